"""COM_BINLOG_DUMP: stream a directory's binlog files to one client, as a MySQL master does.

fake ROTATE → the file's FDE (patched when starting past 4) → events verbatim, many packets per
write (``framing.frame_events``, compiled) → at the end of an older file the next one (fake ROTATE + FDE) → at the end of the newest file EOF (non-blocking) or
wait for growth, sending HEARTBEAT (27) every ``@master_heartbeat_period`` while idle. Only whole
events are sent; bad file/position → ERR 1236. Each client has its own task and a bounded write
buffer (``drain()``), so a slow client only slows itself.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from binlog.constants import HEADER_LEN, MAX_EVENT_SIZE
from dumper.server import protocol as p
from dumper.server.binlogdir import (
    BinlogDir,
    BinlogDirError,
    Fde,
    event_at,
    fake_rotate,
    heartbeat,
    patch_fde,
)
from dumper.server.framing import SPLIT_AT, frame_events

if TYPE_CHECKING:
    from dumper.server.queries import Session
    from dumper.server.server import BinlogServer

BINLOG_DUMP_NON_BLOCK = 0x01
_DUMP_HEAD = struct.Struct("<IHI")
_SIZE = struct.Struct("<I")


class DumpError(Exception):
    """Ends the dump with ERR 1236 (the replica stops instead of retrying)."""


@dataclass(slots=True)
class DumpRequest:
    position: int
    flags: int
    server_id: int
    file: str

    @classmethod
    def parse(cls, payload: bytes) -> DumpRequest:
        """``payload`` after the command byte: pos u32, flags u16, server_id u32, file name."""
        if len(payload) < _DUMP_HEAD.size:
            raise DumpError(f"COM_BINLOG_DUMP packet of {len(payload)} bytes is too short")
        pos, flags, server_id = _DUMP_HEAD.unpack_from(payload)
        # MariaDB reads the name as a C string; pmr in MariaDB mode sends four NULs.
        name = payload[_DUMP_HEAD.size:].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        if "/" in name or name in (".", ".."):
            raise DumpError(f"Could not find first log file name in binary log index file ({name!r})")
        return cls(pos, flags, server_id, name)


class BinlogDump:
    """One running dump. ``file``/``position`` say where it is (for PURGE and status)."""

    def __init__(self, server: BinlogServer, session: Session, writer: asyncio.StreamWriter,
                 request: DumpRequest, bdir: BinlogDir | None = None) -> None:
        self.server = server
        self.cfg = server.config
        self.bdir = bdir or server.bdir             # a stream group: the stream the request names
        self.session = session
        self.writer = writer
        self.request = request
        self.file = request.file
        self.position = request.position
        self.seq = 1
        self.checksum = False           # the stream's current algorithm (the FDE's)
        self.bytes_sent = 0
        self.events_sent = 0
        self.started_at = time.time()
        self._buf = bytearray()          # file reads land here; [0:_have] = an event not yet complete
        self._have = 0
        self._last_sent = time.monotonic()
        self._direct: socket.socket | None = None   # see _open_direct

    # -- output ---------------------------------------------------------------------------------------
    def _packet(self, payload: bytes) -> bytes:
        data, self.seq = p.frame(payload, self.seq)
        return data

    def _event_packet(self, event: bytes) -> bytes:
        return self._packet(b"\0" + event)

    async def _send(self, data: bytes | bytearray) -> None:
        self.bytes_sent += len(data)
        if self._direct is None:
            self.writer.write(data)
            await self.writer.drain()
            return
        transport = self.writer.transport
        if transport.get_write_buffer_size():   # a packet the transport still holds goes first
            transport.set_write_buffer_limits(high=0)
            await self.writer.drain()
            transport.set_write_buffer_limits(high=self.cfg.write_buffer)
        await asyncio.get_running_loop().sock_sendall(self._direct, data)

    def _open_direct(self) -> None:
        """Send the stream straight from our buffer to the kernel on a plain TCP connection.

        ``StreamWriter.write`` copies whatever the kernel does not take at once into the transport's
        buffer, and a replica reading slower than we frame (always, in bulk) keeps the kernel buffer
        full, so every byte was copied twice in user space. ``loop.sock_sendall`` sends from our
        buffer as the socket drains. It refuses a transport's own fd, so it gets a duplicate (same
        socket, non-blocking); packets we send through the writer (errors, EOF) wait until the
        direct sends are done, and ``_send`` lets the transport's buffer empty before a direct one.
        TLS connections keep the writer (the bytes must go through the TLS transport)."""
        if self.writer.get_extra_info("ssl_object") is not None:
            return
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return
        try:
            direct = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:
            return
        direct.setblocking(False)
        self._direct = direct

    def _close_direct(self) -> None:
        if self._direct is not None:
            self._direct.close()
            self._direct = None

    def client_checksum(self) -> str | None:
        """What the client said it handles: 'CRC32', 'NONE', or None when it never said."""
        v = self.session.user_vars
        value = v.get("master_binlog_checksum", v.get("source_binlog_checksum"))
        return None if value is None else str(value).upper()

    def heartbeat_period(self) -> float:
        v = self.session.user_vars
        ns = v.get("master_heartbeat_period", v.get("source_heartbeat_period"))
        try:
            period = int(ns) / 1e9 if ns is not None else self.cfg.heartbeat_period
        except (TypeError, ValueError):
            period = self.cfg.heartbeat_period
        return period

    # -- the stream -----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Stream until EOF (non-blocking) or the client goes away; DumpError → ERR 1236."""
        self._open_direct()
        try:
            await self._run()
        except DumpError as exc:
            msg = (f"{exc}; the first event '{self.request.file}' at {self.request.position}, "
                   f"the last event read from '{self.file}' at {self.position}")
            await self._send(self._packet(p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, msg)))
        except (BinlogDirError, FileNotFoundError) as exc:
            await self._send(self._packet(p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, str(exc))))
        finally:
            self._close_direct()

    async def _run(self) -> None:
        req = self.request
        files = self.bdir.files()
        if not files:
            raise DumpError("Binary log is not open")
        name = req.file or files[0]
        if name not in files:
            raise DumpError("Could not find first log file name in binary log index file")
        self.file = name
        if req.position < 4:
            raise DumpError("Client requested master to start replication from position < 4")
        try:
            fh = open(self.bdir.file_path(name), "rb")
        except OSError as exc:
            raise DumpError(f"Could not open log file ({exc.strerror})") from None
        try:
            await self._stream(fh, name, req.position)
        finally:
            fh.close()

    async def _wait_fde(self, name: str) -> Fde:
        """The file's FDE, waiting while a writer has created the file but not yet written it."""
        while True:
            fde = self.bdir.read_fde(name)
            if fde is not None:
                return fde
            await self.server.wait_for_change(self.cfg.poll_interval)

    async def _stream(self, fh, name: str, start: int) -> None:
        size = self.bdir.size(name)
        if start > size:
            raise DumpError("Client requested master to start replication from position > file size")
        fde = await self._wait_fde(name)
        client = self.client_checksum()
        if fde.checksum and client is None:
            raise DumpError("Slave can not handle replication events with the checksum that master is "
                            "configured to log")
        if start > 4 and start < fde.end:
            raise DumpError(f"position {start} is inside the FORMAT_DESCRIPTION event")
        if start > fde.end and start < size:
            why = event_at(fh, start, fde.checksum)
            if why is not None:
                raise DumpError(f"bogus data in log event: position {start} is not an event start ({why})")
        # First fake ROTATE: CRC iff the client asked for CRC32; then the FDE's algorithm rules.
        out = bytearray(self._event_packet(fake_rotate(name, start, server_id=self.cfg.server_id,
                                                       checksum=client == "CRC32")))
        if fde.raw is not None:
            out += self._event_packet(patch_fde(fde.raw, start))
        self.checksum = fde.checksum
        await self._send(out)
        pos = max(start, fde.end)
        self.position = pos
        fh.seek(pos)
        while True:
            name, fh, pos = await self._follow(fh, name, pos)
            if fh is None:
                return

    async def _follow(self, fh, name: str, pos: int):
        """Send whole events of ``name`` from ``pos`` until its end; then switch file, EOF or wait.

        Returns (name, fh, pos) to continue with, or (…, None, …) when the dump is over.
        """
        self._have = 0
        self._last_sent = time.monotonic()
        chunk = self.cfg.read_chunk
        if len(self._buf) < 2 * chunk:   # the pending tail (< one chunk) + one read
            self._buf = bytearray(2 * chunk)
        while True:
            # Read into one reusable buffer: a new bytes per read cost page faults (malloc trimming).
            view = memoryview(self._buf)
            n = fh.readinto(view[self._have:self._have + chunk])
            if n:
                pos = await self._send_chunk(fh, name, pos, view[:self._have + n])
                continue
            # End of the bytes written so far.
            files = self.bdir.files()
            if name not in files:
                raise DumpError(f"log file '{name}' was removed from the index while being read")
            i = files.index(name)
            if i + 1 < len(files):
                # A newer file exists, so this one is complete; a last read catches what was
                # written just before the index changed.
                if fh.read(1):
                    fh.seek(-1, 1)
                    continue
                if self._have:
                    raise DumpError(f"log file '{name}' ends {self._have} bytes into an event at {pos}")
                return await self._next_file(fh, files[i + 1])
            if self.request.flags & BINLOG_DUMP_NON_BLOCK or self.request.server_id == 0:
                await self._send(self._packet(p.eof_packet()))
                return name, None, pos
            await self._idle(name, pos)

    async def _send_chunk(self, fh, name: str, pos: int, buf: memoryview | bytes) -> int:
        """Frame and send the whole events of ``buf`` (the pending tail and what was just read, at
        file offset ``pos``); keep the incomplete tail at the start of ``self._buf``. Returns the
        file offset of the pending bytes."""
        out, off, self.seq, count = frame_events(buf, 0, self.seq)
        pieces = [out]
        # The byte loop stops at an incomplete, oversized or impossible event.
        while off + HEADER_LEN <= len(buf):
            size = _SIZE.unpack_from(buf, off + 9)[0]
            if size < HEADER_LEN or size > MAX_EVENT_SIZE:
                self.position = pos + off
                raise DumpError(f"bogus data in log event: impossible event size {size} at '{name}' {pos + off}")
            if off + size > len(buf):
                if size < self.cfg.read_chunk:
                    break
                # A big event: read the rest of it at once (outside the reusable buffer).
                buf = bytes(buf[off:]) + fh.read(off + size - len(buf))
                pos += off
                off = 0
                if size > len(buf):
                    break
            if size >= SPLIT_AT:  # 0x00 + event spans continuation packets
                pieces.append(self._event_packet(bytes(buf[off:off + size])))
                off += size
                count += 1
            more, off, self.seq, n = frame_events(buf, off, self.seq)
            pieces.append(more)
            count += n
        rest = len(buf) - off
        if rest + self.cfg.read_chunk > len(self._buf):
            # The start of a big event still being written: a new buffer it fits in with the next
            # read (the old one stays exported by the caller's view, so it is replaced, not resized).
            self._buf = bytearray(rest + self.cfg.read_chunk)
        self._buf[:rest] = bytes(buf[off:])
        self._have = rest
        pos += off
        if count:
            self.position = pos
            self.events_sent += count
            await self._send(pieces[0] if len(pieces) == 1 else b"".join(pieces))
            self._last_sent = time.monotonic()
        return pos

    async def _next_file(self, fh, nxt: str):
        """Leave the finished file for ``nxt``: fake ROTATE + its FDE, then (nxt, its handle, pos)."""
        fde = await self._wait_fde(nxt)
        try:
            new_fh = open(self.bdir.file_path(nxt), "rb")
        except OSError as exc:
            raise DumpError(f"Could not open log file '{nxt}' ({exc.strerror})") from None
        fh.close()
        # Fake ROTATE and FDE leave together: never a heartbeat between them (MDEV-29981).
        out = self._event_packet(fake_rotate(nxt, 4, server_id=self.cfg.server_id, checksum=self.checksum))
        if fde.raw is not None:
            out += self._event_packet(patch_fde(fde.raw, 4))
        self.checksum = fde.checksum
        self.file = nxt
        self.position = fde.end
        new_fh.seek(fde.end)
        await self._send(out)
        return nxt, new_fh, fde.end

    async def _idle(self, name: str, pos: int) -> None:
        """Newest file, all sent: wait for growth; a heartbeat every period while idle."""
        period = self.heartbeat_period()
        now = time.monotonic()
        if period > 0 and now - self._last_sent >= period:
            await self._send(self._event_packet(heartbeat(
                name, pos, server_id=self.cfg.server_id, checksum=self.checksum)))
            self._last_sent = now
        wait = self.cfg.poll_interval
        if period > 0:
            wait = max(0.001, min(wait, self._last_sent + period - now))
        await self.server.wait_for_change(wait)
        if self.bdir.size(name) < pos + self._have:
            raise DumpError(f"log file '{name}' was truncated below {pos} while being read")
