"""Parse speed on a 1M-event file (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/parse.py [--events 1000000] [--keep DIR]

Writes a file of 1-row transactions (BEGIN, TABLE_MAP, WRITE_ROWS v2 with 5 columns, XID), then
times, on one core: header-only iteration (CRC32 checked), full decode (every body, every row value),
and `mariadb-binlog -v --base64-output=DECODE-ROWS` on the same file, printed as a ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from binlog import BinlogWriter, EventType, read_events  # noqa: E402
from binlog.columns import Column  # noqa: E402
from binlog.constants import ROWS_TYPES, ColumnType  # noqa: E402
from binlog.events import encode_body  # noqa: E402
from binlog.rows_events import encode_rows_event, encode_table_map  # noqa: E402

COLUMNS = [
    Column(ColumnType.LONG, 0, name="id"),
    Column(ColumnType.LONGLONG, 0, name="amount"),
    Column(ColumnType.VARCHAR, 128, name="note"),
    Column(ColumnType.DATETIME2, 0, name="created"),
    Column(ColumnType.NEWDECIMAL, (10 << 8) | 2, name="balance"),
]


def write_file(directory: Path, n_events: int) -> Path:
    w = BinlogWriter(directory, max_file_size=1 << 40)
    begin = encode_body(EventType.QUERY, thread_id=1, exec_time=0, error_code=0, status_vars=b"",
                        db="", query=b"BEGIN")
    table_map = encode_table_map(table_id=1, db="bench", table="t", columns=COLUMNS)
    xid = struct.pack("<Q", 1)
    txns = n_events // 4
    for i in range(txns):
        row = [i, i * 7, f"note {i}".encode(), dt.datetime(2026, 1, 1, 0, 0, i % 60),
               Decimal(i % 100000) / 100]
        rows = encode_rows_event(EventType.WRITE_ROWS, table_id=1, columns=COLUMNS, rows=[row])
        w.append(EventType.QUERY, begin, timestamp=1, flags=0x8)
        w.append(EventType.TABLE_MAP, table_map, timestamp=1)
        w.append(EventType.WRITE_ROWS, rows, timestamp=1)
        w.append(EventType.XID, xid, timestamp=1)
    w.close()
    return directory / "binlog.000001"


def header_only(path: Path) -> tuple[int, float]:
    t = time.perf_counter()
    n = 0
    for _ in read_events(path):
        n += 1
    return n, time.perf_counter() - t


def full_decode(path: Path) -> tuple[int, int, float]:
    t = time.perf_counter()
    n = values = 0
    maps = {}
    table_map = int(EventType.TABLE_MAP)
    rows_types = frozenset(int(t) for t in ROWS_TYPES)
    for ev in read_events(path):
        n += 1
        body = ev.body
        code = ev.h[1]
        if code == table_map:
            maps[body.table_id] = body
        elif code in rows_types:
            for row in body.rows(maps[body.table_id]):
                values += len(row)
    return n, values, time.perf_counter() - t


def mariadb_binlog_time(path: Path) -> float:
    exe = shutil.which("mariadb-binlog")
    if exe is None:
        return float("nan")
    t = time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run([exe, "--no-defaults", "-v", "--base64-output=DECODE-ROWS", str(path)],
                       stdout=null, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    directory = args.keep or Path(tempfile.mkdtemp(prefix="gbinlog-bench-"))
    t = time.perf_counter()
    path = write_file(directory, args.events)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t:.1f} s")
    n, secs = header_only(path)
    print(f"header-only iteration (CRC32 checked): {n:,} events in {secs:.2f} s = {n / secs:,.0f} events/s")
    n, values, fsecs = full_decode(path)
    print(f"full decode (bodies + {values:,} row values): {n:,} events in {fsecs:.2f} s "
          f"= {n / fsecs:,.0f} events/s")
    msecs = mariadb_binlog_time(path)
    print(f"mariadb-binlog -v --base64-output=DECODE-ROWS: {msecs:.2f} s "
          f"= {n / msecs:,.0f} events/s; our full decode is {msecs / fsecs:.2f}x its speed, "
          f"header iteration {msecs / secs:.2f}x")
    if args.keep is None:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
