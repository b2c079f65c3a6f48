"""Extractor: transaction assembly, vtso, trace ids, the Sorter."""

from __future__ import annotations

import struct
import threading
import time

import pytest

from binlog.constants import EventType as E
from binlog.constants import GcnFlag
from extractor import DirSource, Pos, Sorter, TxnKind, VtsoState, extract, vtso_for_commit
from extractor.trace import build_trace_id, parse_hint, reduce_hint
from extractor.vtso import storage_sequence, storage_sequences
from extractor.xid import java_string_hash, parse
from tests.test_ordering_dn_writer import GCN_COMMIT, GCN_LOCAL, DnWriter, Stmt, hint, xid_text

TSO1 = (1_700_000_000_000 << 22) | 1
TSO2 = (1_700_000_000_050 << 22) | 2
TSO3 = (1_700_000_000_100 << 22) | 3
DB = "d_p00000"


def vt(tso: int, txn: int, seq: int = 0, storage: str = "000000") -> str:
    return f"{tso:019d}{txn:019d}{seq:010d}{storage}"


def run(tmp_path, build, dn="dn0"):
    w = DnWriter(tmp_path, dn)
    build(w)
    w.close()
    return list(extract(tmp_path / dn))


# -- the Sorter release rule: P1 P2 C1 P3 C2 C3 (docs/architecture.md) -----------------------------
def test_sorter_walks_p1_p2_c1_p3_c2_c3():
    """T1 commits first (TSO 10) while T2 is open; T3 prepares after C1, so its TSO (12) exceeds 10,
    but T2's (15) was fetched later than T3's: the DN writes C2 before C3 — a hole."""
    s = Sorter()
    s.prewrite("T1", "t1")
    s.prewrite("T2", "t2")
    assert s.release() == []
    s.commit("T1", "10")
    # C1 lies after the open P2: it does not count for W yet, T1 stays held.
    assert s.release() == [] and s.watermark is None
    assert s.oldest_open() == "t2"
    s.prewrite("T3", "t3")
    s.commit("T2", "15")
    # P2 done → C1 counts (W = 10); P3 is open and stops the scan before C2.
    assert s.release() == ["t1"] and s.watermark == "10"
    assert s.oldest_open() == "t3"
    s.commit("T3", "12")
    # Everything before is closed: W = max(15, 12) = 15; T3 (12) then T2 (15).
    assert s.release() == ["t3", "t2"] and s.watermark == "15"
    assert len(s) == 0 and s.oldest_open() is None


def test_sorter_watermark_never_decreases_and_rollback_moves_it():
    s = Sorter()
    s.prewrite("A", "a")
    s.commit("A", "50")
    assert s.release() == ["a"] and s.watermark == "50"
    s.prewrite("B", "b")
    s.prewrite("R", "r")
    s.rollback("R", "70")
    s.commit("B", "60")  # below the rollback's 70, which came after B's prepare: W becomes 70
    assert s.release() == ["b"] and s.watermark == "70"


def test_a_commit_below_what_was_committed_before_its_prepare_is_a_tso_that_went_back():
    """A TSO is fetched after the prepare, so it is above every commit written before the prepare:
    W (which counts only those) can never be above it. Both Sorters, the group path too."""
    from extractor.errors import TsoWentBack
    from extractor.sorter import PySorter

    for make in (Sorter, PySorter):
        s = make()
        s.prewrite("A", "a")
        s.commit("A", "50")
        s.release()
        s.prewrite("B", "b")
        with pytest.raises(TsoWentBack, match="goes back below"):
            s.commit("B", "40")
        alone = make()
        alone.prewrite("A", "a")
        alone.commit("A", f"{TSO1:019d}{'0' * 35}")
        alone.release()
        with pytest.raises(TsoWentBack, match="goes back below"):
            alone.commit_alone(type("T", (), {"txn_id": 1})(), TSO1 - 1, VtsoState())


# -- vtso --------------------------------------------------------------------------------------------
def test_vtso_for_commit_tso_and_local():
    st = VtsoState()
    assert vtso_for_commit(st, None, 0, "123456") == vt(0, 0, 1, "123456")
    assert vtso_for_commit(st, TSO1, 77, "123456") == vt(TSO1, 77)
    assert (st.tso, st.txn_id, st.seq) == (TSO1, 77, 0)
    assert vtso_for_commit(st, None, 0, "123456") == vt(TSO1, 77, 1, "123456")
    assert vtso_for_commit(st, None, 0, "123456") == vt(TSO1, 77, 2, "123456")
    # a smaller TSO (a hole) does not move maxTso; an equal TSO with a larger txnId does
    assert vtso_for_commit(st, TSO1 - 5, 99, "x") == vt(TSO1 - 5, 99)
    assert (st.tso, st.txn_id, st.seq) == (TSO1, 77, 2)
    vtso_for_commit(st, TSO1, 78, "x")
    assert (st.tso, st.txn_id, st.seq) == (TSO1, 78, 0)
    assert len(vt(TSO1, 1)) == 54


def test_storage_sequence_is_java_objects_hash():
    assert java_string_hash("hello") == 99162322  # Java "hello".hashCode()
    assert storage_sequence("dn0") == "099589"    # abs(31 + "dn0".hashCode()) = 99589
    # dn10 and dn11 collide (308640): the later one takes the next free number, as the simulator does
    assert storage_sequence("dn10") == storage_sequence("dn11") == "308640"
    seqs = storage_sequences(["dn11", "dn10", "dn0"])
    assert seqs == {"dn0": "099589", "dn10": "308640", "dn11": "308641"}


def test_xid_and_trace_parsing():
    x = parse(xid_text(0x1881C1536F401000, "D1_P00000_GROUP@0000", 3))
    assert x == (0x1881C1536F401000, "D1_P00000_GROUP@0000", True)
    assert parse_hint("/*DRDS /127.0.0.1/1881c1536f401000-3/0// */") == ("00000000030000000000", None)
    assert parse_hint("/*DRDS /1.2.3.4/abc-12/7/42/ */ UPDATE t SET a=1") == ("00000000120000000007", 42)
    assert parse_hint("/*DRDS /1.2.3.4/abc/x// */") == ("00000000000000000000", None)
    assert parse_hint("UPDATE t SET a = 1") is None
    assert build_trace_id("5", None) == "00000000050000000000"
    assert reduce_hint("/*DRDS /1.2.3.4/abc-1/0// */ UPDATE t SET a=1") == "/*DRDS /1.2.3.4/abc-1/0// */"


# -- assembly ----------------------------------------------------------------------------------------
def test_two_phase_tso_branch(tmp_path):
    xid = xid_text(0xABC, "D_P00000_GROUP")
    pos = {}

    def build(w):
        pos["start"] = w.prepare(xid, [Stmt(DB, "t1", hint=hint(1, 0, server="9")),
                                       Stmt(DB, "t2", hint=hint(2, 1))])
        pos["commit"] = w.commit(xid, TSO1)
        pos["end"] = w.w.position

    (t,) = run(tmp_path, build)
    assert t.kind is TxnKind.DML and t.is_tso and t.tso == TSO1
    assert t.vtso == vt(TSO1, 0xABC)
    assert t.txn_id == 0xABC and t.xid == xid
    assert t.branch == f"{java_string_hash('dn0')}_D_P00000_GROUP"
    assert t.start == Pos("mysql-bin.000001", pos["start"]) and t.end == Pos("mysql-bin.000001", pos["end"])
    assert [(b.trace_id, b.table, b.hint) for b in t.blocks] == [
        ("00000000010000000000", "t1", hint(1, 0, server="9")), ("00000000020000000001", "t2", hint(2, 1))]
    assert [[e.type_code for e in b.events] for b in t.blocks] == [[E.TABLE_MAP, E.WRITE_ROWS]] * 2
    assert t.server_id == 9


def test_local_one_phase_rollback_and_ddl_take_the_dn_sequence(tmp_path):
    seq = storage_sequence("dn0")
    x1, x2, x3 = (xid_text(i, "D_P00000_GROUP") for i in (10, 11, 12))

    def build(w):
        w.local([Stmt(DB, "t")])                   # before any TSO txn: maxTso = (0, 0)
        w.prepare(x1, [Stmt(DB, "t")])
        w.commit(x1, TSO1)                         # TSO txn: maxTso = (TSO1, 10)
        w.one_phase(x2, [Stmt(DB, "t")], tso=TSO2)  # one phase: local even with a commit TSO
        w.prepare(x3, [Stmt(DB, "t")])
        w.rollback(x3)                             # takes seq 2, never emitted
        w.ddl("ALTER TABLE t ADD COLUMN c INT")
        w.local([Stmt(DB, "t")], gcn_flags=GCN_COMMIT)  # a 1PC with a commit TSO is still local

    out = run(tmp_path, build)
    assert [(t.kind, t.vtso) for t in out] == [
        (TxnKind.DML, vt(0, 0, 1, seq)),
        (TxnKind.DML, vt(TSO1, 10)),
        (TxnKind.DML, vt(TSO1, 10, 1, seq)),
        (TxnKind.PHYSICAL_DDL, vt(TSO1, 10, 3, seq)),
        (TxnKind.DML, vt(TSO1, 10, 4, seq)),
    ]
    assert out[2].xid == x2 and out[2].tso is None and not out[2].is_tso
    assert out[3].sql == "ALTER TABLE t ADD COLUMN c INT" and out[3].db == DB and out[3].blocks == []


def test_ignored_format_ids_and_single_group_take_no_vtso(tmp_path):
    seq = storage_sequence("dn0")
    bad = xid_text(5, "D_P00000_GROUP", format_id=2)
    single = xid_text(6, "__CDC___SINGLE_GROUP")

    def build(w):
        w.prepare(bad, [Stmt(DB, "t")])
        w.commit(bad, TSO1)
        w.prepare(single, [Stmt(DB, "t")])
        w.commit(single, TSO2)
        w.local([Stmt(DB, "t")])

    out = run(tmp_path, build)
    assert [t.vtso for t in out] == [vt(0, 0, 1, seq)]


def test_holes_are_repaired_per_dn(tmp_path):
    """P1 P2 C2 C1 with tso(T2) < tso(T1), and P1 P2 L C1 C2 with a local txn inside the hole."""
    seq = storage_sequence("dn0")
    a, b, c, d = (xid_text(i, "D_P00000_GROUP") for i in (1, 2, 3, 4))

    def build(w):
        w.prepare(a, [Stmt(DB, "t")])
        w.prepare(b, [Stmt(DB, "t")])
        w.commit(b, TSO2)
        w.commit(a, TSO3)          # binlog order b, a; TSO order b < a: already ordered
        w.prepare(c, [Stmt(DB, "t")])
        w.prepare(d, [Stmt(DB, "t")])
        w.local([Stmt(DB, "t")])   # inside the hole: ordered after maxTso = (TSO3, 1)
        w.commit(d, TSO3 + 20)
        w.commit(c, TSO3 + 10)     # binlog order d, c; TSO order c < d: the hole

    out = run(tmp_path, build)
    assert [t.vtso for t in out] == [vt(TSO2, 2), vt(TSO3, 1), vt(TSO3, 1, 1, seq), vt(TSO3 + 10, 3),
                                     vt(TSO3 + 20, 4)]


def test_sequence_and_lizard_and_old_gcn_commit_tso(tmp_path):
    """DN 5.7 SEQUENCE(commit), DN 8.0 V1 Q_LIZARD_COMMIT_GCN, and an old 9-byte GCN body whose
    flags lack HAVE_GCN all make TSO transactions; GCN without 0x04 does not."""
    xs = [xid_text(i, "D_P00000_GROUP") for i in (1, 2, 3, 4)]

    def build(w):
        w.prepare(xs[0], [Stmt(DB, "t")])
        w.gtid()
        w.append(E.SEQUENCE, struct.pack("<BQ", 2, TSO1), 0x80)
        w.query(f"XA COMMIT {xs[0]}", DB)
        w.prepare(xs[1], [Stmt(DB, "t")])
        w.query(f"XA COMMIT {xs[1]}", DB, status_vars=b"\x00\x00\x00\x00\x00" + b"\xc8" + struct.pack("<Q", TSO2))
        w.prepare(xs[2], [Stmt(DB, "t")])
        w.append(E.GCN, struct.pack("<BQ", GcnFlag.HAVE_COMMITTED_SEQ, TSO3), 0x80)  # old engine body
        w.query(f"XA COMMIT {xs[2]}", DB)
        w.prepare(xs[3], [Stmt(DB, "t")])
        w.gcn(GCN_LOCAL | GcnFlag.HAVE_SNAPSHOT_SEQ, TSO3 + 5)
        w.query(f"XA COMMIT {xs[3]}", DB)

    out = run(tmp_path, build)
    assert [t.vtso for t in out] == [vt(TSO1, 1), vt(TSO2, 2), vt(TSO3, 3),
                                     vt(TSO3, 3, 1, storage_sequence("dn0"))]


def test_trace_ids_consecutive_table_maps_and_fake(tmp_path):
    x1 = xid_text(1, "D_P00000_GROUP")

    def build(w):
        w.prepare(x1, [Stmt(DB, "a", hint=hint(3, 2), table_map_only=True), Stmt(DB, "b"),
                       Stmt(DB, "c", hint=hint(4)), Stmt(DB, "d")])
        w.commit(x1, TSO1)
        w.local([Stmt(DB, "e"), Stmt(DB, "f")])  # no hint at all: a fake trace id

    t1, t2 = run(tmp_path, build)
    assert [(b.table, b.trace_id, b.hint is not None, len(b.events)) for b in t1.blocks] == [
        ("a", "00000000030000000002", True, 1), ("b", "00000000030000000002", False, 2),
        ("c", "00000000040000000000", True, 2), ("d", "00000000040000000000", False, 2)]
    assert [b.trace_id for b in t2.blocks] == ["0" * 20] * 2


def test_system_tables_make_heartbeat_mark_and_instruction_kinds(tmp_path):
    xs = [xid_text(i, "__CDC___000000_GROUP") for i in (1, 2, 3, 4)]
    sysdb = "__cdc___000000"

    def build(w):
        w.prepare(xs[0], [Stmt(sysdb, "__cdc_heartbeat__", kind=E.UPDATE_ROWS)])
        w.commit(xs[0], TSO1)
        w.prepare(xs[1], [Stmt(DB, "user_t", hint=hint(1)), Stmt(sysdb, "__cdc_ddl_record__", hint=hint(2))])
        w.commit(xs[1], TSO2)
        w.prepare(xs[2], [Stmt(sysdb, "__cdc_instruction__")])
        w.commit(xs[2], TSO3)
        w.prepare(xs[3], [Stmt(sysdb, "__cdc_other__"), Stmt(DB, "user_t")])  # only system: dropped
        w.commit(xs[3], TSO3 + 1)

    hb, mark, instr = run(tmp_path, build)
    assert hb.kind is TxnKind.HEARTBEAT and hb.blocks == [] and hb.vtso == vt(TSO1, 1)
    assert mark.kind is TxnKind.DDL_MARK and [b.table for b in mark.blocks] == ["__cdc_ddl_record__"]
    assert [e.type_code for e in mark.blocks[0].events] == [E.TABLE_MAP, E.WRITE_ROWS]
    assert instr.kind is TxnKind.INSTRUCTION and instr.vtso == vt(TSO3, 3)


def test_files_follow_the_index_and_rotation(tmp_path):
    xs = [xid_text(i, "D_P00000_GROUP") for i in (1, 2)]
    w = DnWriter(tmp_path, "dn7")
    w.prepare(xs[0], [Stmt(DB, "t")])
    w.rotate()
    w.prepare(xs[1], [Stmt(DB, "t")])
    w.commit(xs[1], TSO2)
    w.rotate()
    c1 = w.commit(xs[0], TSO1)
    w.close()
    out = list(extract(tmp_path / "dn7"))
    assert [(t.txn_id, t.start.file, t.end.file) for t in out] == [
        (1, "mysql-bin.000001", "mysql-bin.000003"), (2, "mysql-bin.000002", "mysql-bin.000002")]
    assert out[0].dn == "dn7" and out[0].end.offset > c1
    # without the index file the names give the same order
    (tmp_path / "dn7" / "mysql-bin.index").unlink()
    assert [t.vtso for t in extract(tmp_path / "dn7")] == [t.vtso for t in out]


def test_start_position_resumes_with_state(tmp_path):
    xs = [xid_text(i, "D_P00000_GROUP") for i in (1, 2)]
    w = DnWriter(tmp_path, "dn0")
    w.prepare(xs[0], [Stmt(DB, "t")])
    w.commit(xs[0], TSO1)
    w.local([Stmt(DB, "t")])
    second = w.prepare(xs[1], [Stmt(DB, "t")])
    w.commit(xs[1], TSO2)
    w.local([Stmt(DB, "t")])
    w.close()
    full = list(extract(tmp_path / "dn0"))
    resumed = list(extract(tmp_path / "dn0", start=Pos("mysql-bin.000001", second),
                           state=VtsoState(TSO1, 1, 1)))
    assert [t.vtso for t in resumed] == [t.vtso for t in full[2:]]


def test_follow_mode_reads_a_growing_dn(tmp_path):
    """A DN that keeps writing: transactions come out as their commits land, then rotation is
    followed into the next file; the source stops when asked."""
    xs = [xid_text(i, "D_P00000_GROUP") for i in (1, 2, 3)]
    w = DnWriter(tmp_path, "dn0")
    w.prepare(xs[0], [Stmt(DB, "t")])
    w.w.flush()
    stop = threading.Event()
    got: list = []

    def consume():
        src = DirSource(tmp_path / "dn0", follow=True, poll_interval=0.01, should_stop=stop.is_set)
        for t in extract(src):
            got.append((t.txn_id, time.monotonic()))

    th = threading.Thread(target=consume)
    th.start()
    time.sleep(0.1)
    assert got == []                      # prepared, not committed: held
    w.commit(xs[0], TSO1)
    w.w.flush()
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [g[0] for g in got] == [1]
    w.rotate()
    w.prepare(xs[1], [Stmt(DB, "t")])
    w.commit(xs[1], TSO2)
    w.w.flush()
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    th.join(5)
    assert not th.is_alive()
    assert [g[0] for g in got] == [1, 2]
    w.close()
