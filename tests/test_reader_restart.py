"""A binlog file read from a restart point mid-file (``BinlogFile(path, start=…)``) takes the
kernel's scan, as a whole file does: the same records as the event-by-event reader from that
position, and the same refusal of a position that is no event boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from binlog.errors import BinlogError
from binlog.reader import BinlogFile, read_events
from extractor import extract
from extractor.assembler import _KIND_OF, _KINDS
from extractor.model import Pos
from extractor.vtso import VtsoState

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bank-4dn"


def test_records_from_every_tenth_boundary_equal_the_event_path():
    path = FIXTURE / "dn1" / "mysql-bin.000001"
    events = list(read_events(path))
    assert len(events) > 300
    for ev in events[2::10]:
        scanned = BinlogFile(path, start=ev.pos)
        fast = [(k, r.pos, bytes(r.raw)) for batch in scanned.records(_KINDS) for k, r, _ in batch]
        slow = [(_KIND_OF[e.h[1]], e.pos, bytes(e.raw)) for e in read_events(path, start=ev.pos) if _KIND_OF[e.h[1]]]
        # the events read: those from the start on (the FDE before it is read, not counted), as iterating
        # counts them, and as the events list says
        walked = BinlogFile(path, start=ev.pos)
        assert sum(1 for _ in walked) == walked.events == len(events) - events.index(ev)
        assert scanned.events == walked.events, ev.pos
        # the scan classifies QUERYs and drops GCNs without a commit TSO; compare what both keep
        assert [r[1] for r in fast] == sorted(r[1] for r in fast)
        assert {r[1]: r[2] for r in fast}.items() <= {r[1]: r[2] for r in slow}.items()
        assert fast[0][1] >= ev.pos and all(r[1] >= ev.pos for r in fast)


def test_a_position_inside_an_event_is_refused():
    path = FIXTURE / "dn1" / "mysql-bin.000001"
    events = list(read_events(path))
    inside = events[20].pos + 3
    with pytest.raises(BinlogError, match="not an event boundary") as exc:
        list(BinlogFile(path, start=inside).records(_KINDS))
    assert exc.value.offset <= inside
    with pytest.raises(BinlogError, match="not an event boundary"):     # inside the FDE
        list(BinlogFile(path, start=10).records(_KINDS))
    # a restart point right after the file's last event (as ``DirSource`` takes it): nothing more
    assert list(BinlogFile(path, start=path.stat().st_size).records(_KINDS)) == []
    with pytest.raises(BinlogError, match="past the end"):
        list(BinlogFile(path, start=path.stat().st_size + 10).records(_KINDS))


def test_extract_from_each_restart_point_gives_the_rest_of_the_dn():
    """What the Spark engine's range writers rely on: re-reading a DN from the restart point a
    transaction carries, with its state, gives exactly the transactions after it."""
    dn = FIXTURE / "dn2"
    whole = list(extract(dn))
    carried = [(i, t.restart) for i, t in enumerate(whole) if t.restart is not None]
    assert len(carried) > 10
    mid_file = [c for c in carried if c[1].offset > 4]
    assert len(mid_file) > 5
    for i, point in carried[1::max(1, len(carried) // 12)]:
        again = list(extract(dn, start=Pos(point.file, point.offset),
                             state=VtsoState(point.tso, point.txn_id, point.seq)))
        assert [(t.vtso, t.end, len(t.blocks)) for t in again] == [(t.vtso, t.end, len(t.blocks)) for t in whole[i + 1:]]
