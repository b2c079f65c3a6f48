"""The statements a CDC connector's schema snapshot sends around it (Debezium, Flink CDC, Canal):
``FLUSH TABLES [t, …] WITH READ LOCK``, ``LOCK TABLES t READ [LOCAL], …``, ``LOCK INSTANCE|TABLES FOR
BACKUP``, then ``UNLOCK TABLES|INSTANCE`` — ``snapshot_statement``.

The endpoint is read-only, so a read lock holds nothing back; what a connector needs from it is
that the position it reads under the lock (``SHOW MASTER STATUS``) and the schema it reads (SHOW
CREATE TABLE, information_schema) describe one moment. So a lock *pins* the session: its SHOW
MASTER STATUS answers the row of the moment the lock was taken, and its schema statements read the
catalog of that moment, while the files grow on (``Pin``). Every user holds RELOAD and LOCK
TABLES (SHOW GRANTS says so): the locks lock nothing. A write lock is refused (read-only), and so
is FLUSH BINARY LOGS, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dumper.server import protocol as p
from dumper.server.errors import QueryError

if TYPE_CHECKING:
    from dumper.server.queries import QueryHandler, Session

ER_OPTION_PREVENTS_STATEMENT = 1290


@dataclass(frozen=True, slots=True)
class Pin:
    """A session's view of the moment it took a read lock."""

    master_status: list[list[object]]     # the SHOW MASTER STATUS rows then
    catalog: Any                          # dumper.server.catalog.Catalog then


def snapshot_statement(handler: QueryHandler, session: Session, words: list[str]) -> list[bytes] | None:
    """The answer to a lock statement (``words``: the statement's words, lower-case), or None when the
    statement is not one."""
    head = words[:2]
    if words[:3] == ["flush", "binary", "logs"] or words[:2] == ["flush", "logs"]:
        raise QueryError(ER_OPTION_PREVENTS_STATEMENT,
                         f"{' '.join(words[:3 if words[1] == 'binary' else 2]).upper()} is refused: the global "
                         "binlog rotates with the data (output.rotate_size), so the same input always gives "
                         "the same files and positions; a rotation on demand would break that")
    if head in (["flush", "tables"], ["flush", "table"]) and words[-3:] == ["with", "read", "lock"]:
        return _pin(handler, session)
    if head in (["lock", "instance"], ["lock", "tables"]) and words[2:] == ["for", "backup"]:
        return _pin(handler, session)
    if head in (["lock", "tables"], ["lock", "table"]):
        modes = {w for w in words[2:] if w in ("read", "write", "low_priority")}
        if modes - {"read"}:
            raise QueryError(ER_OPTION_PREVENTS_STATEMENT,
                             "LOCK TABLES is refused for a WRITE lock: gbinlog is read-only; the MySQL server is "
                             "running with the --read-only option so it cannot execute this statement")
        if "read" not in modes:
            return None
        return _pin(handler, session)
    if head in (["unlock", "tables"], ["unlock", "instance"]):
        session.pin = None
        return [p.ok_packet(status=session.status)]
    return None


def _pin(handler: QueryHandler, session: Session) -> list[bytes]:
    session.pin = None      # a second lock statement takes the moment anew, as a new lock would
    session.pin = Pin(master_status=handler.master_status_rows(session), catalog=handler.catalog())
    return [p.ok_packet(status=session.status)]
