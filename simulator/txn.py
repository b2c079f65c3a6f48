"""Transactions as the CN runs them: physical statements (``PhysOp``), XA branches, the txn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulator.naming import bqual, gtrid, trace_hint, trace_id, xid_sql
from simulator.state import LogicalTable, PhysTable, Shard


class PhysOp:
    """One physical statement on one shard: one ROWS_QUERY hint + TABLE_MAP block in the binlog.

    ``rows``: insert → [after], delete → [before], update → [(before, after)] (full images)."""

    __slots__ = ("seq", "subseq", "shard", "pt", "kind", "rows", "table", "db_name", "table_name",
                 "move", "phys_table")

    def __init__(self, seq: int, subseq: int, shard: Shard, pt: PhysTable, kind: str,
                 table: LogicalTable | None, db_name: str, table_name: str) -> None:
        self.seq = seq
        self.subseq = subseq
        self.shard = shard
        self.pt = pt
        # The physical name in force when the statement ran: a later RENAME renames ``pt`` itself.
        self.phys_table = pt.name
        self.kind = kind
        self.rows: list[Any] = []
        self.table = table
        self.db_name = db_name          # logical names when the statement ran
        self.table_name = table_name
        self.move = False               # half of a shard-key move (delete + insert)

    @property
    def trace(self) -> str:
        return trace_id(self.seq, self.subseq)

    def hint(self, txn_id: int, server_id: str) -> bytes:
        return trace_hint(txn_id, self.seq, self.subseq, server_id).encode()


class Branch:
    """One XA branch: a connection of the txn to one group (``rv`` = its read-view sequence)."""

    __slots__ = ("dn", "group", "db", "rv", "ops", "gtrid", "bqual", "prepared_group", "_xid",
                 "tables")

    def __init__(self, dn: Any, group: str, db: str, rv: int, gtrid_text: str) -> None:
        self.dn = dn
        self.group = group
        self.db = db
        self.rv = rv
        self.ops: list[PhysOp] = []
        self.gtrid = gtrid_text.encode()
        bq = bqual(group, rv)
        self.bqual = bq.encode()
        self._xid = xid_sql("", gtrid_text, bq)[4:]      # "X'…',X'…',1" once per branch
        self.prepared_group = 0
        self.tables: list[PhysTable] = []

    def sql(self, verb: str) -> str:
        """``XA START X'…',X'…',1`` and the other verbs (docs/formats.md)."""
        return f"XA {verb} {self._xid}"


class Txn:
    """A transaction the CN runs: kind (dml / heartbeat / ddl / instruction), commit mode
    (xa / one_phase / local), branches in first-touch order."""

    __slots__ = ("id", "kind", "mode", "session", "branches", "ops", "rollback", "snapshot_tso",
                 "commit_tso", "locks", "hint_server", "pending", "on_done", "gtrid", "info",
                 "vtso", "dn_vtsos", "apply")

    def __init__(self, txn_id: int, kind: str, session: Any, primary_group: str) -> None:
        self.id = txn_id
        self.kind = kind
        self.mode = "xa"
        self.session = session
        self.branches: dict[tuple[str, int], Branch] = {}
        self.ops: list[PhysOp] = []
        self.rollback = False
        self.snapshot_tso = 0
        self.commit_tso = 0
        self.locks: list[Any] = []
        self.hint_server = ""
        self.pending = 0
        self.on_done: Callable[[Txn], None] | None = None
        self.gtrid = gtrid(txn_id, primary_group)
        self.info: dict[str, Any] = {}
        self.vtso = ""
        self.dn_vtsos: dict[str, str] = {}
        self.apply: Callable[[], None] | None = None

    def branch(self, dn: Any, group: str, db: str, rv: int = 0) -> Branch:
        key = (group, rv)
        br = self.branches.get(key)
        if br is None:
            br = self.branches[key] = Branch(dn, group, db, rv, self.gtrid)
        return br
