"""Scale-out and scale-in as PolarDB-X runs them: groups move between DNs, and a ``StorageInstChange``
instruction tells CDC the new storage list.

A group (one physical database: one shard of every table of a logical database) moves from DN
``source`` to DN ``target``:

1. **prepare** — the target gets the physical database and a copy of every table of the group
   (physical DDL on the target, the tables as the source has them now);
2. **switch** — new statements on the group's tables queue (as behind a physical DDL's MDL) until
   no open branch uses them; the rows are copied to the target by a backfill that CDC must not
   output: one-phase XA transactions with format id 4 (``IGNORE_BINLOG``), which
   the extractor drops entirely; then the shard points at the target and the queue drains there;
3. **cleanup** — the source drops its copy (physical DDL; only on a DN that stays).

Scale-out (``scale_out``): a new DN is added (its ``__cdc__`` copy), the groups that move to it are
prepared there *before* the instruction that adds it — physical DDL from before its join, which
the shaper must still see — then the instruction (on every DN, the new one included), then the
switch and the cleanup on the source. Scale-in (``scale_in``): every group of the leaving DN moves
to the remaining DNs, then the instruction (on every DN, the leaving one included: its branch is
its last transaction for CDC) lists the remaining DNs; heartbeats and DDL marks no longer reach it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from simulator.ddl import INSTRUCTION_TABLE, _insert_op, _json, sim_datetime
from simulator.schema import TABLE_COLLATION, quote_ident
from simulator.state import LogicalDb, LogicalTable, PhysTable, Shard
from simulator.txn import PhysOp

IGNORE_BINLOG = 4           # TransactionAttribute.FormatId.IGNORE_BINLOG: CDC ignores the txn
BACKFILL_ROWS = 200         # rows per backfill transaction
MDL_RETRY_US = 200


class GroupMove:
    """One group (logical db ``db``, shard ``index``) moving from ``source`` to ``target``."""

    def __init__(self, cl: Any, db: LogicalDb, index: int, target: Any) -> None:
        self.cl = cl
        self.db = db
        self.index = index
        dn, self.group, self.pdb = db.shards[index]
        self.source = cl.dns[dn]
        self.target = target
        self.tables: list[tuple[LogicalTable, PhysTable, PhysTable]] = []

    def prepare(self) -> None:
        """The physical database and a copy of every table of the group on the target."""
        cl, target, pdb = self.cl, self.target, self.pdb
        target.write_ddl("", f"CREATE DATABASE IF NOT EXISTS {quote_ident(pdb)} CHARACTER SET utf8mb4 "
                         f"COLLATE {TABLE_COLLATION}", cl.now)
        for table in sorted((t for t in cl.tables.values() if t.db is self.db), key=lambda t: t.name):
            sh = table.shards[self.index]
            src = self.source.tables[(sh.db, sh.table)]
            target.write_ddl(pdb, src.schema.create_sql(src.name), cl.now)
            copy = PhysTable(pdb, src.name, src.schema.copy(), target.new_table_id())
            target.tables[(pdb, src.name)] = copy
            self.tables.append((table, src, copy))

    def switch(self, then: Callable[[], None], *, drop_source: bool) -> None:
        """Wait until no open branch uses the group's tables (new statements queue), backfill, and
        point the shards at the target; then ``then()``."""
        for _, src, _ in self.tables:
            src.ddl_pending = True
        if any(src.open_branches for _, src, _ in self.tables):
            self.cl.after(MDL_RETRY_US, lambda: self.switch(then, drop_source=drop_source))
            return
        cl = self.cl
        for table, src, copy in self.tables:
            self._backfill(src, copy)
            copy.rows = dict(src.rows)
            old = table.shards[self.index]
            table.shards[self.index] = Shard(old.index, self.target.index, old.db, old.group, old.table)
            del self.source.tables[(src.db, src.name)]
            src.ddl_pending = False
        self.db.shards[self.index] = (self.target.index, self.group, self.pdb)
        if drop_source:
            for _, src, _ in self.tables:
                self.source.write_ddl(self.pdb, f"DROP TABLE IF EXISTS {quote_ident(src.name)}", cl.now)
            self.source.write_ddl("", f"DROP DATABASE IF EXISTS {quote_ident(self.pdb)}", cl.now)
        then()

    def _backfill(self, src: PhysTable, copy: PhysTable) -> None:
        """The source's rows into the target's copy, as transactions CDC ignores (format id 4)."""
        rows = [src.rows[pk] for pk in sorted(src.rows)]
        for start in range(0, len(rows), BACKFILL_ROWS):
            op = PhysOp(1, 1, Shard(self.index, self.target.index, self.pdb, self.group, copy.name), copy,
                        "insert", None, self.db.name, "")
            op.rows = [copy.conform(r) for r in rows[start:start + BACKFILL_ROWS]]
            self.target.write_ignored(op, self.cl.new_txn_id(), self.group, IGNORE_BINLOG,
                                      self.cl.oracle.next(self.cl.now), self.cl.now)


def _instruction(cl: Any, dns: list[Any], listed: list[Any], done: Callable[[Any], None]) -> Any:
    """A ``StorageInstChange`` instruction on ``dns`` whose content lists ``listed``."""
    cl.instruction_id += 1
    content = {"storageInstList": sorted(n.id for n in listed)}
    row = {"ID": cl.instruction_id, "INSTRUCTION_TYPE": b"StorageInstChange",
           "INSTRUCTION_CONTENT": _json(content), "GMT_CREATED": sim_datetime(cl.now, aware=True),
           "INSTRUCTION_ID": str(uuid.UUID(int=cl.rng.getrandbits(128), version=4)).encode(),
           "CLUSTER_ID": b"0"}
    txn = cl.system_txn("instruction", INSTRUCTION_TABLE, _insert_op(cl, INSTRUCTION_TABLE, row), dns, done)
    return txn, content, row["INSTRUCTION_ID"].decode()


def _then_all(moves: list[GroupMove], then: Callable[[], None], *, drop_source: bool) -> None:
    """Switch the moves one after another, then ``then()``."""
    if not moves:
        then()
        return
    moves[0].switch(lambda: _then_all(moves[1:], then, drop_source=drop_source), drop_source=drop_source)


def scale_out(cl: Any, then: Callable[[], None], move: list[tuple[LogicalDb, int]] = ()) -> Any:
    """A new DN joins: its ``__cdc__`` copy, the groups ``move`` prepared on it, the
    ``StorageInstChange`` instruction on every DN (the new one included), then the groups switch to
    it and their old copies are dropped; heartbeats then include it."""
    cl.jobs_running += 1
    node = cl.add_dn()
    moves = [GroupMove(cl, db, i, node) for db, i in move]
    for m in moves:
        m.prepare()
    dns = list(cl.cdc_dns) + [node]

    def finish() -> None:
        cl.jobs_running -= 1
        then()
        cl.maybe_finish()

    def done(txn: Any) -> None:
        cl.cdc_dns.append(node)
        _then_all(moves, finish, drop_source=True)
    txn, content, iid = _instruction(cl, dns, dns, done)
    txn.info["instruction"] = {"type": "StorageInstChange", "content": content, "id": iid, "new_dn": node.id}
    return node


def scale_in(cl: Any, leaving: Any, then: Callable[[], None]) -> None:
    """DN ``leaving`` leaves: each of its groups moves to one of the other DNs (in turn), then the
    ``StorageInstChange`` instruction (on every DN, ``leaving`` included) lists the others; from
    its commit on, broadcast transactions no longer reach it."""
    cl.jobs_running += 1
    stay = [n for n in cl.cdc_dns if n is not leaving]
    groups = [(db, i) for db in sorted(cl.dbs.values(), key=lambda d: d.name)
              for i, (dn, _, _) in enumerate(db.shards) if dn == leaving.index]
    moves = [GroupMove(cl, db, i, stay[k % len(stay)]) for k, (db, i) in enumerate(groups)]
    for m in moves:
        m.prepare()

    def done(txn: Any) -> None:
        cl.jobs_running -= 1
        then()
        cl.maybe_finish()

    def announce() -> None:
        dns = list(cl.cdc_dns)
        # new broadcast transactions leave it out from now on (the merge lets it go at its branch)
        cl.cdc_dns.remove(leaving)
        txn, content, iid = _instruction(cl, dns, stay, done)
        txn.info["instruction"] = {"type": "StorageInstChange", "content": content, "id": iid,
                                   "new_dn": None, "left_dn": leaving.id}
    _then_all(moves, announce, drop_source=False)
