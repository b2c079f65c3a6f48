"""``Shaper`` and ``shape(txns)``: GlobalTxns in global order → LogicalTxns (docs/architecture.md).

One LogicalTxn per GlobalTxn, in the same order:

* DML → logical db/table names and output table ids, rows in the logical columns in force at the
  txn's vtso (``schema_shaper.rows``); blocks on system tables (``__cdc__*``, ``__drds_*``) are left
  out, and a txn left with none is NONE.
* DDL mark → applied to the logical model (and stored in the meta store), one logical QUERY (DDL);
  NONE when the DDL is not visible to MySQL.
* physical DDL → the physical model only (and the meta store); NONE.
* heartbeat → HEARTBEAT; instruction, rollback → NONE.

State (topology, logical tables with their output table ids, physical tables) is a function of the
history applied so far — marks and physical DDLs in vtso order — so ``Shaper.as_of(store, vtso)``
(restart) and ``Shaper.from_history(entries, vtso)`` (a Spark range) rebuild exactly the state an
uninterrupted run had after ``vtso``; a mark or physical DDL at or below the state's vtso is not
applied again. Table ids: a counter over table versions in history order (initial snapshot tables
first, in sorted order), never a process-local one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from binlog import kernel
from binlog.constants import ROWS_V1_TYPES, ROWS_V2_TYPES
from binlog.rows_events import decode_table_map
from extractor.model import Block, DnTxn, TxnKind
from extractor.vtso import vtso_tso
from merger.model import GlobalTxn
from schema_shaper.ddl import CreateDatabase, DropDatabase, parse_ddl, strip_polardbx
from schema_shaper.errors import BadDdl, ShapeError, UnknownPhysicalSchema, UnknownTable, ValueMismatch
from schema_shaper.marks import mark_entries, phys_entry, snapshot_entries, where
from schema_shaper.meta_store import Entry, MarkEntry, MetaStore
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn, PassBlock
from schema_shaper.query import ddl_query_payload, ddl_text
from schema_shaper.rows import (
    PASS,
    RESHAPE,
    SKIP,
    TablePlan,
    compatible,
    pass_table_map,
    rebuild_rows,
    reshape_plan,
    row_metadata,
)
from schema_shaper.state import SYSTEM_PREFIXES, SchemaState, json_field

log = logging.getLogger(__name__)

_V2_OK = b"\x02\x00"
_V2 = frozenset(int(t) for t in ROWS_V2_TYPES)
_DML, _NONE = LogicalKind.DML, LogicalKind.NONE
_SKIP_PLAN = TablePlan(SKIP)
_BODY, _BODY_CRC = slice(19, None), slice(19, -4)    # an event's body without its header (and CRC32)


def is_system(db: str, table: str) -> bool:
    """Tables that never appear in the output: CDC system schemas and PolarDB-X internal tables."""
    d, t = db.lower(), table.lower()
    return d.startswith(SYSTEM_PREFIXES) or t.startswith(SYSTEM_PREFIXES)


@dataclass(slots=True)
class DdlOutput:
    """What a mark emits (None when it is not visible to MySQL)."""

    db: str
    sql: str
    query: bytes
    server_id: int | None


class Shaper(SchemaState):
    """The shaper's state and rules; ``shape_txn`` turns one GlobalTxn into its LogicalTxn.

    ``store``: where history is persisted (None: nowhere). ``on_error``: ``"raise"`` (a
    ``ShapeError`` stops the stream) or ``"skip"`` (the offending block or DDL is left out with a
    ``logging.warning``). ``ddl_comments``: DDL query events lead with the ``# POLARX_*`` lines
    (``schema_shaper.query.ddl_text``), as the system we follow writes them.
    """

    def __init__(self, *, store: MetaStore | None = None, on_error: str = "raise", ddl_comments: bool = True) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        super().__init__()
        self.store = store
        self.on_error = on_error
        self.ddl_comments = ddl_comments
        self._plans: dict[bytes, TablePlan] = {}
        self._stored_upto = (store.last_vtso() or "") if store is not None else ""
        self._deferred = False      # the store is synced by whoever calls ``sync_store`` (defer_store_sync)
        self._unsynced = False
        self.counts = {"pass": 0, "reshape": 0}

    # -- construction from history ----------------------------------------------------------------------
    @classmethod
    def from_history(cls, entries: Iterable[Entry], upto: str | None = None, **kwargs: Any) -> Shaper:
        """A shaper in the state after applying ``entries`` with vtso ≤ ``upto`` (all when None)."""
        shaper = cls(**kwargs)
        for entry in entries:
            if upto is not None and entry.vtso > upto:
                continue
            # on_error="skip" leaves out a bad entry here as it did when the entry streamed by.
            shaper._guard(lambda entry=entry: shaper.apply(entry, store=False), None)
        if upto is not None:
            shaper.vtso = max(shaper.vtso, upto)
        return shaper

    @classmethod
    def as_of(cls, store: MetaStore, vtso: str | None, **kwargs: Any) -> Shaper:
        """Restart: the state in force after ``vtso`` (None: after everything stored), from ``store``,
        which the new shaper keeps writing to."""
        return cls.from_history(store.history(vtso), vtso, store=store, **kwargs)

    def load_snapshot(self, records: Iterable[dict[str, Any]], vtso: str | None = None) -> None:
        """Start from an initial snapshot: TopologyRecords with ``createSql`` (see
        ``marks.snapshot_entries``); stored like marks, so ``as_of`` restores them too."""
        for entry in snapshot_entries(records, *(() if vtso is None else (vtso,))):
            self.apply(entry)

    # -- the stream ----------------------------------------------------------------------------------------
    def shape_txn(self, g: GlobalTxn) -> LogicalTxn:
        kind = g.kind
        if kind is TxnKind.DML:
            return self._dml(g)
        if kind is TxnKind.HEARTBEAT:
            return LogicalTxn(g.vtso, LogicalKind.HEARTBEAT, server_id=g.server_id, archive=g.archive, source=g)
        if kind is TxnKind.DDL_MARK:
            return self._mark(g)
        if kind is TxnKind.PHYSICAL_DDL:
            entry = phys_entry(g)
            if entry.vtso > self.vtso:
                self._guard(lambda: self.apply(entry), None)
        return LogicalTxn(g.vtso, LogicalKind.NONE, archive=g.archive, source=g)

    def apply_prejoin(self, txns: Iterable[DnTxn], at_vtso: str) -> None:
        """The physical DDLs of a DN that joins at ``at_vtso`` (its ``StorageInstChange``), from
        before it joined (``merger.Membership.prejoin``): applied now, stamped with ``at_vtso`` so a
        restart from the store (entries of one vtso in the order stored) replays them at the same
        point; at or below the state's vtso they are in force already."""
        if at_vtso <= self.vtso:
            return
        for txn in txns:
            if txn.kind is not TxnKind.PHYSICAL_DDL:
                continue
            entry = dataclasses.replace(phys_entry(txn), vtso=at_vtso)
            self._guard(lambda entry=entry: self.apply_entry(entry), None)
            if self.store is not None:
                self._store(entry, True)
        self._plans.clear()
        self._stored_upto = max(self._stored_upto, at_vtso)

    def _guard(self, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except ShapeError as exc:
            if self.on_error == "raise":
                raise
            log.warning("SKIPPED (on_error=skip): %s", exc)
            return default

    # -- DML -------------------------------------------------------------------------------------------------
    @property
    def plans(self) -> dict[bytes, TablePlan]:
        """The plan cache: TABLE_MAP body (header and CRC cut) → plan, made on a table map's first
        occurrence, cleared in place when the schema changes. A pass-through transaction is shaped
        from it alone (``_dml``; ``dumper.GlobalBinlog.append_passed`` shapes and writes one in one
        kernel call)."""
        return self._plans

    def _dml(self, g: GlobalTxn) -> LogicalTxn:
        """The hot path: when every block's table passes through with a cached plan, one kernel call
        (``kernel.pass_blocks``: per block one dict lookup of the TABLE_MAP payload and one check of
        its rows events) gives the ``PassBlock``s — the rows events go on as read, the dumper writes
        them with the output table id; otherwise ``_dml_blocks`` block by block."""
        out = kernel.pass_blocks(g.blocks, self._plans, PASS, PassBlock)
        if out is None:
            out = self._dml_blocks(g)
        else:
            self.counts["pass"] += len(out)
        # GlobalTxn.server_id / .archive inlined (the first hint's server id; any archive branch).
        server_id = None
        archive = False
        for b in g.branches:
            if server_id is None:
                server_id = b.server_id
            if b.archive:
                archive = True
        if not out:
            return LogicalTxn(g.vtso, _NONE, [], None, None, None, None, archive, g)
        return LogicalTxn(g.vtso, _DML, out, None, None, None, server_id, archive, g)

    def _dml_blocks(self, g: GlobalTxn) -> list[LogicalBlock | PassBlock]:
        """The logical blocks of a DML transaction, block by block: a plan made on a TABLE_MAP's first
        occurrence (and cached), pass-through rows checked, rows rebuilt where they must be."""
        out: list[LogicalBlock | PassBlock] = []
        plans = self._plans
        tso = None
        passed = 0
        for blk in g.blocks:
            events = blk.events
            tm = events[0]
            # A block's events come from one file (a DN rotates between transactions): one CRC setting.
            if tm.ctx.checksum:
                crc = 4
                payload = tm.raw[_BODY_CRC]
            else:
                crc = 0
                payload = tm.raw[_BODY]
            plan = plans.get(payload)
            if plan is None:
                plan = self._guard(lambda blk=blk, payload=payload: self._plan(blk, g, payload), _SKIP_PLAN)
                if plan is _SKIP_PLAN and not is_system(blk.db, blk.table):
                    continue  # an error skipped: not cached, every occurrence warns
                plans[payload] = plan
            kind = plan.kind
            if kind == PASS:
                if kernel.rows_pass(events, plan.src_id):
                    passed += 1
                    out.append(PassBlock((plan.db, plan.table, plan.table_map, blk.hint, events, plan.id_bytes,
                                          crc)))
                    continue
                rows = self._pass_rows(plan, blk, g, crc)
                if rows is not None:
                    passed += 1
                    out.append(LogicalBlock(plan.db, plan.table, plan.table_map, rows, blk.hint))
            elif kind == RESHAPE:
                if tso is None:
                    tso = vtso_tso(g.vtso)
                rows = self._reshape_rows(plan, blk, g, tso)
                self.counts["reshape"] += 1
                if rows is not None:
                    out.append(LogicalBlock(plan.db, plan.table, plan.table_map, rows, blk.hint))
        if passed:
            self.counts["pass"] += passed
        return out

    def _pass_rows(self, plan: TablePlan, blk: Block, g: GlobalTxn, crc: int) -> list[tuple[int, bytes]] | None:
        """The rows of a pass-through table when some rows event cannot pass as read (a v1 event,
        extra data, another table id): those are rebuilt; None when one cannot be (skipped)."""
        idb, src = plan.id_bytes, plan.src_id
        rows = []
        for e in blk.events[1:]:
            r = e.raw
            t = r[4]
            # v2 rows event with this table map's 6-byte id and no extra data: replace the id.
            if t in _V2 and r[19:25] == src and r[27:29] == _V2_OK:
                rows.append((t, idb + r[25:len(r) - crc]))
            else:
                got = self._guard(lambda e=e: self._rebuild(plan, blk, g, e, 0), None)
                if got is None:
                    return None
                rows.append(got)
        return rows

    def _reshape_rows(self, plan: TablePlan, blk: Block, g: GlobalTxn, tso: int) -> list[tuple[int, bytes]] | None:
        rows = []
        for e in blk.events[1:]:
            got = self._guard(lambda e=e: self._rebuild(plan, blk, g, e, tso), None)
            if got is None:
                return None
            rows.append(got)
        return rows

    def _rebuild(self, plan: TablePlan, blk: Block, g: GlobalTxn, e: Any, tso: int) -> tuple[int, bytes]:
        t = e.h[1]
        try:
            return (t + 7 if t in ROWS_V1_TYPES else t), rebuild_rows(plan, t, e.payload, e.ctx, tso)
        except (ValueError, KeyError) as exc:
            loc = where(blk, g)
            loc["offset"] = e.pos
            raise ValueMismatch(f"rows of {plan.db}.{plan.table} cannot be put in the logical form: {exc}",
                                table=f"{blk.db}.{blk.table}", vtso=g.vtso, **loc) from None

    def _plan(self, blk: Block, g: GlobalTxn, payload: bytes) -> TablePlan:
        """The plan of one TABLE_MAP (cold path, cached by payload)."""
        if is_system(blk.db, blk.table):
            return _SKIP_PLAN
        tm = blk.events[0]
        shard = self.topology.lookup(blk.db, blk.table)
        logical = self.tables.get((shard.db.lower(), shard.table.lower())) if shard is not None else None
        if logical is None:
            raise UnknownTable(f"no topology entry maps physical table {blk.db}.{blk.table} to a logical "
                               "table", table=f"{blk.db}.{blk.table}", vtso=g.vtso, **where(blk, g))
        try:
            body = decode_table_map(payload, tm.ctx)
        except ValueError as exc:
            raise ValueMismatch(f"cannot read the TABLE_MAP: {exc}", table=f"{blk.db}.{blk.table}",
                                vtso=g.vtso, **where(blk, g)) from None
        phys_columns = list(body.columns)
        names = [c.name for c in phys_columns]
        known = self.physical.get((blk.db.lower(), blk.table.lower()))
        if None in names:
            if known is None or len(known.columns) != len(phys_columns):
                what = "is unknown" if known is None else f"has {len(known.columns)} columns"
                raise UnknownPhysicalSchema(
                    f"the TABLE_MAP carries no column names and the physical table {what} "
                    f"(TABLE_MAP: {len(phys_columns)} columns)", table=f"{blk.db}.{blk.table}", vtso=g.vtso,
                    **where(blk, g))
            names = known.names
        if body.optional_metadata is None and known is not None and len(known.columns) == len(phys_columns):
            # Without optional metadata the TABLE_MAP lacks signedness and ENUM/SET members: the
            # physical model has them (needed to decode when rows must be reshaped).
            phys_columns = [dataclasses.replace(c, name=k.name, unsigned=k.column.unsigned,
                                                enum_values=k.column.enum_values, set_values=k.column.set_values)
                            for c, k in zip(phys_columns, known.columns, strict=True)]
        db = self.topology.db(logical.db)
        plan = TablePlan(PASS, db.name if db is not None else logical.db, logical.name, logical.table_id,
                         id_bytes=logical.table_id.to_bytes(6, "little"), src_id=payload[:6],
                         src_table_id=body.table_id)
        specs = logical.schema.columns
        try:
            if compatible(phys_columns, names, specs):
                short = self._short_id(tm)
                plan.table_map = pass_table_map(payload, plan.table_id, plan.db, plan.table, 4 if short else 6,
                                                row_metadata(logical.schema.binlog_columns()))
                if short:
                    plan.src_id = b""  # never equal: rows go through the rebuilding path
                return plan
            return reshape_plan(plan, phys_columns, names, specs, logical.schema.binlog_columns())
        except (ValueError, IndexError) as exc:  # e.g. a name over 255 bytes, a TABLE_MAP cut short
            raise ValueMismatch(f"no logical TABLE_MAP for {plan.db}.{plan.table}: {exc}",
                                table=f"{blk.db}.{blk.table}", vtso=g.vtso, **where(blk, g)) from None

    @staticmethod
    def _short_id(tm: Any) -> bool:
        phl = tm.ctx.post_header_len
        return len(phl) >= 19 and phl[18] == 6

    # -- marks ----------------------------------------------------------------------------------------------
    def _mark(self, g: GlobalTxn) -> LogicalTxn:
        entries = self._guard(lambda: mark_entries(g), [])
        outputs, targets = [], []
        fresh = g.vtso > self.vtso  # else applied already (a restart replays it): output only
        for entry in entries:
            if fresh:
                ok = self._guard(lambda entry=entry: self.apply(entry) or True, False)
                if not ok:
                    continue
            out = self._guard(lambda entry=entry: self.ddl_output(entry), None)
            if out is not None:
                outputs.append(out)
                targets.append((entry.db, entry.table or None))
        if not outputs:
            return LogicalTxn(g.vtso, LogicalKind.NONE, archive=g.archive, source=g)
        if len(outputs) > 1:
            err = BadDdl(f"one mark transaction carries {len(outputs)} visible DDLs; one is written",
                         vtso=g.vtso, table=f"{outputs[0].db}")
            if self.on_error == "raise":
                raise err
            log.warning("SKIPPED (on_error=skip): %s", err)
        out = outputs[0]
        return LogicalTxn(g.vtso, LogicalKind.DDL, query=out.query, db=out.db, sql=out.sql,
                          server_id=out.server_id, archive=g.archive, source=g, target=targets[0])

    def ddl_output(self, entry: MarkEntry) -> DdlOutput | None:
        """The logical QUERY of a mark, or None when the DDL is not for MySQL."""
        ext = json_field(entry.ext, entry, "EXT") or {}
        if entry.visibility != 1 or ext.get("isGsi") or ext.get("isCci"):
            return None
        mysql_sql = strip_polardbx(entry.ddl)
        if not mysql_sql:
            return None
        try:
            stmt = parse_ddl(entry.ddl)
        except ValueError as exc:
            raise self._bad_mark(entry, f"unparseable DDL: {exc}") from None
        db = "" if isinstance(stmt, CreateDatabase) else entry.db
        target = stmt.name if isinstance(stmt, (CreateDatabase, DropDatabase)) else entry.db
        known = self.topology.db(target)
        charset = (stmt.charset if isinstance(stmt, CreateDatabase) and stmt.charset else
                   known.charset if known is not None else None)
        text = ddl_text(entry.ddl, entry.vtso, ext.get("ddlId") or entry.job_id or 0, mysql_sql,
                        comments=self.ddl_comments)
        query = ddl_query_payload(db=db, text=text, updated_db=target, charset=charset,
                                  sql_mode=ext.get("sqlMode"), flags2=int(ext.get("flags2") or 0))
        server_id = ext.get("serverId")
        return DdlOutput(db, mysql_sql, query, int(server_id) if server_id else None)

    # -- history ---------------------------------------------------------------------------------------------
    def apply(self, entry: Entry, *, store: bool = True) -> None:
        """Apply one history entry to the model (and the store); the plan cache is dropped when the
        model changed."""
        changed = self.apply_entry(entry)
        if changed:
            self._plans.clear()
        # Entries are stored in vtso order as they are applied: one at or below the store's last
        # vtso is there already (a restart replaying it), and writing it again would only cost a sync.
        if store and self.store is not None and entry.vtso > self._stored_upto:
            self._store(entry, changed)

    def _store(self, entry: Entry, needed: bool) -> None:
        """Store an entry; ``needed``: a restart without it would be in another state, so it must be
        durable before anything after it is — at once, unless the caller syncs (``defer_store_sync``)."""
        self.store.add(entry, sync=needed and not self._deferred)  # type: ignore[union-attr]
        self._unsynced = self._unsynced or (needed and self._deferred)

    def defer_store_sync(self) -> Any:
        """The caller makes the stored entries durable itself, by calling the returned function
        before it writes out anything shaped after them (the pipeline: before each write of the
        global binlog), so a burst of physical DDLs — two per DN for every table a cluster creates,
        each a disk wait — costs one."""
        self._deferred = True
        return self.sync_store

    def sync_store(self) -> None:
        """Make the entries stored so far durable (nothing to do when none waits)."""
        if self._unsynced and self.store is not None:
            self.store.sync()
        self._unsynced = False



def shape(txns: Iterable[GlobalTxn], *, shaper: Shaper | None = None, store: MetaStore | None = None,
          on_error: str = "raise") -> Iterator[LogicalTxn]:
    """Shape a GlobalTxn stream in global order: exactly one LogicalTxn per input txn, same order.

    ``shaper``: a prepared one (``Shaper.as_of`` on restart, ``Shaper.from_history`` for a range);
    otherwise a new one on ``store`` with ``on_error``.
    """
    if shaper is None:
        shaper = Shaper(store=store, on_error=on_error)
    shape_txn = shaper.shape_txn
    for g in txns:
        yield shape_txn(g)
