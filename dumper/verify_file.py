"""One global binlog file through the transaction grammar ``gbinlog verify`` checks (see
``dumper.verify``): FDE first, ROTATE last (naming the next file), and between them whole
transactions — ``[GTID] BEGIN [hint+CTS] maps/rows … XID CTS``, a heartbeat ``BEGIN "# TSO HEARTBEAT
TXN" XID CTS``, a DDL ``QUERY CTS`` — with vtsos strictly increasing and no system table.

``FileScan.event`` takes the events one by one; each state of the grammar is a method of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from binlog import EventType
from binlog.constants import ROWS_TYPES, UPDATE_TYPES, WRITE_TYPES
from dumper.global_binlog import CTS_PREFIX, HEARTBEAT_TEXT

E = EventType
SYSTEM_PREFIXES = ("__cdc__", "__drds_")
_CTS_LINE = re.compile(r"(?:^|\n)# CTS::(\d{54})(?:::ARCHIVE)?$")
_HEARTBEAT = HEARTBEAT_TEXT.decode()


@dataclass(slots=True)
class FileInfo:
    name: str
    size: int
    first_vtso: str | None = None
    last_vtso: str | None = None
    txns: int = 0


@dataclass(slots=True)
class Written:
    """One transaction as it is in the files (rows decoded only when checking against a truth)."""

    vtso: str
    kind: str                     # dml / ddl / heartbeat
    file: str
    pos: int
    db: str | None = None
    sql: str | None = None
    changes: list[tuple[str, str, str, list]] = field(default_factory=list)  # (db, table, op, rows)


class FileScan:
    """The grammar's state over one file. ``checker`` (``dumper.verify._Checker``) collects errors,
    the GTID rules, the last vtso and the written transactions."""

    def __init__(self, checker: Any, name: str, next_name: str | None, info: FileInfo) -> None:
        self.c = checker
        self.name, self.next_name, self.info = name, next_name, info
        self.state = "idle"          # idle | begin | dml | heartbeat | xid | ddl
        self.txn: Written | None = None
        self.announced: str | None = None
        self.maps: dict[int, Any] = {}
        self.rotated = False
        self.first = True

    def event(self, ev: Any, at: str) -> bool:
        """Check one event; False: the rest of the file cannot be checked."""
        if self.first:
            self.first = False
            return self.fde(ev, at)
        if self.rotated:
            self.c.error(f"{at}: event after the ROTATE")
            return False
        if ev.h[1] == E.ROTATE:
            self.rotate(ev, at)
        elif self.state == "idle":
            self.idle(ev, at)
        elif self.state in ("begin", "dml"):
            self.in_txn(ev, at)
        elif self.state == "heartbeat":
            if ev.h[1] != E.XID:
                self.c.error(f"{at}: a heartbeat transaction must be BEGIN, ROWS_QUERY, XID, CTS")
            self.state = "xid"
        else:
            self.marker(ev, at)
        return True

    def fde(self, ev: Any, at: str) -> bool:
        if ev.h[1] != E.FORMAT_DESCRIPTION:
            self.c.error(f"{at}: the file does not start with a FORMAT_DESCRIPTION")
            return False
        body = ev.body
        if body.binlog_version != 4 or not body.server_version.startswith(("5.", "8.")) or not ev.ctx.checksum:
            self.c.error(f"{at}: FDE binlog v{body.binlog_version}, server {body.server_version!r}, "
                         f"checksum {ev.ctx.checksum}: expected v4, '5.…' or '8.…', CRC32")
        return True

    def rotate(self, ev: Any, at: str) -> None:
        if self.state != "idle":
            self.c.error(f"{at}: ROTATE inside a transaction (a txn spans files)")
        if ev.body.next_file != self.next_name:
            self.c.error(f"{at}: ROTATE names {ev.body.next_file}, the next file is {self.next_name}")
        self.rotated = True

    def idle(self, ev: Any, at: str) -> None:
        """Between transactions: GTID / PREVIOUS_GTIDS, or BEGIN, or a DDL's QUERY."""
        c, t = self.c, ev.h[1]
        if t in (E.GTID, E.PREVIOUS_GTIDS):
            c.gtid_event(ev, at, self.info)
            return
        if c.gtid_pending is False and c.gtids:
            c.error(f"{at}: a transaction without its GTID event (the others have one)")
        c.gtid_pending = False
        if t != E.QUERY:
            c.error(f"{at}: event type {t} outside a transaction")
            return
        q = ev.body.query
        self.announced = None
        if q == b"BEGIN":
            self.state, self.txn, self.maps = "begin", Written("", "dml", self.name, ev.pos), {}
        else:
            self.state = "ddl"
            self.txn = Written("", "ddl", self.name, ev.pos, db=ev.body.db, sql=q.decode("utf-8", "replace"))

    def in_txn(self, ev: Any, at: str) -> None:
        """Inside BEGIN … XID: the first ROWS_QUERY (heartbeat text or the CTS hint), maps, rows."""
        c, t, txn = self.c, ev.h[1], self.txn
        if self.state == "begin" and t == E.ROWS_QUERY:
            text = ev.body.query.decode("utf-8", "replace")
            if text == _HEARTBEAT:
                self.state = txn.kind = "heartbeat"
                return
            m = _CTS_LINE.search(text)
            if m is None:
                c.error(f"{at}: the first ROWS_QUERY of a transaction has no '# CTS::<vtso>' line")
            else:
                self.announced = m.group(1)
            self.state = "dml"
        elif t == E.TABLE_MAP:
            tm = ev.body
            if tm.db.lower().startswith(SYSTEM_PREFIXES) or tm.table.lower().startswith(SYSTEM_PREFIXES):
                c.error(f"{at}: system table {tm.db}.{tm.table} in the output")
            self.maps[tm.table_id] = tm
            self.state = "dml"
        elif t in ROWS_TYPES:
            self.rows(ev, at)
        elif t == E.XID:
            if self.announced is None and txn.kind == "dml":
                c.error(f"{at}: transaction at {txn.pos} has no '# CTS::' hint before its first table map")
            self.state = "xid"
        elif t != E.ROWS_QUERY:                       # a ROWS_QUERY: a later block's hint
            c.error(f"{at}: event type {t} inside a transaction (started at {txn.pos})")

    def rows(self, ev: Any, at: str) -> None:
        tid, t = ev.body.table_id, ev.h[1]
        if tid not in self.maps:
            self.c.error(f"{at}: rows event for table id {tid} with no TABLE_MAP before it")
        elif self.c.decode_rows:
            tm = self.maps[tid]
            op = "insert" if t in WRITE_TYPES else "update" if t in UPDATE_TYPES else "delete"
            self.txn.changes.append((tm.db, tm.table, op, ev.body.rows(tm)))

    def marker(self, ev: Any, at: str) -> None:
        """After XID / a DDL's QUERY: the CTS::<vtso> marker must come now."""
        c, txn, info, report = self.c, self.txn, self.info, self.c.report
        if ev.h[1] != E.ROWS_QUERY or not ev.body.query.startswith(CTS_PREFIX):
            c.error(f"{at}: expected the CTS::<vtso> marker after the transaction at {txn.pos}")
            self.state = "idle"
            return
        vtso = ev.body.query[len(CTS_PREFIX):].decode("ascii", "replace").split("::", 1)[0]
        if len(vtso) != 54 or not vtso.isdigit():
            c.error(f"{at}: bad vtso in marker {ev.body.query[:80]!r}")
        if self.announced is not None and self.announced != vtso:
            c.error(f"{at}: marker {vtso} differs from the vtso {self.announced} announced in the transaction")
        if c.last_vtso is not None and vtso <= c.last_vtso:
            c.error(f"{at}: vtso {vtso} is not above the previous {c.last_vtso}")
        c.last_vtso = txn.vtso = vtso
        report.txns += 1
        report.kinds[txn.kind] = report.kinds.get(txn.kind, 0) + 1
        info.txns += 1
        info.first_vtso = info.first_vtso or vtso
        info.last_vtso = vtso
        if c.decode_rows:
            c.written.append(txn)
        self.state, self.txn = "idle", None

    def end(self, where: str) -> None:
        """After the file's last event."""
        if self.first:
            self.c.error(f"{where}: empty file")
        if self.state != "idle":
            self.c.error(f"{where}: ends inside the transaction at {self.txn.pos if self.txn else '?'}")
        if self.next_name is not None and not self.rotated:
            self.c.error(f"{where}: not the last file but does not end with ROTATE")
