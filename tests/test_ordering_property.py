"""Property test of extractor + merger.

Random schedules of concurrent transactions as a real CN runs them: a distributed transaction
prepares its branches (k DNs, sometimes two groups on one DN) in any interleaving with other
sessions, fetches its commit TSO only after every branch prepared, then writes its commits to the
DNs in arbitrary order; 1PC and one-phase transactions and rollbacks interleave, and a heartbeat is
a TSO transaction on every DN. Files rotate at random group boundaries.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog.constants import EventType as E
from extractor import TxnKind, extract
from merger import PASSED_ALL, EndsPassing, merge
from tests.test_ordering_dn_writer import DnWriter, Stmt, xid_text

BASE_MS = 1_700_000_000_000
TXN_BASE = 0x1881C1536F400000


@dataclass
class Txn:
    tid: int
    kind: str                                # xa | heartbeat | rollback | local | onephase
    branches: list[tuple[int, str, str]]     # (dn, group, db)
    stmts: dict[int, list[Stmt]] = field(default_factory=dict)  # branch index -> statements
    actions: list[tuple] = field(default_factory=list)
    tso: int | None = None
    starts: set[tuple[str, str, int]] = field(default_factory=set)  # (dn, file, offset) per branch
    first_prepare: int | None = None
    first_commit: int | None = None
    n_stmts: int = 0

    def xid(self, b: int) -> str:
        return xid_text(self.tid, self.branches[b][1])


class Cluster:
    def __init__(self, root: Path, n_dns: int, rng: random.Random) -> None:
        self.rng = rng
        self.n = n_dns
        self.dns = [DnWriter(root, f"dn{d}") for d in range(n_dns)]
        self.clock = 0
        self.tso_k = 0
        self.commits_on: list[list[tuple[int, Txn]]] = [[] for _ in range(n_dns)]  # (time, txn)
        self.locals: list[tuple[Txn, int, int]] = []  # (txn, dn, time)

    def next_tso(self) -> int:
        self.tso_k += 1 + self.rng.randrange(3)
        return ((BASE_MS + self.tso_k) << 22) | (self.tso_k & 0xFFFF)

    def group(self, dn: int, second: bool = False) -> tuple[int, str, str]:
        p = dn + (self.n if second else 0)
        return dn, f"BANK_P{p:05d}_GROUP", f"bank_p{p:05d}"

    def new_txn(self, tid: int) -> Txn:
        r = self.rng.random()
        if r < 0.12:
            t = Txn(tid, "heartbeat", [(d, f"__CDC___{d:06d}_GROUP", f"__cdc___{d:06d}") for d in range(self.n)])
            for b, (_, _, db) in enumerate(t.branches):
                t.stmts[b] = [Stmt(db, "__cdc_heartbeat__", kind=E.UPDATE_ROWS)]
        elif r < 0.3:
            t = Txn(tid, "local" if r < 0.24 else "onephase", [self.group(self.rng.randrange(self.n),
                                                                        self.rng.random() < 0.3)])
        else:
            picks = {self.group(d, self.rng.random() < 0.25) for d in range(self.n) if self.rng.random() < 0.6}
            if not picks:
                picks = {self.group(self.rng.randrange(self.n))}
            t = Txn(tid, "rollback" if self.rng.random() < 0.15 else "xa", sorted(picks))
        if t.kind != "heartbeat":
            # Statements in CN order (trace seq 1..m), each sent to one branch (every branch gets one).
            m = len(t.branches) + self.rng.randrange(3)
            owners = list(range(len(t.branches))) + [self.rng.randrange(len(t.branches))
                                                     for _ in range(m - len(t.branches))]
            self.rng.shuffle(owners)
            for seq, b in enumerate(owners, 1):
                db = t.branches[b][2]
                h = f"/*DRDS /10.0.0.1/{tid:x}-{seq}/0// */ UPDATE accounts"
                t.stmts.setdefault(b, []).append(Stmt(db, f"accounts_{b % 3}", rows=[[seq, tid & 0xFF]], hint=h))
            t.n_stmts = m
        order = list(range(len(t.branches)))
        if t.kind in ("local", "onephase"):
            t.actions = [(t.kind, 0)]
        else:
            self.rng.shuffle(order)
            t.actions = [("prepare", b) for b in order]
            if t.kind == "rollback":
                t.actions += [("rollback", b) for b in order]
            else:
                commit_order = order[:]
                self.rng.shuffle(commit_order)
                t.actions += [("tso", None)] + [("commit", b) for b in commit_order]
        return t

    def step(self, t: Txn) -> None:
        act, b = t.actions.pop(0)
        self.clock += 1
        if b is not None:
            dn = t.branches[b][0]
            w = self.dns[dn]
            if self.rng.random() < 0.05:
                w.rotate()
            xid = t.xid(b)
        if act == "prepare":
            pos = w.prepare(xid, t.stmts[b])
            t.starts.add((f"dn{dn}", w.file, pos))
            t.first_prepare = t.first_prepare or self.clock
        elif act == "tso":
            t.tso = self.next_tso()
        elif act == "commit":
            w.commit(xid, t.tso)
            t.first_commit = t.first_commit or self.clock
            self.commits_on[dn].append((self.clock, t))
        elif act == "rollback":
            w.rollback(xid)
        elif act == "local":
            pos = w.local(t.stmts[b])
            t.starts.add((f"dn{dn}", w.file, pos))
            self.locals.append((t, dn, self.clock))
        elif act == "onephase":
            pos = w.one_phase(xid, t.stmts[b], tso=self.next_tso() if self.rng.random() < 0.5 else None)
            t.starts.add((f"dn{dn}", w.file, pos))
            self.locals.append((t, dn, self.clock))


def run_schedule(root: Path, n_dns: int, n_txns: int, rng: random.Random) -> tuple[Cluster, list[Txn]]:
    cl = Cluster(root, n_dns, rng)
    txns: list[Txn] = []
    active: list[Txn] = []
    while len(txns) < n_txns or active:
        if len(txns) < n_txns and (not active or rng.random() < 0.35):
            t = cl.new_txn(TXN_BASE + len(txns) * 7 + rng.randrange(5))
            txns.append(t)
            active.append(t)
            continue
        t = rng.choice(active)
        cl.step(t)
        if not t.actions:
            active.remove(t)
    for w in cl.dns:
        w.close()
    return cl, txns


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_dns=st.integers(1, 4), n_txns=st.integers(1, 40), rng=st.randoms(use_true_random=False))
def test_merged_order_is_global_commit_order(n_dns, n_txns, rng):
    with tempfile.TemporaryDirectory() as tmp:
        cl, txns = run_schedule(Path(tmp), n_dns, n_txns, rng)
        # every branch has ended: the DNs' whole binlogs, their ends pass everything
        out = list(merge([EndsPassing(extract(w.dir, complete=True), PASSED_ALL) for w in cl.dns]))
        # as files that may still grow, the emission rule holds what an ended DN has not passed
        held = list(merge([extract(w.dir) for w in cl.dns]))
    assert [g.vtso for g in held] == [g.vtso for g in out][:len(held)]
    lasts = [max((g.vtso for g in out if f"dn{d}" in g.dns), default="") for d in range(n_dns)]
    assert all(g.vtso <= min(lasts) for g in held)
    assert len(held) == len([g for g in out if g.vtso <= min(lasts)])

    # 1. strictly increasing vtso
    vtsos = [g.vtso for g in out]
    assert all(a < b for a, b in zip(vtsos, vtsos[1:], strict=False)), "merged vtso not strictly increasing"

    # 2. every committed txn exactly once with all its branches joined; no rolled-back txn
    by_start = {}
    for i, g in enumerate(out):
        key = frozenset((b.dn, b.start.file, b.start.offset) for b in g.branches)
        assert key not in by_start
        by_start[key] = i
    committed = [t for t in txns if t.kind != "rollback"]
    position: dict[int, int] = {}
    for t in committed:
        key = frozenset(t.starts)
        assert key in by_start, f"{t.kind} txn {t.tid:x} missing or not joined"
        position[t.tid] = by_start[key]
        g = out[position[t.tid]]
        if t.kind in ("xa", "heartbeat"):
            assert g.vtso == f"{t.tso:019d}{t.tid:019d}" + "0" * 16
        else:
            assert not g.is_tso and len(g.branches) == 1
    assert len(out) == len(committed)
    rolled = {s for t in txns if t.kind == "rollback" for s in t.starts}
    assert not any((b.dn, b.start.file, b.start.offset) in rolled for g in out for b in g.branches)

    # 3. heartbeats: one window per heartbeat, one branch per DN, never DML
    for t in committed:
        g = out[position[t.tid]]
        if t.kind == "heartbeat":
            assert g.kind is TxnKind.HEARTBEAT and g.blocks == []
            assert sorted(g.dns) == [f"dn{d}" for d in range(n_dns)]
        else:
            assert g.kind is TxnKind.DML
            assert all(b.table != "__cdc_heartbeat__" for b in g.blocks)
            # all statements, merged across branches in trace (CN statement) order
            assert [b.trace_id for b in g.blocks] == [f"{s:010d}{0:010d}" for s in range(1, t.n_stmts + 1)]

    # 4. a TSO txn comes before every TSO txn whose prepare started after its commit
    tso_txns = [t for t in committed if t.kind in ("xa", "heartbeat")]
    for a in tso_txns:
        for b in tso_txns:
            if b.first_prepare > a.first_commit:
                assert position[a.tid] < position[b.tid]

    # 5. a local txn comes right after the TSO txns that preceded it on its DN
    for loc, dn, when in cl.locals:
        before = [t for (c, t) in cl.commits_on[dn] if c < when]
        for t in before:
            assert position[t.tid] < position[loc.tid]
        max_before = max((t.tso for t in before), default=0)
        for t in tso_txns:
            if t.tso > max_before:
                assert position[loc.tid] < position[t.tid]
