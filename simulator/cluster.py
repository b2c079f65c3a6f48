"""The simulated cluster: a discrete-event scheduler over simulated time, the TSO oracle, the CN
(statement resolution to shards, row locks, MDL, 2PC), heartbeats, DDL marks and instructions.

Time is integer microseconds; the heap orders by (time, push order), so a seed gives one schedule.
Concurrency that matters for CDC is modelled explicitly:
* sessions run transactions concurrently; a txn's rows are locked until it ends, so the before
  image of a row is always the after image of the previous txn that touched it;
* 2PC: branches prepare at different times, the commit TSO is fetched only after every branch
  prepared (``fetch_commit``), and each branch's commit then reaches its DN after its own delay —
  with probability ``hole_rate`` a long one, so later TSOs commit first on that DN (holes);
* a physical DDL on a shard waits until no open branch uses that table (MDL), and statements on that
  shard queue behind it.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.node import DnNode
from simulator.state import LogicalDb, LogicalTable, PhysTable, Row
from simulator.tso import TsoOracle
from simulator.txn import PhysOp, Txn

EPOCH_US = 1_717_200_000 * 1_000_000     # 2024-06-01 00:00:00 UTC: simulated time starts here
TXN_ID_EPOCH_MS = 1_514_764_800_000      # 2018-01-01: the txn id generator's epoch
HEARTBEAT_US = 200_000                   # CN TsoHeartbeatTimer default


@dataclass(slots=True)
class SimConfig:
    workload: str
    dns: int
    txns: int
    seed: int
    hole_rate: float = 0.3
    sessions: int = 8
    tps: int = 400                # simulated client txns per second (think time between txns)
    consensus: bool = True
    max_file_size: int = 1 << 20
    truth: bool = True


@dataclass(slots=True)
class Plan:
    """A logical transaction a workload wants to run.

    ``ops``: (kind, table, payload) with kind insert (payload: rows as dicts), update (payload: list
    of (pk, {column: value})), delete (payload: list of pks). ``mode``: xa (the CN picks 2PC or
    one-phase XA), local (1PC BEGIN…XID when one group, else xa), autocommit (one statement)."""

    ops: list[tuple[str, LogicalTable, list[Any]]]
    mode: str = "xa"
    rollback: bool = False
    hint_server: str = ""
    two_read_views: bool = False
    one_phase_rate: float = 0.5


class Session:
    __slots__ = ("id", "done")

    def __init__(self, sid: int) -> None:
        self.id = sid
        self.done = False


class Cluster:
    """The whole simulated cluster; ``run()`` processes scheduled actions in time order."""

    def __init__(self, cfg: SimConfig, out_dir: Path) -> None:
        self.cfg = cfg
        self.out_dir = out_dir
        self.rng = random.Random(cfg.seed)
        self._random = self.rng.random
        self.now = EPOCH_US
        self._heap: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._order = itertools.count()
        self.oracle = TsoOracle()
        self.dns: list[DnNode] = []
        self.cdc_dns: list[DnNode] = []       # DNs the broadcast __cdc__ txns reach
        self.dbs: dict[str, LogicalDb] = {}
        self.tables: dict[tuple[str, str], LogicalTable] = {}
        self.locks: set[Any] = set()
        self.records: list[Txn] = []          # finished txns for the truth (committed ones)
        self.rollbacks: list[Txn] = []
        self.committed = 0                     # counts, kept also when the truth is off
        self.rolled_back = 0
        self.txn_counter = 0
        self.table_uid = 0
        self.started = 0                       # workload txns started
        self.done = 0                          # workload txns finished
        self.inflight = 0
        self.jobs_running = 0
        self.sessions: list[Session] = []
        self.finished = False
        self.heartbeats_on = True
        self.workload: Any = None
        self.ddl_record_id = 0
        self.job_seq = 0
        self.instruction_id = 0
        self.storage_seqs: set[str] = set()
        self.bank_accounts = 0

    # -- scheduler ----------------------------------------------------------------------------------
    def at(self, when: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._heap, (when, next(self._order), fn, args))

    def randint(self, lo: int, hi: int) -> int:
        """Uniform in [lo, hi]; ``random.randint`` costs 2 µs a call on this hot path."""
        return lo + int(self._random() * (hi - lo + 1))

    def after(self, delay_us: int, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay_us, fn, *args)

    def run(self) -> None:
        heap = self._heap
        pop = heapq.heappop
        while heap:
            when, _, fn, args = pop(heap)
            self.now = when
            fn(*args)

    def new_txn_id(self) -> int:
        """CN txn ids as PolarDB-X's snowflake-like generator makes them: milliseconds since its epoch
        << 22 | a sequence (15-16 hex digits, never equal to a TSO)."""
        self.txn_counter += 1
        return ((self.now // 1000 - TXN_ID_EPOCH_MS) << 22) | (self.txn_counter & 0x3FFFFF)

    # -- DNs ----------------------------------------------------------------------------------------
    def add_dn(self) -> DnNode:
        node = DnNode(len(self.dns), self.out_dir, self.rng, consensus=self.cfg.consensus,
                      max_file_size=self.cfg.max_file_size, now_us=self.now,
                      record_writes=self.cfg.truth, taken=self.storage_seqs)
        self.dns.append(node)
        from simulator.ddl import create_cdc_tables
        create_cdc_tables(self, node)
        return node

    # -- sessions -----------------------------------------------------------------------------------
    def start_sessions(self) -> None:
        for i in range(self.cfg.sessions):
            s = Session(i + 1)
            self.sessions.append(s)
            self.after(self.randint(0, 2000), self.session_next, s)

    def think_us(self) -> int:
        mean = self.cfg.sessions * 1_000_000 // max(1, self.cfg.tps)
        return self.randint(0, 2 * mean)

    def session_next(self, s: Session) -> None:
        if self.started >= self.cfg.txns:
            s.done = True
            self.maybe_finish()
            return
        plan = self.workload.next_plan(self, self.rng)
        if plan is None:
            self.after(1000, self.session_next, s)
            return
        txn = self.execute(plan, s)
        if txn is None:                       # a lock or a pending DDL is in the way: retry soon
            self.after(self.randint(100, 600), self.session_next, s)
            return
        self.started += 1
        txn.on_done = self._session_txn_done

    def _session_txn_done(self, txn: Txn) -> None:
        self.done += 1
        self.workload.on_progress(self)
        self.after(self.think_us(), self.session_next, txn.session)

    def maybe_finish(self) -> None:
        if self.finished or self.inflight or self.jobs_running:
            return
        if not self.sessions or not all(s.done for s in self.sessions) \
                or self.workload.has_pending_jobs():
            return
        self.finished = True
        # One last heartbeat after everything: its window covers the last transactions.
        self.heartbeats_on = False
        self.heartbeat(final=True)

    # -- CN: statement resolution -----------------------------------------------------------------
    def phys(self, table: LogicalTable, shard_index: int) -> PhysTable:
        sh = table.shards[shard_index]
        return self.dns[sh.dn].tables[(sh.db, sh.table)]

    def _op_for(self, by_shard: dict[tuple[int, str], PhysOp], table: LogicalTable, seq: int,
                shard: int, what: str) -> PhysOp:
        """The statement's physical SQL on ``shard`` (one per shard and kind; phySqlId = order of
        first use). Workload statements that move rows touch one row, so a move's delete always
        gets the lower trace id."""
        key = (shard, what)
        op = by_shard.get(key)
        if op is None:
            sh = table.shards[shard]
            pt = self.dns[sh.dn].tables[(sh.db, sh.table)]
            op = by_shard[key] = PhysOp(seq, len(by_shard) + 1, sh, pt, what, table, table.db.name,
                                        table.name)
        return op

    def resolve(self, plan: Plan) -> tuple[list[PhysOp], list[Any]] | None:
        """Logical statements → physical statements with full before/after images, seeing the txn's
        own earlier writes; None when a row lock or a pending DDL blocks it."""
        overlay: dict[Any, tuple[int, Row | None]] = {}
        ops: list[PhysOp] = []
        locks: list[Any] = []
        held = self.locks
        op_for = self._op_for
        for seq, (kind, table, payload) in enumerate(plan.ops, start=1):
            by_shard: dict[tuple[int, str], PhysOp] = {}
            uid = table.uid
            for item in payload:
                if kind == "insert":
                    pk = item[table.schema.pk]
                    key = (uid, pk)
                    if key in held:
                        return None
                    shard = table.shard_for(item)
                    op = op_for(by_shard, table, seq, shard, "insert")
                    row = op.pt.conform(item)
                    op.rows.append(row)
                    overlay[key] = (shard, row)
                    locks.append(key)
                    continue
                pk = item[0] if kind == "update" else item
                key = (uid, pk)
                if key in overlay:
                    shard, before = overlay[key]
                else:
                    if key in held:
                        return None
                    shard = table.location[pk]
                    before = self.phys(table, shard).rows[pk]
                    locks.append(key)
                if before is None:
                    raise RuntimeError(f"{table.full_name}: row {pk} used after its delete")
                if kind == "delete":
                    op_for(by_shard, table, seq, shard, "delete").rows.append(before)
                    overlay[key] = (shard, None)
                    continue
                changes = item[1]
                merged = {**before, **changes}
                target = table.shard_for(merged) if table.shard_key in changes else shard
                if target == shard:
                    op = op_for(by_shard, table, seq, shard, "update")
                    after = op.pt.conform(merged)
                    op.rows.append((before, after))
                    overlay[key] = (shard, after)
                else:
                    # A shard-key change: the CN deletes on the old shard and inserts on the new one,
                    # in one txn, the delete's trace id first (the ``drift`` workload).
                    d = op_for(by_shard, table, seq, shard, "delete")
                    d.rows.append(before)
                    d.move = True
                    i = op_for(by_shard, table, seq, target, "insert")
                    row = i.pt.conform(merged)
                    i.rows.append(row)
                    i.move = True
                    overlay[key] = (target, row)
            ops.extend(by_shard.values())
        for op in ops:
            if op.pt.ddl_pending:
                return None
        return ops, locks

    def execute(self, plan: Plan, session: Session) -> Txn | None:
        resolved = self.resolve(plan)
        if resolved is None:
            return None
        ops, locks = resolved
        if not ops:
            raise RuntimeError("a plan with no rows")
        first = ops[0].shard
        txn = Txn(self.new_txn_id(), "dml", session, first.group)
        txn.ops = ops
        txn.locks = locks
        txn.rollback = plan.rollback
        txn.hint_server = plan.hint_server
        self.locks.update(locks)
        for n, op in enumerate(ops):
            rv = n % 2 if plan.two_read_views and op.shard.group == first.group else 0
            br = txn.branch(self.dns[op.shard.dn], op.shard.group, op.shard.db, rv)
            br.ops.append(op)
            if op.pt not in br.tables:
                br.tables.append(op.pt)
                op.pt.open_branches += 1
        if not plan.rollback:
            self.apply_ops(ops)
        single = len(txn.branches) == 1
        if single and not plan.rollback and plan.mode in ("local", "autocommit"):
            txn.mode = "local"
        elif single and not plan.rollback and self._random() < plan.one_phase_rate:
            txn.mode = "one_phase"
        exec_us = sum(self.randint(150, 500) for _ in plan.ops)
        self.launch(txn, exec_us)
        return txn

    def apply_ops(self, ops: list[PhysOp]) -> None:
        """Make the statements' effects the current state (rows stay locked until the txn ends)."""
        for op in ops:
            rows = op.pt.rows
            table = op.table
            pk_name = table.schema.pk
            if op.kind == "insert":
                for row in op.rows:
                    pk = row[pk_name]
                    rows[pk] = row
                    if pk not in table.location:
                        table.keys.add(pk)
                    table.location[pk] = op.shard.index
            elif op.kind == "update":
                for _, after in op.rows:
                    rows[after[pk_name]] = after
            else:
                for row in op.rows:
                    pk = row[pk_name]
                    del rows[pk]
                    if not op.move:
                        table.keys.remove(pk)
                        del table.location[pk]

    # -- 2PC and local commit -----------------------------------------------------------------------
    def launch(self, txn: Txn, exec_us: int) -> None:
        """Schedule the txn's binlog writes: prepares then commits, or one local commit group."""
        self.inflight += 1
        txn.pending = len(txn.branches)
        if txn.mode in ("local", "one_phase"):
            (br,) = txn.branches.values()
            self.after(exec_us + self.randint(50, 400), self.commit_single, txn, br)
            return
        txn.snapshot_tso = self.oracle.next(self.now)
        txn.info["prepared"] = 0
        for br in txn.branches.values():
            self.after(exec_us + self.randint(50, 400), self.prepare_branch, txn, br)

    def prepare_branch(self, txn: Txn, br: Any) -> None:
        br.dn.write_prepare(txn, br, self.now)
        txn.info["prepared"] += 1
        if txn.info["prepared"] == len(txn.branches):
            self.after(self.randint(100, 300), self.fetch_commit, txn)

    def commit_delay(self) -> int:
        """Network delay of a commit to one DN: fixed, or with probability hole_rate a long one —
        commits of later TSOs then overtake it on that DN."""
        if self._random() < self.cfg.hole_rate:
            return 200 + self.randint(1_000, 12_000)
        return 200

    def fetch_commit(self, txn: Txn) -> None:
        """All branches prepared: the CN fetches the commit TSO now (or decides to roll back)."""
        if txn.rollback:
            for br in txn.branches.values():
                self.after(self.commit_delay(), self.rollback_branch, txn, br)
            return
        txn.commit_tso = self.oracle.next(self.now)
        for br in txn.branches.values():
            self.after(self.commit_delay(), self.commit_branch, txn, br)

    def commit_branch(self, txn: Txn, br: Any) -> None:
        txn.vtso = br.dn.write_commit(txn, br, self.now)
        self.branch_done(txn, br)

    def rollback_branch(self, txn: Txn, br: Any) -> None:
        txn.dn_vtsos[br.dn.id] = br.dn.write_rollback(txn, br, self.now)
        self.branch_done(txn, br)

    def commit_single(self, txn: Txn, br: Any) -> None:
        if txn.mode == "one_phase":
            txn.commit_tso = self.oracle.next(self.now)
            txn.vtso = br.dn.write_one_phase(txn, br, self.now)
        else:
            txn.vtso = br.dn.write_local(txn, br, self.now)
        self.branch_done(txn, br)

    def branch_done(self, txn: Txn, br: Any) -> None:
        for pt in br.tables:
            pt.open_branches -= 1
        txn.pending -= 1
        if txn.pending:
            return
        self.locks.difference_update(txn.locks)
        self.inflight -= 1
        # Without a truth to build, finished txns are dropped: memory stays flat on big runs.
        if txn.rollback:
            self.rolled_back += 1
            if self.cfg.truth:
                self.rollbacks.append(txn)
        else:
            self.committed += 1
            if self.cfg.truth:
                self.records.append(txn)
        if txn.on_done is not None:
            txn.on_done(txn)
        self.maybe_finish()

    # -- broadcast system txns (heartbeat, DDL mark, instruction) ----------------------------------
    def system_txn(self, kind: str, table: str, rows_for: Callable[[DnNode, PhysTable], PhysOp],
                   dns: list[DnNode], on_done: Callable[[Txn], None] | None) -> Txn:
        """A TSO XA txn with one branch per DN on the broadcast ``__cdc__`` schema."""
        from simulator.naming import cdc_group, cdc_phys_db
        txn = Txn(self.new_txn_id(), kind, "cdc", cdc_group(dns[0].index))
        for node in dns:
            db = cdc_phys_db(node.index)
            pt = node.tables[(db, table)]
            op = rows_for(node, pt)
            br = txn.branch(node, cdc_group(node.index), db)
            br.ops.append(op)
            br.tables.append(pt)
            pt.open_branches += 1
            txn.ops.append(op)
        txn.on_done = on_done
        self.launch(txn, self.randint(100, 300))
        return txn

    def heartbeat(self, final: bool = False) -> None:
        """``replace into __cdc_heartbeat__(id, sname, gmt_modified) values(1, 'heartbeat', now)`` on
        every DN, every 200 ms of simulated time (CN ``TsoHeartbeatTimer``)."""
        from simulator.ddl import heartbeat_op
        if not self.cdc_dns or (not final and not self.heartbeats_on):
            return
        self.system_txn("heartbeat", "__cdc_heartbeat__", lambda node, pt: heartbeat_op(self, pt),
                        list(self.cdc_dns), None)
        if self.heartbeats_on and not final:
            self.after(HEARTBEAT_US, self.heartbeat)
