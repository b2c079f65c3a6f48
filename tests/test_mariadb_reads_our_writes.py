"""Our writer, real reader: a file written by BinlogWriter with one table of every column type that
MariaDB 10.11 knows (all but JSON), decoded by `mariadb-binlog -v --base64-output=DECODE-ROWS`; each
printed value must equal the value written."""

import datetime as dt
import math
import random
import re
import struct
from decimal import Decimal

from binlog import BinlogWriter, EventType
from binlog.columns import (
    Column,
    bit_column,
    blob_column,
    char_column,
    decimal_column,
    enum_column,
    set_column,
    varchar_column,
)
from binlog.constants import ColumnType as T
from binlog.events import encode_body
from binlog.query_status import status_vars
from binlog.rows_events import encode_rows_event, encode_table_map
from tests.mariadb import mariadb_binlog

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def rand_bytes(rng: random.Random, n: int) -> bytes:
    # A backslash followed by "xNN" would be ambiguous in mariadb-binlog's quoting (bytes < 0x20 are
    # printed as \xNN, everything else raw), so strings never contain a backslash.
    return rng.randbytes(n).replace(b"\\", b"/")


def rand_time2(rng, fsp):
    micro = rng.randrange(-838 * 3600 * 10**6 - 59 * 60 * 10**6 - 59 * 10**6,
                          838 * 3600 * 10**6 + 59 * 60 * 10**6 + 59 * 10**6 + 1)
    micro -= micro % (10 ** (6 - fsp)) if micro >= 0 else -((-micro) % (10 ** (6 - fsp)))
    return dt.timedelta(microseconds=micro)


def rand_datetime(rng, fsp, lo=1000, hi=9999):
    d = dt.datetime(rng.randrange(lo, hi + 1), rng.randrange(1, 13), rng.randrange(1, 29),
                    rng.randrange(24), rng.randrange(60), rng.randrange(60))
    us = rng.randrange(10**6)
    return d.replace(microsecond=us - us % (10 ** (6 - fsp)))


def rand_timestamp(rng, fsp):
    us = rng.randrange(10**6)
    return EPOCH + dt.timedelta(seconds=rng.randrange(1, 2**31 - 1),
                                microseconds=us - us % (10 ** (6 - fsp)))


def rand_decimal(rng, precision, scale):
    digits = "".join(rng.choice("0123456789") for _ in range(precision))
    text = digits[: precision - scale] + ("." + digits[precision - scale:] if scale else "")
    return Decimal(rng.choice(["", "-"]) + text)


def float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def int_col(name, t, bits, unsigned):
    lo, hi = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return (name, Column(t, 0, unsigned=unsigned), lambda r: r.randint(lo, hi), [lo, hi, 0])


COLUMNS = [
    int_col("ti", T.TINY, 8, False), int_col("tiu", T.TINY, 8, True),
    int_col("si", T.SHORT, 16, False), int_col("siu", T.SHORT, 16, True),
    int_col("mi", T.INT24, 24, False), int_col("miu", T.INT24, 24, True),
    int_col("i", T.LONG, 32, False), int_col("iu", T.LONG, 32, True),
    int_col("bi", T.LONGLONG, 64, False), int_col("biu", T.LONGLONG, 64, True),
    ("f", Column(T.FLOAT, 4), lambda r: float32(r.uniform(-1e6, 1e6)), [float32(1.5), -0.0, 3e38]),
    ("d", Column(T.DOUBLE, 8), lambda r: r.uniform(-1e300, 1e300), [2.5e-300, -1.7976931348623157e308]),
    ("dec", decimal_column(10, 2), lambda r: rand_decimal(r, 10, 2),
     [Decimal("-99999999.99"), Decimal("0.00"), Decimal("0.01")]),
    ("dec65", decimal_column(65, 30), lambda r: rand_decimal(r, 65, 30), [Decimal("-" + "9" * 35 + "." + "9" * 30)]),
    ("dec0", decimal_column(18, 0), lambda r: rand_decimal(r, 18, 0), [Decimal("999999999999999999")]),
    ("y", Column(T.YEAR), lambda r: r.randint(1901, 2155), [1901, 2155]),
    ("dte", Column(T.DATE), lambda r: rand_datetime(r, 0).date(), [dt.date(1000, 1, 1), dt.date(9999, 12, 31)]),
    ("tm_old", Column(T.TIME), lambda r: dt.timedelta(seconds=r.randrange(0, 838 * 3600 + 3599)),
     [dt.timedelta(hours=838, minutes=59, seconds=59)]),
    *[(f"tm{fsp}", Column(T.TIME2, fsp), lambda r, fsp=fsp: rand_time2(r, fsp),
       [-dt.timedelta(hours=838, minutes=59, seconds=59), dt.timedelta(0)]) for fsp in range(7)],
    ("dt_old", Column(T.DATETIME), lambda r: rand_datetime(r, 0), [dt.datetime(1000, 1, 1)]),
    *[(f"dt{fsp}", Column(T.DATETIME2, fsp), lambda r, fsp=fsp: rand_datetime(r, fsp),
       [dt.datetime(9999, 12, 31, 23, 59, 59, 10**6 - 10 ** (6 - fsp))]) for fsp in range(7)],
    ("ts_old", Column(T.TIMESTAMP), lambda r: rand_timestamp(r, 0), [EPOCH + dt.timedelta(seconds=1)]),
    *[(f"ts{fsp}", Column(T.TIMESTAMP2, fsp), lambda r, fsp=fsp: rand_timestamp(r, fsp),
       [EPOCH + dt.timedelta(seconds=2**31 - 1, microseconds=10**6 - 10 ** (6 - fsp))]) for fsp in range(7)],
    ("vc", varchar_column(100, charset=45), lambda r: "héllo wörld 世界 ✓"[: r.randrange(18)].encode(),
     [b"", "😀".encode()]),
    ("vc_long", varchar_column(1000, charset=63), lambda r: rand_bytes(r, r.randrange(0, 1000)),
     [b"x" * 1000, b"\x00\x01\x1f"]),
    ("ch", char_column(20, charset=8), lambda r: rand_bytes(r, r.randrange(1, 20)).rstrip(b" ") or b"a",
     [b"abc"]),
    ("ch_long", char_column(400, charset=45), lambda r: rand_bytes(r, r.randrange(256, 400)).rstrip(b" "),
     [b"y" * 400]),
    ("e", enum_column(("a", "b", "c")), lambda r: r.randint(1, 3), [1, 3]),
    ("s", set_column(("x", "y", "z")), lambda r: r.randrange(8), [0, 7]),
    ("bit1", bit_column(1), lambda r: r.randrange(2), [0, 1]),
    ("bit10", bit_column(10), lambda r: r.randrange(2**10), [2**10 - 1]),
    ("bit64", bit_column(64), lambda r: r.randrange(2**64), [2**64 - 1]),
    ("tb", blob_column(1), lambda r: rand_bytes(r, r.randrange(256)), [b"t" * 255]),
    ("bl", blob_column(2), lambda r: rand_bytes(r, r.randrange(3000)), [b""]),
    ("mb", blob_column(3), lambda r: rand_bytes(r, r.randrange(70000)), [b"m" * 65536]),
    ("lb", blob_column(4), lambda r: rand_bytes(r, r.randrange(100)), [b"l"]),
    ("g", Column(T.GEOMETRY, 4), lambda r: b"\0\0\0\0\x01\x01\x00\x00\x00" + struct.pack("<dd", r.random(), 2.0),
     [b"\0\0\0\0\x01\x01\x00\x00\x00" + struct.pack("<dd", 1.0, 2.0)]),
]
TYPES = [Column(c.type, c.meta, unsigned=c.unsigned) for _, c, _, _ in COLUMNS]
NAMES = [n for n, _, _, _ in COLUMNS]


def make_rows(seed: int, n: int) -> list[list]:
    rng = random.Random(seed)
    rows = [[gen(rng) for _, _, gen, _ in COLUMNS] for _ in range(n)]
    width = max(len(b) for *_, b in COLUMNS)
    for k in range(width):  # boundary rows: the k-th boundary of each column (or a random value)
        rows.append([b[k] if k < len(b) else gen(rng) for _, _, gen, b in COLUMNS])
    rows.append([None] * len(COLUMNS))
    return rows


# -- parsing mariadb-binlog's printed values (log_event.cc log_event_print_value) -----------------
def unquote(text: str) -> bytes:
    assert text[0] == "'" and text[-1] == "'", text
    raw = text[1:-1].encode("utf-8", "surrogateescape")
    return re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw)


def parse_time(text: str) -> dt.timedelta:
    neg = text.startswith("-")
    h, m, s = text.lstrip("-").split(":")
    td = dt.timedelta(hours=int(h), minutes=int(m), microseconds=int(Decimal(s) * 10**6))
    return -td if neg else td


def parse_printed(col: Column, text: str):
    if text == "NULL":
        return None
    t = col.type
    if t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG):
        m = re.fullmatch(r"(-?\d+)(?: \((\d+)\))?", text)
        return int(m.group(2)) if (col.unsigned and m.group(2)) else int(m.group(1))
    if t in (T.FLOAT, T.DOUBLE):
        return float(text)
    if t == T.NEWDECIMAL:
        return Decimal(text)
    if t == T.YEAR:
        return int(text)
    if t == T.DATE:
        y, mo, d = unquote(text).decode().split(":")
        return dt.date(int(y), int(mo), int(d))
    if t in (T.TIME, T.TIME2):
        return parse_time(unquote(text).decode())
    if t in (T.DATETIME, T.DATETIME2):
        s = unquote(text).decode()
        return dt.datetime.fromisoformat(s)
    if t in (T.TIMESTAMP, T.TIMESTAMP2):
        return EPOCH + dt.timedelta(microseconds=int(Decimal(text) * 10**6))
    if t == T.STRING and col.meta >> 8 in (T.ENUM,):
        return int(text)
    if t == T.STRING and col.meta >> 8 in (T.SET,) or t == T.BIT:
        m = re.fullmatch(r"b'([01]*)'", text)
        return int(m.group(1), 2)
    return unquote(text)


def parse_output(out: str) -> list[tuple[str, list]]:
    """[(kind, [values...]), ...] with UPDATE as (before, after) pairs."""
    events, image, current = [], None, None
    for line in out.split("\n"):
        if line.startswith("### INSERT INTO"):
            current = ("insert", []); events.append(current)  # noqa: E702
        elif line.startswith("### UPDATE"):
            current = ("update", []); events.append(current)  # noqa: E702
        elif line.startswith("### DELETE FROM"):
            current = ("delete", []); events.append(current)  # noqa: E702
        elif line in ("### SET", "### WHERE"):
            image = []
            current[1].append(image)
        elif line.startswith("###   @"):
            m = re.match(r"###   @(\d+)=(.*)$", line)
            idx = int(m.group(1)) - 1
            assert idx == len(image)
            image.append(parse_printed(TYPES[idx], m.group(2).rstrip(" ")))
    return events


def assert_value(name: str, col: Column, got, want, where: str):
    if col.type == T.FLOAT and want is not None:  # mariadb-binlog prints FLOAT with %g: 6 digits
        assert math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-30), (name, got, want, where)
    elif isinstance(want, dt.datetime) and want.tzinfo is None and isinstance(got, dt.datetime):
        assert got == want, (name, got, want, where)
    else:
        assert got == want and type(got) is type(want), (name, got, want, where)


def test_mariadb_binlog_reads_every_column_type(tmp_path):
    rows = make_rows(seed=20261121, n=40)
    columns = [Column(c.type, c.meta, unsigned=c.unsigned, name=n) for n, c, _, _ in COLUMNS]
    w = BinlogWriter(tmp_path, server_id=11, timestamp=1_763_700_000)
    begin = encode_body(EventType.QUERY, thread_id=1, exec_time=0, error_code=0,
                        status_vars=status_vars(charset=(45, 45, 45)), db="", query=b"BEGIN")
    tmap = encode_table_map(table_id=70, db="d", table="t", columns=columns)
    xid = encode_body(EventType.XID, xid=1)
    expected = []
    for i, row in enumerate(rows):
        # Each row in its own txn so a huge MEDIUMBLOB row does not make one giant event.
        w.append(EventType.QUERY, begin, timestamp=1_763_700_000 + i, flags=0x8)
        w.append(EventType.TABLE_MAP, tmap, timestamp=1_763_700_000 + i)
        kind = ("insert", "update", "delete")[i % 3]
        if kind == "insert":
            w.append(EventType.WRITE_ROWS, encode_rows_event(EventType.WRITE_ROWS, table_id=70, columns=columns,
                                                             rows=[row]), timestamp=1)
            expected.append(("insert", [row]))
        elif kind == "update":
            before = rows[i - 1]
            w.append(EventType.UPDATE_ROWS_V1, encode_rows_event(EventType.UPDATE_ROWS_V1, table_id=70,
                                                                 columns=columns, rows=[(before, row)]),
                     timestamp=1)
            expected.append(("update", [before, row]))
        else:
            w.append(EventType.DELETE_ROWS, encode_rows_event(EventType.DELETE_ROWS, table_id=70,
                                                              columns=columns, rows=[row]), timestamp=1)
            expected.append(("delete", [row]))
        w.append(EventType.XID, xid, timestamp=1)
    w.close()

    out = mariadb_binlog("-v", "--base64-output=DECODE-ROWS", str(tmp_path / "binlog.000001"))
    got = parse_output(out)
    assert [k for k, _ in got] == [k for k, _ in expected]
    checked = 0
    for n, ((kind, images), (_, want_images)) in enumerate(zip(got, expected, strict=True)):
        assert len(images) == len(want_images)
        for image, want in zip(images, want_images, strict=True):
            assert len(image) == len(want) == len(COLUMNS)
            for name, col, g, v in zip(NAMES, TYPES, image, want, strict=True):
                assert_value(name, col, g, v, f"event {n} ({kind})")
                checked += 1
    assert checked > 40 * len(COLUMNS)
