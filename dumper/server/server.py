"""The asyncio server: accept, authenticate, answer commands, run dumps; one task per connection.

``BinlogServer(config)`` runs inside an event loop (``await start()``, ``await close()``);
``start_in_thread(config)`` runs one in a background thread for tests and for the live service;
``serve(dir, config)`` runs one until cancelled (the CLI).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from dumper.server import limits, retention
from dumper.server import protocol as p
from dumper.server.auth import CACHING_SHA2, RsaKeys
from dumper.server.binlogdir import BinlogDir, BinlogDirError
from dumper.server.config import ConfigError, ServerConfig
from dumper.server.dump import BinlogDump, DumpError, DumpRequest
from dumper.server.errors import QueryError
from dumper.server.gtid_dump import dump_request
from dumper.server.login import login, session_log
from dumper.server.login_throttle import LoginThrottle
from dumper.server.operators import ServerCounters
from dumper.server.prepared import STMT_COMMANDS
from dumper.server.queries import QueryHandler, Session
from dumper.server.replicas import ReplicaStats
from dumper.server.stream_dirs import BOUND_USER_SUFFIX, ServedGroup, ServedStream
from dumper.server.tls import TlsError, server_context

log = logging.getLogger("gbinlog.serve")

COM_QUIT = 0x01
COM_INIT_DB = 0x02
COM_QUERY = 0x03
COM_FIELD_LIST = 0x04
COM_STATISTICS = 0x09
COM_PING = 0x0E
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_SET_OPTION = 0x1B
COM_BINLOG_DUMP_GTID = 0x1E
COM_RESET_CONNECTION = 0x1F

# Queries up to this size made of quick statements (constants, variables, the server's state) are
# answered on the event loop; longer ones, and any that reads tables or a file (QueryHandler.answer_inline),
# by the bounded worker threads within their time budget, so no session's query stalls another's.
_INLINE_QUERY = 4096
_SWITCH_INTERVAL = 0.0005


def _answer_framed(answer: Callable[[Session, object], list[bytes]], session: Session, request: object,
                   seq: int) -> tuple[bytes, int]:
    """A worker thread's whole job for one long query: answer it and frame the answer (a result of
    500,000 columns is as many packets: framing it on the loop would stall it too)."""
    out = []
    for payload in answer(session, request):
        data, seq = p.frame(payload, seq)
        out.append(data)
    return b"".join(out), seq


def _lower_priority() -> None:
    """Query workers run at a lower OS priority than the event loop (Linux: per-thread nice), so a
    busy worker does not take a CPU the loop needs for logins and dumps."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (OSError, AttributeError):
        pass


class _Connection:
    __slots__ = ("session", "writer", "dump", "seq", "secure", "peer_port", "handshake", "task", "counters")

    def __init__(self, session: Session, writer: asyncio.StreamWriter, peer_port: int = 0) -> None:
        self.session = session
        self.writer = writer
        self.dump: BinlogDump | None = None
        self.seq = 0
        self.task: asyncio.Task | None = None      # the connection's own task (KILL cancels it)
        self.counters: ServerCounters | None = None
        self.secure = False
        self.peer_port = peer_port
        self.handshake: asyncio.Timeout | None = None   # the login's deadline (a login delay extends it)

    def send(self, payloads: list[bytes]) -> None:
        out = []
        for payload in payloads:
            data, self.seq = p.frame(payload, self.seq)
            out.append(data)
        data = b"".join(out)
        if self.counters is not None:
            self.counters.add("Bytes_sent", len(data))
        self.writer.write(data)


class BinlogServer:
    """Serves one directory of binlog files over the MySQL replication protocol."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config.validate()
        # a stream group's output directory: every stream served, stream 0 by default (stream_dirs)
        self.group = ServedGroup.open(config.dir, config.streams) if config.base is None else None
        self.bdir = self.group.streams[0].bdir if self.group else BinlogDir(config.dir, config.base)
        self.queries = QueryHandler(self)
        self.credentials = config.credentials()
        self.sha2_cache: dict[str, bytes] = {}   # caching_sha2 fast auth: user -> SHA256(SHA256(pw))
        self.login_throttle = LoginThrottle(config.failed_login_threshold, config.failed_login_min_delay,
                                            config.failed_login_max_delay)
        self._rsa: RsaKeys | None = None
        self.tls_context: ssl.SSLContext | None = None
        if config.tls_cert is not None and config.tls_key is not None:
            try:
                self.tls_context = server_context(Path(config.tls_cert), Path(config.tls_key),
                                                  generate=config.tls_generate, hosts=(config.host,))
            except TlsError as exc:
                raise ConfigError(str(exc)) from None
        self._query_pool: ThreadPoolExecutor | None = None
        self._open = 0                            # connections accepted and not yet closed
        self._background: set[asyncio.Future] = set()   # retention, replica figures
        self.stats = ReplicaStats(self, config.stats_interval)
        self.counters = ServerCounters()           # SHOW GLOBAL STATUS
        self._conns: dict[int, _Connection] = {}
        self._tasks: set[asyncio.Task] = set()
        self._next_id = 1
        self._server: asyncio.Server | None = None
        self._changed: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = config.port

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._query_pool = ThreadPoolExecutor(self.config.query_workers, thread_name_prefix="gbinlog-query",
                                              initializer=_lower_priority)
        # The loop thread waits for the GIL at each wake-up while query workers compute: a short
        # switch interval (CPython's default is 5 ms) keeps those waits, and so logins and dump
        # heartbeats, short (measured in tests/test_server_limits.py).
        sys.setswitchinterval(min(sys.getswitchinterval(), _SWITCH_INTERVAL))
        if any(c.plugin == CACHING_SHA2 for c in self.credentials.values()):
            self._rsa = await asyncio.to_thread(RsaKeys)
        self._server = await asyncio.start_server(self._on_connect, self.config.host, self.config.port,
                                                  reuse_address=True, backlog=256)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving %s on %s:%d", self.config.dir, self.config.host, self.port)
        if retention.enabled(self):
            self._background.add(asyncio.ensure_future(retention.retention_task(self)))
        self._background.add(asyncio.ensure_future(self.stats.run()))

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()
        # A connection accepted just now has its task created but not yet started (so not yet in
        # _tasks): let it start, then cancel everything.
        await asyncio.sleep(0)
        while self._tasks:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._tasks.difference_update(tasks)
        if self._server is not None:
            await self._server.wait_closed()
        if self._query_pool is not None:
            self._query_pool.shutdown(wait=False, cancel_futures=True)

    # -- shared state ---------------------------------------------------------------------------------
    def rsa_keys(self) -> RsaKeys:
        if self._rsa is None:
            self._rsa = RsaKeys()
        return self._rsa

    def sessions(self) -> list[Session]:
        return [c.session for c in self._conns.values()]

    def kill(self, conn_id: int, *, query_only: bool = False) -> None:
        """KILL: end connection ``conn_id`` (a dump stops with it), or with ``query_only`` interrupt
        its running statement (a dump has none: KILL QUERY ends it too). From any thread."""
        conn = self._conns.get(conn_id)
        if conn is None or self._loop is None:
            return
        session = conn.session
        if query_only and conn.dump is None:
            if session.command == "Query":
                session.killed = True
                if session.interrupt is not None:
                    session.interrupt()
            return
        session_log.info("conn=%d user=%s killed", conn_id, session.user)
        if conn.task is not None:
            self._loop.call_soon_threadsafe(conn.task.cancel)

    def stream_of(self, session: Session, name: str | None = None) -> ServedStream:
        r"""The stream a statement of ``session`` is about: the one ``name``\ d (``… WITH 'name'``), else
        the one its user is bound to, else stream 0; a single-stream directory's files otherwise.
        QueryError 1373 for a name that is not a stream here."""
        group = self.group
        if name is not None:
            stream = group.by_name(name) if group else None
            if stream is None:
                raise QueryError(p.ER_UNKNOWN_TARGET_BINLOG, f"Stream '{name}' not found (SHOW BINARY STREAMS "
                                                             "lists the streams)")
            return stream
        if group is None:
            return ServedStream("", self.bdir, self.queries.gtid_files)
        return group.of_user(session.user) or group.streams[0]

    def dump_stream(self, session: Session, file: str) -> ServedStream:
        """The stream a dump reads: the one its file names; with no file (GTID auto-position), the
        one the user is bound to. DumpError (ERR 1236) when a group's request names neither."""
        group = self.group
        if group is None:
            return ServedStream("", self.bdir, self.queries.gtid_files)
        if file:
            stream = group.by_file(file)
            if stream is None:
                raise DumpError(f"Could not find first log file name in binary log index file ('{file}' is not "
                                f"a file of stream group {group.group}: SHOW BINARY STREAMS lists its streams)")
            return stream
        stream = group.of_user(session.user)
        if stream is None:
            raise DumpError(f"this endpoint serves stream group {group.group} ({len(group.streams)} streams): "
                            f"name a stream's file, or log in as a user bound to a stream "
                            f"('<stream>{BOUND_USER_SUFFIX}', e.g. '{group.streams[0].name}{BOUND_USER_SUFFIX}') "
                            "for GTID auto-position")
        return stream

    def files_in_use(self) -> set[str]:
        """Files a connected dump is reading, or may still read (the files after its current one)."""
        return {c.dump.file for c in self._conns.values() if c.dump is not None}

    def dumps(self) -> list[BinlogDump]:
        return [c.dump for c in self._conns.values() if c.dump is not None]

    def connections(self) -> list[_Connection]:
        return list(self._conns.values())

    def health(self, timeout: float = 1.0) -> tuple[bool, str]:
        """(healthy, reason) for ``/healthz`` of ``gbinlog serve``, from any thread: listening, the
        event loop running a callback within ``timeout`` s (a blocked loop leaves every replica and
        login waiting while the port still accepts), and the binlog index readable."""
        if self._server is None or not self._server.is_serving() or self._loop is None:
            return False, "the replication endpoint is not listening"
        answered = threading.Event()
        try:
            self._loop.call_soon_threadsafe(answered.set)
        except RuntimeError:                      # the loop is closed
            return False, "the replication endpoint is not running"
        if not answered.wait(timeout):
            return False, f"the endpoint's event loop did not answer within {timeout:g} s"
        try:
            index = self.bdir.index_path    # read here, not through the loop thread's cached list
        except BinlogDirError as exc:
            return False, str(exc)
        if index is None:
            return False, f"{self.config.dir}: no binlog index (<base>.index)"
        try:
            with open(index, "rb") as fh:
                if not fh.read(4096).strip():
                    return False, f"{index}: empty binlog index"
        except OSError as exc:
            return False, f"{index}: {exc.strerror or exc}"
        return True, "ok"

    def replica_stats(self) -> list[dict]:
        """Per connected replica (dump): server_id, user, host, port, tls, file, pos, bytes_sent,
        bytes_per_s, seconds_behind_head… as of the last sample (``stats_interval``). Any thread."""
        return list(self.stats.snapshot)

    def disk_usage(self) -> tuple[int, int]:
        """(files, bytes) of the served binlog files."""
        return retention.disk_usage(self)

    def notify(self) -> None:
        """Wake dumps waiting at the end of the newest file (a writer in this process appended).
        Safe from any thread."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # loop closed
            pass

    def _wake(self) -> None:
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_change(self, timeout: float) -> None:
        """Sleep up to ``timeout`` s, less when ``notify()`` is called. Callers re-check the files:
        polling the size is what finds growth from other processes."""
        assert self._changed is not None
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    # -- connections ----------------------------------------------------------------------------------
    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn_id = self._next_id
        self._next_id += 1
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = _Connection(Session(conn_id, str(peer[0]), port=int(peer[1])), writer, int(peer[1]))
        conn.task = task
        conn.counters = self.counters
        self._open += 1
        try:
            if self._open > self.config.max_connections:
                await limits.refuse_too_many(writer, str(peer[0]))
                return
            writer.transport.set_write_buffer_limits(high=self.config.write_buffer)
            async with asyncio.timeout(self.config.handshake_timeout) as conn.handshake:
                ok = await login(self, conn, reader)
            self.counters.add("Connections" if ok else "Aborted_connects")
            if ok:
                self._conns[conn_id] = conn
                await self._commands(conn, reader)
        except (asyncio.IncompleteReadError, ConnectionError, p.ProtocolError, TimeoutError, ssl.SSLError) as exc:
            log.debug("connection %d closed: %r", conn_id, exc)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must not take the server down: log it, drop this client only
            log.exception("connection %d failed", conn_id)
        finally:
            self._open -= 1
            self._conns.pop(conn_id, None)
            self._tasks.discard(task)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (Exception, asyncio.CancelledError):
                pass

    async def _commands(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        session = conn.session
        cfg = self.config
        while True:
            try:
                payload, seq = await limits.read_command(reader, max_packet=cfg.max_allowed_packet,
                                                         idle_timeout=cfg.wait_timeout,
                                                         read_timeout=cfg.net_read_timeout)
            except limits.PacketTooLarge as exc:
                conn.seq = (exc.seq + 1) & 0xFF
                conn.send([p.err_packet(p.ER_NET_PACKET_TOO_LARGE,
                                        "Got a packet bigger than 'max_allowed_packet' bytes", "08S01")])
                await conn.writer.drain()
                session_log.info("conn=%d user=%s closed: packet of %d bytes > max_allowed_packet",
                                 session.conn_id, session.user, exc.size)
                return
            conn.seq = (seq + 1) & 0xFF
            self.counters.add("Bytes_received", len(payload) + 4)
            if not payload:
                raise p.ProtocolError("empty command packet")
            cmd = payload[0]
            if cmd == COM_QUIT:
                return
            if cmd == COM_QUERY:
                await self._query(conn, payload)
            elif cmd == COM_PING:
                conn.send([p.ok_packet(status=session.status)])
            elif cmd == COM_INIT_DB:
                conn.send(self.queries.init_db(session, payload[1:]))
            elif cmd in STMT_COMMANDS:
                if len(payload) <= _INLINE_QUERY:
                    conn.send(self.queries.prepared.handle(session, payload))
                else:   # a long statement (or its parameters): the worker thread, as a long query
                    await self._in_worker(conn, self.queries.prepared.handle, session, payload)
            elif cmd == COM_RESET_CONNECTION:
                session.reset()
                conn.send([p.ok_packet(status=session.status)])
            elif cmd == COM_SET_OPTION:   # MYSQL_OPTION_MULTI_STATEMENTS_ON (0) / _OFF (1)
                if len(payload) >= 3:
                    session.multi_statements = payload[1] == 0
                conn.send([p.eof_packet(session.status)])
            elif cmd == COM_STATISTICS:
                conn.send([f"Uptime: 1  Threads: {len(self._conns)}".encode()])
            elif cmd == COM_REGISTER_SLAVE:
                conn.send([self._register_slave(session, payload[1:])])
            elif cmd == COM_BINLOG_DUMP:
                await self._dump(conn, reader, payload[1:])
                return  # the session ends with the dump (MariaDB's "fake COM_QUIT")
            elif cmd == COM_BINLOG_DUMP_GTID:
                await self._dump(conn, reader, payload[1:], by_gtid=True)
                return
            else:
                conn.send([p.err_packet(p.ER_UNKNOWN_COM, f"Unknown command {cmd}", "08S01")])
            await conn.writer.drain()

    async def _query(self, conn: _Connection, payload: bytes) -> None:
        sql = payload[1:].decode("utf-8", "replace")
        if len(payload) <= _INLINE_QUERY:
            answer = self.queries.answer_inline(conn.session, sql)   # (PURGE logs its outcome: queries)
            if answer is not None:
                conn.send(answer)
                return
        await self._in_worker(conn, self.queries.handle, conn.session, sql)

    async def _in_worker(self, conn: _Connection, answer: Callable[[Session, object], list[bytes]],
                         session: Session, request: object) -> None:
        assert self._loop is not None
        data, conn.seq = await self._loop.run_in_executor(self._query_pool, _answer_framed, answer, session,
                                                          request, conn.seq)
        conn.writer.write(data)

    def _register_slave(self, session: Session, body: bytes) -> bytes:
        try:
            server_id = struct.unpack_from("<I", body)[0]
            off = 4
            fields = []
            for _ in range(3):  # host, user, password
                n = body[off]
                fields.append(body[off + 1:off + 1 + n])
                if off + 1 + n > len(body):
                    raise IndexError
                off += 1 + n
            port = struct.unpack_from("<H", body, off)[0] if off + 2 <= len(body) else 0
        except (IndexError, struct.error):
            return p.err_packet(1835, "Malformed communication packet (COM_REGISTER_SLAVE)", "08S01")
        session.slave = {"server_id": server_id, "host": fields[0].decode("utf-8", "replace"),
                         "user": fields[1].decode("utf-8", "replace"), "port": port}
        return p.ok_packet(status=session.status)

    async def _dump_request(self, conn: _Connection, body: bytes, by_gtid: bool,
                            gone: asyncio.Future, stream: ServedStream) -> DumpRequest | None:
        """Where the dump starts (auto-position: the first transaction the client lacks; the first file
        of an empty directory and an HA follower's catch-up are waited for: gtid_dump); None when the
        client went away meanwhile or got ERR 1236."""
        asking = asyncio.ensure_future(dump_request(self, conn, body, by_gtid, stream.bdir, stream.gtid_files))
        try:
            await asyncio.wait({asking, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not asking.done():
                asking.cancel()
                await asyncio.gather(asking, return_exceptions=True)
        if asking.cancelled():
            return None
        try:
            return asking.result()
        except DumpError as exc:
            conn.send([p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, str(exc))])
            await conn.writer.drain()
            return None

    async def _dump(self, conn: _Connection, reader: asyncio.StreamReader, body: bytes, by_gtid: bool = False) -> None:
        gate = getattr(self, "dump_gate", None)     # HA: a follower past its lag gate refuses (gbinlog.ha)
        if gate is not None and (refusal := gate()):
            conn.send([p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, refusal)])
            await conn.writer.drain()
            return
        # The client sends nothing during a dump; a read returning means it closed (or quit): stop,
        # also while the request still waits (for the first file, or for an HA catch-up).
        gone = asyncio.ensure_future(reader.read(1))
        try:
            stream = self.dump_stream(conn.session, "" if by_gtid else DumpRequest.parse(body).file)
        except DumpError as exc:
            gone.cancel()
            conn.send([p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, str(exc))])
            await conn.writer.drain()
            return
        try:
            request = await self._dump_request(conn, body, by_gtid, gone, stream)
        except BaseException:
            gone.cancel()
            raise
        if request is None:
            gone.cancel()
            return
        dump = BinlogDump(self, conn.session, conn.writer, request, stream.bdir)
        dump.seq = conn.seq
        conn.dump = dump
        s = conn.session
        s.command, s.since, s.info = ("Binlog Dump GTID" if by_gtid else "Binlog Dump"), time.monotonic(), None
        session_log.info("dump start conn=%d user=%s from=%s:%d server_id=%d at %s:%d tls=%s", s.conn_id, s.user,
                         s.host, conn.peer_port, request.server_id, request.file, request.position,
                         "yes" if conn.secure else "no")
        dump_task = asyncio.ensure_future(dump.run())
        try:
            done, _ = await asyncio.wait({dump_task, gone}, return_when=asyncio.FIRST_COMPLETED)
            if dump_task in done:
                dump_task.result()
        finally:
            for t in (dump_task, gone):
                if not t.done():
                    t.cancel()
            await asyncio.gather(dump_task, gone, return_exceptions=True)
            conn.dump = None
            self.counters.add("Bytes_sent", dump.bytes_sent)
            session_log.info("dump stop conn=%d user=%s server_id=%d at %s:%d (%d events, %d bytes sent)",
                             s.conn_id, s.user, request.server_id, dump.file, dump.position, dump.events_sent,
                             dump.bytes_sent)


# -- running it ---------------------------------------------------------------------------------------

class ServerHandle:
    """A server running in a background thread: ``.port``, ``.notify()``, ``.stop()``."""

    def __init__(self, server: BinlogServer, loop: asyncio.AbstractEventLoop, thread: threading.Thread):
        self.server = server
        self.loop = loop
        self.thread = thread

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def host(self) -> str:
        return self.server.config.host

    def notify(self) -> None:
        self.server.notify()

    def stop(self, timeout: float = 10.0) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_thread(config: ServerConfig | None = None, **kwargs: object) -> ServerHandle:
    """Start a ``BinlogServer`` in a daemon thread with its own event loop; returns once listening.

    ``start_in_thread(dir=..., users={"repl": "pw"})`` builds the config from keywords.
    """
    cfg = replace(config, **kwargs) if config is not None else ServerConfig(**kwargs)  # type: ignore[arg-type]
    server = BinlogServer(cfg)  # validates in the caller's thread: config errors raise here
    ready = threading.Event()
    box: dict[str, object] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        box["loop"] = loop
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(server.close())
            # Anything still pending (a connection task that never got to register) ends here too,
            # so no task is destroyed pending when the loop closes.
            rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in rest:
                t.cancel()
            if rest:
                loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.close()

    thread = threading.Thread(target=run, name=f"gbinlog-serve:{Path(cfg.dir).name}", daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return ServerHandle(server, box["loop"], thread)  # type: ignore[arg-type]


async def serve(dir: str | Path, config: ServerConfig | None = None, *,
                on_ready: Callable[[BinlogServer], None] | None = None) -> None:
    """Serve ``dir`` until cancelled; ``on_ready(server)`` runs once listening (``server.port``)."""
    cfg = replace(config or ServerConfig(), dir=Path(dir))
    server = BinlogServer(cfg)
    await server.start()
    if on_ready is not None:
        on_ready(server)
    try:
        await server.serve_forever()
    finally:
        await server.close()
