"""Real writer, our reader: a throwaway mariadbd writes rows of every column type; our reader decodes
its binlog to exactly the values inserted."""

import datetime as dt
import struct
from dataclasses import replace
from decimal import Decimal

import pytest

from binlog import EventType, read_events
from binlog.constants import DELETE_TYPES, ROWS_TYPES, UPDATE_TYPES, WRITE_TYPES
from tests.mariadb import MariaDB

UTC = dt.UTC

# (column definition, SQL literal, expected Python value) — expected values follow MySQL semantics
# and the codec's documented conventions, written by hand.
COLUMNS = [
    ("ti TINYINT", "-128", -128),
    ("tiu TINYINT UNSIGNED", "255", 255),
    ("si SMALLINT", "-32768", -32768),
    ("siu SMALLINT UNSIGNED", "65535", 65535),
    ("mi MEDIUMINT", "-8388608", -8388608),
    ("miu MEDIUMINT UNSIGNED", "16777215", 16777215),
    ("i INT", "-2147483648", -2147483648),
    ("iu INT UNSIGNED", "4294967295", 4294967295),
    ("bi BIGINT", "-9223372036854775808", -9223372036854775808),
    ("biu BIGINT UNSIGNED", "18446744073709551615", 18446744073709551615),
    ("f FLOAT", "1.5", 1.5),
    ("d DOUBLE", "-2.25e100", -2.25e100),
    ("dec1 DECIMAL(10,2)", "-12345678.91", Decimal("-12345678.91")),
    ("dec2 DECIMAL(65,30)", "'-12345678901234567890123456789012345.123456789012345678901234567890'",
     Decimal("-12345678901234567890123456789012345.123456789012345678901234567890")),
    ("dec3 DECIMAL(5,0)", "99999", Decimal("99999")),
    ("y YEAR", "2155", 2155),
    ("dte DATE", "'2024-02-29'", dt.date(2024, 2, 29)),
    ("dz DATE", "'0000-00-00'", "0000-00-00"),
    ("tm3 TIME(3)", "'-838:59:59.000'", -dt.timedelta(hours=838, minutes=59, seconds=59)),
    ("tm0 TIME", "'12:34:56'", dt.timedelta(hours=12, minutes=34, seconds=56)),
    ("tm6 TIME(6)", "'-00:00:01.000001'", -dt.timedelta(seconds=1, microseconds=1)),
    ("dt6 DATETIME(6)", "'2024-01-02 03:04:05.678901'", dt.datetime(2024, 1, 2, 3, 4, 5, 678901)),
    ("dt0 DATETIME", "'1000-01-01 00:00:00'", dt.datetime(1000, 1, 1)),
    ("dt4 DATETIME(4)", "'9999-12-31 23:59:59.9999'", dt.datetime(9999, 12, 31, 23, 59, 59, 999900)),
    ("ts2 TIMESTAMP(2) NULL", "'2038-01-19 03:14:07.99'",
     dt.datetime(2038, 1, 19, 3, 14, 7, 990000, tzinfo=UTC)),
    ("ts0 TIMESTAMP NULL", "'1970-01-01 00:00:01'", dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)),
    ("vc VARCHAR(20)", "'héllo 世界'", "héllo 世界".encode()),
    ("vc300 VARCHAR(300) CHARACTER SET latin1", "x'636166e9'", b"caf\xe9"),
    ("c CHAR(5)", "'ab'", b"ab"),
    ("bn BINARY(4)", "x'61626364'", b"abcd"),
    ("vb VARBINARY(300)", "x'00ff27'", b"\x00\xff\x27"),
    ("e ENUM('a','b','c')", "'b'", 2),
    ("s SET('x','y','z')", "'x,z'", 0b101),
    ("b10 BIT(10)", "b'1010101010'", 0b1010101010),
    ("b64 BIT(64)", "b'1" + "0" * 63 + "'", 1 << 63),
    ("tb TINYBLOB", "'tiny'", b"tiny"),
    ("bl BLOB", "x'" + "ab" * 300 + "'", b"\xab" * 300),
    ("mb MEDIUMBLOB", "'med'", b"med"),
    ("lb LONGBLOB", "'long'", b"long"),
    ("tt TEXT", "'text ✓'", "text ✓".encode()),
    ("g GEOMETRY", "POINT(1,2)", b"\0\0\0\0\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0)),
    ("j JSON", "'{\"a\": 1}'", b'{"a": 1}'),  # MariaDB's JSON is LONGTEXT
]

NAMES = ["id"] + [c[0].split()[0] for c in COLUMNS]


UNSIGNED = [False] + ["UNSIGNED" in c[0] for c in COLUMNS]


def decoded_rows(path, *, schema_signedness=False):
    """(kind, rows) per rows event, decoded by our reader with the table map before it.

    Without optional metadata (binlog_row_metadata=NO_LOG) a table map cannot say which integers
    are unsigned; a CDC takes that from its schema, and ``schema_signedness`` does the same here.
    """
    out, maps = [], {}
    for ev in read_events(path):
        if ev.type_code == EventType.TABLE_MAP:
            tm = ev.body
            maps[tm.table_id] = tm
        elif ev.type_code in ROWS_TYPES:
            body = ev.body
            tm = maps[body.table_id]
            if tm.table != "t":
                continue
            kind = ("insert" if ev.type_code in WRITE_TYPES else
                    "update" if ev.type_code in UPDATE_TYPES else "delete")
            assert ev.type_code in WRITE_TYPES | UPDATE_TYPES | DELETE_TYPES
            columns = tm.columns
            if schema_signedness:
                columns = [replace(c, unsigned=u) for c, u in zip(columns, UNSIGNED, strict=True)]
            out.append((kind, tm, body.rows(columns)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("row_metadata", ["FULL", "NO_LOG"])
def test_every_column_type_from_a_real_server(tmp_path, row_metadata):
    srv = MariaDB.start(tmp_path / "m", log_bin=True,
                        extra_args=(f"--binlog-row-metadata={row_metadata}",))
    try:
        cols = ", ".join(c[0] for c in COLUMNS)
        values = ", ".join(c[1] for c in COLUMNS)
        srv.run_sql(
            "SET time_zone='+00:00'; SET sql_mode='';"
            "CREATE DATABASE d; "
            f"CREATE TABLE d.t (id INT PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4;"
            f"INSERT INTO d.t VALUES (1, {values});"
            "INSERT INTO d.t (id) VALUES (2);"
            "UPDATE d.t SET ti = 5, vc = NULL, dec1 = 0.5 WHERE id = 1;"
            "DELETE FROM d.t WHERE id = 2;")
        srv.query("FLUSH BINARY LOGS")
        events = decoded_rows(srv.binlog_files()[0], schema_signedness=row_metadata == "NO_LOG")
    finally:
        srv.stop()

    full = [1] + [c[2] for c in COLUMNS]
    nulls = [2] + [None] * len(COLUMNS)
    updated = list(full)
    updated[NAMES.index("ti")] = 5
    updated[NAMES.index("vc")] = None
    updated[NAMES.index("dec1")] = Decimal("0.50")

    assert [(k, rows) for k, _, rows in events] == [
        ("insert", [full]),
        ("insert", [nulls]),
        ("update", [(full, updated)]),
        ("delete", [nulls]),
    ]
    tm = events[0][1]
    assert tm.db == "d" and len(tm.columns) == len(NAMES)
    if row_metadata == "NO_LOG":
        assert all(c.name is None and not c.unsigned for c in tm.columns)
    if row_metadata == "FULL":
        assert [c.name for c in tm.columns] == NAMES
        assert [c.unsigned for c in tm.columns[:11]] == [False, False, True, False, True, False, True,
                                                         False, True, False, True]
        e = tm.columns[NAMES.index("e")]
        s = tm.columns[NAMES.index("s")]
        assert tuple(e.enum_values) == ("a", "b", "c") and tuple(s.set_values) == ("x", "y", "z")
