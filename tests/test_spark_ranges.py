"""Input byte ranges and output vtso ranges of the Spark engine (plain functions, no JVM)."""

from __future__ import annotations

import bisect
import shutil

import pytest

from extractor import extract, storage_sequences
from extractor.model import Pos
from gbinlog.spark_engine.ranges import RangeSource, range_bounds, tso_samples
from tests.spark_support import FIXTURES, dn_dirs, dn_txn_fp


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_ranges_cut_at_restart_points_concatenate_to_the_whole_dn(fixture):
    dirs = dn_dirs(fixture)
    seqs = storage_sequences(d.name for d in dirs)
    for d in dirs:
        full = list(extract(d, storage_seq=seqs[d.name]))
        points = [t.restart for t in full if t.restart is not None]
        # three cuts spread over the DN (the first files' points and the last ones)
        cuts = sorted({points[len(points) // 4], points[len(points) // 2], points[-2]},
                      key=lambda p: (p.file, p.offset))
        starts = [None, *cuts]
        ends = [*cuts, None]
        got = []
        for s, e in zip(starts, ends, strict=True):
            src = RangeSource(d, d.name, s.pos if s else None, e.pos if e else None)
            got.append(list(extract(src, dn_id=d.name, storage_seq=seqs[d.name],
                                    state=s.vtso_state() if s else None)))
        assert all(got), "every range has transactions"
        assert [dn_txn_fp(t) for part in got for t in part] == [dn_txn_fp(t) for t in full]


def test_range_source_leaves_a_partial_event_for_later(tmp_path):
    d = dn_dirs(FIXTURES[0])[0]
    shutil.copytree(d, tmp_path / "live" / d.name)
    shutil.copytree(d, tmp_path / "cut" / d.name)
    full = list(extract(d))
    last = sorted(p.name for p in d.glob("mysql-bin.0*"))[-1]
    size = (d / last).stat().st_size
    cut = [t.end.offset for t in full if t.end.file == last][-3]
    data = (d / last).read_bytes()
    # the DN is still writing: its last file ends 7 bytes into an event; planned end = old size
    (tmp_path / "live" / d.name / last).write_bytes(data[:cut + 7])
    (tmp_path / "cut" / d.name / last).write_bytes(data[:cut])
    got = list(extract(RangeSource(tmp_path / "live" / d.name, d.name, None, Pos(last, size)), dn_id=d.name))
    want = list(extract(tmp_path / "cut" / d.name, dn_id=d.name))
    assert len(want) > 10
    assert [dn_txn_fp(t) for t in got] == [dn_txn_fp(t) for t in want]
    # and an end inside the file stops before the event that runs past it
    got = list(extract(RangeSource(d, d.name, None, Pos(last, cut + 7)), dn_id=d.name))
    assert [dn_txn_fp(t) for t in got] == [dn_txn_fp(t) for t in want]


def test_range_source_bad_bytes_inside_the_range_are_an_error(tmp_path):
    from binlog.errors import BinlogError
    d = dn_dirs(FIXTURES[0])[0]
    shutil.copytree(d, tmp_path / d.name)
    first = sorted(p.name for p in (tmp_path / d.name).glob("mysql-bin.0*"))[0]
    path = tmp_path / d.name / first
    data = bytearray(path.read_bytes())
    data[5000] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(BinlogError, match=first):
        list(extract(RangeSource(tmp_path / d.name, d.name)))


def test_range_bounds_balance_bytes_over_tso():
    dns = [list(tso_samples(d)) for d in dn_dirs(FIXTURES[0])]
    assert all(len(s) >= 2 for s in dns)
    bounds = range_bounds(dns, 4)
    assert len(bounds) == 3 and bounds == sorted(bounds)
    # the real transactions fall into 4 ranges of comparable size
    seqs = storage_sequences(d.name for d in dn_dirs(FIXTURES[0]))
    sizes = [0, 0, 0, 0]
    for d in dn_dirs(FIXTURES[0]):
        for t in extract(d, storage_seq=seqs[d.name]):
            sizes[bisect.bisect_right(bounds, t.vtso)] += sum(len(e.raw) for b in t.blocks for e in b.events)
    # (the first range also holds the set-up: accounts loaded, bank.audit_log created, few rows)
    assert min(sizes) > 0.25 * max(sizes), sizes
    assert range_bounds(dns, 1) == [] and range_bounds([], 3) == []
    # a smaller first range: its bound comes earlier, the others' stay in order after it
    smaller = range_bounds(dns, 4, first_share=0.5)
    assert len(smaller) == 3 and smaller == sorted(smaller) and smaller[0] < bounds[0]


def test_replication_range_reads_a_dn_over_the_protocol_up_to_a_planned_end():
    """``run --engine spark`` with host:port DNs: the stream source's end comes from the DN's
    ``SHOW BINARY LOGS``; a task reads from a restart point up to that end over a replica
    connection and assembles exactly what the directory read gives (our endpoint serves the DN)."""
    from dumper.server import start_in_thread
    from gbinlog.spark_engine.stream_source import ReplicationRange, remote_end

    d = next(x for f in FIXTURES for x in dn_dirs(f) if len(list(x.glob("*.0*"))) >= 3)
    seqs = storage_sequences(x.name for x in dn_dirs(d.parent))
    server = start_in_thread(dir=d, users={"cdc": "pw"}, server_id=9)
    try:
        dn = {"id": d.name, "host": "127.0.0.1", "port": server.port, "user": "cdc", "password": "pw",
              "server_id": 4_200_077}
        conn, end = remote_end(dn)
        names = sorted(p.name for p in d.glob("*.0*"))
        assert end == [names[-1], (d / names[-1]).stat().st_size]
        assert remote_end(dn, conn=conn) == (conn, end)           # the connection is kept
        conn.close()
        assert remote_end(dict(dn, password="wrong")) == (None, None)
        full = list(extract(d, storage_seq=seqs[d.name]))
        points = [t.restart for t in full if t.restart is not None]
        start, stop = points[len(points) // 3], points[2 * len(points) // 3]
        for s, e in ((None, Pos(*end)), (start, Pos(*end)), (start, stop.pos), (None, stop.pos)):
            want = list(extract(RangeSource(d, d.name, s.pos if s else None, e), dn_id=d.name,
                                storage_seq=seqs[d.name], state=s.vtso_state() if s else None))
            got = list(extract(ReplicationRange(dn, s.pos if s else None, e), dn_id=d.name,
                               storage_seq=seqs[d.name], state=s.vtso_state() if s else None))
            assert want and [dn_txn_fp(t) for t in got] == [dn_txn_fp(t) for t in want]
        assert list(ReplicationRange(dn, Pos(*end), Pos(*end)).files()) == []
    finally:
        server.stop()


def test_header_walk_probes_match_the_reader():
    """``commit_tso_after`` and ``group_start_after`` (a walk over the headers of a mapped file, the
    lead-in's probes) against the reader's events from every event start of a DN file: the first
    commit TSO from there, and the start of the event after the first XA_PREPARE/XID."""
    from binlog import read_events
    from gbinlog.spark_engine.ranges import commit_tso_after, group_start_after, raw_commit_tso

    path = next(p for p in FIXTURES if p.name == "bank-4dn") / "dn0" / "mysql-bin.000001"
    data = path.read_bytes()
    events = list(read_events(path))
    crc = events[0].ctx.crc_len
    checked = 0
    for i, ev in enumerate(events[1:], 1):
        later = events[i:]
        tso = next((t for e in later if (t := raw_commit_tso(e.raw, e.ctx.crc_len)) is not None), None)
        assert commit_tso_after(data, ev.pos, crc) == tso, ev.pos
        ends = [e.pos + e.h[3] for e in later if e.h[1] in (16, 38)]
        assert group_start_after(data, ev.pos) == (ends[0] if ends and ends[0] + 19 <= len(data) else None), ev.pos
        checked += tso is not None
    assert checked > 100
