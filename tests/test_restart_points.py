"""Restart points: re-reading a DN from any point a transaction carries regenerates
exactly the DN's later transactions, with the same vtsos, the same bytes and the same later points.

A point is attached to the highest-vtso transaction released at (or after) a quiet point, so a
restart may re-yield a few transactions at or below that carrier (begun after the point, released
before it in vtso order); the runner drops those as ``vtso <= last``. Everything above the carrier
must come out identical.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from extractor import RestartPoint, extract, storage_sequences
from extractor.model import DnTxn
from tests.test_extractor import TSO1, TSO2, TSO3
from tests.test_ordering_dn_writer import DnWriter, Stmt, xid_text

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))


def signature(t: DnTxn) -> tuple:
    return (t.vtso, t.kind, t.xid, t.branch, t.start, t.end, t.tso, t.restart,
            [(b.trace_id, b.db, b.table, b.hint, [e.raw for e in b.events]) for b in t.blocks],
            t.query.raw if t.query is not None else None)


def check_restarts(dn_dir: Path, storage_seq: str | None) -> int:
    full = list(extract(dn_dir, storage_seq=storage_seq))
    want = [signature(t) for t in full]
    carriers = [i for i, t in enumerate(full) if t.restart is not None]
    # points come in binlog order, and each lies at or after its carrier's commit
    points = [full[i].restart for i in carriers]
    assert [(p.file, p.offset) for p in points] == sorted((p.file, p.offset) for p in points)
    for i in carriers:
        p: RestartPoint = full[i].restart
        got = [signature(t) for t in extract(dn_dir, storage_seq=storage_seq, start=p.pos,
                                             state=p.vtso_state())]
        carrier = full[i].vtso
        above = [g for g in got if g[0] > carrier]
        # what comes before the suffix is at or below the carrier (dropped by the runner)
        assert all(g[0] <= carrier for g in got[:len(got) - len(above)]), (dn_dir, p)
        assert above == want[i + 1:], (dn_dir, p)
    return len(carriers)


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_every_restart_point_of_every_fixture_regenerates_the_suffix(name):
    root = ROOT / "fixtures" / name
    dns = sorted(p.name for p in root.iterdir() if p.is_dir())
    seqs = storage_sequences(dns)
    counts = {dn: check_restarts(root / dn, seqs[dn]) for dn in dns}
    # quiet points are frequent: heartbeats alone reach every DN every 200 ms
    assert all(n >= 10 for n in counts.values()), counts


def test_points_of_rollbacks_and_open_prepares(tmp_path):
    """A rollback's quiet point has an empty release batch: it rides on the next released
    transaction even when that release is not quiet. While a prepare is open there is no point:
    transactions released then carry none."""
    w = DnWriter(tmp_path, "dn0")
    x = [xid_text(i, "D_P00000_GROUP@0001") for i in range(1, 6)]
    tso4 = TSO3 + (7 << 22)
    w.prepare(x[0], [Stmt("d_p00000", "t")])
    w.commit(x[0], TSO1)
    end_a = w.w.position
    w.prepare(x[1], [Stmt("d_p00000", "t")])
    w.rollback(x[1])
    end_rollback = w.w.position
    w.prepare(x[2], [Stmt("d_p00000", "t")])
    w.prepare(x[3], [Stmt("d_p00000", "t")])
    w.commit(x[2], TSO2)      # held: x[3] was open before this commit
    w.prepare(x[4], [Stmt("d_p00000", "t")])
    w.commit(x[3], TSO3)      # releases x[2] only (x[4] is open): not quiet, carries the rollback's point
    w.commit(x[4], tso4)      # quiet: releases x[3] and x[4]; x[4] carries this point
    end_last = w.w.position
    w.close()
    full = list(extract(tmp_path / "dn0"))
    assert [t.xid for t in full] == [x[0], x[2], x[3], x[4]]
    assert full[0].restart.offset == end_a and full[0].restart.tso == TSO1
    # the rollback took seq 1 after TSO1
    assert full[1].restart.offset == end_rollback and (full[1].restart.tso, full[1].restart.seq) == (TSO1, 1)
    assert full[2].restart is None
    assert full[3].restart.offset == end_last and full[3].restart.tso == tso4
    assert check_restarts(tmp_path / "dn0", None) == 3
