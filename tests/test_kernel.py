"""The compiled kernel (``binlog._kernel``) and its pure-Python twin (``binlog.kernel_py``) give the
same bytes: every fixture built through the compiled scan + frame, through
the pure-Python ones, and event by event (the path of streams and restarts) gives identical files;
the two ``scan``s return the same records, stops and offsets on every fixture file, damaged ones
included; the two ``frame``s the same events."""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlog import BinlogError, kernel, kernel_py, read_all, read_events
from binlog.event import Event, FormatContext
from binlog.reader import BinlogFile
from extractor import assembler, sorter, trace, vtso
from extractor.errors import TsoWentBack
from extractor.model import Pos
from extractor.source import BytesSource, list_binlog_files
from extractor.xid import bqual_hex as xid_bqual
from gbinlog.local_engine import Settings, build, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))

try:
    from binlog import _kernel
except ImportError:  # the test below says why it must be there
    _kernel = None


def dn_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("dn"))


def test_the_compiled_kernel_is_built_and_used():
    """``pip install`` (dev.sh) compiles it; without the override this process uses it."""
    assert _kernel is not None, "binlog._kernel is not built: pip install -e . with Cython and a C compiler"
    if os.environ.get("GBINLOG_PURE_PYTHON", "") in ("", "0"):
        assert kernel.COMPILED and kernel.scan is _kernel.scan and kernel.frame is _kernel.frame
        # the grouped scan makes the model's objects by their slots: a field added to DnTxn, Block or
        # Event must be added to the kernel's lists too (else every event goes alone, slowly)
        assert assembler.Assembler("dn0")._maker("mysql-bin.000001") is not None
        assert sorter.Sorter is not sorter.PySorter and vtso.tso_vtso is not vtso.py_tso_vtso
        assert importlib.import_module("merger.kway_merge").merge_loop is not None   # merger/_merge.pyx
    out = subprocess.run([sys.executable, "-c", "import binlog.kernel as k; print(k.COMPILED)"],
                         env={**os.environ, "GBINLOG_PURE_PYTHON": "1"}, capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_the_kernels_make_only_plain_tuple_classes_by_allocation():
    """``pos_of`` and the groups' restart points fill a tuple of the class: only a class whose
    objects hold nothing but the items (a NamedTuple) passes; Maker and Groups refuse others."""
    from extractor.model import Pos, RestartPoint

    class WithDict(tuple):
        pass

    assert kernel_py.plain_tuple_class(Pos) and kernel_py.plain_tuple_class(RestartPoint)
    assert not kernel_py.plain_tuple_class(WithDict) and not kernel_py.plain_tuple_class(list)
    with pytest.raises(TypeError, match="not a NamedTuple"):
        _kernel.Maker(Event, assembler.Block, assembler.DnTxn, WithDict, "f", "dn0", "dml", {})


class BytesDn:
    """A fixture DN read from memory: the assembler's event-by-event path."""

    def __init__(self, directory: Path) -> None:
        self.directory, self.dn_id = directory, directory.name
        self.files = [(n, (directory / n).read_bytes()) for n in list_binlog_files(directory)]

    def server_id(self) -> int:
        return int.from_bytes(self.files[0][1][9:13], "little")

    def stream(self, restart, storage_seq, should_stop=None):
        from extractor import extract

        assert restart is None
        return extract(BytesSource(self.dn_id, self.files), storage_seq=storage_seq)


def output(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name.startswith("binlog.")}


@pytest.mark.parametrize("name", FIXTURES)
def test_compiled_pure_python_and_event_by_event_builds_are_byte_identical(name, tmp_path, monkeypatch):
    dirs = dn_dirs(ROOT / "fixtures" / name)
    settings = Settings(max_file_size=256 << 10)
    result = build(dirs, tmp_path / "compiled", settings=settings)
    # the closing line's DN events read: every event of every DN file, counted by the scan (a DN that
    # left, scale-in, is not read past its leave)
    total = sum(len(read_all(p)) for d in dirs for p in (d / n for n in list_binlog_files(d)))
    left = json.loads((tmp_path / "compiled" / "state.json").read_text()).get("left")
    assert result.dn_events == total if not left else 0.5 * total < result.dn_events < total
    with monkeypatch.context() as m:
        m.setattr(kernel, "scan", kernel_py.scan)
        m.setattr(kernel, "scan_txns", kernel_py.scan_txns)
        m.setattr(assembler, "Sorter", sorter.PySorter)
        m.setattr(vtso, "tso_vtso", vtso.py_tso_vtso)
        m.setattr(vtso, "seq_vtso", vtso.py_seq_vtso)
        m.setattr(kernel, "frame", kernel_py.frame)
        m.setattr(importlib.import_module("merger.kway_merge"), "merge_loop", None)
        for name in ("frame_dml", "rows_pass"):
            m.setattr(kernel, name, getattr(kernel_py, name))
        build(dirs, tmp_path / "pure", settings=settings)
    run_pipeline([BytesDn(d) for d in dirs], tmp_path / "events", settings)
    compiled = output(tmp_path / "compiled")
    assert len(compiled) >= 2 and sum(map(len, compiled.values())) > 50_000
    assert output(tmp_path / "pure") == compiled
    assert output(tmp_path / "events") == compiled


@pytest.mark.parametrize("name", FIXTURES)
def test_grouped_and_event_by_event_extraction_give_the_same_transactions_and_restart_points(name):
    """The compiled groups (``extractor._sort.Groups``: quiet points, the point carried, empty DML
    dropped) against the assembler's own rules, event by event: every DN transaction, its vtso and
    the restart point it carries (which no output byte shows) are the same."""
    from extractor import extract, storage_sequences
    from tests.test_restart_points import signature

    dirs = dn_dirs(ROOT / "fixtures" / name)
    seqs = storage_sequences(d.name for d in dirs)
    for d in dirs:
        grouped = [signature(t) for t in extract(d, storage_seq=seqs[d.name])]
        one_by_one = [signature(t) for t in extract(BytesSource(d.name, BytesDn(d).files), storage_seq=seqs[d.name])]
        assert grouped == one_by_one, d
        assert sum(1 for s in grouped if s[7] is not None) >= 3, d    # points are carried


def fixture_files() -> list[Path]:
    return [d / n for name in FIXTURES for d in dn_dirs(ROOT / "fixtures" / name) for n in list_binlog_files(d)]


def scan_all(impl, data: bytes, kinds: bytes, batch: int) -> list:
    """Every scan call over ``data`` from 4, stepping over FDEs: records as plain values, stops."""
    ctx = FormatContext(source="t")
    out, off = [], 4
    while True:
        recs, off, status, walked = impl.scan(data, off, True, kinds, 13, Event, ctx, batch)
        out.append([(k, ev.pos, ev.h, ev.raw, q) for k, ev, q in recs])
        out.append((off, status, walked))
        if status == kernel_py.ST_FDE:
            off += int.from_bytes(data[off + 9:off + 13], "little")
        elif status != kernel_py.ST_MORE or len(recs) < batch:
            return out


def test_scan_gives_the_same_records_and_stops_on_every_fixture_file_and_damaged_copies():
    assert _kernel is not None
    rnd = random.Random(17)
    files = fixture_files()
    for path in files:
        data = path.read_bytes()
        variants = [data, data[:len(data) - 7]]
        for _ in range(3):  # one flipped byte: a CRC mismatch, an impossible size or a new class
            bad = bytearray(data)
            bad[rnd.randrange(4, len(bad))] ^= 1 << rnd.randrange(8)
            variants.append(bytes(bad))
        for kinds in (assembler._KINDS, bytes(rnd.randrange(0, 4) for _ in range(256))):
            for v in variants:
                batch = rnd.choice([1, 7, 4096])
                assert scan_all(_kernel, v, kinds, batch) == scan_all(kernel_py, v, kinds, batch), path
    assert len(files) >= 10


def test_scan_classifies_statements_and_drops_xa_end_and_plain_gcns():
    data = (ROOT / "fixtures" / "bank-4dn" / "dn0" / "mysql-bin.000001").read_bytes()
    recs = [r for batch in scan_all(kernel, data, assembler._KINDS, 4096)[::2] for r in batch]
    classes = {k for k, *_ in recs}
    assert {kernel.Q_XA_START, kernel.Q_XA_COMMIT, kernel.K_GCN} <= classes
    for k, _pos, h, raw, q in recs:
        if k == kernel.Q_XA_START:
            assert raw[q:q + 8] == b"XA START"
        assert not (h[1] == 2 and raw[q:q + 6] == b"XA END")
        if h[1] == 105:
            assert raw[19] & 0x04


def test_frame_gives_the_same_events():
    rnd = random.Random(5)
    for _ in range(200):
        items = [(rnd.randrange(256), rnd.randbytes(rnd.randrange(0, 300)), rnd.randrange(1 << 16))
                 for _ in range(rnd.randrange(0, 12))]
        items += [(19, bytearray(b"\x01\x02"), 0), (30, memoryview(b"abc"), 0x20)]
        pos, ts, sid = rnd.randrange(4, 1 << 31), rnd.randrange(1 << 32), rnd.randrange(1 << 32)
        a, b = bytearray(b"head"), bytearray(b"head")
        assert _kernel.frame(a, pos, ts, sid, items) == kernel_py.frame(b, pos, ts, sid, items)
        assert a == b


_HINT_PARTS = st.sampled_from(["", "0", "1", "12", "007", " 1", "1 ", "a", "-", "x-1", "bc88-1", "bc-1-2", "bc--3",
                               "١", "+1", "1.5", "0x1f", "/", "*/", " ", "10.20.0.7"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_HINT_PARTS, max_size=7), st.sampled_from(["/ */", "/*/", " */", "/ */ UPDATE t", "", "*/"]))
def test_the_hint_fast_path_gives_what_the_general_rules_give(fields, tail):
    """``parse_hint`` reads the CN's usual form with one regex; any text gives what the general
    (``LogEventUtil.buildTrace``) rules give."""
    text = "/*DRDS /" + "/".join(fields) + tail
    fast = trace.parse_hint(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(trace, "_CANONICAL", re.compile(r"(?!)"))
        assert trace.parse_hint(text) == fast, text


def outcome(fn):
    try:
        fn()
    except BinlogError as exc:
        return type(exc), str(exc)
    return None


def test_a_damaged_file_raises_the_same_typed_error_by_scan_as_by_read_events(tmp_path):
    """The fast path names the same file, offset and cause as ``read_events`` (flipped bits,
    truncation, a bad magic, an empty file)."""
    rnd = random.Random(3)
    data = (ROOT / "fixtures" / "mixed-2dn" / "dn0" / "mysql-bin.000001").read_bytes()
    copies = [data[:4 + rnd.randrange(len(data) - 4)] for _ in range(5)] + [b"", b"\xfebi", b"\xfebin" + data[4:]]
    for _ in range(25):
        bad = bytearray(data)
        bad[rnd.randrange(4, len(bad))] ^= 1 << rnd.randrange(8)
        copies.append(bytes(bad))
    errors = 0
    for i, copy in enumerate(copies):
        path = tmp_path / f"mysql-bin.{i:06d}"
        path.write_bytes(copy)
        by_scan = outcome(lambda p=path: [r for batch in BinlogFile(p).records(assembler._KINDS) for r in batch])
        by_events = outcome(lambda p=path: list(read_events(p)))
        assert by_scan == by_events, i
        errors += by_scan is not None
    assert errors >= 25


# -- frame_dml / rows_pass / passed_rows: a DML transaction in one call ------------------------------------
class _Ev:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw


class _Block:
    """A LogicalBlock (``events`` None, ``rows`` given) or a PassBlock (``events``, ``id_bytes``, ``crc``)."""

    def __init__(self, hint, table_map, rows=None, events=None, id_bytes=b"", crc=0) -> None:
        self.hint, self.table_map, self.rows = hint, table_map, rows
        self.events, self.id_bytes, self.crc = events, id_bytes, crc


def _rows_event(rnd: random.Random, type_code: int, table_id: bytes, crc: int, extra: bytes = b"\x02\x00") -> bytes:
    body = table_id + b"\x00\x00" + extra + rnd.randbytes(rnd.randrange(0, 200))
    head = rnd.randbytes(4) + bytes([type_code]) + rnd.randbytes(14)
    return head + body + (rnd.randbytes(4) if crc else b"")


def _random_txn(rnd: random.Random) -> tuple[list, list, bytes, list]:
    head = [(33, rnd.randbytes(42)), (2, rnd.randbytes(23))][rnd.randrange(2):]
    tail = [(16, rnd.randbytes(8)), (29, b"\x01CTS::" + rnd.randbytes(54), 0x80)]
    blocks = []
    for _ in range(rnd.randrange(0, 5)):
        hint = rnd.choice([None, "", "/*DRDS /10.20.0.7/bc88501a080006f-1/1// */", "/*DRDS /é/ü-1// */"])
        tm = rnd.randbytes(rnd.randrange(8, 90))
        if rnd.random() < 0.3:
            rows = [(rnd.choice([30, 31, 32, 23]), rnd.randbytes(rnd.randrange(0, 80)))
                    for _ in range(rnd.randrange(0, 3))]
            blocks.append(_Block(hint, bytearray(tm) if rnd.random() < 0.2 else tm, rows=rows))
        else:
            crc, src = rnd.choice([0, 4]), rnd.randbytes(6)
            events = [_Ev(b"tm")] + [_Ev(_rows_event(rnd, rnd.choice([30, 31, 32]), src, crc))
                                     for _ in range(rnd.randrange(0, 4))]
            blk = _Block(hint, tm, events=events, id_bytes=rnd.randbytes(6), crc=crc)
            # a PassBlock is the tuple (db, table, table_map, hint, events, id_bytes, crc)
            blocks.append(blk if rnd.random() < 0.5 else ("db", "t", tm, hint, events, blk.id_bytes, crc))
    return head, blocks, b"\n# CTS::" + rnd.randbytes(54), tail


def test_frame_dml_gives_the_same_events_compiled_and_in_pure_python_and_what_frame_gives():
    """Both ``frame_dml``s give the same bytes, and those are ``frame``'s of the transaction's events
    spelled out: the first block's ROWS_QUERY carries the hint and the CTS line (the line alone,
    without its newline, when there is no hint), a later block's only with a hint, pass-through rows
    events keep their bytes but for the new table id (their old header and CRC dropped)."""
    assert _kernel is not None
    rnd = random.Random(11)
    for _ in range(300):
        head, blocks, cts, tail = _random_txn(rnd)
        pos, ts, sid = rnd.randrange(4, 1 << 30), rnd.randrange(1 << 32), rnd.randrange(1 << 32)
        a, b, expected = bytearray(b"head"), bytearray(b"head"), bytearray(b"head")
        n = _kernel.frame_dml(a, pos, ts, sid, head, blocks, cts, tail)
        assert kernel_py.frame_dml(b, pos, ts, sid, head, blocks, cts, tail) == n
        assert a == b
        items = list(head)
        for i, blk in enumerate(blocks):
            if isinstance(blk, tuple):
                blk = _Block(blk[3], blk[2], events=blk[4], id_bytes=blk[5], crc=blk[6])
            text = (blk.hint or "").encode() + (cts if i == 0 and blk.hint else cts[1:] if i == 0 else b"")
            if text:
                items.append((29, b"\x01" + text, 0x80))
            items.append((19, bytes(blk.table_map)))
            if blk.events is None:
                items += blk.rows
            else:
                items += [(e.raw[4], blk.id_bytes + e.raw[25:len(e.raw) - blk.crc]) for e in blk.events[1:]]
        kernel_py.frame(expected, pos, ts, sid, items + tail)
        assert n == len(items) + len(tail) and a == expected


def test_rows_pass_and_passed_rows_agree_compiled_and_in_pure_python():
    """Only v2 rows events (30–32) with the table map's 6-byte id and no extra data pass."""
    assert _kernel is not None
    rnd = random.Random(13)
    src = b"\x07\x00\x00\x00\x00\x00"
    ok = [_Ev(b"tm")] + [_Ev(_rows_event(rnd, t, src, 4)) for t in (30, 31, 32)]
    bad = [_rows_event(rnd, 23, src, 4), _rows_event(rnd, 30, b"\x08" + src[1:], 4),
           _rows_event(rnd, 31, src, 4, extra=b"\x04\x00\x01\x02"), _rows_event(rnd, 32, src, 0)[:28]]
    for impl in (_kernel, kernel_py):
        assert impl.rows_pass(ok, src) is True and impl.rows_pass(ok[:1], src) is True
        assert impl.rows_pass(ok, src[:4]) is False
        for raw in bad:
            assert impl.rows_pass([*ok, _Ev(raw)], src) is False, raw
        assert impl.passed_rows(ok, b"NEWID!", 4) == [(e.raw[4], b"NEWID!" + e.raw[25:-4]) for e in ok[1:]]
        with pytest.raises(ValueError):
            impl.passed_rows([*ok, _Ev(b"x" * 26)], b"NEWID!", 4)
        with pytest.raises(ValueError):
            impl.frame_dml(bytearray(), 4, 0, 1, [], [_Block(None, b"tm", events=[*ok, _Ev(b"x" * 26)],
                                                             id_bytes=b"NEWID!", crc=4)], b"\nc", [])


# -- scan_txns: the common XA shapes in one record each (compiled only) ------------------------------
def test_scan_txns_groups_the_common_branches_and_a_group_stands_for_its_plain_records():
    """On the bank fixture nearly every branch comes as K_BRANCH + K_TSO_COMMIT, or as one K_TXN when
    its commit follows it at once, or as one K_LOCAL when its XA_PREPARE is one-phase; replaying a group gives exactly the plain records scan gives from
    its offset; a known group's branch comes with its prepared DnTxn, its blocks holding the table
    maps and rows events as read."""
    from extractor.model import Block, DnTxn, Pos, TxnKind

    path = ROOT / "fixtures" / "bank-4dn" / "dn0" / "mysql-bin.000001"
    f = BinlogFile(path)
    kinds, bquals, made, heartbeats, gcn_led = {}, {}, 0, 0, 0
    maker = kernel.Maker(Event, Block, DnTxn, Pos, path.name, "dn0", TxnKind.DML, bquals, TxnKind.HEARTBEAT)
    assert maker.heartbeat is TxnKind.HEARTBEAT

    def check_commit(payload, plain):
        assert plain[0][1].pos == payload[0] and plain[0][0] == kernel.K_GCN and plain[1][0] == kernel.Q_XA_COMMIT
        assert payload[1] == int.from_bytes(plain[0][1].raw[20:28], "little")
        end = plain[1][1].pos + plain[1][1].h[3]
        assert payload[2:] == (Pos(path.name, end), plain[1][1].raw[plain[1][2] + 9:-4].decode("latin-1").strip())

    for batch in f.records(assembler._KINDS, 8, grouped=maker):  # small batches: bquals filled between
        for k, payload, n in batch:
            kinds[k] = kinds.get(k, 0) + 1
            if k not in (kernel.K_BRANCH, kernel.K_TSO_COMMIT, kernel.K_TXN, kernel.K_LOCAL):
                continue
            plain = f.replay(payload[0], n)
            assert plain[0][1].pos == payload[0] and len(plain) == n
            if k == kernel.K_TSO_COMMIT:
                check_commit(payload, plain)
                continue
            if k == kernel.K_TXN:  # a branch and its commit right after it: the same xid
                check_commit(payload[4:] + (payload[1],), plain[-2:])
                plain = plain[:-2]
            if plain[0][0] == kernel.K_GCN:  # a commit TSO the branch's XA START makes void
                assert plain[0][1].raw[19] & 4 and k != kernel.K_TSO_COMMIT
                gcn_led += 1
                plain = plain[1:]
            prepare = plain[-1][1]
            assert plain[0][0] == kernel.Q_XA_START and prepare.h[1] == 38
            assert prepare.raw[19] == (k == kernel.K_LOCAL)  # one_phase: committed by its XA_PREPARE
            if k == kernel.K_LOCAL:
                assert payload[4] == Pos(path.name, prepare.pos + prepare.h[3])
            txn = payload[2]
            if txn is None:  # the group's first branch: the assembler files its branch key
                assert k == kernel.K_BRANCH
                bquals[xid_bqual(payload[1])] = "branch"
                continue
            made += 1
            assert (txn.xid, txn.start, txn.branch, txn.vtso, txn.end) == (payload[1], Pos(path.name, plain[0][1].pos),
                                                                            "branch", "", None)
            if txn.kind is TxnKind.HEARTBEAT:  # the heartbeat table's rows are dropped
                heartbeats += 1
                assert txn.blocks == [] and [kk for kk, _, _ in plain].count(assembler._K_TABLE_MAP) == 1
                continue
            assert [(e.pos, e.h, e.raw) for b in txn.blocks for e in b.events] == [
                (ev.pos, ev.h, ev.raw) for kk, ev, _ in plain if kk in (assembler._K_TABLE_MAP, assembler._K_ROWS)]
    # the plain ones: other system-table branches
    branches, commits = kinds[kernel.K_BRANCH] + kinds[kernel.K_TXN], kinds[kernel.K_TSO_COMMIT] + kinds[kernel.K_TXN]
    assert branches > 4 * kinds.get(kernel.Q_XA_START, 0) > 0 and made > 30 and heartbeats > 0
    assert commits > 4 * kinds.get(kernel.Q_XA_COMMIT, 1) and kinds[kernel.K_TXN] > 10 and kinds[kernel.K_BRANCH] > 10
    assert kinds[kernel.K_LOCAL] > 0 and gcn_led > 0 and kinds.get(kernel.K_GCN, 0) < gcn_led


def test_a_group_the_assembler_turns_down_is_replayed_with_the_general_rules(tmp_path):
    """A whole XA branch while a local transaction is open: scan_txns groups it, the assembler's
    state turns the group down and the replay raises what the event-by-event path raises."""
    from extractor import BytesSource, UnfinishedTransaction, extract
    from tests.test_ordering_dn_writer import DnWriter, Stmt, hint, xid_text

    w = DnWriter(tmp_path, "dn3")
    x = xid_text(1, "G")
    w.prepare(x, [Stmt("d_p00000", "t", hint=hint(1))])
    w.commit(x, 5 << 22)
    w.query("BEGIN", "d_p00000")
    w.statement(Stmt("d_p00000", "t"))
    at = w.prepare(xid_text(2, "G"), [Stmt("d_p00000", "t", hint=hint(1))])
    w.close()
    errors = []
    for source in (tmp_path / "dn3", BytesSource("dn3", [(n, (tmp_path / "dn3" / n).read_bytes())
                                                         for n in list_binlog_files(tmp_path / "dn3")])):
        with pytest.raises(UnfinishedTransaction) as ei:
            list(extract(source))
        errors.append((ei.value.offset, str(ei.value)))
    assert errors[0] == errors[1] and errors[0][0] == at


def test_a_commit_tso_left_pending_before_a_grouped_branch_raises_as_event_by_event(tmp_path):
    """A GCN with a commit TSO that no XA COMMIT follows, then a one-phase branch (which scan_txns
    hands over with its own leading GCN as one K_LOCAL): the group is turned down and replayed from
    that GCN, which raises the OrphanCommitTso the event-by-event path raises, at the same offset."""
    from extractor import BytesSource, OrphanCommitTso, extract
    from tests.test_ordering_dn_writer import GCN_COMMIT, DnWriter, Stmt, hint, xid_text

    w = DnWriter(tmp_path, "dn3")
    x = xid_text(1, "G")
    w.prepare(x, [Stmt("d_p00000", "t", hint=hint(1))])  # the group seen once: its branches are grouped
    w.commit(x, 5 << 22)
    pending = w.gcn(GCN_COMMIT, 6 << 22)
    w.one_phase(xid_text(2, "G"), [Stmt("d_p00000", "t", hint=hint(1))], tso=7 << 22)
    w.close()
    path = tmp_path / "dn3" / list_binlog_files(tmp_path / "dn3")[0]
    asm = assembler.Assembler("dn3")
    asm._bquals[xid_bqual(xid_text(2, "G"))] = "branch"
    kinds = [k for batch in BinlogFile(path).records(assembler._KINDS, 64, grouped=asm._maker(path.name))
             for k, _, _ in batch]
    assert kernel.K_LOCAL in kinds and kinds.count(kernel.K_GCN) == 1  # the pending one alone
    errors = []
    for source in (tmp_path / "dn3", BytesSource("dn3", [(n, (tmp_path / "dn3" / n).read_bytes())
                                                         for n in list_binlog_files(tmp_path / "dn3")])):
        with pytest.raises(OrphanCommitTso) as ei:
            list(extract(source))
        errors.append((ei.value.offset, str(ei.value)))
    assert errors[0] == errors[1] and errors[0][0] == pending


def _event(type_code: int, body: bytes) -> bytes:
    size = 19 + len(body) + 4
    return bytes([0] * 4 + [type_code] + [0] * 4) + size.to_bytes(4, "little") + bytes(6) + body + b"\x9c\x9c\x9c\x9c"


@settings(max_examples=3000, deadline=None)
@given(st.lists(_HINT_PARTS, max_size=7), st.sampled_from(["/ */", "/*/", " */", "/ */ UPDATE t", "", "*/", "/ */*/"]),
       st.sampled_from(["/*DRDS /", "/*DRDS  /", "/*drds /", "x/*DRDS /"]))
def test_the_compiled_hint_reader_gives_what_parse_hint_and_reduce_hint_give(fields, tail, head):
    text = head + "/".join(fields) + tail
    got = _kernel.hint_of(_event(29, b"\x00" + text.encode()), 4)
    want = trace.parse_hint(text)
    if got is not None:
        assert want is not None and got == (want[0], want[1], trace.reduce_hint(text)), text
    elif head == "/*DRDS /" and want is not None and text.isascii() and trace._CANONICAL.match(text):
        assert len(want[0]) > 40, text  # only a trace id too long for the C buffer is left to Python


@settings(max_examples=2000, deadline=None)
@given(st.integers(0, (1 << 64) - 1), st.text(alphabet="0123456789abcdefABCDEF@-drs x", max_size=24),
       st.text(alphabet="0123456789abcdef_GROUP@", max_size=12), st.sampled_from(["1", "3", "2", "1 ", " 3"]),
       st.sampled_from(["", " ", "  \t"]))
def test_the_compiled_xid_reader_gives_what_parse_gives(txn_id, gtrid_tail, group, fmt, pad):
    from extractor.xid import bqual_hex, is_valid, parse

    for gtrid in (f"drds-{txn_id:x}@{gtrid_tail}", f"drds-{gtrid_tail}"):
        text = f"X'{gtrid.encode().hex()}',X'{group.encode().hex()}',{fmt}"
        raw = _event(2, b"\x00" * 20 + b"XA START" + (pad + text + pad).encode())
        got = _kernel.xid_of(raw, 39, 4)
        if got is None:
            continue
        xid = (pad + text + pad).strip()
        x = parse(xid)
        assert is_valid(xid) and got == (xid, x.txn_id, bqual_hex(xid), x.archive), text


_KEYS = st.sampled_from(["A", "B", "C", "D", ("f", 4)])
_OPS = st.lists(st.tuples(st.sampled_from(["prewrite", "commit", "rollback", "release", "commit_tso", "commit_alone"]), _KEYS,
                          st.integers(0, 60)), max_size=40)


class _Txn:
    def __init__(self, txn_id: int) -> None:
        self.txn_id, self.vtso, self.tso = txn_id, "", None
        self.dn, self.start = "dn0", Pos("mysql-bin.000001", 4 + txn_id)    # named by TsoWentBack

    def __eq__(self, other) -> bool:
        return (self.txn_id, self.vtso, self.tso) == (other.txn_id, other.vtso, other.tso)


@settings(max_examples=1500, deadline=None)
@given(_OPS)
def test_the_compiled_sorter_follows_the_python_one(ops):
    from extractor import _sort
    from extractor.vtso import VtsoState

    a, b = _sort.Sorter(), sorter.PySorter()
    txns = {a: {}, b: {}}
    states = {a: VtsoState(), b: VtsoState()}
    for op, key, v in ops:
        if op in ("commit", "commit_tso", "rollback") and key not in b.wait and key in b.trans:
            continue  # a second end of one transaction: the assembler never does it
        results = []
        for s in (a, b):
            txn = txns[s].setdefault(key, _Txn(v))
            try:
                if op == "prewrite":
                    results.append(s.prewrite(key, txn))
                elif op == "release":
                    results.append(s.release())
                elif op == "commit_tso":
                    results.append(s.commit_tso(key, txn, v + 1, states[s]))
                elif op == "commit_alone":  # the group path: a txn prewritten, committed and released at once
                    results.append(s.commit_alone(txn, v + 1, states[s]))
                else:
                    results.append(getattr(s, op)(key, f"{v:03d}"))
            except (sorter.SorterError, TsoWentBack) as exc:
                results.append(f"{type(exc).__name__}: {exc}")
        assert results[0] == results[1] and states[a] == states[b] and txns[a] == txns[b]
        assert (a.watermark, a.heap, a.trans, a.wait, len(a)) == (b.watermark, b.heap, b.trans, b.wait, len(b))
        assert (a.open_keys(), a.oldest_open(), list(a.items)) == (b.open_keys(), b.oldest_open(), list(b.items))


@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 63) - 1))
def test_the_compiled_vtso_text_is_the_python_one(tso, txn_id):
    from extractor import _sort

    assert _sort.tso_vtso(tso, txn_id) == vtso.py_tso_vtso(tso, txn_id)


@given(st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 63) - 1), st.integers(0, (1 << 64) - 1),
       st.sampled_from(["", "000000", "123456", "x"]))
def test_the_compiled_seq_vtso_text_is_the_python_one(tso, txn_id, seq, storage):
    from extractor import _sort

    assert _sort.seq_vtso(tso, txn_id, seq, storage) == vtso.py_seq_vtso(tso, txn_id, seq, storage)


@settings(max_examples=800, deadline=None)
@given(st.binary(max_size=700), st.integers(0, 15), st.integers(0, (1 << 32) - 1))
def test_the_compiled_crc32_is_zlibs(data, skip, start):
    """The kernel's CRC-32 (folded by carry-less multiplication where the CPU has it) is zlib's, for
    every length and alignment, from a fresh or a running value; so is a whole event's residue."""
    import zlib

    assert _kernel is not None
    view = memoryview(data)        # slices of one buffer: the start address moves with skip (bytes slices are copies)
    for part in (view, view[skip:], view[:skip], view[skip % 16:]):
        assert _kernel.crc32_of(part) == zlib.crc32(part)
        assert _kernel.crc32_of(part, start) == zlib.crc32(part, start)
    big = memoryview(random.Random(len(data)).randbytes(70_000 + skip))
    assert _kernel.crc32_of(big[skip:], start) == zlib.crc32(big[skip:], start)
    event = data + zlib.crc32(data).to_bytes(4, "little")
    assert _kernel.crc32_of(event) == kernel_py.CRC_RESIDUE


def test_the_compiled_crc32_folds_on_x86_with_pclmulqdq():
    """On this machine (x86-64 with PCLMULQDQ, as CI's) the fast CRC-32 is the one in use."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " pclmulqdq" in flags and " sse4_1" in flags:
        assert _kernel.crc32_folds()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.binary(min_size=1, max_size=6), st.integers(0, 320), st.none() | st.integers(0, 320))
def test_the_compiled_find_is_bytes_find(data, needle, start, end):
    """The cluster check's byte search (gb_find.h) finds what ``bytes.find`` finds, in every window."""
    assert _kernel is not None
    data = data + needle + data[:7]
    want = data.find(needle, start, len(data) if end is None else end)
    assert _kernel.find(data, needle, start, end) == kernel_py.find(data, needle, start, end) == want


@settings(max_examples=1000, deadline=None)
@given(st.text("_ab", max_size=80), st.text("_ab", min_size=1, max_size=40), st.lists(st.integers(0, 39), max_size=12),
       st.booleans(), st.integers(0, 40), st.none() | st.integers(0, 900))
def test_the_compiled_find_is_bytes_find_among_near_misses(filler, needle_text, flips, present, start, end):
    """Copies of the needle with one byte changed (its first and last bytes often the same): the
    32-wide search (gb_find.h) must compare every candidate in full, in its blocks and its tail."""
    assert _kernel is not None
    needle = needle_text.encode()
    swap = {ord("_"): b"a", ord("a"): b"b", ord("b"): b"_"}
    pieces = [filler.encode()]
    for i in flips:
        i %= len(needle)
        pieces += [needle[:i] + swap[needle[i]] + needle[i + 1:], filler.encode()[:3]]
    if present:
        pieces.insert(len(pieces) // 2, needle)
    data = b"".join(pieces)
    want = data.find(needle, start, len(data) if end is None else end)
    assert _kernel.find(data, needle, start, end) == want


def test_the_compiled_find_is_the_avx2_one_on_this_machine():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if " avx2" in flags:
        assert _kernel.find_is_avx2()


@settings(max_examples=1000, deadline=None)
@given(st.integers(0, 10**19 - 1), st.integers(0, (1 << 63) - 1), st.sampled_from(["", " ", "x", "-1", "+"]))
def test_the_compiled_vtso_timestamp_is_the_python_one(tso, txn_id, odd):
    from extractor import _sort

    text = vtso.py_tso_vtso(tso, txn_id)
    for v in (text, f"{tso:019d}", odd + text[len(odd):], text[:5] + odd + text[5 + len(odd):]):
        try:
            want = vtso.py_vtso_timestamp(v)
        except ValueError as exc:
            with pytest.raises(ValueError, match=re.escape(str(exc))):
                _sort.vtso_timestamp(v)
            continue
        assert _sort.vtso_timestamp(v) == want
    assert vtso.vtso_timestamp is _sort.vtso_timestamp or kernel.pure_python()
