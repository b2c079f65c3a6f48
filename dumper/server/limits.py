"""What one client may take from the endpoint, with MySQL's names and errors.

* ``max_connections``: one more is answered ERR 1040 "Too many connections" (08004) instead of the
  handshake, and closed (as ``sql/conn_handler/connection_handler_manager.cc`` does);
* ``max_allowed_packet``: a command longer than this is answered ERR 1153 (08S01) and the connection
  closed, before its bytes are buffered;
* ``wait_timeout``: a logged-in session idle between commands this long is closed;
* ``net_read_timeout``: once a packet has started, each read of the rest must return within this
  (a client that sends half a packet is closed, not waited on forever).
"""

from __future__ import annotations

import asyncio
import struct

from dumper.server import protocol as p
from dumper.server.logtext import session_log

ER_CON_COUNT = 1040
_HEADER = struct.Struct("<I")
_READ = 1 << 16

log = session_log


class PacketTooLarge(Exception):
    def __init__(self, size: int, seq: int) -> None:
        super().__init__(f"packet of {size} bytes")
        self.size = size
        self.seq = seq


async def refuse_too_many(writer: asyncio.StreamWriter, host: str) -> None:
    frame, _ = p.frame(p.err_packet(ER_CON_COUNT, "Too many connections", "08004"), 0)
    writer.write(frame)
    log.info("connection from %s refused: max_connections reached", host)
    try:
        await asyncio.wait_for(writer.drain(), 1.0)
    except (TimeoutError, ConnectionError):
        pass


async def _exactly(reader: asyncio.StreamReader, n: int, timeout: float) -> bytes:
    """``n`` bytes, each read returning within ``timeout`` (MySQL's per-read net_read_timeout)."""
    if n == 0:
        return b""
    parts = []
    left = n
    while left:
        async with asyncio.timeout(timeout):
            chunk = await reader.read(min(left, _READ))
        if not chunk:
            raise asyncio.IncompleteReadError(b"".join(parts), n)
        parts.append(chunk)
        left -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


async def _discard(reader: asyncio.StreamReader, n: int, timeout: float) -> None:
    while n:
        async with asyncio.timeout(timeout):
            chunk = await reader.read(min(n, _READ))
        if not chunk:
            return
        n -= len(chunk)


async def read_command(reader: asyncio.StreamReader, *, max_packet: int, idle_timeout: float,
                       read_timeout: float) -> tuple[bytes, int]:
    """The next command packet (continuations joined) and the sequence id of its last part."""
    async with asyncio.timeout(idle_timeout):
        first = await reader.readexactly(1)
    header = first + await _exactly(reader, 3, read_timeout)
    parts = []
    total = 0
    while True:
        word = _HEADER.unpack(header)[0]
        n = word & 0xFFFFFF
        seq = word >> 24
        total += n
        if total > max_packet:
            # Read the rest of this packet away first: closing with unread bytes makes the kernel
            # reset the connection, and the client would never see the error.
            await _discard(reader, n, read_timeout)
            raise PacketTooLarge(total, seq)
        parts.append(await _exactly(reader, n, read_timeout))
        if n < p.MAX_PAYLOAD:
            return (parts[0] if len(parts) == 1 else b"".join(parts)), seq
        header = await _exactly(reader, 4, read_timeout)
