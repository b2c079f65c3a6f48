"""The dump's byte loop: whole binlog events of a file buffer → replication protocol packets.

Each event is its own packet (3-byte length = event size + 1, sequence id, ``0x00``, the event), and
many packets leave in one write. ``frame_events`` is the compiled kernel (``_framing.c``, built by
``pip install``) when it is there, else ``frame_events_py``; both give identical bytes (the tests run
both). ``GBINLOG_PURE_PYTHON=1`` forces the Python loop.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from binlog.constants import HEADER_LEN
from binlog.kernel import compiled_twin
from binlog.wire import MAX_PAYLOAD

SPLIT_AT = MAX_PAYLOAD - 1               # 0x00 + event no longer fits one packet
_PACKET_HEAD_00 = struct.Struct("<IB")   # packet header + the 0x00 "OK" byte before each event
_SIZE = struct.Struct("<I")

FrameResult = tuple[bytes | bytearray, int, int, int]


def frame_events_py(buf: bytes | bytearray | memoryview, off: int, seq: int) -> FrameResult:
    """Packets for the whole events of ``buf`` from ``off``: (packets, offset reached, next sequence
    id, events framed). Stops at the first event that is incomplete, impossible (< 19 bytes) or too
    big for one packet; the caller deals with that event."""
    unpack_size = _SIZE.unpack_from
    pack_head = _PACKET_HEAD_00.pack
    mv = memoryview(buf)
    out = bytearray()
    limit = len(buf) - HEADER_LEN
    n = len(buf)
    count = 0
    while off <= limit:
        size = unpack_size(buf, off + 9)[0]
        end = off + size
        if end > n or size < HEADER_LEN or size >= SPLIT_AT:
            break
        out += pack_head((size + 1) | (seq << 24), 0)
        out += mv[off:end]
        seq = (seq + 1) & 0xFF
        off = end
        count += 1
    del mv
    return out, off, seq, count


frame_events_c = compiled_twin("dumper.server._framing", "frame_events")
frame_events: Callable[[bytes, int, int], FrameResult] = frame_events_c or frame_events_py
COMPILED = frame_events_c is not None

__all__ = ["frame_events", "frame_events_py", "frame_events_c", "COMPILED", "SPLIT_AT"]
