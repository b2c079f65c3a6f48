"""COM_BINLOG_DUMP: stream a directory's binlog files to one client (reference §4).

fake ROTATE → the file's FDE (patched when starting past 4) → events verbatim, many packets per
write (``framing.frame_events``, compiled) → at the end of an older file the next one (fake ROTATE + FDE) → at the end of the newest file EOF (non-blocking) or
wait for growth, sending HEARTBEAT (27) every ``@master_heartbeat_period`` while idle. Only whole
events are sent; bad file/position → ERR 1236. Each client has its own task and a bounded write
buffer (``drain()``), so a slow client only slows itself.
"""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from binlog.constants import HEADER_LEN, MAX_EVENT_SIZE
from dumper.server import protocol as p
from dumper.server.binlogdir import BinlogDirError, Fde, event_at, fake_rotate, heartbeat, patch_fde
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
                 request: DumpRequest) -> None:
        self.server = server
        self.cfg = server.config
        self.bdir = server.bdir
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
        self._pending = b""              # bytes of an event not yet complete in the file
        self._last_sent = time.monotonic()

    # -- output ---------------------------------------------------------------------------------------
    def _packet(self, payload: bytes) -> bytes:
        data, self.seq = p.frame(payload, self.seq)
        return data

    def _event_packet(self, event: bytes) -> bytes:
        return self._packet(b"\0" + event)

    async def _send(self, data: bytes | bytearray) -> None:
        self.writer.write(data)
        self.bytes_sent += len(data)
        await self.writer.drain()

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
        try:
            await self._run()
        except DumpError as exc:
            msg = (f"{exc}; the first event '{self.request.file}' at {self.request.position}, "
                   f"the last event read from '{self.file}' at {self.position}")
            await self._send(self._packet(p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, msg)))
        except (BinlogDirError, FileNotFoundError) as exc:
            await self._send(self._packet(p.err_packet(p.ER_MASTER_FATAL_READING_BINLOG, str(exc))))

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
        # First fake ROTATE: CRC iff the client asked for CRC32 (§4.1); then the FDE's algorithm rules.
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
        self._pending = b""
        self._last_sent = time.monotonic()
        while True:
            data = fh.read(self.cfg.read_chunk)
            if data:
                pos = await self._send_chunk(fh, name, pos, data)
                continue
            # End of the bytes written so far.
            files = self.bdir.files()
            if name not in files:
                raise DumpError(f"log file '{name}' was removed from the index while being read")
            i = files.index(name)
            if i + 1 < len(files):
                # A newer file exists, so this one is complete; a last read catches what was written
                # just before the index changed.
                data = fh.read(self.cfg.read_chunk)
                if data:
                    fh.seek(-len(data), 1)
                    continue
                if self._pending:
                    raise DumpError(f"log file '{name}' ends {len(self._pending)} bytes into an event at {pos}")
                return await self._next_file(fh, files[i + 1])
            if self.request.flags & BINLOG_DUMP_NON_BLOCK or self.request.server_id == 0:
                await self._send(self._packet(p.eof_packet()))
                return name, None, pos
            await self._idle(name, pos)

    async def _send_chunk(self, fh, name: str, pos: int, data: bytes) -> int:
        """Frame and send the whole events of ``pending + data`` (file offset ``pos``); keep the
        incomplete tail as pending. Returns the file offset of the pending bytes."""
        buf = self._pending + data if self._pending else data
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
                # A big event: read the rest of it at once.
                buf = buf[off:] + fh.read(off + size - len(buf))
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
        self._pending = buf[off:]
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
        if self.bdir.size(name) < pos + len(self._pending):
            raise DumpError(f"log file '{name}' was truncated below {pos} while being read")
