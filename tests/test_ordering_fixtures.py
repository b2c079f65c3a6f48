"""Extractor + merger against the simulator's truth.

On every committed fixture (``fixtures/*/truth.json``) and on a fresh small run of each workload:
the merged transactions are exactly the truth's, in the truth's order (TSO txns by TSO, 1PC right
after the TSO txn that preceded them on their DN), with the same branches and the same physical
statements in trace order; in ``drift`` every split-key move's delete precedes its insert.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from binlog.constants import DELETE_TYPES, UPDATE_TYPES, WRITE_TYPES
from extractor import TxnKind, extract, storage_sequences
from merger import GlobalTxn, merge
from simulator.run import simulate

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))
WORKLOADS = ["bank", "drift", "ddl", "mixed", "scale"]
KIND = {"dml": TxnKind.DML, "heartbeat": TxnKind.HEARTBEAT, "ddl": TxnKind.DDL_MARK,
        "instruction": TxnKind.INSTRUCTION}


def op_of(type_code: int) -> str:
    if type_code in WRITE_TYPES:
        return "insert"
    if type_code in UPDATE_TYPES:
        return "update"
    assert type_code in DELETE_TYPES
    return "delete"


def statements(g: GlobalTxn) -> list[tuple[str, str, str, str]]:
    """(trace, phys db, phys table, op) per rows event of the merged transaction, in output order."""
    return [(b.trace_id, b.db, b.table, op_of(e.type_code)) for b in g.blocks for e in b.rows_events]


def dedup(seq: list) -> list:
    """Consecutive equal entries once (a statement may span several rows events)."""
    return [s for i, s in enumerate(seq) if i == 0 or seq[i - 1] != s]


def check_against_truth(root: Path) -> dict[str, int]:
    truth = json.loads((root / "truth.json").read_text())
    dns = [d["id"] for d in truth["dns"]]
    seqs = storage_sequences(dns)
    assert seqs == {d["id"]: d["storage_seq"] for d in truth["dns"]}
    merged = [g for g in merge([extract(root / dn, storage_seq=seqs[dn]) for dn in dns])
              if g.kind is not TxnKind.PHYSICAL_DDL]
    expected = truth["txns"]
    assert [(g.vtso, g.kind) for g in merged] == [(t["vtso"], KIND[t["kind"]]) for t in expected]
    moves = 0
    for g, t in zip(merged, expected, strict=True):
        if t["commit"] == "xa":
            got_branches = sorted(f"{b.dn}:{b.branch.split('_', 1)[1]}" for b in g.branches)
            assert got_branches == sorted(t["branches"]), t["vtso"]
            assert g.tso == t["tso"] and g.is_tso
        else:
            assert len(g.branches) == 1 and not g.is_tso and g.dns == t["dns"]
        if t["kind"] != "dml":
            continue
        want = dedup([(c["trace"], c["phys_db"], c["phys_table"], c["op"]) for c in t["changes"]])
        got = dedup(statements(g))
        assert got == want, t["vtso"]
        # split-key moves: (delete on the old DN, insert on the new) pairs, in the truth's order
        mv = [k for k, c in enumerate(t["changes"]) if c.get("move")]
        for a, b in zip(mv[0::2], mv[1::2], strict=True):
            moves += 1
            assert a < b and got[a][3] == "delete" and got[b][3] == "insert", t["vtso"]
    return {"txns": len(merged), "moves": moves}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_matches_truth(name):
    stats = check_against_truth(ROOT / "fixtures" / name)
    assert stats["txns"] > 0
    if name.startswith("drift"):
        assert stats["moves"] > 0


@pytest.mark.parametrize("workload", WORKLOADS)
def test_fresh_simulation_matches_truth(tmp_path, workload):
    simulate(workload, 3, 150, 7, tmp_path / workload)
    stats = check_against_truth(tmp_path / workload)
    assert stats["txns"] >= 150
    if workload == "drift":
        assert stats["moves"] > 0
