"""What operators ask a MySQL 8 server, answered the same way: ``SHOW [FULL] PROCESSLIST`` (and
information_schema.PROCESSLIST), ``KILL [CONNECTION|QUERY] id``, ``SHOW REPLICA|SLAVE STATUS`` (empty:
the endpoint replicates from nobody), ``SHOW WARNINGS|ERRORS`` after an error, ``SHOW [GLOBAL] STATUS``
with real counters (``ServerCounters``).

Who sees what follows MySQL's privileges: an admin user (``[server] users … admin = true``: PROCESS,
CONNECTION_ADMIN) sees and kills every session; any other user only its own (ERR 1095 for another's).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dumper.server import protocol as p
from dumper.server.errors import QueryError

if TYPE_CHECKING:
    from dumper.server.queries import QueryHandler, Session

ER_NO_SUCH_THREAD = 1094
ER_KILL_DENIED = 1095
ER_QUERY_INTERRUPTED = 1317
L = p.TYPE_LONGLONG
PROCESSLIST_COLUMNS = [p.Column("Id", L), p.Column("User"), p.Column("Host"), p.Column("db"), p.Column("Command"),
                       p.Column("Time", L), p.Column("State"), p.Column("Info")]
DUMP_STATE = "Master has sent all binlog to slave; waiting for more updates"
_INFO_SHORT = 100        # SHOW PROCESSLIST (without FULL) cuts Info here, as MySQL does

# SHOW SLAVE STATUS's columns (MySQL 8.0 before the 8.0.22 renaming; 5.7 ends at Master_TLS_Version);
# SHOW REPLICA STATUS names them with Replica/Source.
SLAVE_STATUS_COLUMNS = (
    "Slave_IO_State Master_Host Master_User Master_Port Connect_Retry Master_Log_File Read_Master_Log_Pos "
    "Relay_Log_File Relay_Log_Pos Relay_Master_Log_File Slave_IO_Running Slave_SQL_Running Replicate_Do_DB "
    "Replicate_Ignore_DB Replicate_Do_Table Replicate_Ignore_Table Replicate_Wild_Do_Table "
    "Replicate_Wild_Ignore_Table Last_Errno Last_Error Skip_Counter Exec_Master_Log_Pos Relay_Log_Space "
    "Until_Condition Until_Log_File Until_Log_Pos Master_SSL_Allowed Master_SSL_CA_File Master_SSL_CA_Path "
    "Master_SSL_Cert Master_SSL_Cipher Master_SSL_Key Seconds_Behind_Master Master_SSL_Verify_Server_Cert "
    "Last_IO_Errno Last_IO_Error Last_SQL_Errno Last_SQL_Error Replicate_Ignore_Server_Ids Master_Server_Id "
    "Master_UUID Master_Info_File SQL_Delay SQL_Remaining_Delay Slave_SQL_Running_State Master_Retry_Count "
    "Master_Bind Last_IO_Error_Timestamp Last_SQL_Error_Timestamp Master_SSL_Crl Master_SSL_Crlpath "
    "Retrieved_Gtid_Set Executed_Gtid_Set Auto_Position Replicate_Rewrite_DB Channel_Name Master_TLS_Version "
    "Master_public_key_path Get_master_public_key Network_Namespace").split()


def replica_status_columns(replica_names: bool) -> list[str]:
    if not replica_names:
        return SLAVE_STATUS_COLUMNS
    return [c.replace("Slave", "Replica").replace("Master", "Source").replace("_master_", "_Source_")
            for c in SLAVE_STATUS_COLUMNS]


@dataclass
class ServerCounters:
    """SHOW GLOBAL STATUS: counted as the server works (thread-safe: queries run on workers too)."""

    started: float = field(default_factory=time.monotonic)
    counts: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] += n

    def statement(self, kind: str) -> None:
        """One statement answered: Questions, Queries and its ``Com_<kind>``."""
        with self._lock:
            self.counts["Questions"] += 1
            self.counts["Queries"] += 1
            self.counts[f"Com_{kind}"] += 1

    def rows(self, sessions: list[Session]) -> list[tuple[str, object]]:
        with self._lock:
            counts = dict(self.counts)
        running = sum(1 for s in sessions if s.command != "Sleep")
        values = {"Uptime": int(time.monotonic() - self.started), "Threads_connected": len(sessions),
                  "Threads_running": running, "Connections": counts.get("Connections", 0),
                  "Aborted_connects": counts.get("Aborted_connects", 0),
                  "Bytes_received": counts.get("Bytes_received", 0), "Bytes_sent": counts.get("Bytes_sent", 0),
                  "Questions": counts.get("Questions", 0), "Queries": counts.get("Queries", 0),
                  "Uptime_since_flush_status": int(time.monotonic() - self.started)}
        for name in ("select", "set_option", "show_variables", "show_status", "show_processlist", "kill",
                     "purge", "show_master_status", "show_binlogs", "show_binlog_events", "show_create_table",
                     "show_databases", "show_tables", "show_fields", "show_grants", "show_warnings", "flush",
                     "lock_tables", "unlock_tables", "begin", "commit", "rollback", "change_db",
                     "show_slave_status", "show_replica_status", "other"):
            values[f"Com_{name}"] = counts.get(f"Com_{name}", 0)
        values.update({k: v for k, v in counts.items() if k.startswith("Com_") and k not in values})
        return sorted(values.items())


def statement_kind(words: list[str]) -> str:
    """The ``Com_*`` counter a statement counts under (MySQL's names for the common ones)."""
    head = words[0] if words else ""
    if head == "show" and len(words) > 1:
        rest = [w for w in words[1:] if w not in ("global", "session", "full", "local")]
        shown = {"variables": "show_variables", "status": "show_status", "processlist": "show_processlist",
                 "databases": "show_databases", "schemas": "show_databases", "tables": "show_tables",
                 "columns": "show_fields", "fields": "show_fields", "grants": "show_grants",
                 "warnings": "show_warnings", "errors": "show_errors"}
        if rest[:2] in (["master", "status"], ["binary", "log"]):
            return "show_master_status"
        if rest[:2] in (["binary", "logs"], ["master", "logs"]):
            return "show_binlogs"
        if rest[:2] == ["binlog", "events"]:
            return "show_binlog_events"
        if rest[:2] == ["create", "table"]:
            return "show_create_table"
        if rest[:2] in (["slave", "status"], ["replica", "status"]):
            return f"show_{rest[0]}_status"
        return shown.get(rest[0] if rest else "", "show_other")
    named = {"select": "select", "with": "select", "(": "select", "set": "set_option", "kill": "kill",
             "purge": "purge", "flush": "flush", "lock": "lock_tables", "unlock": "unlock_tables",
             "begin": "begin", "start": "begin", "commit": "commit", "rollback": "rollback", "use": "change_db"}
    return named.get(head, "other")


def processlist_rows(handler: QueryHandler, session: Session, full: bool = True) -> list[list[object]]:
    """Every session the asking one may see: (Id, User, Host, db, Command, Time, State, Info)."""
    now = time.monotonic()
    rows = []
    for s in sorted(handler.server.sessions(), key=lambda s: s.conn_id):
        if not session.admin and s.user != session.user:
            continue
        info = s.info
        if info is not None and not full:
            info = info[:_INFO_SHORT]
        state = DUMP_STATE if s.command.startswith("Binlog Dump") else ("executing" if s.command == "Query" else "")
        rows.append([s.conn_id, s.user, f"{s.host}:{s.port}", s.db, s.command, int(now - s.since), state, info])
    return rows


def show_processlist(handler: QueryHandler, session: Session, full: bool) -> list[bytes]:
    return handler.result(PROCESSLIST_COLUMNS, processlist_rows(handler, session, full), session)


def kill(handler: QueryHandler, session: Session, words: list[str], sql: str) -> list[bytes]:
    """``KILL [CONNECTION|QUERY] id``: the connection ends (a dump stops), or its running statement
    is interrupted (ERR 1317 to it)."""
    query = len(words) > 1 and words[1] == "query"
    rest = words[2:] if len(words) > 1 and words[1] in ("query", "connection") else words[1:]
    if len(rest) != 1 or not rest[0].isdigit():
        raise handler.parse_error(sql)
    target_id = int(rest[0])
    target = next((s for s in handler.server.sessions() if s.conn_id == target_id), None)
    if target is None:
        raise QueryError(ER_NO_SUCH_THREAD, f"Unknown thread id: {target_id}")
    if not session.admin and target.user != session.user:
        raise QueryError(ER_KILL_DENIED, f"You are not owner of thread {target_id}")
    handler.server.kill(target_id, query_only=query)
    return [p.ok_packet(status=session.status)]


def replica_status(handler: QueryHandler, session: Session, replica_names: bool) -> list[bytes]:
    """Empty, as on a server that replicates from nobody (with the columns a MySQL 8 sends)."""
    return handler.result([p.Column(c) for c in replica_status_columns(replica_names)], [], session)


def diagnostics(handler: QueryHandler, session: Session, words: list[str]) -> list[bytes]:
    """SHOW WARNINGS|ERRORS [LIMIT …] and SHOW COUNT(*) WARNINGS|ERRORS: the last statement's error."""
    errors_only = "errors" in words
    rows = [list(d) for d in session.diagnostics if not errors_only or d[0] == "Error"]
    if words[1:2] == ["count"]:
        name = f"@@session.{'error' if errors_only else 'warning'}_count"
        return handler.result([p.Column(name, L)], [[len(rows)]], session)
    return handler.result([p.Column("Level"), p.Column("Code", L), p.Column("Message")], rows, session)
