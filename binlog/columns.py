"""Column types of binlog row images: ``Column``, per-type value codecs and the TABLE_MAP metadata block.

``Column.type`` is the type byte of the TABLE_MAP and ``Column.meta`` the 16-bit metadata value as MySQL's
``table_def`` reads it from the metadata block:

==============================================  ===============================================
type                                            meta
==============================================  ===============================================
FLOAT, DOUBLE                                   4 / 8 (size)
BLOB (also TEXT), JSON, GEOMETRY, VECTOR        bytes of the length prefix (1..4)
TIME2, DATETIME2, TIMESTAMP2                    fractional second precision 0..6
NEWDECIMAL                                      precision << 8 | scale
BIT                                             whole bytes << 8 | remaining bits
VARCHAR                                         maximum byte length (2-byte prefix above 255)
STRING (CHAR, ENUM, SET)                        byte0 << 8 | byte1, see ``string_meta``
anything else (incl. VAR_STRING)                0 (no metadata bytes)
==============================================  ===============================================

ENUM and SET columns travel as type STRING with the real type in the high byte of meta and the pack
length in the low byte; CHAR columns longer than 255 bytes fold bits 8..9 of the length into the high
byte (``byte0 = real_type ^ ((length & 0x300) >> 4)``), hence ``((meta >> 4) & 0x300) ^ 0x300``.

Python values (fixed, other stages depend on them): SQL NULL → None; integers → int; FLOAT/DOUBLE →
float; NEWDECIMAL → Decimal; YEAR → int (0 for 0000); DATE → date or str for invalid dates;
DATETIME(2) → naive datetime or str for zero/invalid dates; TIME(2) → timedelta; TIMESTAMP(2) →
datetime with tzinfo=UTC (epoch 0 is MySQL's zero timestamp); CHAR/VARCHAR/BLOB/TEXT/GEOMETRY → bytes;
ENUM → int (1-based index, 0 = the empty error value); SET → int bitmask; BIT → int; JSON → see
``binlog.jsonb``. Encoding also takes str for strings (as UTF-8), enum/set member names when the
column knows its values, and MySQL date literals for temporal columns.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from binlog.constants import ColumnType
from binlog.jsonb import JSON_NULL, decode_json, encode_json
from binlog.value_formats import (
    EPOCH,
    datetime2_decoder,
    decimal_binary_size,
    decimal_decoder,
    encode_datetime2,
    encode_decimal,
    encode_time2,
    encode_timestamp2,
    frac_bytes,
    make_datetime,
    make_timedelta,
    parse_datetime_text,
    time2_decoder,
    time_fields,
    timestamp2_decoder,
    timestamp_parts,
)

T = ColumnType

__all__ = [
    "Column", "ColumnCodec", "JSON_NULL", "bit_column", "blob_column", "char_column", "codec_for",
    "decimal_column", "decode_metadata", "decode_value", "encode_metadata", "encode_value",
    "enum_column", "is_character", "is_enum_or_set", "is_numeric", "real_type", "set_column",
    "string_max_length", "string_meta", "value_length", "varchar_column",
]


@dataclass(frozen=True, slots=True)
class Column:
    """One column as a TABLE_MAP describes it (wire ``type`` and ``meta``) plus what MySQL 8's optional
    metadata or a schema adds."""

    type: int
    meta: int = 0
    unsigned: bool = False
    nullable: bool = True
    charset: int | None = None
    name: str | None = None
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None
    primary_key: bool = False

    @property
    def real_type(self) -> int:
        return real_type(self.type, self.meta)


# -- STRING meta and column classes --------------------------------------------------------------------

def real_type(type_code: int, meta: int) -> int:
    """The type behind a STRING column (STRING, ENUM or SET); other types are their own real type."""
    if type_code == T.STRING and meta >= 256:
        byte0 = meta >> 8
        return byte0 | 0x30 if (byte0 & 0x30) != 0x30 else byte0
    return type_code


def string_max_length(meta: int) -> int:
    """Maximum byte length of a CHAR column from its STRING meta."""
    return (((meta >> 4) & 0x300) ^ 0x300) + (meta & 0xFF)


def string_meta(real: int, length: int) -> int:
    """STRING meta for a CHAR of ``length`` bytes (< 1024), or an ENUM/SET of pack length ``length``."""
    if real in (T.ENUM, T.SET):
        return (real << 8) | length
    if not 0 <= length < 1024:
        raise ValueError(f"CHAR byte length {length} is not below 1024")
    return ((real ^ ((length & 0x300) >> 4)) << 8) | (length & 0xFF)


_NUMERIC_TYPES = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.NEWDECIMAL, T.FLOAT,
                            T.DOUBLE})
_CHARACTER_TYPES = frozenset({T.STRING, T.VAR_STRING, T.VARCHAR, T.BLOB, T.VECTOR})


def is_numeric(col: Column, *, mariadb: bool = False) -> bool:
    """Columns covered by the SIGNEDNESS optional metadata (MySQL ``is_numeric_type``). MariaDB gives a
    bit to every column with a signedness, YEAR included (its Field_year is a Field_tiny)."""
    return col.type in _NUMERIC_TYPES or (mariadb and col.type == T.YEAR)


def is_character(col: Column, *, mariadb: bool = False) -> bool:
    """Columns covered by the (DEFAULT_|COLUMN_)CHARSET optional metadata (``is_character_type`` of the
    real type). MariaDB also counts GEOMETRY, whose base class there is BLOB."""
    real = col.real_type
    return real in _CHARACTER_TYPES or (mariadb and real == T.GEOMETRY)


def is_enum_or_set(col: Column) -> bool:
    return col.real_type in (T.ENUM, T.SET)


def decimal_column(precision: int, scale: int, **fields: Any) -> Column:
    return Column(T.NEWDECIMAL, (precision << 8) | scale, **fields)


def char_column(max_bytes: int, **fields: Any) -> Column:
    """CHAR(n) whose longest value takes ``max_bytes`` bytes (n × the charset's max bytes per char)."""
    return Column(T.STRING, string_meta(T.STRING, max_bytes), **fields)


def varchar_column(max_bytes: int, **fields: Any) -> Column:
    return Column(T.VARCHAR, max_bytes, **fields)


def blob_column(length_bytes: int = 2, **fields: Any) -> Column:
    """TINY/-/MEDIUM/LONG BLOB or TEXT for ``length_bytes`` 1/2/3/4."""
    return Column(T.BLOB, length_bytes, **fields)


def bit_column(nbits: int, **fields: Any) -> Column:
    return Column(T.BIT, ((nbits // 8) << 8) | (nbits % 8), **fields)


def enum_column(values: Sequence[str], **fields: Any) -> Column:
    pack_length = 1 if len(values) < 256 else 2
    return Column(T.STRING, string_meta(T.ENUM, pack_length), enum_values=tuple(values), **fields)


def set_column(values: Sequence[str], **fields: Any) -> Column:
    pack_length = (len(values) + 7) // 8
    pack_length = 8 if pack_length > 4 else pack_length  # MySQL get_set_pack_length
    return Column(T.STRING, string_meta(T.SET, pack_length), set_values=tuple(values), **fields)


# -- per-type codecs -----------------------------------------------------------------------------------

class ColumnCodec(NamedTuple):
    """How one (type, meta, unsigned) column is read and written.

    ``decode(buf, off) -> (value, new_off)`` expects ``buf`` to be ``bytes`` (slices must be bytes);
    ``length(buf, off)`` is the value's byte length; ``encode(value) -> bytes``. Fixed-width columns also
    give ``size`` and a ``struct`` format piece with an optional ``convert`` of the unpacked item, so a run
    of them can be read with one precompiled ``struct.Struct``; length-prefixed columns give ``prefix``
    (bytes of the little-endian length) and an optional ``convert`` of the raw bytes. Row decoders are
    compiled from these facts (``binlog.row_image``).
    """

    decode: Callable[[bytes, int], tuple[Any, int]]
    length: Callable[[bytes, int], int]
    encode: Callable[[Any], bytes]
    size: int | None = None
    struct_code: str | None = None
    convert: Callable[[Any], Any] | None = None
    prefix: int | None = None


def _fixed(code: str, convert: Callable[[Any], Any] | None = None,
           encode: Callable[[Any], bytes] | None = None) -> ColumnCodec:
    layout = struct.Struct("<" + code)
    size = layout.size
    unpack_from = layout.unpack_from

    if convert is None:
        def decode(buf: bytes, off: int) -> tuple[Any, int]:
            return unpack_from(buf, off)[0], off + size
    else:
        def decode(buf: bytes, off: int) -> tuple[Any, int]:
            return convert(unpack_from(buf, off)[0]), off + size

    if encode is None:
        pack = layout.pack

        def encode(value: Any) -> bytes:
            try:
                return pack(value)
            except struct.error as exc:
                raise ValueError(f"{value!r} does not fit struct format {code!r}: {exc}") from exc

    return ColumnCodec(decode, lambda buf, off: size, encode, size, code, convert)


def _int_bytes(size: int, signed: bool, order: str) -> Callable[[Any], bytes]:
    def encode(value: Any) -> bytes:
        try:
            return int(value).to_bytes(size, order, signed=signed)
        except OverflowError as exc:
            raise ValueError(f"{value} does not fit {size} bytes") from exc
    return encode


def _length_prefixed(prefix: int, convert: Callable[[bytes], Any] | None = None,
                     to_bytes: Callable[[Any], bytes] | None = None, max_length: int | None = None,
                     what: str = "value") -> ColumnCodec:
    limit = (1 << (8 * prefix)) - 1 if max_length is None else max_length
    if prefix == 1:
        def length(buf: bytes, off: int) -> int:
            return 1 + buf[off]

        def decode_raw(buf: bytes, off: int) -> tuple[bytes, int]:
            end = off + 1 + buf[off]
            return buf[off + 1:end], end
    else:
        def length(buf: bytes, off: int) -> int:
            return prefix + int.from_bytes(buf[off:off + prefix], "little")

        def decode_raw(buf: bytes, off: int) -> tuple[bytes, int]:
            start = off + prefix
            end = start + int.from_bytes(buf[off:start], "little")
            return buf[start:end], end

    if convert is None:
        decode = decode_raw
    else:
        def decode(buf: bytes, off: int) -> tuple[Any, int]:
            raw, end = decode_raw(buf, off)
            return convert(raw), end

    def encode(value: Any) -> bytes:
        data = to_bytes(value) if to_bytes is not None else _as_bytes(value)
        if len(data) > limit:
            raise ValueError(f"{what} of {len(data)} bytes exceeds the column's {limit}")
        return len(data).to_bytes(prefix, "little") + data

    return ColumnCodec(decode, length, encode, convert=convert, prefix=prefix)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"expected bytes, got {type(value).__name__}")


def _decode_date(raw: bytes) -> dt.date | str:
    packed = int.from_bytes(raw, "little")
    year, month, day = packed >> 9, (packed >> 5) & 0xF, packed & 0x1F
    try:
        return dt.date(year, month, day)
    except ValueError:
        return f"{year:04d}-{month:02d}-{day:02d}"


def _encode_date(value: dt.date | str) -> bytes:
    if isinstance(value, str):
        year, month, day = parse_datetime_text(value)[:3]
    elif isinstance(value, dt.date):
        year, month, day = value.year, value.month, value.day
    else:
        raise TypeError(f"expected date, got {type(value).__name__}")
    return ((year << 9) | (month << 5) | day).to_bytes(3, "little")


def _decode_old_time(raw: bytes) -> dt.timedelta:
    hhmmss = int.from_bytes(raw, "little", signed=True)
    magnitude = abs(hhmmss)
    return make_timedelta(hhmmss < 0, magnitude // 10000, magnitude // 100 % 100, magnitude % 100, 0)


def _encode_old_time(value: dt.timedelta | dt.time) -> bytes:
    negative, hours, minutes, seconds, _usec = time_fields(value)
    hhmmss = hours * 10000 + minutes * 100 + seconds
    return (-hhmmss if negative else hhmmss).to_bytes(3, "little", signed=True)


def _decode_old_datetime(packed: int) -> dt.datetime | str:
    date_part, time_part = divmod(packed, 1_000_000)
    return make_datetime(date_part // 10000, date_part // 100 % 100, date_part % 100, time_part // 10000,
                         time_part // 100 % 100, time_part % 100, 0, 0)


def _encode_old_datetime(value: dt.datetime | dt.date | str) -> bytes:
    if isinstance(value, str):
        y, mo, d, h, mi, s, _ = parse_datetime_text(value)
    elif isinstance(value, dt.datetime):
        y, mo, d, h, mi, s = value.year, value.month, value.day, value.hour, value.minute, value.second
    elif isinstance(value, dt.date):
        y, mo, d, h, mi, s = value.year, value.month, value.day, 0, 0, 0
    else:
        raise TypeError(f"expected datetime, got {type(value).__name__}")
    return struct.pack("<Q", ((y * 100 + mo) * 100 + d) * 1_000_000 + (h * 100 + mi) * 100 + s)


def _encode_year(value: int) -> bytes:
    value = int(value)
    if value == 0:
        return b"\0"
    if not 1901 <= value <= 2155:
        raise ValueError(f"YEAR {value} is not 0 or 1901..2155")
    return bytes((value - 1900,))


def _encode_old_timestamp(value: dt.datetime | str | int) -> bytes:
    return struct.pack("<I", timestamp_parts(value)[0])


@lru_cache(maxsize=4096)
def _codec(type_code: int, meta: int, unsigned: bool, enum_values: tuple[str, ...] | None = None,
           set_values: tuple[str, ...] | None = None) -> ColumnCodec:
    if type_code == T.STRING:
        real = real_type(type_code, meta)
        if real == T.ENUM:
            return _enum_codec(meta & 0xFF, enum_values)
        if real == T.SET:
            return _set_codec(meta & 0xFF, set_values)
        max_length = string_max_length(meta)
        return _length_prefixed(2 if max_length > 255 else 1, max_length=max_length, what="CHAR value")
    if type_code in (T.ENUM, T.SET):  # the real type given directly: meta's low byte is the pack length
        if type_code == T.ENUM:
            return _enum_codec(meta & 0xFF, enum_values)
        return _set_codec(meta & 0xFF, set_values)
    if type_code in _INT_CODES:
        code = _INT_CODES[type_code]
        return _fixed(code.upper() if unsigned else code)
    if type_code == T.INT24:
        return _fixed("3s", lambda raw: int.from_bytes(raw, "little", signed=not unsigned),
                      _int_bytes(3, not unsigned, "little"))
    if type_code == T.FLOAT:
        return _fixed("f")
    if type_code == T.DOUBLE:
        return _fixed("d")
    if type_code == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        size = decimal_binary_size(precision, scale)
        return _fixed(f"{size}s", decimal_decoder(precision, scale),
                      lambda value: encode_decimal(value, precision, scale))
    if type_code == T.YEAR:
        return _fixed("B", lambda raw: raw + 1900 if raw else 0, _encode_year)
    if type_code in (T.DATE, T.NEWDATE):
        return _fixed("3s", _decode_date, _encode_date)
    if type_code == T.TIME:
        return _fixed("3s", _decode_old_time, _encode_old_time)
    if type_code == T.DATETIME:
        return _fixed("Q", _decode_old_datetime, _encode_old_datetime)
    if type_code == T.TIMESTAMP:
        return _fixed("I", lambda seconds: EPOCH + dt.timedelta(seconds=seconds), _encode_old_timestamp)
    if type_code == T.TIME2:
        fsp = meta
        return _fixed(f"{3 + frac_bytes(fsp)}s", time2_decoder(fsp),
                      lambda value: encode_time2(value, fsp))
    if type_code == T.DATETIME2:
        fsp = meta
        return _fixed(f"{5 + frac_bytes(fsp)}s", datetime2_decoder(fsp),
                      lambda value: encode_datetime2(value, fsp))
    if type_code == T.TIMESTAMP2:
        fsp = meta
        return _fixed(f"{4 + frac_bytes(fsp)}s", timestamp2_decoder(fsp),
                      lambda value: encode_timestamp2(value, fsp))
    if type_code == T.BIT:
        nbits = (meta >> 8) * 8 + (meta & 0xFF)
        size = (meta >> 8) + (1 if meta & 0xFF else 0)

        def encode_bit(value: int) -> bytes:
            if not 0 <= value < 1 << nbits:
                raise ValueError(f"{value} does not fit BIT({nbits})")
            return int(value).to_bytes(size, "big")

        return _fixed(f"{size}s", lambda raw: int.from_bytes(raw, "big"), encode_bit)
    if type_code in (T.VARCHAR, T.VAR_STRING):
        # VAR_STRING has no metadata bytes (MySQL's table_def): meta 0, 1-byte lengths as mysqlbinlog reads.
        return _length_prefixed(2 if meta > 255 else 1, max_length=meta if type_code == T.VARCHAR else None,
                                what="VARCHAR value")
    if type_code in (T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.GEOMETRY, T.VECTOR):
        _check_length_bytes(type_code, meta)
        return _length_prefixed(meta)
    if type_code == T.JSON:
        _check_length_bytes(type_code, meta)
        return _length_prefixed(meta, decode_json, encode_json, what="JSON document")
    if type_code == T.NULL:
        return _fixed("0s", lambda raw: None, lambda value: b"")
    raise ValueError(f"column type {type_code} cannot appear in a row image (old DECIMAL is pre-5.0)")


_INT_CODES = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q"}


def _check_length_bytes(type_code: int, meta: int) -> None:
    if not 1 <= meta <= 4:
        raise ValueError(f"type {type_code} needs 1..4 length bytes as meta, got {meta}")


def _enum_codec(pack_length: int, values: tuple[str, ...] | None) -> ColumnCodec:
    if pack_length not in (1, 2):
        raise ValueError(f"ENUM pack length {pack_length} is not 1 or 2")
    index = {name: i + 1 for i, name in enumerate(values or ())}
    to_bytes = _int_bytes(pack_length, False, "little")

    def encode(value: int | str) -> bytes:
        if isinstance(value, str):
            try:
                value = index[value]
            except KeyError:
                raise ValueError(f"{value!r} is not a member of the ENUM") from None
        return to_bytes(value)

    return _fixed("B" if pack_length == 1 else "H", None, encode)


def _set_codec(pack_length: int, values: tuple[str, ...] | None) -> ColumnCodec:
    if not 1 <= pack_length <= 8:
        raise ValueError(f"SET pack length {pack_length} is not 1..8")
    bits = {name: 1 << i for i, name in enumerate(values or ())}
    to_bytes = _int_bytes(pack_length, False, "little")

    def encode(value: int | Iterable[str]) -> bytes:
        if not isinstance(value, int):
            mask = 0
            for name in value:
                try:
                    mask |= bits[name]
                except KeyError:
                    raise ValueError(f"{name!r} is not a member of the SET") from None
            value = mask
        return to_bytes(value)

    code = {1: "B", 2: "H", 4: "I", 8: "Q"}.get(pack_length)
    if code is not None:
        return _fixed(code, None, encode)
    return _fixed(f"{pack_length}s", lambda raw: int.from_bytes(raw, "little"), encode)


def codec_for(col: Column) -> ColumnCodec:
    """The (cached) codec of a column; built once per distinct (type, meta, signedness, members)."""
    if col.type == T.STRING or col.type in (T.ENUM, T.SET):
        return _codec(col.type, col.meta, False, col.enum_values, col.set_values)
    return _codec(col.type, col.meta, col.unsigned)


# -- public per-value functions --------------------------------------------------------------------------

def value_length(col: Column, buf: bytes, off: int) -> int:
    """Byte length of the (non-NULL) value of ``col`` at ``buf[off]`` without decoding it."""
    return codec_for(col).length(buf, off)


def decode_value(col: Column, buf: bytes, off: int) -> tuple[Any, int]:
    """Decode the (non-NULL) value of ``col`` at ``buf[off]`` → (value, offset after it).
    ``buf`` other than bytes (memoryview, bytearray) is copied first: pass bytes on hot paths."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    try:
        value, end = codec_for(col).decode(buf, off)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"value of type {col.type} runs past the end of the buffer") from exc
    if end > len(buf):
        raise ValueError(f"value of type {col.type} runs past the end of the buffer")
    return value, end


def encode_value(col: Column, value: Any) -> bytes:
    """The row-image bytes of a non-NULL ``value`` (NULL lives in the image's null bitmap)."""
    if value is None:
        raise ValueError("SQL NULL has no value bytes; it is a bit of the null bitmap")
    return codec_for(col).encode(value)


# -- TABLE_MAP metadata block ----------------------------------------------------------------------------

_META_ONE_BYTE = frozenset({T.FLOAT, T.DOUBLE, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                            T.GEOMETRY, T.JSON, T.VECTOR, T.TIME2, T.DATETIME2, T.TIMESTAMP2})
_META_TWO_BYTES_HIGH_FIRST = frozenset({T.STRING, T.ENUM, T.SET, T.NEWDECIMAL})
_META_TWO_BYTES_LITTLE_ENDIAN = frozenset({T.BIT, T.VARCHAR})


def decode_metadata(types: bytes, meta_block: bytes) -> list[int]:
    """Per-column meta values from the TABLE_MAP metadata block (0, 1 or 2 bytes per type)."""
    metas = []
    pos = 0
    try:
        for type_code in types:
            if type_code in _META_ONE_BYTE:
                metas.append(meta_block[pos])
                pos += 1
            elif type_code in _META_TWO_BYTES_HIGH_FIRST:
                metas.append((meta_block[pos] << 8) | meta_block[pos + 1])
                pos += 2
            elif type_code in _META_TWO_BYTES_LITTLE_ENDIAN:
                metas.append(meta_block[pos] | (meta_block[pos + 1] << 8))
                pos += 2
            else:
                metas.append(0)
    except IndexError:
        raise ValueError(f"metadata block of {len(meta_block)} bytes too short for the column types") from None
    if pos != len(meta_block):
        raise ValueError(f"metadata block has {len(meta_block) - pos} bytes the column types do not use")
    return metas


def wire_type(col: Column) -> int:
    """The TABLE_MAP type byte: ENUM and SET travel as STRING."""
    return T.STRING if col.type in (T.ENUM, T.SET) else col.type


def encode_metadata(columns: Iterable[Column]) -> bytes:
    out = bytearray()
    for col in columns:
        type_code, meta = col.type, col.meta
        if type_code in (T.ENUM, T.SET):
            meta = (type_code << 8) | (meta & 0xFF)
        if type_code in _META_ONE_BYTE:
            out.append(meta & 0xFF)
        elif type_code in _META_TWO_BYTES_HIGH_FIRST:
            out += bytes((meta >> 8 & 0xFF, meta & 0xFF))
        elif type_code in _META_TWO_BYTES_LITTLE_ENDIAN:
            out += bytes((meta & 0xFF, meta >> 8 & 0xFF))
    return bytes(out)
