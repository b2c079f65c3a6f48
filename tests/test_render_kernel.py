"""The after-extraction hot path in one kernel call: a global transaction
that passes through shaped and framed at once (``kernel.frame_pass_txn``), or in two calls, its
blocks (``kernel.pass_blocks``) then its events from its vtso (``kernel.frame_dml_txn``), give the
same results compiled and in pure Python, and the same files as the general path block by block,
on every fixture."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from binlog import kernel, kernel_py
from gbinlog.local_engine import Settings, build
from schema_shaper.model import PassBlock
from schema_shaper.rows import PASS, RESHAPE

try:
    from binlog import _kernel
except ImportError:  # test_kernel.py says why it must be there
    _kernel = None

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))
IMPLS = [kernel_py] + ([_kernel] if _kernel is not None else [])


class _Ev:
    def __init__(self, raw: bytes, checksum: bool = True) -> None:
        self.raw, self.ctx = raw, SimpleNamespace(checksum=checksum)


def _event(rnd: random.Random, type_code: int, body: bytes, crc: bool) -> bytes:
    return rnd.randbytes(4) + bytes([type_code]) + rnd.randbytes(14) + body + (rnd.randbytes(4) if crc else b"")


def _random_blocks(rnd: random.Random, plans: dict) -> tuple[list, list | None]:
    """Blocks over a few tables, and what ``pass_blocks`` must give for them (None: one does not pass)."""
    blocks, expected = [], []
    for _ in range(rnd.randrange(0, 4)):
        crc = rnd.random() < 0.8
        body = rnd.choice(list(plans))
        plan = plans[body]
        tid = plan.src_id if rnd.random() < 0.9 else rnd.randbytes(6)
        kinds = [rnd.choice([30, 31, 32]) if rnd.random() < 0.95 else rnd.choice([23, 24, 25])
                 for _ in range(rnd.randrange(0, 4))]
        extra = b"\x02\x00" if rnd.random() < 0.95 else b"\x04\x00\x01\x02"
        rows = [_event(rnd, t, tid + b"\x00\x00" + extra + rnd.randbytes(rnd.randrange(0, 60)), crc) for t in kinds]
        unknown = rnd.random() < 0.05
        tm = _Ev(_event(rnd, 19, rnd.randbytes(12) if unknown else body, crc), crc)
        events = [tm] + [_Ev(r, crc) for r in rows]
        hint = rnd.choice([None, "", "/*DRDS /10.0.0.7/bc88-1/1// */"])
        blocks.append(SimpleNamespace(events=events, hint=hint))
        passes = (not unknown and plan.kind == PASS and len(plan.src_id) == 6
                  and all(r[4] in (30, 31, 32) and r[19:25] == plan.src_id and r[27:29] == b"\x02\x00" for r in rows))
        if expected is not None:
            expected = [*expected, (plan.db, plan.table, plan.table_map, hint, events, plan.id_bytes,
                                    4 if crc else 0)] if passes else None
    return blocks, expected


def test_pass_blocks_gives_a_pass_block_per_block_when_every_table_passes_else_none():
    rnd = random.Random(23)
    plans = {}
    for i in range(4):
        kind = PASS if i < 3 else RESHAPE
        src = rnd.randbytes(6) if i else b""        # a short-id table map: rows never pass as read
        plans[rnd.randbytes(30 + i)] = SimpleNamespace(kind=kind, db=f"db{i}", table=f"t{i}", table_map=rnd.randbytes(40),
                                                        id_bytes=rnd.randbytes(6), src_id=src)
    seen = {True: 0, False: 0}
    for _ in range(500):
        blocks, expected = _random_blocks(rnd, plans)
        for impl in IMPLS:
            got = impl.pass_blocks(blocks, plans, PASS, PassBlock)
            if expected is None:
                assert got is None
            else:
                assert [type(b) for b in got] == [PassBlock] * len(expected)
                assert [tuple(b) for b in got] == expected
        seen[expected is None] += 1
    assert seen[True] > 50 and seen[False] > 50


@pytest.mark.parametrize("archive", [False, True])
def test_frame_dml_txn_writes_the_cts_line_the_xid_hash_and_the_marker_of_the_vtso(archive):
    """The XID is ``crc32(vtso) << 31 ^ adler32(vtso)`` (63 bits, the same in every engine), the
    first hint ends with ``\\n# CTS::<vtso>`` (``::ARCHIVE`` for an archive transaction), the
    marker is ``\\x01CTS::<vtso>``: both kernels give ``frame_dml``'s bytes with those."""
    rnd = random.Random(29 + archive)
    plans = {rnd.randbytes(30): SimpleNamespace(kind=PASS, db="d", table="t", table_map=rnd.randbytes(40),
                                                id_bytes=rnd.randbytes(6), src_id=rnd.randbytes(6))}
    for _ in range(200):
        blocks, _ = _random_blocks(rnd, plans)
        blocks = kernel_py.pass_blocks(blocks, plans, PASS, PassBlock) or []
        vtso = "".join(rnd.choice("0123456789") for _ in range(54))
        v = vtso.encode()
        head = [(33, rnd.randbytes(42)), (2, b"\0" * 13 + b"\0BEGIN", 8)][rnd.randrange(2):]
        pos, ts, sid = rnd.randrange(4, 1 << 30), rnd.randrange(1 << 32), rnd.randrange(1 << 32)
        expected = bytearray(b"x")
        xid = (zlib.crc32(v) << 31) ^ zlib.adler32(v)
        assert xid < 1 << 63
        n = kernel_py.frame_dml(expected, pos, ts, sid, head, blocks, b"\n# CTS::" + v + b"::ARCHIVE" * archive,
                                [(16, xid.to_bytes(8, "little")), (29, b"\x01CTS::" + v, 0x80)])
        for impl in IMPLS:
            out = bytearray(b"x")
            assert impl.frame_dml_txn(out, pos, ts, sid, head, blocks, vtso, archive) == n
            assert out == expected
        assert kernel_py.xid_of(vtso) == xid and kernel_py.cts_marker(vtso) == b"\x01CTS::" + v


def test_frame_pass_txn_is_pass_blocks_then_frame_dml_txn_with_the_branches_server_id_and_archive_flag():
    """One call: the blocks pass (else -1 and nothing written, also for a transaction with no block),
    the server id is the first branch's that has one (else the default), archive when any branch is."""
    rnd = random.Random(31)
    plans = {rnd.randbytes(30): SimpleNamespace(kind=PASS, db="d", table="t", table_map=rnd.randbytes(40),
                                                id_bytes=rnd.randbytes(6), src_id=rnd.randbytes(6))}
    outcomes = {"written": 0, "refused": 0}
    for _ in range(300):
        blocks, expected = _random_blocks(rnd, plans)
        branches = [SimpleNamespace(server_id=rnd.choice([None, None, rnd.randrange(1 << 32)]),
                                    archive=rnd.random() < 0.2) for _ in range(rnd.randrange(1, 4))]
        vtso = "".join(rnd.choice("0123456789") for _ in range(54))
        head = [(2, b"\0" * 13 + b"\0BEGIN", 8)]
        pos, ts, default = rnd.randrange(4, 1 << 30), rnd.randrange(1 << 32), rnd.randrange(1 << 32)
        want = bytearray(b"x")
        if expected:
            sid = next((b.server_id for b in branches if b.server_id is not None), default)
            n = kernel_py.frame_dml_txn(want, pos, ts, sid, head, expected, vtso, any(b.archive for b in branches))
        else:
            n = -1
        for impl in IMPLS:
            out = bytearray(b"x")
            assert impl.frame_pass_txn(out, pos, ts, default, head, blocks, branches, vtso, plans, PASS) == n
            assert out == want
        outcomes["written" if expected else "refused"] += 1
    assert min(outcomes.values()) > 50


def output(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name.startswith("binlog.")}


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_builds_are_byte_identical_compiled_in_pure_python_and_block_by_block(name, tmp_path, monkeypatch):
    """The one-call paths (compiled), their pure-Python twins, and the general path (the shaper block
    by block, ``frame_dml`` with the markers made in Python) write the same files."""
    assert _kernel is not None
    dirs = sorted(p for p in (ROOT / "fixtures" / name).iterdir() if p.is_dir() and p.name.startswith("dn"))
    settings = Settings(max_file_size=256 << 10)
    fused = []

    def counted(*args):
        fused.append(kernel.frame_pass_txn.__wrapped__(*args))
        return fused[-1]
    counted.__wrapped__ = _kernel.frame_pass_txn
    with monkeypatch.context() as m:
        m.setattr(kernel, "frame_pass_txn", counted)
        build(dirs, tmp_path / "compiled", settings=settings)
    # DML transactions took the one-call path (not those in a DDL window: their rows are reshaped)
    assert sum(n > 0 for n in fused) > 20
    with monkeypatch.context() as m:
        for name in ("pass_blocks", "frame_dml_txn", "frame_pass_txn"):
            m.setattr(kernel, name, getattr(kernel_py, name))
        build(dirs, tmp_path / "pure", settings=settings)
    with monkeypatch.context() as m:    # shaped into a LogicalTxn, then written
        m.setattr(kernel, "frame_pass_txn", lambda *a: -1)
        build(dirs, tmp_path / "shaped", settings=settings)
    with monkeypatch.context() as m:
        m.setattr(kernel, "frame_pass_txn", lambda *a: -1)
        m.setattr(kernel, "pass_blocks", lambda *a: None)

        def general(out, pos, ts, sid, head, blocks, vtso, archive):
            tail = [(16, kernel_py.xid_of(vtso).to_bytes(8, "little")), (29, kernel_py.cts_marker(vtso), 0x80)]
            return kernel.frame_dml(out, pos, ts, sid, head, blocks, kernel_py.cts_line(vtso, archive), tail)
        m.setattr(kernel, "frame_dml_txn", general)
        build(dirs, tmp_path / "general", settings=settings)
    compiled = output(tmp_path / "compiled")
    assert compiled and sum(map(len, compiled.values())) > 50_000
    assert output(tmp_path / "pure") == compiled
    assert output(tmp_path / "shaped") == compiled
    assert output(tmp_path / "general") == compiled


def test_by_trace_is_the_stable_merge_of_the_branches_blocks_by_trace_id():
    """Both kernels: every branch's blocks in one list, stably ordered by trace id (the earlier
    branch first on ties), and whether two neighbours share an id; small and big transactions."""
    rnd = random.Random(41)
    for _ in range(1500):
        branches = []
        for b in range(rnd.randrange(1, 4)):
            ids = sorted(f"{rnd.randrange(0, 30):020d}" for _ in range(rnd.randrange(0, 12 if rnd.random() < 0.9 else 40)))
            branches.append(SimpleNamespace(blocks=[SimpleNamespace(trace_id=t, at=(b, i)) for i, t in enumerate(ids)]))
        every = [blk for br in branches for blk in br.blocks]
        want = sorted(every, key=lambda blk: (blk.trace_id, blk.at))
        repeated = any(x.trace_id == y.trace_id for x, y in zip(want, want[1:], strict=False))
        for impl in IMPLS:
            for seq in (branches, tuple(branches)):
                merged, flag = impl.by_trace(seq)
                assert merged == want and flag is repeated
                assert all(merged is not br.blocks for br in branches)


def test_route_pass_txn_routes_the_passed_blocks_by_the_known_streams():
    """``pass_blocks``' tuples with each block's stream from ``known`` — one int when they all go
    to one stream, a list when several, None when a table is not known — and the branches' server
    id and archive flag; None when the transaction does not pass. Both kernels alike."""
    rnd = random.Random(37)
    plans = {rnd.randbytes(30 + i): SimpleNamespace(kind=PASS, db=f"db{i % 2}", table=f"t{i}",
                                                    table_map=rnd.randbytes(40), id_bytes=rnd.randbytes(6),
                                                    src_id=rnd.randbytes(6)) for i in range(3)}
    seen = {"one": 0, "several": 0, "unknown": 0, "refused": 0}
    for _ in range(400):
        blocks, expected = _random_blocks(rnd, plans)
        branches = [SimpleNamespace(server_id=rnd.choice([None, rnd.randrange(1 << 32)]), archive=rnd.random() < 0.2)
                    for _ in range(rnd.randrange(1, 4))]
        by_db = rnd.random() < 0.5
        known = {((p.db, "") if by_db else (p.db, p.table)): rnd.randrange(3) for p in plans.values()
                 if rnd.random() < 0.8}
        if not expected:
            want = None
            seen["refused"] += 1
        else:
            each = [known.get((b[0], "") if by_db else (b[0], b[1])) for b in expected]
            streams = None if None in each else each[0] if len(set(each)) == 1 else each
            seen["unknown" if streams is None else "one" if type(streams) is int else "several"] += 1
            sid = next((b.server_id for b in branches if b.server_id is not None), None)
            want = (expected, streams, sid, any(b.archive for b in branches))
        for impl in IMPLS:
            assert impl.route_pass_txn(blocks, branches, plans, PASS, known, by_db) == want
    assert min(seen.values()) > 20, seen
