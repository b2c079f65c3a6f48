"""ROWS event bodies — WRITE/UPDATE/DELETE_ROWS v1 (23–25) and v2 (30–32) — and, re-exported from
``binlog.table_map``, the TABLE_MAP (19) body they depend on.

Layout (``RowsV1`` / ``RowsV2``): table_id (6 bytes; 4 with a 6-byte post-header), flags (2), for v2 the
extra-data length (2, counting itself) and extra data (8.0: NDB / partition info TLVs, kept raw), the
column count (packed), the columns-present bitmap (two for UPDATE: before and after image), then the
row images back to back (see ``binlog.row_image``).

The construct declarations build events; parsing takes the hot path with precompiled ``struct``s and
keeps the rows bytes undecoded until ``RowsBody.rows`` is asked for them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import construct as cs

from binlog.columns import Column
from binlog.constants import (
    ROWS_TYPES,
    ROWS_V2_TYPES,
    UPDATE_TYPES,
    WRITE_TYPES,
    RowsFlag,
)
from binlog.lenenc import PackedInt, TableId6, read_packed_int
from binlog.row_image import TableCodec, all_present, bitmap_size, pack_bitmap, table_codec
from binlog.table_map import (
    OptionalMetadata,
    OptionalMetadataType,
    TableMap,
    TableMapBody,
    decode_table_map,
    encode_table_map,
)

__all__ = [
    "OptionalMetadata", "OptionalMetadataType", "RowsBody", "RowsV1", "RowsV2", "TableMap",
    "TableMapBody", "decode_rows_event", "decode_table_map", "encode_rows_event", "encode_table_map",
]

ROWS_HEADER_LEN_V1 = 8
ROWS_HEADER_LEN_V2 = 10

_ExtraLength = cs.ExprAdapter(cs.Int16ul, lambda stored, ctx: stored - 2, lambda length, ctx: length + 2)


def _rows_layout(v2: bool) -> cs.Struct:
    return cs.Struct(
        "table_id" / TableId6,
        "flags" / cs.Int16ul,
        *(["extra" / cs.Prefixed(_ExtraLength, cs.GreedyBytes)] if v2 else []),
        "column_count" / PackedInt,
        "present" / cs.Bytes((cs.this.column_count + 7) // 8),
        "present_after" / cs.If(cs.this._params.update, cs.Bytes((cs.this.column_count + 7) // 8)),
        "rows" / cs.GreedyBytes,
    )


RowsV1 = _rows_layout(v2=False)
RowsV2 = _rows_layout(v2=True)


class RowsBody(NamedTuple):
    """A decoded rows event header; the row images stay as bytes (``rows_data``) until asked for.
    (A NamedTuple: built for every rows event, it costs a third of a frozen dataclass.)"""

    type_code: int
    table_id: int
    flags: int
    extra: bytes
    column_count: int
    present: bytes
    present_after: bytes | None
    rows_data: bytes

    @property
    def is_update(self) -> bool:
        return self.type_code in UPDATE_TYPES

    @property
    def kind(self) -> str:
        """'write', 'update' or 'delete'."""
        if self.type_code in WRITE_TYPES:
            return "write"
        return "update" if self.type_code in UPDATE_TYPES else "delete"

    @property
    def statement_end(self) -> bool:
        return bool(self.flags & RowsFlag.STMT_END)

    def _codec(self, table_map: TableMapBody | TableCodec | Sequence[Column]) -> TableCodec:
        if isinstance(table_map, TableMapBody):
            codec = table_map.codec
        elif isinstance(table_map, TableCodec):
            codec = table_map
        else:
            codec = table_codec(tuple(table_map))
        if codec.width != self.column_count:
            raise ValueError(f"rows event for table id {self.table_id} has {self.column_count} columns, "
                             f"its table map {codec.width}")
        return codec

    def rows(self, table_map: TableMapBody | TableCodec | Sequence[Column]) -> list:
        """Decoded rows: value lists (as wide as the table, ``ABSENT`` for columns a minimal image leaves
        out), or (before, after) pairs for UPDATE."""
        codec = self._codec(table_map)
        try:
            return codec.decode_rows(self.rows_data, self.present, self.present_after,
                                     update=self.present_after is not None)
        except (IndexError, struct.error) as exc:
            raise ValueError(f"rows event for table id {self.table_id}: truncated row image ({exc})") from exc

    def raw_rows(self, table_map: TableMapBody | TableCodec | Sequence[Column]) -> list:
        """The row images as byte slices (pairs for UPDATE), for moving rows without decoding them."""
        codec = self._codec(table_map)
        try:
            return codec.split_rows(self.rows_data, self.present, self.present_after,
                                    update=self.present_after is not None)
        except (IndexError, struct.error) as exc:
            raise ValueError(f"rows event for table id {self.table_id}: truncated row image ({exc})") from exc


_V2_HEAD = struct.Struct("<IHHH")   # table id low 32 bits, high 16 bits, flags, extra-data length
_V1_HEAD = struct.Struct("<IHH")
_SHORT_ID_HEAD = struct.Struct("<IH")


def decode_rows_event(type_code: int, payload: bytes, ctx: Any = None) -> RowsBody:
    """Decode a rows event payload (bytes after the common header, before the CRC). ValueError if bad."""
    if type_code not in ROWS_TYPES:
        raise ValueError(f"event type {type_code} is not a rows event")
    post_header = 0
    if ctx is not None:
        table = ctx.post_header_len
        if len(table) >= type_code:
            post_header = table[type_code - 1]
    if not post_header:
        post_header = ROWS_HEADER_LEN_V2 if type_code in ROWS_V2_TYPES else ROWS_HEADER_LEN_V1
    try:
        extra = b""
        if post_header == ROWS_HEADER_LEN_V2:
            low, high, flags, extra_length = _V2_HEAD.unpack_from(payload, 0)
            table_id = low | high << 32
            off = 8 + extra_length
            if extra_length > 2:
                extra = bytes(payload[ROWS_HEADER_LEN_V2:off])
            elif extra_length < 2:
                raise ValueError(f"rows event extra-data length {extra_length} is below 2")
        elif post_header == 6:
            table_id, flags = _SHORT_ID_HEAD.unpack_from(payload, 0)
            off = 6
        else:
            low, high, flags = _V1_HEAD.unpack_from(payload, 0)
            table_id = low | high << 32
            off = post_header
        width = payload[off]
        if width < 251:
            off += 1
        else:
            width, off = read_packed_int(payload, off)
        size = (width + 7) >> 3
        present = payload[off:off + size]
        off += size
        present_after = None
        if type_code in UPDATE_TYPES:
            present_after = payload[off:off + size]
            off += size
        if off > len(payload):
            raise ValueError("rows event ends inside its header")
    except (IndexError, struct.error) as exc:
        raise ValueError(f"truncated rows event: {exc}") from exc
    if type(payload) is not bytes:
        present = bytes(present)
        present_after = None if present_after is None else bytes(present_after)
    return RowsBody(type_code, table_id, flags, extra, width, present, present_after, payload[off:])


def _bitmap(present: bytes | Sequence[bool] | None, width: int) -> bytes:
    if present is None:
        return all_present(width)
    if isinstance(present, bytes | bytearray | memoryview):
        if len(present) != bitmap_size(width):
            raise ValueError(f"present bitmap of {len(present)} bytes for {width} columns")
        return bytes(present)
    return pack_bitmap(present)


def encode_rows_event(type_code: int, *, table_id: int, columns: list[Column], rows: Sequence,
                      flags: int = RowsFlag.STMT_END, extra: bytes = b"", present: Any = None) -> bytes:
    """A rows event payload (6-byte table id) built from its construct declaration.

    ``rows``: value lists for WRITE/DELETE, (before, after) pairs for UPDATE. ``present``: None (every
    column), a bitmap (bytes) or flags per column; for UPDATE also a (before, after) pair of those.
    """
    if type_code not in ROWS_TYPES:
        raise ValueError(f"event type {type_code} is not a rows event")
    update = type_code in UPDATE_TYPES
    v2 = type_code in ROWS_V2_TYPES
    if extra and not v2:
        raise ValueError("v1 rows events carry no extra data")
    width = len(columns)
    if update and isinstance(present, tuple) and len(present) == 2 and not isinstance(present[0], bool):
        before, after = _bitmap(present[0], width), _bitmap(present[1], width)
    else:
        before = after = _bitmap(present, width)
    codec = table_codec(tuple(columns))
    data = codec.encode_rows(rows, before, after, update=update)
    fields = {"table_id": table_id, "flags": flags, "column_count": width, "present": before,
              "present_after": after if update else None, "rows": data}
    if v2:
        fields["extra"] = bytes(extra)
    return (RowsV2 if v2 else RowsV1).build(fields, update=update)
