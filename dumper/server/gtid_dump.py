"""GTIDs at the endpoint: the executed / purged sets of the served files and COM_BINLOG_DUMP_GTID.

``GtidFiles`` answers ``@@gtid_executed`` (the sid of the files and ``1-<last gno>``),
``@@gtid_purged`` (everything before the first file still listed: its PREVIOUS_GTIDS, so PURGE moves
it) and ``@@server_uuid``; it scans only the newest file, incrementally. ``dump_gtid_request`` turns a
COM_BINLOG_DUMP_GTID into the ``DumpRequest`` of the first transaction the client lacks: its gno is
the first one missing from the client's set for our sid, found by binary search over the files'
PREVIOUS_GTIDS (``dumper.gtid.locate_gno``), not a scan of everything. A client whose set has gaps is
served from the first missing transaction (a MySQL replica skips what it already executed). A set
naming transactions we never wrote, or missing purged ones, gets ERR 1236 with MySQL's text.

``dump_request`` is the start of every dump: on a server that may catch up (an HA follower within
its lag gate: ``catch_up_wait``) a client asking for transactions (GTID) or a file:pos this member
has not written yet keeps its connection and waits, up to that bound, then is served from there; past
the bound it gets ERR 1236 saying so. A file:pos client gets heartbeats meanwhile, naming the file
and position it asked for (what MariaDB's and MySQL's replica checks accept); a GTID client gets none
before its first event (a MySQL replica rejects a heartbeat naming a file it never rotated to), so
the bound stays well under replicas' heartbeat periods and net timeouts.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumper.gtid import (
    GTID,
    PREVIOUS_GTIDS,
    GtidError,
    GtidSet,
    _events,
    decode_sid_block,
    format_gtid_set,
    locate_gno,
    previous_gtids_of,
    subtract,
    tail_gtids,
    uuid_of,
)
from dumper.server.binlogdir import BinlogDir, heartbeat
from dumper.server.dump import BinlogDump, DumpError, DumpRequest
from dumper.server.login import session_log
from dumper.server.retention import seq_of

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer

_HEAD = struct.Struct("<HII")   # flags, server_id, name length
FDE, ROWS_QUERY = 15, 29

# MySQL 8.0's texts (ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS / ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE)
PURGED_TEXT = ("Cannot replicate because the source purged required binary logs. Replicate the missing transactions "
               "from elsewhere, or provision a new replica from backup. Consider increasing the source's binary log "
               "expiration period. The GTID set sent by the replica is '{sent}', and the missing transactions are "
               "'{missing}'")
MORE_TEXT = ("Replica has more GTIDs than the source has, using the source's SERVER_UUID. This may indicate that the "
             "end of the binary log was truncated or that the last binary log file was lost, e.g., after a power or "
             "disk failure when sync_binlog != 1. The source may or may not have rolled back transactions that were "
             "already replicated to the replica. Suggest to replicate any transactions that source has rolled back "
             "from replica to source, and/or commit empty transactions on source to account for transactions that "
             "have been committed on source but are not included in GTID_EXECUTED.")


class DumpAhead(DumpError):
    """The client asks for what the directory does not hold yet (a catching-up member may wait)."""


class GtidFiles:
    """The GTID facts of a served directory (thread-safe; cheap to ask repeatedly)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        # name, scanned up to, sid, last gno, end of the last whole transaction
        self._scan: tuple[str, int, bytes | None, int, int] | None = None

    def executed(self, files: list[str]) -> tuple[bytes | None, int]:
        """(sid, last gno written), (None, 0) without GTIDs."""
        return self._newest(files)[:2]

    def head(self, files: list[str]) -> tuple[str, int]:
        """(newest file, end of its last whole transaction): where a client with everything starts."""
        return files[-1], self._newest(files)[2]

    def _newest(self, files: list[str]) -> tuple[bytes | None, int, int]:
        if not files:
            return None, 0, 4
        with self._lock:
            name = files[-1]
            path = self.directory / name
            try:
                size = path.stat().st_size
            except OSError:
                return None, 0, 4
            if self._scan is None or self._scan[0] != name or self._scan[1] > size:
                sid, before, _ = previous_gtids_of(path)
                self._scan = (name, 4, sid, before, 4)
                tail = tail_gtids(path, size)
                if tail is not None:  # start from the last whole transaction, not the file's start
                    self._scan = (name, tail[2], tail[0], tail[1], tail[2])
            _, end, sid, last, txn_end = self._scan
            pending = None      # the gno of a transaction whose CTS marker (its end) is not read yet
            with open(path, "rb") as fh:
                for pos, type_code, ev_size in _events(fh, end, size):
                    if type_code == GTID:
                        fh.seek(pos + 20)
                        body = fh.read(24)
                        if len(body) == 24:
                            sid = body[:16]
                            pending = struct.unpack_from("<q", body, 16)[0]
                    elif type_code in (FDE, PREVIOUS_GTIDS) and pos < 256:
                        txn_end = pos + ev_size
                    elif type_code == ROWS_QUERY:
                        fh.seek(pos + 19)
                        if fh.read(6) == b"\x01CTS::":
                            txn_end = pos + ev_size
                            if pending is not None:
                                last, pending = pending, None
            # A transaction counts as executed at its end, not at its GTID event: a file read while a
            # transaction is half written must not say it is there (a client holding it would be
            # served it again from the end of the one before). The next scan starts at that end.
            self._scan = (name, txn_end, sid, last, txn_end)
            return sid, last, txn_end

    def purged(self, files: list[str]) -> tuple[bytes | None, int]:
        if not files:
            return None, 0
        sid, before, _ = previous_gtids_of(self.directory / files[0])
        return sid, before

    def text(self, files: list[str], which: str) -> str:
        sid, gno = self.executed(files) if which == "executed" else self.purged(files)
        if sid is None or gno < 1:
            return ""
        return format_gtid_set({uuid_of(sid): [(1, gno)]})

    def server_uuid(self, files: list[str]) -> str | None:
        sid, _ = self.executed(files)
        return uuid_of(sid) if sid is not None else None


def parse_dump_gtid(payload: bytes) -> tuple[int, int, GtidSet]:
    """COM_BINLOG_DUMP_GTID after the command byte → (flags, server_id, the client's GTID set)."""
    if len(payload) < _HEAD.size:
        raise DumpError(f"COM_BINLOG_DUMP_GTID packet of {len(payload)} bytes is too short")
    flags, server_id, name_len = _HEAD.unpack_from(payload)
    off = _HEAD.size + name_len
    if len(payload) < off + 12:
        raise DumpError("COM_BINLOG_DUMP_GTID packet ends before its GTID set")
    (size,) = struct.unpack_from("<I", payload, off + 8)
    data = payload[off + 12:off + 12 + size]
    if len(data) != size:
        raise DumpError("COM_BINLOG_DUMP_GTID packet ends inside its GTID set")
    try:
        return flags, server_id, decode_sid_block(data) if size else {}
    except GtidError as exc:
        raise DumpError(f"Malformed GTID set in COM_BINLOG_DUMP_GTID: {exc}") from None


def start_gno(client: GtidSet, sid: bytes, executed: int, purged: int) -> int:
    """The first gno to send: the first of ours missing from ``client``. DumpError (1236) when the
    client has transactions we never wrote, or lacks purged ones."""
    key = uuid_of(sid)
    mine = client.get(key, [])
    sent = format_gtid_set(client)
    if mine and mine[-1][1] > executed:
        raise DumpAhead(MORE_TEXT)
    missing_purged = subtract({key: [(1, purged)]}, client) if purged else {}
    if missing_purged:
        raise DumpError(PURGED_TEXT.format(sent=sent, missing=format_gtid_set(missing_purged)))
    first = 1
    for start, end in mine:
        if start > first:
            break
        first = max(first, end + 1)
    return first


def dump_gtid_request(payload: bytes, gtids: GtidFiles, directory: Path, files: list[str]) -> DumpRequest:
    """The file/position request equivalent to a COM_BINLOG_DUMP_GTID."""
    flags, server_id, client = parse_dump_gtid(payload)
    sid, executed = gtids.executed(files)
    if sid is None:
        raise DumpError("The served binlog has no GTIDs (built with gtids = false): replicate by file and "
                        "position (SOURCE_AUTO_POSITION=0 / MASTER_USE_GTID=no)")
    _, purged = gtids.purged(files)
    gno = start_gno(client, sid, executed, purged)
    if gno > executed:          # nothing missing: from the end of the newest file, then follow it
        last, end = gtids.head(files)
        return DumpRequest(end, flags & 1, server_id, last)
    found = locate_gno(directory, files, gno)
    if found is None:
        raise DumpError(PURGED_TEXT.format(sent=format_gtid_set(client),
                                           missing=format_gtid_set({uuid_of(sid): [(gno, gno)]})))
    return DumpRequest(found[1], flags & 1, server_id, found[0])


def ahead_of(bdir: BinlogDir, req: DumpRequest) -> str | None:
    """Why a file:pos request is past what the directory holds (None: it is not)."""
    files = bdir.files()
    if not files:
        return "no binlog file is written yet"
    if not req.file:
        return None
    newest = files[-1]
    if req.file == newest:
        size = bdir.size(newest)
        return f"position {req.position} is past the end of '{newest}' ({size} bytes)" if req.position > size else None
    if req.file not in files and req.file.rsplit(".", 1)[0] == newest.rsplit(".", 1)[0] \
            and seq_of(req.file) > seq_of(newest):
        return f"'{req.file}' is not written yet (the newest file is '{newest}')"
    return None


async def wait_for_first_file(server: BinlogServer, conn: Any, body: bytes, by_gtid: bool,
                              bdir: BinlogDir | None = None) -> None:
    """While the directory holds no binlog file yet (a build or run has not written its first one),
    keep the client and wait for it, however long: a MySQL/MariaDB IO thread treats ERR 1236 "Binary
    log is not open" as fatal. A file:pos client gets heartbeats naming the file and position it asked
    for; a GTID client gets none (see the module doc). The caller stops the wait when the client goes."""
    bdir = bdir or server.bdir
    if bdir.files():
        return
    request = None if by_gtid else DumpRequest.parse(body)
    since = time.monotonic()
    session_log.info("dump conn=%d user=%s waits for the first binlog file of %s", conn.session.conn_id,
                     conn.session.user, bdir.path)
    beat: tuple[BinlogDump, float] | None = None
    while not bdir.files():
        if request is not None:
            beat = await _heartbeat(server, conn, request, beat)
        await server.wait_for_change(server.config.poll_interval * 5)
    session_log.info("dump conn=%d user=%s: the first binlog file appeared after %.2f s", conn.session.conn_id,
                     conn.session.user, time.monotonic() - since)


async def dump_request(server: BinlogServer, conn: Any, body: bytes, by_gtid: bool,
                       bdir: BinlogDir | None = None, gtid_files: GtidFiles | None = None) -> DumpRequest:
    """The request of a COM_BINLOG_DUMP(_GTID) ``body``; while it asks for what is not written yet
    and ``server.catch_up_wait()`` allows, wait for it (heartbeats to a file:pos client). DumpError →
    ERR 1236."""
    bdir = bdir or server.bdir              # a stream group: the request's stream (stream_dirs)
    gtid_files = gtid_files or server.queries.gtid_files
    await wait_for_first_file(server, conn, body, by_gtid, bdir)
    wait = getattr(server, "catch_up_wait", None)
    bound = wait() if wait is not None else 0.0
    deadline = time.monotonic() + bound
    beat: tuple[BinlogDump, float] | None = None    # (the dump-to-be for its settings, last heartbeat)
    waited_since: float | None = None
    while True:
        try:
            if by_gtid:
                if bound > 0 and not bdir.files():
                    raise DumpAhead("no binlog file is written yet")
                request = await asyncio.to_thread(dump_gtid_request, body, gtid_files, bdir.path, bdir.files())
            else:
                request = DumpRequest.parse(body)
                if bound > 0 and (why := ahead_of(bdir, request)):
                    raise DumpAhead(why)
            if waited_since is not None:
                session_log.info("dump conn=%d user=%s caught up after %.2f s", conn.session.conn_id, conn.session.user,
                                 time.monotonic() - waited_since)
            return request
        except DumpAhead as exc:
            if bound <= 0:
                raise
            left = deadline - time.monotonic()
            if waited_since is None:
                waited_since = time.monotonic()
                session_log.info("dump conn=%d user=%s waits up to %g s (this member is catching up): %s",
                                 conn.session.conn_id, conn.session.user, bound,
                                 "it asks for GTIDs past the last written here" if by_gtid else exc)
            if left <= 0:
                raise DumpError(f"{exc} (this member is catching up with the HA leader and waited {bound:g} s for "
                                "it: replicate from the leader, or retry)") from None
            if not by_gtid:
                beat = await _heartbeat(server, conn, request, beat)
            await server.wait_for_change(min(left, server.config.poll_interval * 5))


async def _heartbeat(server: BinlogServer, conn: Any, request: DumpRequest,
                     beat: tuple[BinlogDump, float] | None) -> tuple[BinlogDump, float]:
    """A HEARTBEAT naming the requested file:pos when the client's period is due."""
    now = time.monotonic()
    if beat is None:
        return BinlogDump(server, conn.session, conn.writer, request), now
    dump, last = beat
    period = dump.heartbeat_period()
    if period <= 0 or now - last < period:
        return beat
    event = heartbeat(request.file, request.position, server_id=server.config.server_id,
                      checksum=dump.client_checksum() == "CRC32")
    conn.send([b"\0" + event])
    await conn.writer.drain()
    return dump, now
