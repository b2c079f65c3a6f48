"""A live DN source: the DN's binlog over the replication protocol (docs/architecture.md).

``ReplicationSource`` connects to a DN (or any MySQL-protocol binlog server) the way a replica
does, with the project's own small client (``extractor.replication_client``: login, checksum
negotiation, heartbeat period, COM_REGISTER_SLAVE, COM_BINLOG_DUMP from a file and position).
Nothing is decoded on the way: every event reaches the assembler as the exact bytes the DN wrote
(``Event.raw``) for pass-through, and the DN's own event types (GCN 105, SEQUENCE 80, consensus
101–104) need no decoder registration.

It yields ``(file name, events)`` like ``DirSource``: the stream's fake ROTATE names the file,
events carry their position in it (``log_pos - event_size``), a real ROTATE ends a file and the
next fake ROTATE starts the next one. Every event's size and CRC32 (when the FDE says so) is
checked, as in ``read_events``; positions never go back (a server may skip events it filters).

Network errors, an end-of-stream packet or a stopped server are retried: reconnect with
exponential backoff (``backoff_initial`` doubling up to ``backoff_max``) and resume at the end of
the last event handed out, so the assembler sees each event exactly once. Errors that a retry
cannot fix (bad password, ERR 1236 for an unknown file/position, corrupt events) raise
``LiveSourceError`` naming the DN, file and offset (where the damaged event starts: a damaged
header cannot say); ``gbinlog run``'s feed (``gbinlog.live_feed.DnFeed``) then reads the DN again
from a restart point after a backoff.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from zlib import crc32

from binlog import kernel
from binlog.constants import CRC_LEN, HEADER_LEN, MAX_EVENT_SIZE, EventFlag, EventType
from binlog.errors import BinlogError
from binlog.event import Event, FormatContext
from binlog.header import CRC_RESIDUE, HEADER_STRUCT, crc_ok
from binlog.reader import context_from_fde
from extractor.replication_client import ClientProtocolError, ReplicationClient, ServerError
from extractor.source import DnSource, FileEvents

log = logging.getLogger(__name__)

_FDE, _ROTATE, _STOP, _HEARTBEAT = 15, 4, 3, 27
_STREAM_TYPES = frozenset({_FDE, _ROTATE, _HEARTBEAT})   # handled one by one (``_event``)
_STOP_TYPES = bytes(1 if t in _STREAM_TYPES else 0 for t in range(256))   # the same, for the unframing
_ARTIFICIAL = EventFlag.ARTIFICIAL
_unpack_header = HEADER_STRUCT.unpack_from
_TYPE_SIZE_END = struct.Struct("<4xB4xII")   # type_code, event_size, log_pos of a header
WAIT_TICK_S = 0.05
# Server errors no reconnect can fix: access denied, unknown db/user, bad binlog position/file.
FATAL_SERVER_ERRORS = frozenset({1044, 1045, 1049, 1227, 1236, 1251, 1698})


class LiveSourceError(Exception):
    """A DN stream that cannot go on: ``dn``, ``file`` and ``offset`` say where."""

    def __init__(self, message: str, *, dn: str, file: str | None = None, offset: int | None = None) -> None:
        self.message, self.dn, self.file, self.offset = message, dn, file, offset
        where = f"DN {dn}"
        if file:
            where += f": {file}"
        if offset is not None:
            where += f": offset {offset}"
        super().__init__(f"{where}: {message}")


class StopWaiting(Exception):
    """Raised by a ``while_waiting`` hook to give up waiting for the DN (a shutdown is pending)."""


class _Reconnect(Exception):
    """The connection broke (or the server ended the stream): reconnect and resume."""


class ReplicationSource(DnSource):
    """DN ``dn_id`` read over the replication protocol from ``start_file``:``start_pos``.

    ``start_file=None`` starts at the first file the server lists. ``should_stop()`` is checked
    between packets; ``stop()`` (any thread) also breaks a blocking read; ``before_wait()`` (if set)
    is called when the next read would wait for the network (or a reconnect); ``while_waiting()``
    (if set) every ``WAIT_TICK_S`` while it waits (it may raise ``StopWaiting``). ``heartbeat`` asks the
    server for a heartbeat every so many seconds while idle, so a dead link is noticed within
    ``read_timeout``. Attributes for status: ``state``, ``file``, ``pos`` (end of the last event
    handed out), ``last_event_at`` (monotonic), ``events``, ``bytes``, ``reconnects``, ``gaps``, ``last_error``.
    """

    def __init__(self, dn_id: str, host: str, port: int, user: str, password: str = "", *,
                 start_file: str | None = None, start_pos: int = 4, server_id: int = 4_200_000,
                 heartbeat: float = 0.5, read_timeout: float = 5.0, connect_timeout: float = 5.0,
                 backoff_initial: float = 0.1, backoff_max: float = 5.0,
                 should_stop: Callable[[], bool] | None = None,
                 on_state: Callable[[ReplicationSource], None] | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.dn_id = dn_id
        self.tls = tls
        self.host, self.port, self.user, self.password = host, port, user, password
        self.server_id = server_id
        self.heartbeat = heartbeat
        self.read_timeout = max(read_timeout, 3 * heartbeat)
        self.connect_timeout = connect_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.should_stop = should_stop or (lambda: False)
        self.on_state = on_state
        self.on_idle: Callable[[], None] | None = None
        self.before_wait: Callable[[], None] | None = None   # called when the next read would wait
        self.while_waiting: Callable[[], object] | None = None   # called every WAIT_TICK_S while waiting
        self.file: str = start_file or ""
        self.pos: int = start_pos if start_file else 4
        self.state = "new"
        self.last_error: str | None = None
        self.last_event_at = 0.0
        self.events = 0
        self.bytes = 0
        self.reconnects = 0
        self.gaps = 0                            # events the server left out (filtered)
        self._stream: ReplicationClient | None = None
        self._batch: list[bytes] = []           # events received, not yet looked at
        self._checksum = False                   # we told the server we handle CRC32
        self._stopped = threading.Event()
        self._ctx = FormatContext(source=f"{dn_id}")
        self._pending_file: str | None = None   # named by a fake ROTATE, not started yet
        self._ctx_known = False                  # an FDE of the current file was seen
        self._fresh = False                      # nothing read yet on this connection
        self._lock = threading.Lock()
        self._run: tuple | None = None           # the run ``_records`` is in (for ``_replay``)

    # -- control ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """End ``files()`` soon (from any thread): the blocking read is broken by closing the socket."""
        self._stopped.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            try:
                stream.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _is_stopped(self) -> bool:
        return self._stopped.is_set() or self.should_stop()

    def _set_state(self, state: str) -> None:
        self.state = state
        if self.on_state is not None:
            self.on_state(self)

    def _where(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connection -------------------------------------------------------------------------------
    def _connect(self) -> ReplicationClient:
        client = ReplicationClient(self.host, self.port, self.user, self.password,
                                   connect_timeout=self.connect_timeout, read_timeout=self.read_timeout,
                                   tls=self.tls)
        try:
            self._checksum = client.prepare_dump(server_id=self.server_id, heartbeat=self.heartbeat)
            client.dump(self.file, self.pos, server_id=self.server_id)
        except BaseException:
            client.close()
            raise
        self._batch = []
        return client

    def _close(self) -> None:
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - closing a broken connection may fail any way
                pass

    def _ensure_connected(self) -> bool:
        """Connect (with backoff on errors) unless stopped; False when stopped."""
        delay = self.backoff_initial
        while not self._is_stopped():
            if self._stream is not None:
                return True
            self._set_state("connecting")
            try:
                stream = self._connect()
            except ServerError as exc:
                if exc.code in FATAL_SERVER_ERRORS:
                    self._set_state("failed")
                    raise LiveSourceError(f"{self._where()} refused: {exc}", dn=self.dn_id,
                                          file=self.file or None, offset=self.pos) from None
                self.last_error = str(exc)
            except ClientProtocolError as exc:
                self.last_error = str(exc)
            except OSError as exc:
                self.last_error = exc.strerror or str(exc) or type(exc).__name__
            else:
                with self._lock:
                    self._stream = stream
                self._fresh = True
                if self._stopped.is_set():
                    self._close()
                    return False
                self._set_state("streaming")
                return True
            self.reconnects += 1
            self._set_state("backoff")
            log.warning("DN %s: %s: %s; retrying in %.1f s", self.dn_id, self._where(), self.last_error, delay)
            if self._pause(delay):
                return False
            delay = min(delay * 2, self.backoff_max)
        return False

    def _packets(self, one: bool = False) -> list[bytes]:
        """The next events (raw) from the stream (``one``: the next packet's alone); raises
        ``_Reconnect`` on a broken connection."""
        if self._batch:
            batch, self._batch = self._batch, []
            return batch
        batch = self._read(lambda stream: stream.one() if one else stream.batch())
        if not batch:
            raise _Reconnect("server ended the stream (EOF packet)")
        return batch

    def _read(self, how: Callable[[ReplicationClient], Any]) -> Any:
        """``how(stream)``, its failures sorted: a fatal ERR → ``LiveSourceError``; any other ERR, a
        protocol or network error (or the stream closed by ``stop()``) → ``_Reconnect``."""
        try:
            if self.while_waiting is not None:
                self._wait_readable()
            return how(self._stream)  # type: ignore[arg-type]
        except ServerError as exc:
            if exc.code in FATAL_SERVER_ERRORS:
                raise LiveSourceError(f"{self._where()}: {exc}", dn=self.dn_id, file=self.file,
                                      offset=self.pos) from None
            raise _Reconnect(str(exc)) from None
        except ClientProtocolError as exc:
            raise _Reconnect(str(exc)) from None
        except (OSError, ValueError, AttributeError, struct.error) as exc:  # closed by stop()
            raise _Reconnect(str(exc) or type(exc).__name__) from None

    def _wait_readable(self) -> None:
        """Until a whole packet is received or the socket has bytes: ``while_waiting()`` every
        ``WAIT_TICK_S``."""
        stream = self._stream
        if stream is None or stream.has_packet():
            return
        while not stream.readable(WAIT_TICK_S):
            self.while_waiting()  # type: ignore[misc]

    def _pause(self, seconds: float) -> bool:
        """Sleep ``seconds`` (a backoff), ``while_waiting()`` every ``WAIT_TICK_S``; True when stopped."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._stopped.is_set()
            if self._stopped.wait(min(left, WAIT_TICK_S)):
                return True
            if self.while_waiting is not None:
                self.while_waiting()

    # -- events -----------------------------------------------------------------------------------
    def files(self) -> Iterator[FileEvents]:
        """``(file, events)`` in stream order until stopped (a live DN never ends by itself)."""
        try:
            while not self._is_stopped():
                name = self._next_file()
                if name is None:
                    return
                yield name, _LiveFile(self, name)
        finally:
            self._close()
            self._set_state("stopped")

    def _next_file(self) -> str | None:
        """The file the stream continues with: named by a fake ROTATE (read here if needed)."""
        if self._pending_file is not None:
            name, self._pending_file = self._pending_file, None
            return name
        while not self._is_stopped():
            if not self._ensure_connected():
                return None
            try:
                batch = self._packets()
            except _Reconnect as exc:
                self._lost(str(exc))
                continue
            raw = batch[0]
            self._batch = batch[1:]
            rotated = self._fake_rotate(raw)
            self._fresh = False
            if rotated is not None:
                return rotated[0]
            raise LiveSourceError(f"stream starts with event type {raw[4] if len(raw) > 4 else '?'}, "
                                  "not a ROTATE naming the file", dn=self.dn_id, file=self.file or None,
                                  offset=self.pos)
        return None

    def _lost(self, why: str) -> None:
        self._close()
        if self._is_stopped():
            return
        self.last_error = why
        self.reconnects += 1
        self._set_state("backoff")
        log.warning("DN %s: %s: connection lost (%s); resuming at %s:%d", self.dn_id, self._where(), why,
                    self.file or "(first file)", self.pos)
        self._pause(self.backoff_initial)

    def _fake_rotate(self, raw: bytes) -> tuple[str, int] | None:
        """(file, position) of a ROTATE that starts a file in the stream, else None."""
        if len(raw) < HEADER_LEN + 8 or raw[4] != _ROTATE:
            return None
        h = _unpack_header(raw, 0)
        if h[0] != 0 and not h[5] & _ARTIFICIAL:
            return None  # a real ROTATE: the end of the current file
        end = len(raw)
        # A connection's first fake ROTATE carries a CRC iff we asked for CRC32; later ones
        # (file switches) follow the FDE of the file before, as a MySQL master sends them.
        if self._fresh or not self._ctx_known:
            crc = self._checksum
        else:
            crc = self._ctx.checksum
        if crc:
            end -= CRC_LEN
        position = int.from_bytes(raw[HEADER_LEN:HEADER_LEN + 8], "little")
        name = raw[HEADER_LEN + 8:end].decode("utf-8", "replace")
        return name, position

    def _begin(self, name: str) -> None:
        """Start (or, after a reconnect, resume) ``name``: position and format context."""
        if name != self.file:
            self.file, self.pos = name, 4
            self._ctx_known = False
        self._ctx = FormatContext(source=f"{self.dn_id}/{name}", table_maps=self._ctx.table_maps) \
            if not self._ctx_known else self._ctx

    def _batches(self) -> Iterator[list[bytes]]:
        """The stream's batches of events for the current file (reconnecting as needed)."""
        while not self._is_stopped():
            if not self._ensure_connected():
                return
            try:
                batch = self._packets()
            except _Reconnect as exc:
                self._lost(str(exc))
                continue
            yield batch
            if self._pending_file is not None:
                return

    def _events(self, name: str) -> Iterator[Event]:
        """Events of ``name`` from ``self.pos`` until the stream moves to another file or stops."""
        self._begin(name)
        for batch in self._batches():
            yield from self._checked(batch)

    def _records(self, name: str, kinds: bytes, batch: int, grouped=None) -> Iterator[list[tuple[int, Any, int]]]:
        """``BinlogFile.records`` for the stream: each run of contiguous events goes through the
        kernel's scan (CRC32, the accept set, QUERY classes in the byte loop), with a
        ``binlog.kernel.Maker`` through ``scan_txns`` (the common XA shapes as one record each;
        positions count from the run's file offset; a group cut by the end of the run comes as its
        plain records). Typed errors name the DN, file and offset."""
        self._begin(name)
        st_more = kernel.ST_MORE
        for buf, base, ctx in self._stream_runs():
            phl = ctx.post_header_len
            query_phl = phl[EventType.QUERY - 1] if len(phl) >= EventType.QUERY else 13
            tid_len = 4 if len(phl) >= EventType.TABLE_MAP and phl[EventType.TABLE_MAP - 1] == 6 else 6
            self._run = (buf, base, ctx, kinds, query_phl)
            off, n = 0, len(buf)
            while off < n:
                if grouped is not None:
                    recs, off, status, _ = kernel.scan_txns(buf, off, ctx.checksum, kinds, query_phl, Event, ctx,
                                                            batch, tid_len, grouped, base)
                else:
                    recs, off, status, _ = kernel.scan(buf, off, ctx.checksum, kinds, query_phl, Event, ctx, batch)
                    for rec in recs:   # the scan counts from the run's first byte
                        rec[1].pos += base
                if recs:
                    yield recs
                if status == st_more and (len(recs) >= batch or off == n):
                    continue
                h = _unpack_header(buf, off)
                if status == kernel.ST_BAD_CRC:
                    raise self._bad(f"CRC32 mismatch in event type {h[1]}", base + off)
                raise self._bad(f"event of type {h[1]} and size {h[3]} cannot be read there", base + off)

    def _replay(self, offset: int, n: int) -> list[tuple[int, Event, int]]:
        """``BinlogFile.replay`` for the run ``_records`` is in: the ``n`` plain records from file
        offset ``offset`` (a group's first event, always inside that run)."""
        buf, base, ctx, kinds, query_phl = self._run
        recs = kernel.scan(buf, offset - base, ctx.checksum, kinds, query_phl, Event, ctx, n)[0]
        for rec in recs:
            rec[1].pos += base
        return recs

    def _stream_runs(self) -> Iterator[tuple[bytes, int, FormatContext]]:
        """(bytes, file position, format context) of the current file's events, as ``_runs`` gives
        them, until the stream moves to another file or stops. What follows one another in the file
        comes straight out of the client's receive buffer, one compiled pass per receive
        (``ReplicationClient.take_run``: no object per event, no join); any other packet (FDE, fake
        ROTATE, heartbeat, an event after a gap) and events kept from an earlier batch take ``_runs``."""
        while not self._is_stopped():
            if not self._batch:
                stream = self._stream
                if self.before_wait is not None and (stream is None or not stream.has_packet()):
                    self.before_wait()
                if not self._ensure_connected():
                    return
                try:
                    start = self.pos
                    run, count, end = self._read(lambda stream, at=start: stream.take_run(at, _STOP_TYPES))
                    if count:
                        yield self._handed_run(run, count, start, end)
                        continue
                    batch = self._packets(one=True)
                except _Reconnect as exc:
                    self._lost(str(exc))
                    continue
            else:
                batch, self._batch = self._batch, []
            yield from self._runs(batch)
            if self._pending_file is not None:
                return

    def _handed_run(self, run: bytes, count: int, start: int, end: int) -> tuple[bytes, int, FormatContext]:
        self.pos = end
        self.events += count
        self.bytes += end - start
        self.last_event_at = time.monotonic()
        return run, start, self._ctx

    def _runs(self, batch: list[bytes]) -> Iterator[tuple[bytes, int, FormatContext]]:
        """(bytes, file position, format context) of each run of ``batch``'s events that follow one
        another in the file (no stream-only event, no gap): the bytes as the file holds them. Other
        events take ``_event`` (an event after a gap is a run of one; FDEs, fake ROTATEs and
        heartbeats are consumed). At a fake ROTATE naming the next file the rest is kept for it."""
        unpack, special, max_size = _TYPE_SIZE_END.unpack_from, _STREAM_TYPES, MAX_EVENT_SIZE
        run: list[bytes] = []
        start = pos = self.pos
        for i, raw in enumerate(batch):
            size = len(raw)
            t, event_size, end = unpack(raw, 0) if size >= HEADER_LEN else (0, -1, 0)
            if event_size == size and end == pos + size and t not in special and size <= max_size:
                run.append(raw)
                pos += size
                continue
            if run:
                yield self._handed(run, start, pos)
                run = []
            ev = self._event(raw)
            self._fresh = False
            if ev is None:
                if self._pending_file is not None:
                    self._batch = batch[i + 1:]
                    return
            elif ev.h[1] == _FDE:      # the context changed (``_event``); not a record
                self._handed([ev.raw], ev.pos, ev.pos + ev.h[3])
            else:
                yield self._handed([ev.raw], ev.pos, ev.pos + ev.h[3])
            start = pos = self.pos
        if run:
            yield self._handed(run, start, pos)

    def _handed(self, raws: list[bytes], start: int, end: int) -> tuple[bytes, int, FormatContext]:
        self.pos = end
        self.events += len(raws)
        self.bytes += end - start
        self.last_event_at = time.monotonic()
        return (raws[0] if len(raws) == 1 else b"".join(raws)), start, self._ctx

    def _checked(self, batch: list[bytes]) -> Iterator[Event]:
        """The events of ``batch`` that belong to the file, checked; at a fake ROTATE naming the
        next file the rest of the batch is kept for it. The common event (a whole event at its file
        position, CRC32 right, no stream-only type) takes the inline path."""
        unpack, residue, special, max_size = _unpack_header, CRC_RESIDUE, _STREAM_TYPES, MAX_EVENT_SIZE
        ctx = self._ctx
        check = ctx.checksum
        for i, raw in enumerate(batch):
            size = len(raw)
            h = unpack(raw, 0) if size >= HEADER_LEN else None
            if (h is not None and h[3] == size and h[4] and h[1] not in special and size <= max_size
                    and h[4] - size == self.pos and (not check or crc32(raw) == residue)):
                ev = Event(self.pos, h, raw, ctx)
            else:
                ev = self._event(raw)
                self._fresh = False
                ctx = self._ctx
                check = ctx.checksum
                if ev is None:
                    if self._pending_file is not None:
                        self._batch = batch[i + 1:]
                        return
                    continue
            self.pos = ev.pos + size
            self.events += 1
            self.bytes += size
            yield ev
        self.last_event_at = time.monotonic()

    def _event(self, raw: bytes) -> Event | None:
        """Check one event; None for stream-only events (fake ROTATE, heartbeat, a patched FDE,
        events before the resume position)."""
        size = len(raw)
        if size < HEADER_LEN:
            raise self._bad(f"event of {size} bytes is shorter than a header")
        h = _unpack_header(raw, 0)
        if h[3] != size or size > MAX_EVENT_SIZE:
            raise self._bad(f"event size {h[3]} in its header, {size} bytes received")
        type_code = h[1]
        if type_code == _HEARTBEAT:
            # a heartbeat carries a CRC when one was negotiated, as MySQL and MariaDB send it: an
            # event whose type byte was damaged into a heartbeat must not be skipped unnoticed
            if self._checksum and not crc_ok(raw):
                raise self._bad(f"CRC32 mismatch in event type {type_code}")
            if self.on_idle is not None:
                self.on_idle()
            return None
        if type_code == _ROTATE:
            rotated = self._fake_rotate(raw)
            if rotated is not None:
                fname, position = rotated
                if fname != self.file:
                    self._pending_file = fname
                elif position != self.pos:
                    raise self._bad(f"server resumed at {position}, expected {self.pos}")
                return None
        if type_code == _FDE:
            pos = h[4] - size if h[4] else None
            try:
                self._ctx = context_from_fde(raw, self._ctx, pos or 4)
            except BinlogError as exc:
                raise self._bad(exc.message) from None
            self._ctx_known = True
            if pos is None or pos < self.pos:
                return None  # the FDE a server sends when starting mid-file, or already handed out
            return Event(pos, h, raw, self._ctx)
        if self._ctx.checksum and not crc_ok(raw):
            # the header is as damaged as the rest (a flipped log_pos would point anywhere): the
            # event starts where the one before it ended
            raise self._bad(f"CRC32 mismatch in event type {type_code}")
        if not h[4]:
            if h[5] & _ARTIFICIAL:
                return None
            raise self._bad(f"event type {type_code} without a position (log_pos 0)")
        pos = h[4] - size
        if pos < self.pos:
            return None  # already handed out before a reconnect
        if pos != self.pos:
            # A server may leave out events it filters (MariaDB masters skip ANNOTATE_ROWS unless
            # asked); positions stay those of the file, so the gap is harmless for restarts.
            self.gaps += 1
        return Event(pos, h, raw, self._ctx)

    def _bad(self, message: str, offset: int | None = None) -> LiveSourceError:
        return LiveSourceError(message, dn=self.dn_id, file=self.file, offset=self.pos if offset is None else offset)



class _LiveFile:
    """One file of the stream, as ``files()`` hands it out: iterating it gives checked ``Event``s;
    ``records(kinds[, grouped=maker])`` and ``replay`` are the assembler's fast paths
    (``binlog.reader.BinlogFile``'s protocol)."""

    __slots__ = ("src", "name")
    scannable = True
    grouped_records = True

    def __init__(self, src: ReplicationSource, name: str) -> None:
        self.src, self.name = src, name

    def __iter__(self) -> Iterator[Event]:
        return self.src._events(self.name)

    def records(self, kinds: bytes, batch: int = 512, grouped=None) -> Iterator[list[tuple[int, Any, int]]]:
        return self.src._records(self.name, kinds, batch, grouped)

    def replay(self, offset: int, n: int) -> list[tuple[int, Event, int]]:
        return self.src._replay(offset, n)
