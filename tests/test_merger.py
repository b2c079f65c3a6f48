"""Merger: blocking k-way merge, branch join, heartbeat windows, trace merge, errors."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from binlog import read_events
from extractor import Block, DnTxn, Pos, TxnKind, extract
from extractor.assembler import Assembler
from merger import PASSED_ALL, BranchConflict, EndsPassing, NonMonotonicMerge, merge, merge_by_trace
from tests.test_ordering_dn_writer import DnWriter, Stmt, hint, xid_text

TSO = 1_700_000_000_000 << 22
ZERO16 = "0" * 16
pytestmark = pytest.mark.usefixtures("both_merge_loops")


def tso_vtso(tso: int, txn: int) -> str:
    return f"{tso:019d}{txn:019d}{ZERO16}"


def local_vtso(tso: int, txn: int, seq: int, storage: str = "111111") -> str:
    return f"{tso:019d}{txn:019d}{seq:010d}{storage}"


def blk(trace: int, table: str, sub: int = 0, hinted: bool = True) -> Block:
    trace_id = f"{trace:010d}{sub:010d}"
    return Block(trace_id, "db", table, [], hint=f"/*DRDS /ip/x-{trace}/{sub}// */" if hinted else None)


def txn(dn: str, vtso: str, *blocks: Block, kind: TxnKind = TxnKind.DML, xid: str | None = "x",
        branch: str | None = None, offset: int = 100) -> DnTxn:
    return DnTxn(kind, dn, int(vtso[19:38]), branch or f"{dn}_G", Pos("mysql-bin.000001", offset),
                 xid=xid, vtso=vtso, end=Pos("mysql-bin.000001", offset + 50), blocks=list(blocks))


def complete(stream) -> EndsPassing:
    """A DN's whole binlog (its cluster stopped): its end passes every vtso (merger.emission)."""
    return EndsPassing(stream, PASSED_ALL)


# -- trace merge ---------------------------------------------------------------------------------------
def test_merge_by_trace_moves_table_map_blocks_as_units_in_trace_order():
    """A split-key move: delete on DN0 (statement 2), insert on DN1 (statement 3), around updates."""
    a = txn("dn0", tso_vtso(TSO, 1), blk(1, "acc"), blk(2, "acc_del"), blk(4, "acc"))
    b = txn("dn1", tso_vtso(TSO, 1), blk(3, "acc_ins"), blk(5, "acc"))
    merged = merge_by_trace([a, b])
    assert [(x.trace_id[:10], x.table) for x in merged] == [
        ("0000000001", "acc"), ("0000000002", "acc_del"), ("0000000003", "acc_ins"),
        ("0000000004", "acc"), ("0000000005", "acc")]
    assert all(x is y for x, y in zip(merged, [a.blocks[0], a.blocks[1], b.blocks[0], a.blocks[2], b.blocks[1]],
                                      strict=True))


def test_merge_by_trace_compresses_duplicate_hints_and_is_stable():
    a = txn("dn0", tso_vtso(TSO, 1), blk(7, "t1"), blk(7, "t2", hinted=False))
    b = txn("dn1", tso_vtso(TSO, 1), blk(7, "t3"), blk(8, "t4"))
    merged = merge_by_trace([a, b])
    # equal trace ids: the first branch's blocks first; the hint is written once per trace id
    assert [(x.table, x.hint is not None) for x in merged] == [("t1", True), ("t2", False), ("t3", False),
                                                               ("t4", True)]
    assert b.blocks[0].hint is not None  # the branch's own block is not modified
    single = txn("dn0", local_vtso(TSO, 1, 1), blk(2, "a"), blk(2, "b"), xid=None)
    assert [x.hint is not None for x in merge_by_trace([single])] == [True, False]


# -- join, heartbeat, ordering ---------------------------------------------------------------------------
def test_branches_join_heartbeat_emitted_once_and_locals_are_not_joined():
    v1, hb, v2 = tso_vtso(TSO + 10, 5), tso_vtso(TSO + 20, 6), tso_vtso(TSO + 30, 7)
    dn0 = [txn("dn0", v1, blk(1, "a"), branch="g0"), txn("dn0", v1, blk(3, "c"), branch="g4"),
           txn("dn0", hb, kind=TxnKind.HEARTBEAT),
           txn("dn0", local_vtso(TSO + 20, 6, 1), blk(0, "l"), xid=None)]
    dn1 = [txn("dn1", v1, blk(2, "b")), txn("dn1", hb, kind=TxnKind.HEARTBEAT), txn("dn1", v2, blk(1, "z"))]
    dn2 = [txn("dn2", hb, kind=TxnKind.HEARTBEAT)]
    out = list(merge([complete(dn0), complete(dn1), complete(dn2)]))
    assert [(g.vtso, g.kind, g.dns) for g in out] == [
        (v1, TxnKind.DML, ["dn0", "dn0", "dn1"]),
        (hb, TxnKind.HEARTBEAT, ["dn0", "dn1", "dn2"]),
        (local_vtso(TSO + 20, 6, 1), TxnKind.DML, ["dn0"]),
        (v2, TxnKind.DML, ["dn1"]),
    ]
    assert [b.table for b in out[0].blocks] == ["a", "b", "c"]
    assert out[1].blocks == []


def test_merge_blocks_until_every_dn_has_something_newer():
    """DN1 delivers nothing until released: the merge must not emit DN0's transactions before it
    knows DN1 has nothing older."""
    gate = threading.Event()
    emitted: list[str] = []

    def dn0():
        yield txn("dn0", tso_vtso(TSO + 30, 3))
        yield txn("dn0", tso_vtso(TSO + 50, 5))

    def dn1():
        gate.wait(5)
        yield txn("dn1", tso_vtso(TSO + 10, 1))
        yield txn("dn1", tso_vtso(TSO + 40, 4))

    th = threading.Thread(target=lambda: emitted.extend(g.vtso[:19] for g in merge([complete(dn0()),
                                                                                     complete(dn1())])))
    th.start()
    time.sleep(0.2)
    assert emitted == []
    gate.set()
    th.join(5)
    assert emitted == [f"{TSO + k:019d}" for k in (10, 30, 40, 50)]


def test_a_prepare_that_never_commits_holds_what_comes_after_it(tmp_path, caplog):
    w = DnWriter(tmp_path, "dn0")
    x1, x2 = xid_text(1, "G0"), xid_text(2, "G0")
    w.prepare(x1, [Stmt("d", "t")])          # never committed
    w.prepare(x2, [Stmt("d", "t")])
    w.commit(x2, TSO + 5)
    w.close()
    with caplog.at_level(logging.WARNING):
        assert list(merge([extract(tmp_path / "dn0")])) == []
    assert "never committed" in caplog.text and x1 in caplog.text
    # while following, the held prepare is reported with its XID and age every interval
    asm = Assembler("dn0", warn_interval=0.05)
    list(asm.feed("mysql-bin.000001", read_events(tmp_path / "dn0" / "mysql-bin.000001")))
    caplog.clear()
    time.sleep(0.06)
    with caplog.at_level(logging.WARNING):
        asm.warn_held()
    assert f"prepare {x1}" in caplog.text and "not committed for" in caplog.text


# -- errors ----------------------------------------------------------------------------------------------
def test_non_monotonic_merge_names_dn_file_offset():
    dn0 = [txn("dn0", tso_vtso(TSO + 10, 1)), txn("dn0", tso_vtso(TSO + 5, 2), offset=777)]
    with pytest.raises(NonMonotonicMerge) as ei:
        list(merge([dn0]))
    e = ei.value
    assert (e.dn, e.file, e.offset) == ("dn0", "mysql-bin.000001", 827)
    assert "goes down" in str(e) and "DN dn0: mysql-bin.000001: offset 827" in str(e)


def test_two_different_transactions_with_one_vtso_are_an_error():
    v = local_vtso(TSO, 1, 1)  # e.g. two DNs given the same storage sequence
    with pytest.raises(NonMonotonicMerge, match="repeats"):
        list(merge([[txn("dn0", v, xid=None)], [txn("dn1", v, xid=None)]]))


def test_branch_conflicts():
    v = tso_vtso(TSO, 9)
    with pytest.raises(BranchConflict, match="heartbeat"):
        list(merge([[txn("dn0", v, kind=TxnKind.HEARTBEAT)], [txn("dn1", v)]]))
    with pytest.raises(BranchConflict, match="second"):
        list(merge([[txn("dn0", v, branch="g"), txn("dn0", v, branch="g")]]))


def test_trace_regression_is_caught_per_branch_not_across_branches(tmp_path):
    """Across branches trace ids interleave freely (that is what the merge sorts); only inside one
    branch must they not go down."""
    x = [xid_text(1, "G0"), xid_text(1, "G1")]
    ws = [DnWriter(tmp_path, f"dn{d}") for d in range(2)]
    ws[0].prepare(x[0], [Stmt("d0", "t", hint=hint(1)), Stmt("d0", "t", hint=hint(4))])
    ws[1].prepare(x[1], [Stmt("d1", "t", hint=hint(2)), Stmt("d1", "t", hint=hint(3))])
    for d in range(2):
        ws[d].commit(x[d], TSO + 1)
        ws[d].close()
    (g,) = merge([extract(w.dir) for w in ws])
    assert [b.trace_id[:10] for b in g.blocks] == ["0000000001", "0000000002", "0000000003", "0000000004"]
