"""Rows in logical form: one ``TablePlan`` per physical TABLE_MAP, then per rows
event either the pass-through (only the 6-byte table id replaced) or ``reshape_row`` by column name.

A plan is built once per distinct TABLE_MAP payload and schema state (the shaper drops its cache at
every schema change). Compatible ⇔ same column count, the same names at the same places, the same
type byte and meta: the physical bytes are then the logical bytes, and rows events are sliced, never
decoded. Otherwise the TABLE_MAP is rebuilt with exactly the logical columns and every row is decoded
with the physical columns and encoded with the logical ones: a missing column takes the logical
default (NULL if none), an extra one is dropped, a type that differs is converted
(``convert_value``). Every output TABLE_MAP carries the optional metadata a MySQL 8 server writes with
``binlog_row_metadata=FULL`` (``row_metadata``), built from the logical schema the plan was made under:
names, signedness, charsets, ENUM/SET members, primary key. MariaDB 10.5+ and MySQL 8 read it; older
readers skip the bytes after the null bitmap.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlog.columns import Column
from binlog.constants import ROWS_V1_TYPES, UPDATE_TYPES
from binlog.constants import ColumnType as T
from binlog.lenenc import pack_int, read_packed_int
from binlog.row_image import ABSENT, TableCodec, pack_bitmap, table_codec, unpack_bitmap
from binlog.rows_events import decode_rows_event
from binlog.table_map import encode_optional_metadata, encode_table_map
from schema_shaper.schema import ColumnSpec
from schema_shaper.types import INT_BITS

PASS = 1
RESHAPE = 2
SKIP = 3
_V2_EMPTY_EXTRA = b"\x02\x00"
_NAME = struct.Struct("<B")


def _name(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) > 255:
        raise ValueError(f"name {text!r} is longer than 255 bytes")
    return _NAME.pack(len(raw)) + raw + b"\0"


def table_map_core(payload: bytes, id_len: int = 6) -> tuple[int, int]:
    """(start, end) of a TABLE_MAP payload's column part: from the column count to the end of the
    null bitmap, i.e. without table id, flags, names, and the optional metadata after it."""
    off = id_len + 2
    for _ in range(2):
        off += 1 + payload[off] + 1
    start = off
    count, off = read_packed_int(payload, off)
    off += count
    if off < len(payload):
        meta_len, off = read_packed_int(payload, off)
        off += meta_len + (count + 7) // 8
    if off > len(payload):
        raise ValueError("TABLE_MAP ends inside its column part")
    return start, off


def pass_table_map(payload: bytes, table_id: int, db: str, table: str, id_len: int = 6,
                   optional_metadata: bytes = b"") -> bytes:
    """The DN's TABLE_MAP with the output table id and logical names; the DN's optional metadata
    (physical names) replaced by ``optional_metadata`` (the logical one, see ``row_metadata``)."""
    start, end = table_map_core(payload, id_len)
    flags = payload[id_len:id_len + 2]
    return table_id.to_bytes(6, "little") + flags + _name(db) + _name(table) + payload[start:end] + \
        optional_metadata


def row_metadata(logical_columns: Sequence[Column]) -> bytes:
    """The optional metadata block of a logical table's TABLE_MAP (``binlog_row_metadata=FULL``), from
    the logical schema in force: a consumer names the columns as the logical table has them at that
    point of the global binlog, so after an online ADD/DROP COLUMN the names change at the DDL."""
    return encode_optional_metadata(logical_columns)


@dataclass(slots=True)
class TablePlan:
    """How the rows of one physical TABLE_MAP become logical rows (``kind`` PASS / RESHAPE / SKIP)."""

    kind: int
    db: str = ""
    table: str = ""
    table_id: int = 0
    table_map: bytes = b""
    id_bytes: bytes = b""
    src_id: bytes = b""            # the DN table id as its 6 bytes (rows events must carry it)
    src_table_id: int = 0
    # RESHAPE only
    phys_codec: TableCodec | None = None
    logical_codec: TableCodec | None = None
    sources: tuple[int, ...] = ()   # per logical column: physical index, or -1 (missing)
    converters: tuple[Callable[[Any], Any] | None, ...] = ()
    specs: tuple[ColumnSpec, ...] = ()
    phys_width: int = 0


def compatible(phys: Sequence[Column], phys_names: Sequence[str], logical: Sequence[ColumnSpec]) -> bool:
    """polardbx-cdc's ``compare``: same count, same name at each index, same type byte and meta."""
    if len(phys) != len(logical):
        return False
    for col, name, spec in zip(phys, phys_names, logical, strict=True):
        lc = spec.column
        if name.lower() != spec.key or col.type != lc.type or col.meta != lc.meta:
            return False
    return True


# -- values ------------------------------------------------------------------------------------------
_NUMERIC = frozenset(INT_BITS) | {T.YEAR, T.FLOAT, T.DOUBLE, T.NEWDECIMAL, T.BIT}
_STRINGS = frozenset({T.STRING, T.VARCHAR, T.VAR_STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_DATETIMES = frozenset({T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2})


def convert_value(value: Any, phys: Column, logical: Column) -> Any:
    """A physical value as the logical column holds it (MODIFY COLUMN in flight): numbers between
    numeric types, text between string types, numbers ↔ text, dates ↔ datetimes ↔ timestamps,
    ENUM/SET members by name. Whether it fits (range, length) is checked when it is encoded."""
    if value is None or value is ABSENT:
        return value
    src, dst = phys.real_type, logical.real_type
    if dst in (T.ENUM, T.SET) and src == dst:
        return _members(value, phys, logical)
    if dst in INT_BITS or dst in (T.YEAR, T.BIT):
        if isinstance(value, bytes):
            value = value.decode("utf-8").strip()
        if isinstance(value, float):
            return int(round(value))
        number = Decimal(str(value)) if not isinstance(value, int) else value
        if isinstance(number, Decimal) and number != number.to_integral_value():
            raise ValueError(f"{value!r} is not an integer")
        return int(number)
    if dst in (T.FLOAT, T.DOUBLE):
        return float(value.decode() if isinstance(value, bytes) else value)
    if dst == T.NEWDECIMAL:
        scale = logical.meta & 0xFF
        text = value.decode() if isinstance(value, bytes) else repr(value) if isinstance(value, float) else str(value)
        return Decimal(text).quantize(Decimal(1).scaleb(-scale))
    if dst in _STRINGS:
        if isinstance(value, bytes):
            return value
        if src in _NUMERIC:
            return str(value).encode()
        if isinstance(value, (dt.date, dt.datetime, dt.timedelta)):
            return str(value.replace(tzinfo=None) if isinstance(value, dt.datetime) else value).encode()
        raise ValueError(f"{type(value).__name__} value cannot become text")
    if dst in _DATETIMES:
        if isinstance(value, dt.datetime):
            aware = dst in (T.TIMESTAMP, T.TIMESTAMP2)
            return value.replace(tzinfo=dt.UTC if aware else None)
        if isinstance(value, dt.date):
            return dt.datetime(value.year, value.month, value.day)
        return value.decode() if isinstance(value, bytes) else value
    if dst in (T.DATE, T.NEWDATE) and isinstance(value, dt.datetime):
        return value.date()
    return value


def _members(value: Any, phys: Column, logical: Column) -> Any:
    """ENUM index / SET mask re-based on the logical member list (by member name)."""
    old = phys.enum_values if logical.real_type == T.ENUM else phys.set_values
    new = logical.enum_values if logical.real_type == T.ENUM else logical.set_values
    if not old or not new or tuple(old) == tuple(new):
        return value
    index = {name.lower(): i for i, name in enumerate(new)}
    if logical.real_type == T.ENUM:
        if value == 0:
            return 0
        return index[old[value - 1].lower()] + 1
    mask = 0
    for i, name in enumerate(old):
        if value >> i & 1:
            mask |= 1 << index[name.lower()]
    return mask


def _converter(phys: Column, logical: Column) -> Callable[[Any], Any] | None:
    same = (phys.type, phys.meta) == (logical.type, logical.meta) and (
        phys.real_type not in (T.ENUM, T.SET) or not phys.enum_values and not phys.set_values
        or (phys.enum_values, phys.set_values) == (logical.enum_values, logical.set_values))
    if same:
        return None
    return lambda value: convert_value(value, phys, logical)


def reshape_plan(plan: TablePlan, phys_columns: Sequence[Column], phys_names: Sequence[str],
                 logical: Sequence[ColumnSpec], logical_columns: tuple[Column, ...]) -> TablePlan:
    """Fill ``plan`` for reshaping: where each logical column comes from and how it converts."""
    index = {name.lower(): i for i, name in enumerate(phys_names)}
    sources = []
    converters = []
    for spec, lc in zip(logical, logical_columns, strict=True):
        i = index.get(spec.key, -1)
        sources.append(i)
        converters.append(_converter(phys_columns[i], lc) if i >= 0 else None)
    plan.kind = RESHAPE
    plan.phys_codec = table_codec(tuple(phys_columns))
    plan.logical_codec = table_codec(logical_columns)
    plan.sources = tuple(sources)
    plan.converters = tuple(converters)
    plan.specs = tuple(logical)
    plan.phys_width = len(phys_columns)
    plan.table_map = encode_table_map(table_id=plan.table_id, db=plan.db, table=plan.table,
                                      columns=list(logical_columns), optional_metadata=True)
    return plan


def reshape_row(plan: TablePlan, row: list[Any], tso: int) -> list[Any]:
    """One physical row image (table-wide list, ABSENT where the image leaves a column out) → the
    logical one: by column name, missing → logical default, extra → dropped, types converted."""
    out = []
    for i, convert, spec in zip(plan.sources, plan.converters, plan.specs, strict=True):
        if i < 0:
            out.append(spec.default_value(tso))
        else:
            value = row[i]
            out.append(convert(value) if convert is not None else value)
    return out


def _present(plan: TablePlan, bitmap: bytes) -> tuple[bool, ...]:
    bits = unpack_bitmap(bitmap, plan.phys_width)
    # A column the shard lacks is present with its default, in both images.
    return tuple(bits[i] if i >= 0 else True for i in plan.sources)


def _rows_header(type_code: int, id_bytes: bytes, flags: int, width: int, present: bytes,
                 present_after: bytes | None) -> bytes:
    return id_bytes + flags.to_bytes(2, "little") + _V2_EMPTY_EXTRA + pack_int(width) + present + (
        present_after or b"")


def v2_type(type_code: int) -> int:
    return type_code + 7 if type_code in ROWS_V1_TYPES else type_code


def rebuild_rows(plan: TablePlan, type_code: int, payload: bytes, ctx: Any, tso: int) -> bytes:
    """A rows event payload in the output form: v2, no extra data, the output table id; reshaped
    when the plan says so. ValueError for rows that cannot be read or do not fit."""
    body = decode_rows_event(type_code, payload, ctx)
    if body.table_id != plan.src_table_id:
        raise ValueError(f"rows event for table id {body.table_id} in the block of table id "
                         f"{plan.src_table_id}")
    if plan.kind == PASS:
        return _rows_header(type_code, plan.id_bytes, body.flags, body.column_count, body.present,
                            body.present_after) + body.rows_data
    update = type_code in UPDATE_TYPES
    rows = body.rows(plan.phys_codec)  # type: ignore[arg-type]
    codec = plan.logical_codec
    before = _present(plan, body.present)
    after = _present(plan, body.present_after) if update else before
    if update:
        shaped = [(reshape_row(plan, old, tso), reshape_row(plan, new, tso)) for old, new in rows]
    else:
        shaped = [reshape_row(plan, row, tso) for row in rows]
    try:
        data = codec.encode_rows(shaped, before, after, update=update)  # type: ignore[union-attr]
    except (struct.error, OverflowError, TypeError) as exc:
        raise ValueError(str(exc)) from exc
    return _rows_header(type_code, plan.id_bytes, body.flags, len(plan.sources), pack_bitmap(before),
                        pack_bitmap(after) if update else None) + data
