"""SHOW BINLOG EVENTS: one row per event with MySQL's type names and a short Info column (cold path)."""

from __future__ import annotations

from pathlib import Path

from binlog.constants import EventType
from binlog.errors import BinlogError, TruncatedEvent
from binlog.event import FormatContext
from binlog.reader import read_events
from dumper.gtid import uuid_of

# MySQL's names (log_event.cc Log_event::get_type_str).
TYPE_NAMES = {
    1: "Start_v3", 2: "Query", 3: "Stop", 4: "Rotate", 5: "Intvar", 13: "RAND", 14: "User var",
    15: "Format_desc", 16: "Xid", 19: "Table_map", 23: "Write_rows_v1", 24: "Update_rows_v1",
    25: "Delete_rows_v1", 26: "Incident", 27: "Heartbeat", 28: "Ignorable", 29: "Rows_query",
    30: "Write_rows", 31: "Update_rows", 32: "Delete_rows", 33: "Gtid", 34: "Anonymous_Gtid",
    35: "Previous_gtids", 36: "Transaction_context", 37: "View_change", 38: "XA_prepare",
    39: "Update_rows_partial", 40: "Transaction_payload", 80: "Sequence", 105: "Gcn",
    160: "Annotate_rows", 161: "Binlog_checkpoint", 162: "Gtid", 163: "Gtid_list",
}


class ShowEventsError(Exception):
    pass


def _info(ev) -> str:
    t = ev.h[1]
    try:
        body = ev.body
    except (BinlogError, ValueError):
        return ""
    if t == EventType.FORMAT_DESCRIPTION:
        return f"Server ver: {body.server_version}, Binlog ver: {body.binlog_version}"
    if t == EventType.QUERY:
        query = body.query.decode("utf-8", "replace") if isinstance(body.query, bytes) else str(body.query)
        return f"use `{body.db}`; {query}" if body.db else query
    if t == EventType.XID:
        return f"COMMIT /* xid={body.xid} */"
    if t == EventType.ROTATE:
        return f"{body.next_file};pos={body.position}"
    if t == EventType.ROWS_QUERY:
        return "# " + body.query.decode("utf-8", "replace")
    if t == EventType.TABLE_MAP:
        return f"table_id: {body.table_id} ({body.db}.{body.table})"
    if t in (23, 24, 25, 30, 31, 32):
        stmt_end = " flags: STMT_END_F" if body.flags & 1 else ""
        return f"table_id: {body.table_id}{stmt_end}"
    if t == EventType.ANONYMOUS_GTID:
        return "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'"
    if t == EventType.GTID:
        return f"SET @@SESSION.GTID_NEXT= '{body.uuid}:{body.gno}'"
    if t == EventType.PREVIOUS_GTIDS:  # MySQL's form: uuid:start-end (inclusive), several sids joined by ",\n"
        return ",\n".join(
            f"{uuid_of(sid)}:" + ":".join(f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in ranges)
            for sid, ranges in body.sids)
    return ""


def show_binlog_events(path: Path, name: str, start: int, offset: int, count: int | None) -> list[list]:
    """Rows (Log_name, Pos, Event_type, Server_id, End_log_pos, Info) of ``path`` from ``start``.

    Only whole events up to the file's current size are shown (a growing file is read as it is now).
    """
    if count is not None and count <= 0:
        return []
    rows: list[list] = []
    skipped = 0
    try:
        # Memory-mapped, not loaded: a file may be hundreds of MB.
        for ev in read_events(path, start=start, name=name, context=FormatContext(source=name)):
            if skipped < offset:
                skipped += 1
                continue
            h = ev.h
            rows.append([name, ev.pos, TYPE_NAMES.get(h[1], f"Unknown({h[1]})"), h[2], h[4], _info(ev)])
            if count is not None and len(rows) >= count:
                break
    except TruncatedEvent:
        pass  # a growing file's half-written tail: show the whole events before it
    except BinlogError as exc:
        raise ShowEventsError(f"Wrong offset or I/O error ({exc})") from None
    except OSError as exc:
        raise ShowEventsError(f"cannot read {name}: {exc}") from None
    return rows
