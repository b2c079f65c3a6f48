"""TABLE_MAP (19) body: ``decode_table_map`` / ``encode_table_map`` and MySQL 8's optional metadata.

Layout (``TableMap``): table_id (6 bytes; 4 when the FDE gives TABLE_MAP a 6-byte post-header), flags
(2), db and table names (length byte, bytes, NUL), column count (packed), one type byte per column, the
metadata block (packed length, 0/1/2 bytes per column, see ``binlog.columns``), the nullable bitmap,
then optional metadata TLVs (type byte, packed length, value) with ``binlog_row_metadata`` MINIMAL/FULL.

Decoding parses with plain indexing and caches the result per distinct payload (a DN repeats the same
TABLE_MAP before every transaction on a table), so the compiled row codec is built once per table.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import construct as cs

from binlog.columns import (
    Column,
    decode_metadata,
    encode_metadata,
    is_character,
    is_enum_or_set,
    is_numeric,
    wire_type,
)
from binlog.constants import ColumnType, EventType
from binlog.lenenc import PackedInt, TableId6, pack_int, read_packed_int
from binlog.row_image import TableCodec, table_codec


class OptionalMetadataType:
    """``Table_map_event::Optional_metadata_field_type`` (MySQL 8.0; 13 is MySQL 9)."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12
    VECTOR_DIMENSIONALITY = 13


M = OptionalMetadataType
TABLE_MAP_FLAG_BIT_LEN_EXACT = 0x1

_Name = cs.FocusedSeq("name", "name" / cs.Prefixed(cs.Int8ul, cs.GreedyBytes), cs.Const(b"\0"))


def _table_map_layout(table_id: cs.Construct) -> cs.Struct:
    return cs.Struct(
        "table_id" / table_id,
        "flags" / cs.Int16ul,
        "db" / _Name,
        "table" / _Name,
        "column_count" / PackedInt,
        "column_types" / cs.Bytes(cs.this.column_count),
        "metadata" / cs.Prefixed(PackedInt, cs.GreedyBytes),
        "null_bitmap" / cs.Bytes((cs.this.column_count + 7) // 8),
        "optional_metadata" / cs.GreedyBytes,
    )


TableMap = _table_map_layout(TableId6)
# Post-header length 6: a 4-byte table id (servers before 5.1.4).
TableMapShortId = _table_map_layout(cs.Int32ul)
OptionalMetadataField = cs.Struct("type" / cs.Int8ul, "value" / cs.Prefixed(PackedInt, cs.GreedyBytes))
OptionalMetadataFields = cs.GreedyRange(OptionalMetadataField)


@dataclass(frozen=True, slots=True)
class OptionalMetadata:
    """MySQL 8 optional metadata, decoded; per-column facts are also folded into the ``Column``s.
    Charset lists are resolved to one id per character (resp. enum/set) column."""

    signedness: tuple[bool, ...] | None = None
    default_charset: int | None = None
    column_charsets: tuple[int, ...] | None = None
    column_names: tuple[str, ...] | None = None
    set_values: tuple[tuple[str, ...], ...] | None = None
    enum_values: tuple[tuple[str, ...], ...] | None = None
    geometry_types: tuple[int, ...] | None = None
    primary_key: tuple[tuple[int, int], ...] | None = None  # (column index, prefix length or 0)
    enum_set_default_charset: int | None = None
    enum_set_charsets: tuple[int, ...] | None = None
    visibility: tuple[bool, ...] | None = None
    unknown: tuple[tuple[int, bytes], ...] = ()


@dataclass(slots=True)
class TableMapBody:
    table_id: int
    flags: int
    db: str
    table: str
    columns: list[Column]
    null_bitmap: bytes = b""
    optional_metadata: OptionalMetadata | None = None
    codec: TableCodec = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.codec is None:
            self.codec = table_codec(tuple(self.columns))


# -- decoding --------------------------------------------------------------------------------------------

_ID_AND_FLAGS = struct.Struct("<IHH")
_SHORT_ID_AND_FLAGS = struct.Struct("<IH")


def _decode_name(raw: bytes) -> str:
    # Names are utf8 on the server; anything else survives a round trip instead of failing the stream.
    return raw.decode("utf-8", "surrogateescape")


def _is_mariadb(ctx: Any) -> bool:
    return "mariadb" in (getattr(ctx, "server_version", "") or "").lower()


def decode_table_map(payload: bytes, ctx: Any = None) -> TableMapBody:
    """Decode a TABLE_MAP payload (bytes after the common header, before the CRC)."""
    post_header = getattr(ctx, "post_header_len", None)
    short_id = post_header is not None and len(post_header) >= EventType.TABLE_MAP and \
        post_header[EventType.TABLE_MAP - 1] == 6
    parts = _parse_table_map(bytes(payload), short_id, _is_mariadb(ctx))
    table_id, flags, db, table, columns, null_bitmap, optional, codec = parts
    return TableMapBody(table_id, flags, db, table, list(columns), null_bitmap, optional, codec)


@lru_cache(maxsize=4096)
def _parse_table_map(payload: bytes, short_id: bool, mariadb: bool) -> tuple:
    try:
        if short_id:
            table_id, flags = _SHORT_ID_AND_FLAGS.unpack_from(payload, 0)
            off = 6
        else:
            low, high, flags = _ID_AND_FLAGS.unpack_from(payload, 0)
            table_id = low | high << 32
            off = 8
        names = []
        for _ in range(2):
            length = payload[off]
            end = off + 1 + length
            if payload[end] != 0:
                raise ValueError("TABLE_MAP name is not NUL-terminated")
            names.append(_decode_name(payload[off + 1:end]))
            off = end + 1
        count, off = read_packed_int(payload, off)
        types = payload[off:off + count]
        if len(types) != count:
            raise ValueError("TABLE_MAP ends inside the column types")
        off += count
        if off < len(payload):
            meta_length, off = read_packed_int(payload, off)
            metas = decode_metadata(types, payload[off:off + meta_length])
            off += meta_length
            null_bitmap = payload[off:off + (count + 7) // 8]
            if len(null_bitmap) != (count + 7) // 8:
                raise ValueError("TABLE_MAP ends inside the null bitmap")
            off += len(null_bitmap)
        else:  # pre-5.1 servers wrote neither metadata nor null bitmap
            metas = [0] * count
            null_bitmap = b"\xff" * ((count + 7) // 8)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated TABLE_MAP: {exc}") from exc
    nullable = int.from_bytes(null_bitmap, "little")
    columns = [Column(t, m, nullable=bool(nullable >> i & 1)) for i, (t, m) in enumerate(zip(types, metas, strict=True))]
    optional = None
    if off < len(payload):
        optional = decode_optional_metadata(payload[off:], columns, mariadb=mariadb)
        columns = apply_optional_metadata(columns, optional, mariadb=mariadb)
    columns_tuple = tuple(columns)
    return (table_id, flags, names[0], names[1], columns_tuple, null_bitmap, optional,
            table_codec(columns_tuple))


def _read_bits_msb_first(value: bytes, count: int) -> tuple[bool, ...]:
    return tuple(bool(value[i // 8] >> (7 - i % 8) & 1) for i in range(min(count, len(value) * 8)))


def _read_packed_list(value: bytes) -> list[int]:
    out = []
    pos = 0
    while pos < len(value):
        item, pos = read_packed_int(value, pos)
        out.append(item)
    return out


def _read_strings(value: bytes, pos: int, count: int) -> tuple[tuple[str, ...], int]:
    strings = []
    for _ in range(count):
        length, pos = read_packed_int(value, pos)
        strings.append(_decode_name(value[pos:pos + length]))
        pos += length
    return tuple(strings), pos


def _read_string_lists(value: bytes) -> tuple[tuple[str, ...], ...]:
    lists = []
    pos = 0
    while pos < len(value):
        count, pos = read_packed_int(value, pos)
        strings, pos = _read_strings(value, pos, count)
        lists.append(strings)
    return tuple(lists)


def _resolve_default_charset(value: bytes, n_columns: int) -> tuple[int, tuple[int, ...]]:
    items = _read_packed_list(value)
    default, overrides = items[0], items[1:]
    charsets = [default] * n_columns
    for index, charset in zip(overrides[::2], overrides[1::2], strict=True):
        if index < n_columns:
            charsets[index] = charset
    return default, tuple(charsets)


def decode_optional_metadata(data: bytes, columns: Sequence[Column], *,
                             mariadb: bool = False) -> OptionalMetadata:
    """Parse the optional metadata TLVs against the columns they describe."""
    n_numeric = sum(1 for col in columns if is_numeric(col, mariadb=mariadb))
    n_character = sum(1 for col in columns if is_character(col, mariadb=mariadb))
    n_enum_set = sum(1 for col in columns if is_enum_or_set(col))
    found: dict[str, Any] = {}
    unknown = []
    pos = 0
    while pos < len(data):
        kind = data[pos]
        length, pos = read_packed_int(data, pos + 1)
        value = data[pos:pos + length]
        if len(value) != length:
            raise ValueError(f"optional metadata field {kind} runs past the end of the TABLE_MAP")
        pos += length
        if kind == M.SIGNEDNESS:
            found["signedness"] = _read_bits_msb_first(value, n_numeric)
        elif kind == M.DEFAULT_CHARSET:
            found["default_charset"], found["column_charsets"] = _resolve_default_charset(value, n_character)
        elif kind == M.COLUMN_CHARSET:
            found["column_charsets"] = tuple(_read_packed_list(value))
        elif kind == M.COLUMN_NAME:
            found["column_names"] = _read_strings(value, 0, len(columns))[0]
        elif kind == M.SET_STR_VALUE:
            found["set_values"] = _read_string_lists(value)
        elif kind == M.ENUM_STR_VALUE:
            found["enum_values"] = _read_string_lists(value)
        elif kind == M.GEOMETRY_TYPE:
            found["geometry_types"] = tuple(_read_packed_list(value))
        elif kind == M.SIMPLE_PRIMARY_KEY:
            found["primary_key"] = tuple((index, 0) for index in _read_packed_list(value))
        elif kind == M.PRIMARY_KEY_WITH_PREFIX:
            items = _read_packed_list(value)
            found["primary_key"] = tuple(zip(items[::2], items[1::2], strict=True))
        elif kind == M.ENUM_AND_SET_DEFAULT_CHARSET:
            found["enum_set_default_charset"], found["enum_set_charsets"] = _resolve_default_charset(
                value, n_enum_set)
        elif kind == M.ENUM_AND_SET_COLUMN_CHARSET:
            found["enum_set_charsets"] = tuple(_read_packed_list(value))
        elif kind == M.COLUMN_VISIBILITY:
            found["visibility"] = _read_bits_msb_first(value, len(columns))
        else:
            unknown.append((kind, bytes(value)))
    return OptionalMetadata(**found, unknown=tuple(unknown))


def apply_optional_metadata(columns: Sequence[Column], meta: OptionalMetadata, *,
                            mariadb: bool = False) -> list[Column]:
    """Columns with names, signedness, charsets, enum/set values and primary key filled in."""
    numeric = iter(meta.signedness or ())
    charsets = iter(meta.column_charsets or ())
    enum_set_charsets = iter(meta.enum_set_charsets or ())
    names = iter(meta.column_names or ())
    set_values = iter(meta.set_values or ())
    enum_values = iter(meta.enum_values or ())
    key_columns = {index for index, _ in meta.primary_key or ()}
    out = []
    for i, col in enumerate(columns):
        changes: dict[str, Any] = {"name": next(names, col.name), "primary_key": i in key_columns}
        if is_numeric(col, mariadb=mariadb):
            changes["unsigned"] = next(numeric, col.unsigned)
        if is_character(col, mariadb=mariadb):
            changes["charset"] = next(charsets, col.charset)
        elif is_enum_or_set(col):
            changes["charset"] = next(enum_set_charsets, col.charset)
            if col.real_type == ColumnType.SET:
                changes["set_values"] = next(set_values, col.set_values)
            else:
                changes["enum_values"] = next(enum_values, col.enum_values)
        out.append(Column(col.type, col.meta, changes.get("unsigned", col.unsigned), col.nullable,
                          changes.get("charset", col.charset), changes["name"],
                          changes.get("enum_values", col.enum_values),
                          changes.get("set_values", col.set_values), changes["primary_key"]))
    return out


# -- encoding --------------------------------------------------------------------------------------------

def _bits_msb_first(bits: Sequence[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i // 8] |= 0x80 >> (i % 8)
    return bytes(out)


def _tlv(kind: int, value: bytes) -> bytes:
    return bytes((kind,)) + pack_int(len(value)) + value


def _charset_field(charsets: list[int], default_kind: int, column_kind: int) -> bytes:
    """MySQL picks the smaller of DEFAULT_CHARSET (most common + exceptions) and COLUMN_CHARSET."""
    default = min(Counter(charsets).most_common(), key=lambda pair: (-pair[1], pair[0]))[0]
    with_default = pack_int(default) + b"".join(
        pack_int(i) + pack_int(charset) for i, charset in enumerate(charsets) if charset != default)
    per_column = b"".join(pack_int(charset) for charset in charsets)
    if len(per_column) < len(with_default):
        return _tlv(column_kind, per_column)
    return _tlv(default_kind, with_default)


def _string_lists(lists: list[tuple[str, ...]]) -> bytes:
    out = bytearray()
    for strings in lists:
        out += pack_int(len(strings))
        for text in strings:
            raw = text.encode("utf-8", "surrogateescape")
            out += pack_int(len(raw)) + raw
    return bytes(out)


def encode_optional_metadata(columns: Sequence[Column]) -> bytes:
    """The TLVs MySQL 8 writes with binlog_row_metadata=FULL, for what the columns know: signedness,
    charsets (when every character / enum-set column has one), geometry types, names (when all have
    one), SET and ENUM values, primary key. Field order follows ``Table_map_log_event::init_metadata_fields``."""
    out = bytearray()
    numeric = [col for col in columns if is_numeric(col)]
    if numeric:
        out += _tlv(M.SIGNEDNESS, _bits_msb_first([col.unsigned for col in numeric]))
    character = [col.charset for col in columns if is_character(col)]
    if character and None not in character:
        out += _charset_field(character, M.DEFAULT_CHARSET, M.COLUMN_CHARSET)  # type: ignore[arg-type]
    geometry = [col for col in columns if col.type == ColumnType.GEOMETRY]
    if geometry:
        # The subtype (POINT, …) is not in the Column; 0 = GEOMETRY, which every subtype's values are.
        out += _tlv(M.GEOMETRY_TYPE, b"".join(pack_int(0) for _ in geometry))
    if columns and all(col.name is not None for col in columns):
        out += _tlv(M.COLUMN_NAME, b"".join(
            pack_int(len(raw)) + raw for raw in (col.name.encode("utf-8", "surrogateescape")  # type: ignore[union-attr]
                                                 for col in columns)))
    enum_set = [col.charset for col in columns if is_enum_or_set(col)]
    if enum_set and None not in enum_set:
        out += _charset_field(enum_set, M.ENUM_AND_SET_DEFAULT_CHARSET,  # type: ignore[arg-type]
                              M.ENUM_AND_SET_COLUMN_CHARSET)
    sets = [col.set_values for col in columns if col.real_type == ColumnType.SET]
    if sets and None not in sets:
        out += _tlv(M.SET_STR_VALUE, _string_lists(sets))  # type: ignore[arg-type]
    enums = [col.enum_values for col in columns if col.real_type == ColumnType.ENUM]
    if enums and None not in enums:
        out += _tlv(M.ENUM_STR_VALUE, _string_lists(enums))  # type: ignore[arg-type]
    key = [i for i, col in enumerate(columns) if col.primary_key]
    if key:
        out += _tlv(M.SIMPLE_PRIMARY_KEY, b"".join(pack_int(i) for i in key))
    return bytes(out)


def encode_table_map(*, table_id: int, flags: int = TABLE_MAP_FLAG_BIT_LEN_EXACT, db: str, table: str,
                     columns: list[Column], optional_metadata: bool = True) -> bytes:
    """A TABLE_MAP payload (6-byte table id) built from its construct declaration."""
    nullable = 0
    for i, col in enumerate(columns):
        if col.nullable:
            nullable |= 1 << i
    return TableMap.build({
        "table_id": table_id,
        "flags": flags,
        "db": db.encode("utf-8", "surrogateescape"),
        "table": table.encode("utf-8", "surrogateescape"),
        "column_count": len(columns),
        "column_types": bytes(wire_type(col) for col in columns),
        "metadata": encode_metadata(columns),
        "null_bitmap": nullable.to_bytes((len(columns) + 7) // 8, "little"),
        "optional_metadata": encode_optional_metadata(columns) if optional_metadata else b"",
    })
