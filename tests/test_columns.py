"""Column value codecs, the TABLE_MAP metadata block and binary JSON.

Fixed vectors come from outside this code: MySQL's ``strings/decimal.c`` and ``my_time.cc`` comments,
the binary JSON layout of ``json_binary.h`` (derived by hand), and values MariaDB 10.11 wrote to a binlog
(``test_rows_events.py`` holds the whole events). Round trips are property-based.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Context, Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog.columns import (
    Column,
    bit_column,
    blob_column,
    char_column,
    codec_for,
    decimal_column,
    decode_metadata,
    decode_value,
    encode_metadata,
    encode_value,
    enum_column,
    real_type,
    set_column,
    string_max_length,
    string_meta,
    value_length,
    varchar_column,
)
from binlog.constants import ColumnType as T
from binlog.jsonb import JSON_NULL, JsonOpaque, decode_json, encode_json

UTC = dt.UTC
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies (also used by test_rows_events) ---------------------------------------------------------

_INT_RANGES = {
    T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64,
}
_MAX_TIME_US = (839 * 3600) * 10**6 - 1


def _int_range(bits: int, unsigned: bool) -> tuple[int, int]:
    return (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _truncate(usec: int, fsp: int) -> int:
    return usec - usec % 10 ** (6 - fsp)


def _time_values(fsp: int) -> st.SearchStrategy[dt.timedelta]:
    def build(total: int) -> dt.timedelta:
        magnitude = _truncate(abs(total), fsp)
        return dt.timedelta(microseconds=-magnitude if total < 0 else magnitude)
    return st.integers(-_MAX_TIME_US, _MAX_TIME_US).map(build)


def _datetimes(fsp: int) -> st.SearchStrategy[dt.datetime]:
    return st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
                        ).map(lambda v: v.replace(microsecond=_truncate(v.microsecond, fsp)))


def _timestamps(fsp: int) -> st.SearchStrategy[dt.datetime]:
    return st.datetimes(min_value=dt.datetime(1970, 1, 1, 0, 0, 1), max_value=dt.datetime(2106, 2, 7, 6, 28, 15)
                        ).map(lambda v: v.replace(microsecond=_truncate(v.microsecond, fsp), tzinfo=UTC))


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    context = Context(prec=100)
    return st.integers(-(10**precision - 1), 10**precision - 1).map(
        lambda n: Decimal(n).scaleb(-scale, context=context))


def _text_bytes(max_bytes: int) -> st.SearchStrategy[bytes]:
    """Raw bytes or multi-byte UTF-8 text, at most ``max_bytes`` long."""
    utf8 = st.text(max_size=max(0, max_bytes // 4)).map(lambda s: s.encode("utf-8"))
    return st.one_of(st.binary(max_size=min(max_bytes, 600)), utf8,
                     st.just(b""), st.just(b"\xff" * min(max_bytes, 255)))


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(st.lists(children, max_size=6),
                               st.dictionaries(st.text(max_size=8), children, max_size=6)),
    max_leaves=25)


@st.composite
def column_and_values(draw: st.DrawFn) -> tuple[Column, st.SearchStrategy]:
    """A column of any row-image type and a strategy of its (non-NULL) Python values."""
    kind = draw(st.sampled_from([
        "int", "float", "double", "decimal", "year", "date", "time", "time2", "datetime", "datetime2",
        "timestamp", "timestamp2", "varchar", "var_string", "char", "enum", "set", "bit", "blob", "json",
        "geometry"]))
    unsigned = draw(st.booleans())
    fsp = draw(st.integers(0, 6))
    if kind == "int":
        type_code = draw(st.sampled_from(sorted(_INT_RANGES)))
        low, high = _int_range(_INT_RANGES[type_code], unsigned)
        return Column(type_code, unsigned=unsigned), st.integers(low, high)
    if kind == "float":
        return Column(T.FLOAT, 4), st.floats(width=32, allow_nan=False, allow_infinity=False)
    if kind == "double":
        return Column(T.DOUBLE, 8), st.floats(allow_nan=False, allow_infinity=False)
    if kind == "decimal":
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(30, precision)))
        return decimal_column(precision, scale, unsigned=unsigned), _decimals(precision, scale)
    if kind == "year":
        return Column(T.YEAR), st.one_of(st.just(0), st.integers(1901, 2155))
    if kind == "date":
        return Column(T.DATE), st.one_of(st.dates(), st.sampled_from(["0000-00-00", "2024-02-00"]))
    if kind == "time":
        return Column(T.TIME), _time_values(0)
    if kind == "time2":
        return Column(T.TIME2, fsp), _time_values(fsp)
    if kind == "datetime":
        return Column(T.DATETIME), st.one_of(_datetimes(0), st.just("0000-00-00 00:00:00"))
    if kind == "datetime2":
        zero = "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")
        return Column(T.DATETIME2, fsp), st.one_of(_datetimes(fsp), st.just(zero))
    if kind == "timestamp":
        return Column(T.TIMESTAMP), _timestamps(0)
    if kind == "timestamp2":
        return Column(T.TIMESTAMP2, fsp), _timestamps(fsp)
    if kind == "varchar":
        max_bytes = draw(st.sampled_from([1, 32, 255, 256, 1020, 65535]))
        return varchar_column(max_bytes), _text_bytes(max_bytes)
    if kind == "var_string":
        return Column(T.VAR_STRING), _text_bytes(255)
    if kind == "char":
        max_bytes = draw(st.sampled_from([1, 4, 40, 255, 256, 400, 1020]))
        return char_column(max_bytes), _text_bytes(max_bytes)
    if kind == "enum":
        members = draw(st.sampled_from([3, 300]))
        return enum_column([f"m{i}" for i in range(members)]), st.integers(0, members)
    if kind == "set":
        members = draw(st.sampled_from([1, 8, 9, 17, 30, 64]))
        return set_column([f"s{i}" for i in range(members)]), st.integers(0, 2**members - 1)
    if kind == "bit":
        nbits = draw(st.integers(1, 64))
        return bit_column(nbits), st.integers(0, 2**nbits - 1)
    if kind == "blob":
        length_bytes = draw(st.integers(1, 4))
        return blob_column(length_bytes), _text_bytes(255 if length_bytes == 1 else 600)
    if kind == "json":
        # A top-level JSON null is JSON_NULL: None would be SQL NULL.
        return Column(T.JSON, 4), json_values.map(lambda v: JSON_NULL if v is None else v)
    return Column(T.GEOMETRY, 4), st.binary(max_size=64)


def assert_same_value(decoded: object, expected: object) -> None:
    assert decoded == expected
    assert type(decoded) is type(expected) or (isinstance(expected, bool) and decoded == expected)
    if isinstance(expected, Decimal):  # exact digits and scale, not just equal numbers
        assert decoded.as_tuple().exponent == expected.as_tuple().exponent  # type: ignore[union-attr]


# -- round trips --------------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_every_type_round_trips(data: st.DataObject) -> None:
    col, values = data.draw(column_and_values())
    value = data.draw(values)
    raw = encode_value(col, value)
    prefix = data.draw(st.binary(max_size=3))
    buf = prefix + raw + b"\x99trailing"
    assert value_length(col, buf, len(prefix)) == len(raw)
    decoded, end = decode_value(col, buf, len(prefix))
    assert end == len(prefix) + len(raw)
    assert_same_value(decoded, value)


@pytest.mark.parametrize("type_code", sorted(_INT_RANGES))
@pytest.mark.parametrize("unsigned", [False, True])
def test_integer_boundaries(type_code: int, unsigned: bool) -> None:
    col = Column(type_code, unsigned=unsigned)
    low, high = _int_range(_INT_RANGES[type_code], unsigned)
    size = _INT_RANGES[type_code] // 8
    for value in (low, low + 1, -1 if not unsigned else 1, 0, high - 1, high):
        raw = encode_value(col, value)
        assert len(raw) == size
        assert raw == value.to_bytes(size, "little", signed=not unsigned)
        assert decode_value(col, raw, 0) == (value, size)
    for bad in (low - 1, high + 1):
        with pytest.raises(ValueError):
            encode_value(col, bad)


def test_signedness_changes_only_the_reading() -> None:
    raw = b"\xff\xff\xff"
    assert decode_value(Column(T.INT24), raw, 0)[0] == -1
    assert decode_value(Column(T.INT24, unsigned=True), raw, 0)[0] == 2**24 - 1


@pytest.mark.parametrize("length", [0, 1, 255, 256, 65535])
def test_varchar_and_blob_length_prefixes(length: int) -> None:
    value = b"a" * length
    short = varchar_column(255)
    long = varchar_column(65535)
    if length <= 255:
        assert encode_value(short, value) == bytes((length,)) + value
    assert encode_value(long, value) == length.to_bytes(2, "little") + value
    assert encode_value(blob_column(2), value) == length.to_bytes(2, "little") + value
    assert encode_value(blob_column(4), value) == length.to_bytes(4, "little") + value
    big = b"b" * 65536
    assert decode_value(blob_column(3), encode_value(blob_column(3), big), 0)[0] == big
    with pytest.raises(ValueError):
        encode_value(blob_column(2), big)
    with pytest.raises(ValueError):
        encode_value(short, b"x" * 256)


def test_multibyte_utf8_strings() -> None:
    text = "日本語 ☃ héllo 𝄞"
    for col in (varchar_column(100), char_column(400), blob_column(2)):
        raw = encode_value(col, text)  # str is written as UTF-8
        assert decode_value(col, raw, 0)[0] == text.encode("utf-8")


# -- DECIMAL --------------------------------------------------------------------------------------------------

# MySQL strings/decimal.c, decimal2bin(): "1234567890.1234" as DECIMAL(14,4), and its negative.
DECIMAL_DOC_VECTORS = [
    ("1234567890.1234", 14, 4, "810dfb38d204d2"),
    ("-1234567890.1234", 14, 4, "7ef204c72dfb2d"),
]
# Written by MariaDB 10.11 (decimal format shared with MySQL): see test_rows_events.MARIADB_WRITE_1.
DECIMAL_SERVER_VECTORS = [
    ("-12345678901234567890123456789012345.123456789012345678901234567890", 65, 30,
     "7f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca484078fc85"),
    ("99999999.99", 10, 2, "85f5e0ff63"),
]


@pytest.mark.parametrize(("text", "precision", "scale", "hex_bytes"), DECIMAL_DOC_VECTORS + DECIMAL_SERVER_VECTORS)
def test_decimal_known_bytes(text: str, precision: int, scale: int, hex_bytes: str) -> None:
    col = decimal_column(precision, scale)
    assert encode_value(col, Decimal(text)).hex() == hex_bytes
    assert_same_value(decode_value(col, bytes.fromhex(hex_bytes), 0)[0], Decimal(text))


def test_decimal_extremes_and_rounding() -> None:
    col = decimal_column(65, 30)
    biggest = Decimal("9" * 35 + "." + "9" * 30)
    for value in (biggest, biggest.copy_negate(), Decimal("0E-30"), Decimal("-1E-30")):  # unary minus would round to 28 digits
        assert_same_value(decode_value(col, encode_value(col, value), 0)[0], value)
    two = decimal_column(10, 2)
    assert decode_value(two, encode_value(two, Decimal("1.005")), 0)[0] == Decimal("1.01")  # half away from 0
    assert decode_value(two, encode_value(two, Decimal("-1.005")), 0)[0] == Decimal("-1.01")
    assert decode_value(two, encode_value(two, 7), 0)[0] == Decimal("7.00")
    with pytest.raises(ValueError):
        encode_value(two, Decimal("100000000"))  # nine integer digits in DECIMAL(10,2)
    fraction_only = decimal_column(5, 5)
    assert decode_value(fraction_only, encode_value(fraction_only, Decimal("-0.12345")), 0)[0] == Decimal("-0.12345")


# -- temporal ---------------------------------------------------------------------------------------------------

# MySQL my_time.cc my_time_packed_from_binary(), the table for TIME(2): disk bytes → value.
TIME2_DOC_VECTORS = [
    ("80000000", dt.timedelta(0)),
    ("7fffffff", -dt.timedelta(microseconds=10000)),
    ("7fffff9d", -dt.timedelta(microseconds=990000)),
    ("7fffff00", -dt.timedelta(seconds=1)),
    ("7ffffeff", -dt.timedelta(seconds=1, microseconds=10000)),
    ("7ffffef6", -dt.timedelta(seconds=1, microseconds=100000)),
]


@pytest.mark.parametrize(("hex_bytes", "value"), TIME2_DOC_VECTORS)
def test_time2_known_bytes_fsp2(hex_bytes: str, value: dt.timedelta) -> None:
    col = Column(T.TIME2, 2)
    assert decode_value(col, bytes.fromhex(hex_bytes), 0) == (value, 4)
    assert encode_value(col, value).hex() == hex_bytes


# Written by MariaDB 10.11 for the SQL literals on the left (test_rows_events.MARIADB_WRITE_1).
TEMPORAL_SERVER_VECTORS = [
    (Column(T.TIME2, 0), "4b9105", -dt.timedelta(hours=838, minutes=59, seconds=59)),
    (Column(T.TIME2, 3), "7ffffefc18", -dt.timedelta(seconds=1, microseconds=100000)),
    (Column(T.TIME2, 6), "80c8b80c0a14", dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789012)),
    (Column(T.DATETIME2, 0), "99b2443105", dt.datetime(2024, 1, 2, 3, 4, 5)),
    (Column(T.DATETIME2, 6), "fef3ff7efb0f423f", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    (Column(T.DATETIME2, 1), "996442000032", dt.datetime(2000, 1, 1, 0, 0, 0, 500000)),
    (Column(T.TIMESTAMP2, 2), "7fffffff63", dt.datetime(2038, 1, 19, 3, 14, 7, 990000, tzinfo=UTC)),
    (Column(T.TIMESTAMP2, 0), "00000001", dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)),
    (Column(T.DATE), "5dd00f", dt.date(2024, 2, 29)),
    (Column(T.DATE), "000000", "0000-00-00"),
    (Column(T.DATETIME2, 0), "8000000000", "0000-00-00 00:00:00"),
    (Column(T.YEAR), "ff", 2155),
    (Column(T.YEAR), "00", 0),
]


@pytest.mark.parametrize(("col", "hex_bytes", "value"), TEMPORAL_SERVER_VECTORS)
def test_temporal_known_bytes(col: Column, hex_bytes: str, value: object) -> None:
    raw = bytes.fromhex(hex_bytes)
    assert_same_value(decode_value(col, raw, 0)[0], value)
    assert encode_value(col, value) == raw


def test_old_temporal_types() -> None:
    # TIME: HHMMSS as a signed 3-byte integer; DATETIME: YYYYMMDDhhmmss as 8 bytes; TIMESTAMP: seconds.
    time_col, datetime_col, timestamp_col = Column(T.TIME), Column(T.DATETIME), Column(T.TIMESTAMP)
    assert encode_value(time_col, -dt.timedelta(hours=1, minutes=2, seconds=3)) == (-10203).to_bytes(3, "little", signed=True)
    assert decode_value(datetime_col, struct.pack("<Q", 20240102030405), 0)[0] == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert decode_value(datetime_col, bytes(8), 0)[0] == "0000-00-00 00:00:00"
    assert decode_value(timestamp_col, struct.pack("<I", 86400), 0)[0] == dt.datetime(1970, 1, 2, tzinfo=UTC)


def test_fractional_digits_beyond_the_column_are_dropped() -> None:
    value = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    assert decode_value(Column(T.DATETIME2, 3), encode_value(Column(T.DATETIME2, 3), value), 0)[0] == value.replace(
        microsecond=123000)
    negative = -dt.timedelta(seconds=5, microseconds=999999)
    assert decode_value(Column(T.TIME2, 1), encode_value(Column(T.TIME2, 1), negative), 0)[0] == -dt.timedelta(
        seconds=5, microseconds=900000)
    zero = decode_value(Column(T.DATETIME2, 4), encode_value(Column(T.DATETIME2, 4), "0000-00-00 00:00:00"), 0)[0]
    assert zero == "0000-00-00 00:00:00.0000"
    with pytest.raises(ValueError):
        encode_value(Column(T.TIME2, 0), dt.timedelta(hours=839))


def test_naive_timestamp_is_taken_as_utc() -> None:
    col = Column(T.TIMESTAMP2, 0)
    naive = dt.datetime(2020, 1, 1, 12)
    assert decode_value(col, encode_value(col, naive), 0)[0] == naive.replace(tzinfo=UTC)


# -- CHAR / ENUM / SET / BIT meta ----------------------------------------------------------------------------

# STRING metas MariaDB wrote (test_rows_events.MARIADB_TABLE_MAP): (meta, real type, max bytes or pack len).
STRING_METAS = [
    (65064, T.STRING, 40),     # CHAR(10) utf8mb4
    (61072, T.STRING, 400),    # CHAR(100) utf8mb4: length bits 8..9 folded into byte0 (0xee)
    (65028, T.STRING, 4),      # BINARY(4)
    (63233, T.ENUM, 1),
    (63489, T.SET, 1),
]


@pytest.mark.parametrize(("meta", "real", "length"), STRING_METAS)
def test_string_meta(meta: int, real: int, length: int) -> None:
    assert real_type(T.STRING, meta) == real
    assert string_meta(real, length) == meta
    if real == T.STRING:
        assert string_max_length(meta) == length
        assert ((meta >> 4) & 0x300) ^ 0x300 == length & 0x300


def test_char_prefix_follows_max_length() -> None:
    assert encode_value(char_column(255), b"ab") == b"\x02ab"
    assert encode_value(char_column(400), b"ab") == b"\x02\x00ab"


def test_enum_set_bit() -> None:
    enum = enum_column(["a", "b", "c"])
    assert encode_value(enum, "b") == b"\x02"
    assert decode_value(enum, b"\x03", 0) == (3, 1)
    big_enum = enum_column([str(i) for i in range(300)])
    assert encode_value(big_enum, 300) == (300).to_bytes(2, "little")
    tags = set_column(["x", "y", "z"])
    assert encode_value(tags, {"x", "z"}) == b"\x05"
    assert len(encode_value(set_column([str(i) for i in range(40)]), 1)) == 8  # pack length 5 rounds to 8
    three_byte_set = Column(T.STRING, string_meta(T.SET, 3))
    assert decode_value(three_byte_set, encode_value(three_byte_set, 0xABCDEF), 0) == (0xABCDEF, 3)
    bits = bit_column(10)
    assert bits.meta == 0x0102
    assert encode_value(bits, 0b1010101010) == bytes.fromhex("02aa")  # MariaDB wrote b'1010101010' so
    with pytest.raises(ValueError):
        encode_value(bits, 1 << 10)
    with pytest.raises(ValueError):
        encode_value(enum, "nope")


# -- metadata block ----------------------------------------------------------------------------------------------

def test_metadata_block_sizes_and_byte_order() -> None:
    columns = [Column(T.LONG), Column(T.FLOAT, 4), varchar_column(300), decimal_column(14, 4), bit_column(10),
               char_column(400), enum_column(["a"]), Column(T.DATETIME2, 6), blob_column(3), Column(T.JSON, 4),
               Column(T.VAR_STRING), Column(T.DATE)]
    block = encode_metadata(columns)
    #                 FLOAT VARCHAR(LE) DECIMAL(p,s) BIT(LE)  CHAR(b0,b1) ENUM   DT2  BLOB JSON
    assert block.hex() == "04" "2c01" "0e04" "0201" "ee90" "f701" "06" "03" "04"
    types = bytes(col.type for col in columns)
    assert decode_metadata(types, block) == [col.meta for col in columns]
    with pytest.raises(ValueError):
        decode_metadata(types, block[:-1])
    with pytest.raises(ValueError):
        decode_metadata(types, block + b"\0")


@SETTINGS
@given(st.lists(column_and_values(), max_size=12))
def test_metadata_block_round_trips(pairs: list) -> None:
    columns = [col for col, _ in pairs]
    types = bytes(col.type for col in columns)
    assert decode_metadata(types, encode_metadata(columns)) == [col.meta for col in columns]


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        encode_value(Column(T.LONG), None)
    with pytest.raises(ValueError):
        codec_for(Column(T.DECIMAL))  # pre-5.0 DECIMAL never appears in row images
    with pytest.raises(TypeError):
        encode_value(Column(T.DATE), 20240101)
    with pytest.raises(ValueError):
        decode_value(varchar_column(100), b"\x05ab", 0)  # runs past the buffer


# -- binary JSON -------------------------------------------------------------------------------------------------

# Derived by hand from the layout in MySQL's json_binary.h.
JSON_VECTORS = [
    # small object: count 1, size 12, key entry (offset 11, length 1), value entry int16 1 inlined, key "a"
    ({"a": 1}, "00" "0100" "0c00" "0b000100" "050100" "61"),
    # small array: count 2, size 12, true inlined, string at offset 10: length 1, "x"
    ([True, "x"], "02" "0200" "0c00" "040100" "0c0a00" "0178"),
    (-1, "05ffff"),
    (2**64 - 1, "0a" + "ff" * 8),
    (-(2**63), "09" + "00" * 7 + "80"),
    (1.5, "0b000000000000f83f"),
    ("é", "0c02c3a9"),
    ("x" * 128, "0c8001" + "78" * 128),  # two-byte variable length
    (False, "0402"),
    (JSON_NULL, "0400"),
    ({}, "00" "0000" "0400"),
    ([None], "02" "0100" "0700" "040000"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), JSON_VECTORS)
def test_json_known_bytes(value: object, hex_bytes: str) -> None:
    assert encode_json(value).hex() == hex_bytes
    assert decode_json(bytes.fromhex(hex_bytes)) == value


def test_json_keys_sorted_by_length_then_bytes() -> None:
    doc = encode_json({"bb": 1, "c": 2, "a": 3, "ab": 4})
    header = 1 + 4 + 4 * 4 + 4 * 3
    assert doc[header:header + 6] == b"acabbb"
    assert list(decode_json(doc)) == ["a", "c", "ab", "bb"]


def test_json_empty_document_and_null() -> None:
    assert decode_json(b"") is JSON_NULL
    assert decode_json(encode_json(None)) is JSON_NULL
    assert decode_json(encode_json({"k": None})) == {"k": None}
    assert repr(JSON_NULL) == "JSON_NULL" and not JSON_NULL


def test_json_large_containers() -> None:
    big = {"big": "y" * 70000, "n": 70000, "small": -5}
    doc = encode_json(big)
    assert doc[0] == 0x01  # large object: offsets no longer fit 16 bits
    # int32 values sit inline in large containers: value entry of "n" is type 0x07 + the number itself
    assert b"\x07" + (70000).to_bytes(4, "little") in doc[:64]
    assert decode_json(doc) == big
    array = encode_json(["z" * 66000, 1])
    assert array[0] == 0x03
    assert decode_json(array) == ["z" * 66000, 1]


def test_json_opaque_values() -> None:
    values = [Decimal("-123.4500"), Decimal("0.5"), dt.datetime(2024, 1, 2, 3, 4, 5, 6),
              dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), dt.date(1999, 12, 31),
              -dt.timedelta(hours=800, microseconds=1), JsonOpaque(252, b"\x00\x01blob")]
    doc = encode_json(values)
    decoded = decode_json(doc)
    assert decoded == values
    assert decoded[0].as_tuple().exponent == -4
    # MySQL's DECIMAL opaque: type 0xf6, length, precision, scale, packed decimal
    assert encode_json(Decimal("1.5")).hex() == "0ff6" "04" "0201" "8105"
    # A zero date is no Python date: it stays opaque, byte for byte.
    zero = bytes.fromhex("0f0c08") + bytes(8)
    assert decode_json(zero) == JsonOpaque(12, bytes(8))
    assert encode_json(decode_json(zero)) == zero


def _as_python_mysql_replication(value: object) -> object:
    """python-mysql-replication returns keys and strings as bytes."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, dict):
        return {_as_python_mysql_replication(k): _as_python_mysql_replication(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_python_mysql_replication(v) for v in value]
    return value


@SETTINGS
@given(json_values)
def test_json_round_trip_and_independent_reader(value: object) -> None:
    doc = encode_json(value)
    expected = JSON_NULL if value is None else value
    assert decode_json(doc) == expected
    from pymysqlreplication import json_binary
    if value is not None:
        assert json_binary.parse_json(doc[0], doc[1:]) == _as_python_mysql_replication(value)


def test_json_rejects_what_mysql_cannot_hold() -> None:
    with pytest.raises(ValueError):
        encode_json(2**64)
    with pytest.raises(TypeError):
        encode_json({1: "non-str key"})
    with pytest.raises(ValueError):
        decode_json(b"\x00\x05\x00")  # truncated object
