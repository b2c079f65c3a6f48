"""TABLE_MAP and ROWS event bodies: real server bytes, round trips, and mariadb-binlog as a reader.

The ``MARIADB_*`` payloads were written by MariaDB 10.11.19 (``binlog_row_metadata=FULL``,
``binlog_row_image=FULL``, then MINIMAL for the last UPDATE) for this script, time_zone +00:00:

    CREATE TABLE gb.t (id INT NOT NULL PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT,
      mu MEDIUMINT UNSIGNED, mi MEDIUMINT, bu BIGINT UNSIGNED, bi BIGINT, fl FLOAT, db DOUBLE,
      d1 DECIMAL(14,4), d2 DECIMAL(65,30), d3 DECIMAL(10,2) UNSIGNED, y YEAR, dt DATE, tm0 TIME,
      tm3 TIME(3), tm6 TIME(6), dt0 DATETIME, dt6 DATETIME(6), dt1 DATETIME(1), ts2 TIMESTAMP(2) NULL,
      ts0 TIMESTAMP NULL, c10 CHAR(10) utf8mb4, c100 CHAR(100) utf8mb4, vl VARCHAR(300) latin1,
      vu VARCHAR(10) utf8mb4, bn BINARY(4), vb VARBINARY(20), tt TINYTEXT utf8mb4, bl BLOB, mb MEDIUMBLOB,
      lt LONGTEXT utf8mb4, e ENUM('a','b','c') utf8mb4, st SET('x','y','z') latin1, bt BIT(10), g GEOMETRY)
      CHARACTER SET utf8mb4;
    INSERT INTO gb.t VALUES (1, -128, 255, -32768, 16777215, -8388608, 18446744073709551615,
      -9223372036854775808, 1.5, -2.25e100, 1234567890.1234,
      -12345678901234567890123456789012345.123456789012345678901234567890, 99999999.99, 2155,
      '2024-02-29', '-838:59:59', '-00:00:01.100', '12:34:56.789012', '2024-01-02 03:04:05',
      '9999-12-31 23:59:59.999999', '2000-01-01 00:00:00.5', '2038-01-19 03:14:07.99',
      '1970-01-01 00:00:01', 'héllo', REPEAT('ü', 100), REPEAT('x', 260), '日本語', 'ab', X'00FF', 'tiny',
      X'DEADBEEF', REPEAT('m', 300), 'long ☃', 'b', 'x,z', b'1010101010', ST_GeomFromText('POINT(1 2)'));
    INSERT INTO gb.t (id, dt, dt0, y) VALUES (2, '0000-00-00', '0000-00-00 00:00:00', 0);  -- sql_mode=''
    UPDATE gb.t SET ti = 5, vu = NULL WHERE id = 1;
    DELETE FROM gb.t WHERE id = 2;
    SET SESSION binlog_row_image = MINIMAL; UPDATE gb.t SET si = 7 WHERE id = 1;
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog.columns import (
    Column,
    bit_column,
    char_column,
    decimal_column,
    enum_column,
    is_character,
    is_enum_or_set,
    is_numeric,
    set_column,
    varchar_column,
)
from binlog.constants import BINLOG_MAGIC, POST_HEADER_LEN_57
from binlog.constants import ColumnType as T
from binlog.constants import EventType as E
from binlog.event import FormatContext
from binlog.row_image import ABSENT, TableCodec, decode_image, encode_image, image_length
from binlog.rows_events import (
    RowsV1,
    RowsV2,
    TableMap,
    decode_rows_event,
    decode_table_map,
    encode_rows_event,
    encode_table_map,
)
from tests import REAL_DN
from tests.test_columns import assert_same_value, column_and_values

UTC = dt.UTC
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARIADB = FormatContext(server_version="10.11.19-MariaDB-0+deb12u1-log", post_header_len=POST_HEADER_LEN_57)

MARIADB_TABLE_MAP = bytes.fromhex(
    "1700000000000100026762000174002503010102090908080405f6f6f60d0a1313131212121111fefe0f0ffe0ffcfcfcfcfe"
    "fe10ff2704080e04411e0a020003060006010200fe28ee902c012800fe04140001020304f701f801020104feffffff1f0102"
    "2a0c030b2d2d082d3f3f2d3f3f2d3f0701000477026964027469027475027369026d75026d6902627502626902666c026462"
    "026431026432026433017902647403746d3003746d3303746d36036474300364743603647431037473320374733003633130"
    "046331303002766c02767502626e02766202747402626c026d62026c74016502737402627401670b022d0805070301780179"
    "017a060703016101620163080100"
)
MARIADB_WRITE_1 = bytes.fromhex(
    "170000000000010025ffffffff1f00000000e00100000080ff0080ffffff000080ffffffffffffffff000000000000008000"
    "00c03fed5b47cae292c4d4810dfb38d204d27f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca484078fc8585f5"
    "e0ff63ff5dd00f4b91057ffffefc1880c8b80c0a1499b2443105fef3ff7efb0f423f9964420000327fffffff630000000106"
    "68c3a96c6c6fc800c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bc040178787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "787878787878787878787878787878787878787809e697a5e69cace8aa9e0261620200ff0474696e790400deadbeef2c0100"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "080000006c6f6e6720e29883020502aa19000000000000000101000000000000000000f03f0000000000000040"
)
MARIADB_WRITE_2 = bytes.fromhex(
    "170000000000010025ffffffff1ffe9ffbffff02000000000000008000000000"
)
MARIADB_UPDATE = bytes.fromhex(
    "170000000000010025ffffffff1fffffffff1f00000000e00100000080ff0080ffffff000080ffffffffffffffff00000000"
    "000000800000c03fed5b47cae292c4d4810dfb38d204d27f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca4840"
    "78fc8585f5e0ff63ff5dd00f4b91057ffffefc1880c8b80c0a1499b2443105fef3ff7efb0f423f9964420000327fffffff63"
    "000000010668c3a96c6c6fc800c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3"
    "bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3"
    "bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3"
    "bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3"
    "bcc3bcc3bcc3bcc3bcc3bcc3bc04017878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787809e697a5e69cace8aa9e0261620200ff0474696e790400dead"
    "beef2c01006d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d080000006c6f6e6720e29883020502aa19000000000000000101000000000000000000f03f0000000000000040"
    "00000004e00100000005ff0080ffffff000080ffffffffffffffff00000000000000800000c03fed5b47cae292c4d4810dfb"
    "38d204d27f439eb1ca484078caf1cb3fd0f8a086f8a432eaff439eb1ca484078fc8585f5e0ff63ff5dd00f4b91057ffffefc"
    "1880c8b80c0a1499b2443105fef3ff7efb0f423f9964420000327fffffff63000000010668c3a96c6c6fc800c3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc"
    "c3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bcc3bc040178787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
    "7878787878780261620200ff0474696e790400deadbeef2c01006d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d"
    "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d080000006c6f6e6720e29883020502aa1900000000000000"
    "0101000000000000000000f03f0000000000000040"
)
MARIADB_DELETE = bytes.fromhex(
    "170000000000010025ffffffff1ffe9ffbffff02000000000000008000000000"
)
MARIADB_UPDATE_MINIMAL = bytes.fromhex(
    "17000000000001002501000000000800000000fe01000000fe0700"
)

NAMES = ("id ti tu si mu mi bu bi fl db d1 d2 d3 y dt tm0 tm3 tm6 dt0 dt6 dt1 ts2 ts0 c10 c100 vl vu bn vb tt "
         "bl mb lt e st bt g").split()
ROW_1 = [
    1, -128, 255, -32768, 16777215, -8388608, 18446744073709551615, -9223372036854775808, 1.5, -2.25e100,
    Decimal("1234567890.1234"), Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
    Decimal("99999999.99"), 2155, dt.date(2024, 2, 29), -dt.timedelta(hours=838, minutes=59, seconds=59),
    -dt.timedelta(seconds=1, microseconds=100000), dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789012),
    dt.datetime(2024, 1, 2, 3, 4, 5), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    dt.datetime(2000, 1, 1, 0, 0, 0, 500000), dt.datetime(2038, 1, 19, 3, 14, 7, 990000, tzinfo=UTC),
    dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "héllo".encode(), ("ü" * 100).encode(), b"x" * 260,
    "日本語".encode(), b"ab",  # BINARY(4): the server strips the 0x00 padding in row images
    b"\x00\xff", b"tiny", b"\xde\xad\xbe\xef", b"m" * 300, "long ☃".encode(), 2, 0b101, 0b1010101010,
    bytes(4) + bytes.fromhex("0101000000000000000000f03f0000000000000040"),  # SRID 0 + WKB POINT(1 2)
]
ROW_2 = [2] + [None] * 12 + [0, "0000-00-00", None, None, None, "0000-00-00 00:00:00"] + [None] * 18
ROW_1_UPDATED = [5 if name == "ti" else None if name == "vu" else value for name, value in zip(NAMES, ROW_1, strict=True)]


def assert_rows_equal(decoded: list, expected: list) -> None:
    assert len(decoded) == len(expected)
    for got, want in zip(decoded, expected, strict=True):
        if isinstance(want, tuple):
            assert isinstance(got, tuple)
            assert_rows_equal(list(got), list(want))
            continue
        assert len(got) == len(want)
        for value, wanted in zip(got, want, strict=True):
            if wanted is None or wanted is ABSENT:
                assert value is wanted
            else:
                assert_same_value(value, wanted)


# -- real server bytes ----------------------------------------------------------------------------------------

def test_mariadb_table_map_with_full_optional_metadata() -> None:
    table_map = decode_table_map(MARIADB_TABLE_MAP, MARIADB)
    assert (table_map.table_id, table_map.flags, table_map.db, table_map.table) == (23, 1, "gb", "t")
    columns = table_map.columns
    assert [col.name for col in columns] == NAMES
    by_name = {col.name: col for col in columns}
    assert [col.nullable for col in columns] == [name != "id" for name in NAMES]
    assert [col.primary_key for col in columns] == [name == "id" for name in NAMES]
    # MariaDB gives YEAR a signedness bit (unsigned); MySQL does not count it as numeric.
    assert {col.name for col in columns if col.unsigned} == {"tu", "mu", "bu", "d3", "y"}
    charsets = {col.name: col.charset for col in columns if col.charset is not None}
    assert charsets == {"c10": 45, "c100": 45, "vl": 8, "vu": 45, "bn": 63, "vb": 63, "tt": 45, "bl": 63,
                        "mb": 63, "lt": 45, "g": 63, "e": 45, "st": 8}
    assert by_name["e"].enum_values == ("a", "b", "c") and by_name["e"].real_type == T.ENUM
    assert by_name["st"].set_values == ("x", "y", "z") and by_name["st"].real_type == T.SET
    assert (by_name["d2"].type, by_name["d2"].meta) == (T.NEWDECIMAL, 65 << 8 | 30)
    assert (by_name["c100"].type, by_name["c100"].meta) == (T.STRING, 0xEE90)
    assert (by_name["vl"].type, by_name["vl"].meta) == (T.VARCHAR, 300)
    assert (by_name["bt"].type, by_name["bt"].meta) == (T.BIT, 0x0102)
    assert (by_name["mb"].type, by_name["mb"].meta) == (T.BLOB, 3)
    assert (by_name["ts2"].type, by_name["ts2"].meta) == (T.TIMESTAMP2, 2)
    assert table_map.optional_metadata.geometry_types == (0,)
    assert table_map.optional_metadata.primary_key == ((0, 0),)


def test_mariadb_rows_decode_to_the_sql_values() -> None:
    table_map = decode_table_map(MARIADB_TABLE_MAP, MARIADB)
    cases = [
        (E.WRITE_ROWS_V1, MARIADB_WRITE_1, [ROW_1]),
        (E.WRITE_ROWS_V1, MARIADB_WRITE_2, [ROW_2]),
        (E.UPDATE_ROWS_V1, MARIADB_UPDATE, [(ROW_1, ROW_1_UPDATED)]),
        (E.DELETE_ROWS_V1, MARIADB_DELETE, [ROW_2]),
    ]
    for type_code, payload, expected in cases:
        body = decode_rows_event(type_code, payload, MARIADB)
        assert (body.table_id, body.flags, body.column_count) == (23, 1, 37)
        assert_rows_equal(body.rows(table_map), expected)


def test_mariadb_minimal_update_image() -> None:
    table_map = decode_table_map(MARIADB_TABLE_MAP, MARIADB)
    body = decode_rows_event(E.UPDATE_ROWS_V1, MARIADB_UPDATE_MINIMAL, MARIADB)
    before = [1] + [ABSENT] * 36
    after = [ABSENT] * 3 + [7] + [ABSENT] * 33
    assert_rows_equal(body.rows(table_map), [(before, after)])


def test_mariadb_rows_re_encode_byte_for_byte() -> None:
    table_map = decode_table_map(MARIADB_TABLE_MAP, MARIADB)
    for type_code, payload in [(E.WRITE_ROWS_V1, MARIADB_WRITE_1), (E.WRITE_ROWS_V1, MARIADB_WRITE_2),
                               (E.UPDATE_ROWS_V1, MARIADB_UPDATE), (E.DELETE_ROWS_V1, MARIADB_DELETE),
                               (E.UPDATE_ROWS_V1, MARIADB_UPDATE_MINIMAL)]:
        body = decode_rows_event(type_code, payload, MARIADB)
        present = (body.present, body.present_after) if body.is_update else body.present
        rebuilt = encode_rows_event(type_code, table_id=body.table_id, columns=table_map.columns,
                                    rows=body.rows(table_map), flags=body.flags, present=present)
        assert rebuilt == payload
        slices = body.raw_rows(table_map)
        flat = b"".join(b"".join(pair) if isinstance(pair, tuple) else pair for pair in slices)
        assert flat == body.rows_data


def test_mariadb_table_map_re_encodes_to_the_same_columns() -> None:
    table_map = decode_table_map(MARIADB_TABLE_MAP, MARIADB)
    rebuilt = encode_table_map(table_id=23, db="gb", table="t", columns=table_map.columns)
    # Our encoder writes MySQL's optional metadata: YEAR has no signedness bit, GEOMETRY no charset.
    mysql_view = [replace(col, unsigned=False) if col.type == T.YEAR else
                  replace(col, charset=None) if col.type == T.GEOMETRY else col for col in table_map.columns]
    assert decode_table_map(rebuilt).columns == mysql_view
    bare = decode_table_map(encode_table_map(table_id=23, db="gb", table="t", columns=table_map.columns,
                                             optional_metadata=False))
    assert [(c.type, c.meta, c.nullable) for c in bare.columns] == [
        (c.type, c.meta, c.nullable) for c in table_map.columns]
    assert bare.optional_metadata is None and bare.columns[0].name is None
    # The mandatory part is MariaDB's bytes exactly.
    assert rebuilt[:101] == MARIADB_TABLE_MAP[:101]


def test_optional_metadata_fields_we_do_not_write() -> None:
    """PRIMARY_KEY_WITH_PREFIX, COLUMN_VISIBILITY, DEFAULT_CHARSET with exceptions, enum/set charsets
    and unknown (newer) fields, as MySQL 8 lays them out: type, packed length, value."""
    columns = [Column(T.LONG, nullable=False), varchar_column(40), varchar_column(40), enum_column(["a"]),
               Column(T.GEOMETRY, 4)]
    base = encode_table_map(table_id=3, db="d", table="t", columns=columns, optional_metadata=False)
    tlvs = bytes.fromhex(
        "0904" "0000" "020a"      # PRIMARY_KEY_WITH_PREFIX: column 0 whole, column 2 prefix 10
        "0c01" "a0"               # COLUMN_VISIBILITY, MSB first: columns 0 and 2 visible
        "0203" "2d" "0108"        # DEFAULT_CHARSET 45, character column #1 uses 8
        "0a01" "21"               # ENUM_AND_SET_DEFAULT_CHARSET 33
        "0701" "01"               # GEOMETRY_TYPE: POINT
        "6302" "abcd")            # a field type this code does not know: kept, not fatal
    table_map = decode_table_map(base + tlvs, None)
    meta = table_map.optional_metadata
    assert meta.primary_key == ((0, 0), (2, 10))
    assert meta.visibility == (True, False, True, False, False)
    assert meta.default_charset == 45 and meta.column_charsets == (45, 8)
    assert meta.enum_set_charsets == (33,) and meta.geometry_types == (1,)
    assert meta.unknown == ((0x63, b"\xab\xcd"),)
    assert [c.primary_key for c in table_map.columns] == [True, False, True, False, False]
    assert [c.charset for c in table_map.columns] == [None, 45, 8, 33, None]


REAL_DN_57 = REAL_DN / "dn57_sequence.bin"


def test_real_dn57_events_re_encode_byte_for_byte() -> None:
    data = REAL_DN_57.read_bytes()
    ctx = FormatContext(server_version="5.7.38-AliSQL-X-Cluster", post_header_len=POST_HEADER_LEN_57)

    def payload_at(pos: int) -> bytes:
        size = int.from_bytes(data[pos + 9:pos + 13], "little")
        return data[pos + 19:pos + size - 4]

    maps = {}
    for pos in (471, 547):
        payload = payload_at(pos)
        table_map = decode_table_map(payload, ctx)
        maps[table_map.table_id] = table_map
        assert encode_table_map(table_id=table_map.table_id, flags=table_map.flags, db=table_map.db,
                                table=table_map.table, columns=table_map.columns,
                                optional_metadata=False) == payload
    assert maps[15890].db == "d1_p00000" and maps[15890].table == "t_jg_tag_ynub"
    payload = payload_at(671)
    body = decode_rows_event(E.UPDATE_ROWS, payload, ctx)
    (before, after), = body.rows(maps[body.table_id])
    assert before[:5] == [1, b"xyz", 0, 0, b"admin"] and after[2] == 1
    assert after[7] == dt.datetime(2024, 8, 29, 8, 30, 43, tzinfo=UTC)
    assert encode_rows_event(E.UPDATE_ROWS, table_id=body.table_id, columns=maps[body.table_id].columns,
                             rows=body.rows(maps[body.table_id]), flags=body.flags) == payload


# -- round trips ---------------------------------------------------------------------------------------------

@st.composite
def tables(draw: st.DrawFn, min_columns: int = 1) -> list[tuple[Column, st.SearchStrategy]]:
    """Columns of random types with what MySQL 8 optional metadata would tell about them."""
    pairs = draw(st.lists(column_and_values(), min_size=min_columns, max_size=9))
    named = draw(st.booleans())
    out = []
    for i, (col, values) in enumerate(pairs):
        col = replace(col, nullable=draw(st.booleans()), name=f"c{i}_é" if named else None,
                      unsigned=col.unsigned if is_numeric(col) else False,
                      primary_key=draw(st.booleans()) and i < 2)
        if is_character(col) or is_enum_or_set(col):
            col = replace(col, charset=draw(st.sampled_from([8, 33, 45, 63, 255])))
        out.append((col, values))
    return out


@SETTINGS
@given(tables(), st.booleans(), st.integers(0, 2**48 - 1), st.integers(0, 0xFFFF))
def test_table_map_round_trip(pairs: list, optional: bool, table_id: int, flags: int) -> None:
    columns = [col for col, _ in pairs]
    payload = encode_table_map(table_id=table_id, flags=flags, db="数据库", table="t_1", columns=columns,
                               optional_metadata=optional)
    table_map = decode_table_map(payload, None)
    assert (table_map.table_id, table_map.flags, table_map.db, table_map.table) == (table_id, flags, "数据库", "t_1")
    if optional:
        assert table_map.columns == columns
    else:
        assert table_map.columns == [Column(c.type, c.meta, nullable=c.nullable) for c in columns]
    parsed = TableMap.parse(payload)  # the construct declaration reads what the hot path reads
    assert parsed.table_id == table_id and parsed.column_count == len(columns)


@st.composite
def rows_events(draw: st.DrawFn) -> tuple:
    pairs = draw(tables())
    columns = [col for col, _ in pairs]
    type_code = draw(st.sampled_from([E.WRITE_ROWS_V1, E.UPDATE_ROWS_V1, E.DELETE_ROWS_V1,
                                      E.WRITE_ROWS, E.UPDATE_ROWS, E.DELETE_ROWS]))
    update = type_code in (E.UPDATE_ROWS_V1, E.UPDATE_ROWS)
    minimal = draw(st.booleans())

    def present_flags() -> list[bool]:
        if not minimal:
            return [True] * len(columns)
        flags = [draw(st.booleans()) for _ in columns]
        flags[draw(st.integers(0, len(columns) - 1))] = True  # an image always carries a column
        return flags

    def image(present: list[bool]) -> list:
        values = []
        for (col, strategy), here in zip(pairs, present, strict=True):
            if not here:
                values.append(ABSENT)
            elif col.nullable and draw(st.booleans()):
                values.append(None)
            else:
                values.append(draw(strategy))
        return values

    before, after = present_flags(), present_flags()
    count = draw(st.integers(0, 3))
    rows = [(image(before), image(after)) if update else image(before) for _ in range(count)]
    extra = draw(st.binary(max_size=8)) if type_code >= E.WRITE_ROWS else b""
    return type_code, columns, rows, (before, after) if update else before, extra


@SETTINGS
@given(rows_events(), st.integers(0, 2**48 - 1), st.integers(0, 0xFFFF))
def test_rows_event_round_trip(event: tuple, table_id: int, flags: int) -> None:
    type_code, columns, rows, present, extra = event
    payload = encode_rows_event(type_code, table_id=table_id, columns=columns, rows=rows, flags=flags,
                                extra=extra, present=present)
    body = decode_rows_event(type_code, payload, None)
    assert (body.type_code, body.table_id, body.flags, body.extra, body.column_count) == (
        type_code, table_id, flags, extra, len(columns))
    assert_rows_equal(body.rows(columns), rows)
    assert_rows_equal(body.rows(decode_table_map(encode_table_map(
        table_id=table_id, db="d", table="t", columns=columns))), rows)
    slices = body.raw_rows(TableCodec(columns))
    assert len(slices) == len(rows)
    flat = b"".join(b"".join(pair) if isinstance(pair, tuple) else pair for pair in slices)
    assert flat == body.rows_data
    layout = RowsV2 if type_code >= E.WRITE_ROWS else RowsV1
    parsed = layout.parse(payload, update=body.is_update)
    assert parsed.present == body.present and parsed.rows == body.rows_data
    assert parsed.present_after == body.present_after


def test_image_functions_and_bitmaps() -> None:
    columns = [Column(T.LONG, nullable=False), varchar_column(20), decimal_column(10, 2)]
    values = [7, None, Decimal("-1.25")]
    image = encode_image(columns, values)
    # null bitmap: bit 1 set, unused high bits set as MySQL 5.7 and MariaDB write them
    assert image[0] == 0b11111010
    assert image_length(columns, image + b"junk") == len(image)
    assert decode_image(columns, b"xx" + image, 2) == (values, 2 + len(image))
    partial = encode_image(columns, [7, ABSENT, Decimal("1.00")], present=[True, False, True])
    assert decode_image(columns, partial, 0, present=b"\x05")[0] == [7, ABSENT, Decimal("1.00")]
    with pytest.raises(ValueError):
        encode_image(columns, [None, None, None])  # NOT NULL column
    with pytest.raises(ValueError):
        encode_image(columns, [1, 2])


def test_table_id_of_four_bytes() -> None:
    """A 6-byte post-header (servers before 5.1.4) means a 4-byte table id."""
    columns = [Column(T.LONG), varchar_column(10)]
    post_header = bytearray(POST_HEADER_LEN_57)
    post_header[E.TABLE_MAP - 1] = 6
    post_header[E.WRITE_ROWS_V1 - 1] = 6
    ctx = FormatContext(post_header_len=bytes(post_header))
    table_map = encode_table_map(table_id=0x01020304, db="d", table="t", columns=columns)
    short = table_map[:4] + table_map[6:]
    decoded = decode_table_map(short, ctx)
    assert decoded.table_id == 0x01020304 and decoded.columns == columns
    rows = encode_rows_event(E.WRITE_ROWS_V1, table_id=0x01020304, columns=columns, rows=[[1, b"a"]])
    body = decode_rows_event(E.WRITE_ROWS_V1, rows[:4] + rows[6:], ctx)
    assert body.table_id == 0x01020304 and body.rows(decoded) == [[1, b"a"]]


def test_rows_body_accessors_and_memoryview_payloads() -> None:
    columns = [Column(T.TINY)]
    for type_code, kind in [(E.WRITE_ROWS, "write"), (E.UPDATE_ROWS_V1, "update"), (E.DELETE_ROWS, "delete")]:
        rows = [([1], [2])] if kind == "update" else [[1]]
        payload = encode_rows_event(type_code, table_id=9, columns=columns, rows=rows, flags=0)
        body = decode_rows_event(type_code, memoryview(b"..." + payload)[3:], FormatContext())
        assert body.kind == kind and not body.statement_end
        assert body.rows(columns) == rows


def test_malformed_rows_events() -> None:
    columns = [Column(T.LONG), varchar_column(100)]
    payload = encode_rows_event(E.WRITE_ROWS, table_id=1, columns=columns, rows=[[1, b"abcdef"]])
    with pytest.raises(ValueError):
        decode_rows_event(E.WRITE_ROWS, payload[:9], None)
    with pytest.raises(ValueError):
        decode_rows_event(E.WRITE_ROWS, payload[:8] + b"\x01\x00" + payload[10:], None)  # extra length < 2
    with pytest.raises(ValueError):
        decode_rows_event(E.WRITE_ROWS, payload[:-2], None).rows(columns)
    with pytest.raises(ValueError):
        decode_rows_event(E.WRITE_ROWS, payload, None).rows([Column(T.LONG)])  # column count differs
    with pytest.raises(ValueError):
        decode_rows_event(E.QUERY, payload, None)
    with pytest.raises(ValueError):
        encode_rows_event(E.WRITE_ROWS_V1, table_id=1, columns=columns, rows=[], extra=b"x")
    with pytest.raises(ValueError):  # an empty image has no bytes: rows could not be told apart
        encode_rows_event(E.WRITE_ROWS, table_id=1, columns=columns, rows=[[1, b""]], present=b"\x00")
    empty_image = encode_rows_event(E.WRITE_ROWS, table_id=1, columns=columns, rows=[], present=b"\x00")
    with pytest.raises(ValueError):
        decode_rows_event(E.WRITE_ROWS, empty_image + b"\x00", None).rows(columns)
    table_map = encode_table_map(table_id=1, db="d", table="t", columns=columns)
    with pytest.raises(ValueError):
        decode_table_map(table_map[:14], None)


# -- a real reader: mariadb-binlog ------------------------------------------------------------------------

def test_mariadb_binlog_reads_our_events(tmp_path: Path) -> None:
    assert shutil.which("mariadb-binlog"), "mariadb-binlog missing: ./dev.sh installs mariadb-client"
    from binlog.writer import build_event, build_fde

    columns = [Column(T.LONG, nullable=False), Column(T.LONGLONG, unsigned=True), varchar_column(300),
               Column(T.DATETIME2, 3), decimal_column(20, 6), Column(T.TIME2, 4), char_column(400),
               enum_column(["a", "b"]), set_column(["x", "y", "z"]), bit_column(10), Column(T.YEAR),
               Column(T.DATE), Column(T.INT24)]
    row = [-7, 2**64 - 1, "héllo", dt.datetime(2024, 2, 29, 23, 59, 58, 123000),
           Decimal("-12345678901234.123456"), -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999900),
           b"x" * 300, 2, 5, 0b1010101010, 2155, dt.date(1000, 1, 1), -8388608]
    nulls = [1] + [None] * (len(columns) - 1)
    out = bytearray(BINLOG_MAGIC)
    out += build_fde(server_version="5.7.44-log", timestamp=0, server_id=1, checksum=True)

    def append(type_code: int, payload: bytes) -> None:
        out.extend(build_event(type_code, payload, timestamp=0, server_id=1,
                               log_pos=len(out) + 19 + len(payload) + 4))

    append(E.TABLE_MAP, encode_table_map(table_id=5, db="d", table="t", columns=columns, optional_metadata=False))
    append(E.WRITE_ROWS, encode_rows_event(E.WRITE_ROWS, table_id=5, columns=columns, rows=[row], flags=0))
    append(E.UPDATE_ROWS_V1, encode_rows_event(E.UPDATE_ROWS_V1, table_id=5, columns=columns,
                                               rows=[(row, nulls)], flags=0))
    append(E.DELETE_ROWS, encode_rows_event(E.DELETE_ROWS, table_id=5, columns=columns, rows=[nulls]))
    path = tmp_path / "binlog.000001"
    path.write_bytes(bytes(out))
    printed = subprocess.run(["mariadb-binlog", "-v", "--base64-output=decode-rows", str(path)],
                             capture_output=True, check=True).stdout.decode("utf-8", "replace")
    values = [line.split("=", 1)[1].split(" /*")[0].strip() for line in printed.splitlines()
              if line.startswith("###   @")]
    expected_row = ["-7 (4294967289)", "-1 (18446744073709551615)", "'héllo'", "'2024-02-29 23:59:58.123'",
                    "-12345678901234.123456", "'-838:59:59.9999'", "'" + "x" * 300 + "'", "2", "b'00000101'",
                    "b'1010101010'", "2155", "'1000:01:01'", "-8388608 (8388608)"]
    expected_nulls = ["1"] + ["NULL"] * (len(columns) - 1)
    assert values == expected_row + expected_row + expected_nulls + expected_nulls
    assert printed.count("### INSERT INTO `d`.`t`") == 1
    assert printed.count("### UPDATE `d`.`t`") == 1
    assert printed.count("### DELETE FROM `d`.`t`") == 1
