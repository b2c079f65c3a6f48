"""The asyncio server: accept, authenticate, answer commands, run dumps; one task per connection.

``BinlogServer(config)`` runs inside an event loop (``await start()``, ``await close()``);
``start_in_thread(config)`` runs one in a background thread for tests and for the live service;
``serve(dir, config)`` runs one until cancelled (the CLI).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import struct
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dumper.server import protocol as p
from dumper.server.binlogdir import BinlogDir
from dumper.server.config import ServerConfig
from dumper.server.dump import BinlogDump, DumpError, DumpRequest
from dumper.server.gtid_dump import dump_gtid_request
from dumper.server.prepared import STMT_COMMANDS
from dumper.server.queries import QueryHandler, Session

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

_SCRAMBLE_CHARS = bytes(range(33, 127))
_SLOW_QUERY = re.compile(r"\s*show\s+binlog\s+events\b", re.I)


class _Connection:
    __slots__ = ("session", "writer", "dump", "seq")

    def __init__(self, session: Session, writer: asyncio.StreamWriter) -> None:
        self.session = session
        self.writer = writer
        self.dump: BinlogDump | None = None
        self.seq = 0

    def send(self, payloads: list[bytes]) -> None:
        out = []
        for payload in payloads:
            data, self.seq = p.frame(payload, self.seq)
            out.append(data)
        self.writer.write(b"".join(out))


class BinlogServer:
    """Serves one directory of binlog files over the MySQL replication protocol."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config.validate()
        self.bdir = BinlogDir(config.dir, config.base)
        self.queries = QueryHandler(self)
        self._hashes = config.password_hashes()
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
        self._server = await asyncio.start_server(self._on_connect, self.config.host, self.config.port,
                                                  reuse_address=True, backlog=256)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving %s on %s:%d", self.config.dir, self.config.host, self.port)

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
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

    # -- shared state ---------------------------------------------------------------------------------
    def sessions(self) -> list[Session]:
        return [c.session for c in self._conns.values()]

    def files_in_use(self) -> set[str]:
        """Files a connected dump is reading, or may still read (the files after its current one)."""
        return {c.dump.file for c in self._conns.values() if c.dump is not None}

    def dumps(self) -> list[BinlogDump]:
        return [c.dump for c in self._conns.values() if c.dump is not None]

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
        conn = _Connection(Session(conn_id, str(peer[0])), writer)
        try:
            writer.transport.set_write_buffer_limits(high=self.config.write_buffer)
            ok = await asyncio.wait_for(self._handshake(conn, reader), self.config.handshake_timeout)
            if ok:
                self._conns[conn_id] = conn
                await self._commands(conn, reader)
        except (asyncio.IncompleteReadError, ConnectionError, p.ProtocolError, TimeoutError) as exc:
            log.debug("connection %d closed: %r", conn_id, exc)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must not take the server down: log it, drop this client only
            log.exception("connection %d failed", conn_id)
        finally:
            self._conns.pop(conn_id, None)
            self._tasks.discard(task)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (Exception, asyncio.CancelledError):
                pass

    async def _handshake(self, conn: _Connection, reader: asyncio.StreamReader) -> bool:
        scramble = bytes(random.choice(_SCRAMBLE_CHARS) for _ in range(20))
        conn.send([p.handshake_v10(self.config.version, conn.session.conn_id, scramble)])
        payload, seq = await p.read_packet(reader, limit=64 << 10)
        conn.seq = (seq + 1) & 0xFF
        resp = p.parse_handshake_response(payload)
        auth = resp.auth
        if resp.plugin not in (None, "", p.NATIVE_PLUGIN.decode()):
            # e.g. a MySQL 8 client starting with caching_sha2_password: switch it to native.
            conn.send([p.auth_switch_request(scramble)])
            await conn.writer.drain()
            auth, seq = await p.read_packet(reader, limit=1024)
            conn.seq = (seq + 1) & 0xFF
        user = resp.user
        stored = self._hashes.get(user) if user else None
        if not p.check_native_password(stored, scramble, auth):
            using = "YES" if auth else "NO"
            conn.send([p.err_packet(p.ER_ACCESS_DENIED, f"Access denied for user '{user}'@'"
                                    f"{conn.session.host}' (using password: {using})", "28000")])
            await conn.writer.drain()
            log.info("connection %d: access denied for %r", conn.session.conn_id, user)
            return False
        conn.session.user = user
        conn.session.admin = user in self.config.admins
        conn.session.db = resp.database or None  # CLIENT_CONNECT_WITH_DB
        conn.send([p.ok_packet(status=conn.session.status)])
        await conn.writer.drain()
        return True

    async def _commands(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        session = conn.session
        while True:
            payload, seq = await p.read_packet(reader)
            conn.seq = (seq + 1) & 0xFF
            if not payload:
                raise p.ProtocolError("empty command packet")
            cmd = payload[0]
            if cmd == COM_QUIT:
                return
            if cmd == COM_QUERY:
                sql = payload[1:].decode("utf-8", "replace")
                if _SLOW_QUERY.match(sql):
                    # Reads a whole file: in a thread, so the dumps on this loop keep streaming.
                    conn.send(await asyncio.to_thread(self.queries.handle, session, sql))
                else:
                    conn.send(self.queries.handle(session, sql))
            elif cmd == COM_PING:
                conn.send([p.ok_packet(status=session.status)])
            elif cmd == COM_INIT_DB:
                conn.send(self.queries.init_db(session, payload[1:]))
            elif cmd in STMT_COMMANDS:
                conn.send(self.queries.prepared.handle(session, payload))
            elif cmd == COM_RESET_CONNECTION:
                session.reset()
                conn.send([p.ok_packet(status=session.status)])
            elif cmd == COM_SET_OPTION:
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

    async def _dump(self, conn: _Connection, reader: asyncio.StreamReader, body: bytes, by_gtid: bool = False) -> None:
        try:
            if by_gtid:  # auto-position: the first transaction the client lacks (gtid_dump)
                request = await asyncio.to_thread(dump_gtid_request, body, self.queries.gtid_files, self.bdir.path,
                                                  self.bdir.files())
            else:
                request = DumpRequest.parse(body)
        except DumpError as exc:
            conn.send([p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, str(exc))])
            await conn.writer.drain()
            return
        dump = BinlogDump(self, conn.session, conn.writer, request)
        dump.seq = conn.seq
        conn.dump = dump
        # The client sends nothing during a dump; a read returning means it closed (or quit): stop.
        dump_task = asyncio.ensure_future(dump.run())
        gone = asyncio.ensure_future(reader.read(1))
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
