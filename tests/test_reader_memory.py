"""A DN's mapped binlog file is given back behind the scan (``binlog.reader._release``), so a DN's
share of the RSS is a fraction of a MB whatever the size of its files, and what is read does not
change."""

from __future__ import annotations

import mmap
from pathlib import Path

import binlog.reader as reader
from binlog.reader import BinlogFile
from extractor import extract
from extractor.assembler import _KINDS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bank-4dn"


def rss_file_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_released_pages_leave_the_rss_and_read_the_same(tmp_path):
    size = 8 << 20
    path = tmp_path / "data"
    path.write_bytes(bytes(range(256)) * (size // 256))
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        before = rss_file_kb()
        checksum = sum(data[i] for i in range(0, size, mmap.PAGESIZE))     # touch every page
        touched = rss_file_kb()
        assert touched - before > 7 << 10
        assert reader._release(data, 0, size - 100) == size - mmap.PAGESIZE  # whole pages only
        assert touched - rss_file_kb() > 7 << 10
        assert sum(data[i] for i in range(0, size, mmap.PAGESIZE)) == checksum
        assert reader._release(data, size - mmap.PAGESIZE, size - 1) == size - mmap.PAGESIZE   # nothing whole


def records(path: Path) -> list[tuple]:
    return [(r[0], r[1].pos, bytes(r[1].raw), r[2]) for batch in BinlogFile(path).records(_KINDS, 16) for r in batch]


def txns(dn: Path) -> list[tuple]:
    return [(t.vtso, t.start, t.end, [[bytes(e.raw) for e in b.events] for b in t.blocks]) for t in extract(dn)]


def test_the_scan_releases_what_it_passed_and_reads_the_same(monkeypatch):
    dn = FIXTURE / "dn0"
    path = max(dn.glob("mysql-bin.0*"), key=lambda p: p.stat().st_size)
    size = path.stat().st_size
    assert size > 64 << 10
    plain, assembled = records(path), txns(dn)
    calls = []
    real = reader._release

    def releasing(data, start, end):
        upto = real(data, start, end)
        calls.append((start, upto))
        return upto
    monkeypatch.setattr(reader, "_RELEASE", 16 << 10)
    monkeypatch.setattr(reader, "_release", releasing)
    assert records(path) == plain
    assert len(calls) >= size // (32 << 10) and calls[0][0] == 0 and calls[-1][1] > size - (64 << 10)
    assert all(a[1] == b[0] < b[1] for a, b in zip(calls, calls[1:], strict=False))    # each page once
    calls.clear()
    assert txns(dn) == assembled                      # the assembler's grouped scan and its replays
    assert len(calls) >= 2
