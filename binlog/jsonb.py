"""MySQL binary JSON (the JSON column format, ``sql-common/json_binary.cc``): ``decode_json`` / ``encode_json``.

Layout: one type byte, then the value. Containers (objects, arrays) come in a small form (2-byte counts,
sizes and offsets) and a large form (4-byte ones); offsets count from the start of the container, after
its type byte. An object holds ``count, size, key entries (offset, u16 length), value entries (type,
offset or inlined value), keys, values``; keys are sorted by length, then bytewise, as MySQL stores them.
Literals and 16-bit integers (and 32-bit ones in large containers) sit inline in their value entry.
Strings carry a variable-length size (7 bits a byte, low bits first, high bit = more).

Python mapping:
  object → dict (str keys), array → list, string → str, int16..uint64 → int, double → float,
  true/false → bool, null inside a container → None, a top-level null → ``JSON_NULL`` (None is SQL NULL
  for the column), an empty document (MySQL writes one for '' in non-strict mode) → ``JSON_NULL``.
  Opaque values (``CAST(x AS JSON)`` of non-JSON types):
    DECIMAL → decimal.Decimal; DATE → datetime.date; TIME → datetime.timedelta;
    DATETIME → naive datetime.datetime; TIMESTAMP → datetime.datetime with tzinfo=UTC (the wall-clock
    fields exactly as MySQL stored them, tzinfo only marks the type so it survives a round trip);
    anything else, or a date Python cannot hold (zero dates) → ``JsonOpaque(field_type, data)``.
Strings that are not valid UTF-8 decode with ``surrogateescape`` so they re-encode to the same bytes.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlog.value_formats import (
    UTC,
    decimal_binary_size,
    decode_decimal,
    encode_decimal,
    pack_datetime_longlong,
    pack_time_longlong,
    unpack_datetime_longlong,
    unpack_time_longlong,
)

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

LITERAL_NULL = 0x00
LITERAL_TRUE = 0x01
LITERAL_FALSE = 0x02

# MySQL field types that appear as opaque JSON values.
_FIELD_TIMESTAMP = 7
_FIELD_DATE = 10
_FIELD_TIME = 11
_FIELD_DATETIME = 12
_FIELD_NEWDECIMAL = 246

_MAX_SMALL = 0xFFFF


class _JsonNull:
    """The JSON literal null at the top of a document (distinct from SQL NULL, which is None)."""

    _instance: _JsonNull | None = None

    def __new__(cls) -> _JsonNull:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        # Pickled across processes (Spark, multiprocessing) it must stay the same singleton.
        return "JSON_NULL"


JSON_NULL = _JsonNull()


@dataclass(frozen=True, slots=True)
class JsonOpaque:
    """An opaque JSON value kept as MySQL stored it: the MySQL field type and its raw bytes."""

    field_type: int
    data: bytes


_INT16 = struct.Struct("<h")
_UINT16 = struct.Struct("<H")
_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")
_INT64 = struct.Struct("<q")
_UINT64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")
_SMALL_HEADER = struct.Struct("<HH")
_LARGE_HEADER = struct.Struct("<II")

_SCALAR_READERS = {
    INT16: _INT16.unpack_from, UINT16: _UINT16.unpack_from, INT32: _INT32.unpack_from,
    UINT32: _UINT32.unpack_from, INT64: _INT64.unpack_from, UINT64: _UINT64.unpack_from,
    DOUBLE: _DOUBLE.unpack_from,
}
_LITERALS = {LITERAL_NULL: None, LITERAL_TRUE: True, LITERAL_FALSE: False}


# -- decoding ------------------------------------------------------------------------------------------

def decode_json(data: bytes) -> Any:
    """Decode one binary JSON document (the bytes of a JSON column value)."""
    if len(data) == 0:
        return JSON_NULL
    data = bytes(data)
    try:
        if data[0] == LITERAL and data[1] == LITERAL_NULL:
            return JSON_NULL
        return _decode_value(data[0], data, 1)
    except (IndexError, KeyError, struct.error) as exc:
        raise ValueError(f"truncated binary JSON: {exc}") from exc


def _read_varlen(data: bytes, pos: int) -> tuple[int, int]:
    length = 0
    for i in range(5):
        byte = data[pos + i]
        length |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return length, pos + i + 1
    raise ValueError("binary JSON string length longer than 5 bytes")


def _decode_value(type_code: int, data: bytes, pos: int) -> Any:
    reader = _SCALAR_READERS.get(type_code)
    if reader is not None:
        return reader(data, pos)[0]
    if type_code == STRING:
        length, start = _read_varlen(data, pos)
        return data[start:start + length].decode("utf-8", "surrogateescape")
    if type_code <= LARGE_ARRAY:
        return _decode_container(data, pos, large=type_code & 1 == 1, is_object=type_code < SMALL_ARRAY)
    if type_code == LITERAL:
        try:
            return _LITERALS[data[pos]]
        except KeyError:
            raise ValueError(f"unknown binary JSON literal {data[pos]:#x}") from None
    if type_code == OPAQUE:
        field_type = data[pos]
        length, start = _read_varlen(data, pos + 1)
        return _decode_opaque(field_type, data[start:start + length])
    raise ValueError(f"unknown binary JSON type {type_code:#x}")


def _decode_container(data: bytes, pos: int, *, large: bool, is_object: bool) -> dict | list:
    header = _LARGE_HEADER if large else _SMALL_HEADER
    offset_size = 4 if large else 2
    offset_reader = _UINT32.unpack_from if large else _UINT16.unpack_from
    count, size = header.unpack_from(data, pos)
    if pos + size > len(data):
        raise ValueError("binary JSON container larger than its document")
    entry = pos + 2 * offset_size
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            key_offset = offset_reader(data, entry)[0]
            key_length = _UINT16.unpack_from(data, entry + offset_size)[0]
            start = pos + key_offset
            keys.append(data[start:start + key_length].decode("utf-8", "surrogateescape"))
            entry += offset_size + 2
    values = []
    for _ in range(count):
        value_type = data[entry]
        if value_type == LITERAL:
            values.append(_LITERALS[data[entry + 1]])
        elif value_type == INT16 or value_type == UINT16 or (large and value_type in (INT32, UINT32)):
            values.append(_SCALAR_READERS[value_type](data, entry + 1)[0])
        else:
            values.append(_decode_value(value_type, data, pos + offset_reader(data, entry + 1)[0]))
        entry += 1 + offset_size
    return dict(zip(keys, values, strict=True)) if is_object else values


def _decode_opaque(field_type: int, payload: bytes) -> Any:
    try:
        if field_type == _FIELD_NEWDECIMAL:
            precision, scale = payload[0], payload[1]
            if len(payload) - 2 == decimal_binary_size(precision, scale):
                return decode_decimal(payload[2:], precision, scale)
        elif field_type in (_FIELD_DATE, _FIELD_DATETIME, _FIELD_TIMESTAMP) and len(payload) == 8:
            year, month, day, hour, minute, second, usec = unpack_datetime_longlong(
                _INT64.unpack_from(payload)[0])
            if field_type == _FIELD_DATE:
                return dt.date(year, month, day)
            tz = UTC if field_type == _FIELD_TIMESTAMP else None
            return dt.datetime(year, month, day, hour, minute, second, usec, tzinfo=tz)
        elif field_type == _FIELD_TIME and len(payload) == 8:
            return unpack_time_longlong(_INT64.unpack_from(payload)[0])
    except (ValueError, IndexError):
        pass  # zero dates and malformed payloads stay opaque, byte for byte
    return JsonOpaque(field_type, bytes(payload))


# -- encoding ------------------------------------------------------------------------------------------

def encode_json(value: Any) -> bytes:
    """Encode a Python value (see the module docstring for the mapping) as a binary JSON document."""
    if value is JSON_NULL:
        value = None
    type_code, payload = _encode_value(value)
    return bytes((type_code,)) + payload


def _varlen(length: int) -> bytes:
    out = bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        if length:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_int(value: int) -> tuple[int, bytes]:
    if -0x8000 <= value <= 0x7FFF:
        return INT16, _INT16.pack(value)
    if -0x8000_0000 <= value <= 0x7FFF_FFFF:
        return INT32, _INT32.pack(value)
    if -(1 << 63) <= value < 1 << 63:
        return INT64, _INT64.pack(value)
    if 0 <= value < 1 << 64:
        return UINT64, _UINT64.pack(value)
    raise ValueError(f"integer {value} does not fit binary JSON (int64/uint64)")


def _opaque(field_type: int, payload: bytes) -> tuple[int, bytes]:
    return OPAQUE, bytes((field_type,)) + _varlen(len(payload)) + payload


def _encode_value(value: Any) -> tuple[int, bytes]:
    if value is None or value is JSON_NULL:
        return LITERAL, bytes((LITERAL_NULL,))
    if value is True:
        return LITERAL, bytes((LITERAL_TRUE,))
    if value is False:
        return LITERAL, bytes((LITERAL_FALSE,))
    if isinstance(value, int):
        return _encode_int(value)
    if isinstance(value, float):
        return DOUBLE, _DOUBLE.pack(value)
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
        return STRING, _varlen(len(raw)) + raw
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"binary JSON object keys must be str, got {type(key).__name__}")
            items.append((key.encode("utf-8", "surrogateescape"), item))
        items.sort(key=lambda pair: (len(pair[0]), pair[0]))
        return _encode_container([k for k, _ in items], [_encode_value(v) for _, v in items])
    if isinstance(value, list | tuple):
        return _encode_container(None, [_encode_value(v) for v in value])
    if isinstance(value, Decimal):
        return _encode_decimal(value)
    if isinstance(value, dt.datetime):
        field_type = _FIELD_DATETIME if value.tzinfo is None else _FIELD_TIMESTAMP
        packed = pack_datetime_longlong(value.year, value.month, value.day, value.hour, value.minute,
                                        value.second, value.microsecond)
        return _opaque(field_type, _INT64.pack(packed))
    if isinstance(value, dt.date):
        return _opaque(_FIELD_DATE, _INT64.pack(pack_datetime_longlong(value.year, value.month,
                                                                       value.day, 0, 0, 0, 0)))
    if isinstance(value, dt.timedelta | dt.time):
        return _opaque(_FIELD_TIME, _INT64.pack(pack_time_longlong(value)))
    if isinstance(value, JsonOpaque):
        return _opaque(value.field_type, value.data)
    raise TypeError(f"cannot encode {type(value).__name__} as binary JSON")


def _encode_decimal(value: Decimal) -> tuple[int, bytes]:
    if not value.is_finite():
        raise ValueError(f"binary JSON cannot hold {value}")
    _, digits, exponent = value.as_tuple()
    scale = max(0, -exponent)
    # Integer digits as written, at least one (MySQL's precision counts a leading "0." as a digit).
    int_digits = max(1, len(digits) + exponent)
    precision = int_digits + scale
    return _opaque(_FIELD_NEWDECIMAL, bytes((precision, scale)) + encode_decimal(value, precision, scale))


def _inline_size(type_code: int, large: bool) -> int | None:
    """Bytes of an inlined value, or None when the value is stored after the entries."""
    if type_code == LITERAL:
        return 1
    if type_code in (INT16, UINT16):
        return 2
    if large and type_code in (INT32, UINT32):
        return 4
    return None


def _encode_container(keys: list[bytes] | None, values: list[tuple[int, bytes]]) -> tuple[int, bytes]:
    small = _layout_container(keys, values, large=False)
    if small is not None:
        return (SMALL_ARRAY if keys is None else SMALL_OBJECT), small
    large = _layout_container(keys, values, large=True)
    assert large is not None
    return (LARGE_ARRAY if keys is None else LARGE_OBJECT), large


def _layout_container(keys: list[bytes] | None, values: list[tuple[int, bytes]], *,
                      large: bool) -> bytes | None:
    offset_size = 4 if large else 2
    limit = 0xFFFF_FFFF if large else _MAX_SMALL
    offset_struct = _UINT32 if large else _UINT16
    count = len(values)
    if count > limit:
        return None
    key_entries_size = 0 if keys is None else count * (offset_size + 2)
    position = 2 * offset_size + key_entries_size + count * (1 + offset_size)
    key_entries = bytearray()
    if keys is not None:
        for key in keys:
            if len(key) > 0xFFFF:
                raise ValueError("binary JSON object key longer than 65535 bytes")
            if position > limit:
                return None
            key_entries += offset_struct.pack(position) + _UINT16.pack(len(key))
            position += len(key)
    value_entries = bytearray()
    tail = bytearray()
    for type_code, payload in values:
        inline = _inline_size(type_code, large)
        if inline is not None:
            value_entries.append(type_code)
            value_entries += payload.ljust(offset_size, b"\0")
        else:
            if position > limit:
                return None
            value_entries.append(type_code)
            value_entries += offset_struct.pack(position)
            tail += payload
            position += len(payload)
    if position > limit:
        return None
    header = (_LARGE_HEADER if large else _SMALL_HEADER).pack(count, position)
    return bytes(header + key_entries + value_entries + b"".join(keys or ()) + tail)
