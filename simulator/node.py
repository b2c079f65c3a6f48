"""A simulated DN: its binlog (``DnLog``), its physical tables, and how each kind of group is laid
out (docs/formats.md). Also keeps, per DN, the extractor's view that the truth needs: the max
(TSO, txnId) seen in binlog order and the local sequence, and hole statistics."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from binlog.constants import EventFlag, EventType
from simulator import dn_events as ev
from simulator.dn import DnLog, Event
from simulator.naming import bqual, dn_id, gtrid, storage_seq, vtso, xid_sql
from simulator.state import PhysTable

ROWS_EVENT_MAX = 8192            # binlog_row_event_max_size: MySQL starts a new rows event past it
_WRITE, _UPDATE, _DELETE = int(EventType.WRITE_ROWS), int(EventType.UPDATE_ROWS), int(EventType.DELETE_ROWS)
ROWS_TYPE = {"insert": _WRITE, "update": _UPDATE, "delete": _DELETE}
_QUERY = int(EventType.QUERY)
_ROWS_QUERY = int(EventType.ROWS_QUERY)
_TABLE_MAP = int(EventType.TABLE_MAP)
_XID = int(EventType.XID)
_XA_PREPARE = int(EventType.XA_PREPARE)
_SUPPRESS_USE = EventFlag.SUPPRESS_USE
_IGNORABLE = EventFlag.IGNORABLE
_STMT_END = 1


def unique_storage_seq(storage_inst_id: str, taken: set[str]) -> str:
    """``storage_seq`` (the first try of polardbx-cdc); on a collision (dn10 and dn11 collide) the
    next free number, where PolarDB-X would rehash with a random seed. Never ``000000``: that suffix
    marks TSO txns in a vtso."""
    seq = storage_seq(storage_inst_id)
    while seq in taken or seq == "000000":
        seq = f"{(int(seq) + 1) % 1_000_000:06d}"
    taken.add(seq)
    return seq


class DnNode:
    """One DN: binlog writer, physical tables, extractor-view bookkeeping, truth of physical writes."""

    def __init__(self, index: int, out_dir: Path, rng: random.Random, *, consensus: bool,
                 max_file_size: int, now_us: int, record_writes: bool, taken: set[str]) -> None:
        self.index = index
        self.id = dn_id(index)
        self.server_id = rng.randrange(1 << 31, 1 << 32)
        sid = rng.randbytes(16)
        self.log = DnLog(out_dir / self.id, server_id=self.server_id, sid=sid, consensus=consensus,
                         max_file_size=max_file_size, timestamp=now_us // 1_000_000)
        self.sid = sid
        self.tables: dict[tuple[str, str], PhysTable] = {}
        self.gcn = 0                      # the DN's GCN: max commit TSO it has seen
        self.max_tso = (0, 0)             # extractor view: max (tso, txnId) in binlog order
        self.seq = 0                      # extractor view: local txns since max_tso changed
        self.storage_seq = unique_storage_seq(self.id, taken)
        self.xid = 0
        self.next_table_id = 100
        self.threads: dict[Any, int] = {}
        self.groups = 0
        self.stats = {"tso_commits": 0, "out_of_order": 0, "holes": 0, "local_commits": 0,
                      "rollbacks": 0, "physical_ddls": 0}
        self.max_commit_tso = 0
        self.writes: list[tuple] | None = [] if record_writes else None
        self.ddl_log: list[dict[str, Any]] = []
        self._prefixes: dict[tuple[int, str], bytes] = {}

    # -- ids ------------------------------------------------------------------------------------
    def thread_id(self, key: Any) -> int:
        """The DN connection id of a CN session's connection to a group (stable per pair)."""
        tid = self.threads.get(key)
        if tid is None:
            tid = self.threads[key] = 2000 + len(self.threads)
        return tid

    def new_table_id(self) -> int:
        self.next_table_id += 1
        return self.next_table_id

    # -- extractor view (vtso) --------------------------------------------------------------------
    def tso_vtso(self, tso: int, txn_id: int) -> str:
        if (tso, txn_id) > self.max_tso:
            self.max_tso = (tso, txn_id)
            self.seq = 0
        return vtso(tso, txn_id)

    def local_vtso(self) -> str:
        self.seq += 1
        return vtso(self.max_tso[0], self.max_tso[1], self.seq, self.storage_seq)

    # -- statements ---------------------------------------------------------------------------------
    def statement_events(self, ops: list, hint_server: str, txn_id: int, events: list[Event],
                         rows_at: list[tuple[int, Any, Any]]) -> None:
        """ROWS_QUERY hint, TABLE_MAP, rows events (split at ~8 KB, STMT_END on the last) per op.
        ``rows_at`` gets (index in events, op, rows of that event) for the truth."""
        for op in ops:
            pt = op.pt
            events.append((_ROWS_QUERY, ev.rows_query_payload(op.hint(txn_id, hint_server)), _IGNORABLE))
            events.append((_TABLE_MAP, pt.table_map, 0))
            type_code = ROWS_TYPE[op.kind]
            image = pt.image
            if op.kind == "update":
                images = [image(b) + image(a) for b, a in op.rows]
            else:
                images = [image(r) for r in op.rows]
            start = 0
            size = 0
            for i, img in enumerate(images):
                if size and size + len(img) > ROWS_EVENT_MAX:
                    rows_at.append((len(events), op, op.rows[start:i]))
                    events.append((type_code, pt.rows_prefix(type_code, 0) + b"".join(images[start:i]), 0))
                    start, size = i, 0
                size += len(img)
            rows_at.append((len(events), op, op.rows[start:] if start else op.rows))
            events.append((type_code, pt.rows_prefix(type_code, _STMT_END) + b"".join(images[start:]), 0))

    def _query(self, thread: int, db: str, text: str) -> Event:
        key = (thread, db)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = ev.query_prefix(thread, db)
        return (_QUERY, prefix + text.encode("utf-8"), _SUPPRESS_USE)

    def _record(self, name: str, first: int, events: list[Event], rows_at: list) -> None:
        """Positions of the rows events, for the truth's physical writes."""
        if self.writes is None or not rows_at:
            return
        starts = []
        pos = first
        for event in events:
            starts.append(pos)
            pos += 23 + len(event[1])
        for i, op, rows in rows_at:
            pt = op.pt
            self.writes.append((name, starts[i], pt.db, pt.name, pt.table_id, op.kind, pt.schema, rows))

    # -- groups -----------------------------------------------------------------------------------
    def write_prepare(self, txn: Any, br: Any, now_us: int, *, one_phase: bool = False,
                      commit_tso: int = 0) -> None:
        """``GCN GTID XA START … XA END XA_PREPARE``; one-phase carries the commit TSO (0x04)."""
        thread = self.thread_id((txn.session, br.group))
        events: list[Event] = [self._query(thread, br.db, br.sql("START"))]
        rows_at: list = []
        self.statement_events(br.ops, txn.hint_server, txn.id, events, rows_at)
        events.append(self._query(thread, br.db, br.sql("END")))
        events.append((_XA_PREPARE, ev.xa_prepare_payload(br.gtrid, br.bqual, one_phase), 0))
        if one_phase:
            flags, gcn = ev.GCN_ONE_PHASE, commit_tso
        else:
            flags, gcn = ev.GCN_PREPARE, txn.snapshot_tso
        name, first = self.log.write_group(events, gcn_flags=flags, gcn=gcn,
                                           timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        br.prepared_group = self.groups
        self._record(name, first, events, rows_at)

    def write_commit(self, txn: Any, br: Any, now_us: int) -> str:
        """``GCN(0x01|0x04|0x08, commit TSO) GTID XA COMMIT``; returns the txn's vtso."""
        thread = self.thread_id((txn.session, br.group))
        tso = txn.commit_tso
        self.log.write_group([self._query(thread, br.db, br.sql("COMMIT"))], gcn_flags=ev.GCN_COMMIT,
                             gcn=tso, timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        stats = self.stats
        stats["tso_commits"] += 1
        if tso < self.max_commit_tso:
            stats["out_of_order"] += 1
        else:
            self.max_commit_tso = tso
        if self.groups - br.prepared_group > 1:
            stats["holes"] += 1
        if tso > self.gcn:
            self.gcn = tso
        return self.tso_vtso(tso, txn.id)

    def write_rollback(self, txn: Any, br: Any, now_us: int) -> str:
        thread = self.thread_id((txn.session, br.group))
        self.log.write_group([self._query(thread, br.db, br.sql("ROLLBACK"))], gcn_flags=ev.GCN_LOCAL,
                             gcn=self.gcn, timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        self.stats["rollbacks"] += 1
        return self.local_vtso()

    def write_one_phase(self, txn: Any, br: Any, now_us: int) -> str:
        self.write_prepare(txn, br, now_us, one_phase=True, commit_tso=txn.commit_tso)
        self.stats["local_commits"] += 1
        if txn.commit_tso > self.gcn:
            self.gcn = txn.commit_tso
        return self.local_vtso()

    def write_local(self, txn: Any, br: Any, now_us: int) -> str:
        """1PC / autocommit: ``GCN(0x01, auto) GTID BEGIN … XID``; a local (non-TSO) txn."""
        thread = self.thread_id((txn.session, br.group))
        events: list[Event] = [self._query(thread, br.db, "BEGIN")]
        rows_at: list = []
        self.statement_events(br.ops, txn.hint_server, txn.id, events, rows_at)
        self.xid += 1
        events.append((_XID, ev.xid_payload(self.xid), 0))
        name, first = self.log.write_group(events, gcn_flags=ev.GCN_LOCAL, gcn=self.gcn,
                                           timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        self.stats["local_commits"] += 1
        self._record(name, first, events, rows_at)
        return self.local_vtso()

    def write_ignored(self, op: Any, txn_id: int, group: str, format_id: int, commit_tso: int, now_us: int) -> None:
        """A one-phase XA whose format id CDC ignores (a rebalance backfill): in the binlog and the
        truth's physical writes, but not in the extractor's view (no local sequence, no stats)."""
        g, b = gtrid(txn_id, group), bqual(group, 0)
        thread = self.thread_id(("backfill", op.pt.db))
        events: list[Event] = [self._query(thread, op.pt.db, xid_sql("START", g, b, format_id))]
        rows_at: list = []
        self.statement_events([op], "", txn_id, events, rows_at)
        events.append(self._query(thread, op.pt.db, xid_sql("END", g, b, format_id)))
        events.append((_XA_PREPARE, ev.xa_prepare_payload(g.encode(), b.encode(), True, format_id), 0))
        name, first = self.log.write_group(events, gcn_flags=ev.GCN_ONE_PHASE, gcn=commit_tso,
                                           timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        self.gcn = max(self.gcn, commit_tso)
        self._record(name, first, events, rows_at)

    def write_ddl(self, db: str, sql: str, now_us: int) -> str:
        """A physical DDL: ``GCN(0x01) GTID QUERY`` outside any txn (a pseudo-txn for the extractor)."""
        payload = ev.query_prefix(self.thread_id(("ddl", db)), db) + sql.encode("utf-8")
        name, first = self.log.write_group([(_QUERY, payload, 0)], gcn_flags=ev.GCN_LOCAL, gcn=self.gcn,
                                           timestamp=now_us // 1_000_000, commit_us=now_us)
        self.groups += 1
        self.stats["physical_ddls"] += 1
        self.ddl_log.append({"file": name, "pos": first, "db": db, "sql": sql})
        return self.local_vtso()

    def close(self) -> None:
        self.log.close()
