"""``Event``: one binlog event as it arrived (position, header, raw bytes), body decoded lazily."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from binlog.constants import CRC_LEN, HEADER_LEN, POST_HEADER_LEN_80
from binlog.header import HEADER_STRUCT, EventHeader


@dataclass(slots=True)
class FormatContext:
    """What the current FORMAT_DESCRIPTION says about the events after it.

    A fragment without an FDE is read as MySQL 8.0 with CRC32 (``DEFAULT_CONTEXT``).
    """

    checksum: bool = True
    server_version: str = "8.0.32"
    binlog_version: int = 4
    post_header_len: bytes = POST_HEADER_LEN_80
    source: str = "<bytes>"
    # table_id -> decoded TABLE_MAP body, filled by whoever decodes table maps (rows need them).
    table_maps: dict[int, Any] = field(default_factory=dict)

    @property
    def crc_len(self) -> int:
        return CRC_LEN if self.checksum else 0


_UNSET = object()
_DECODE_BODY = None


def _decoder():
    """``binlog.events.decode_body``, imported on first use (events imports this module's users)."""
    global _DECODE_BODY
    if _DECODE_BODY is None:
        from binlog.events import decode_body

        _DECODE_BODY = decode_body
    return _DECODE_BODY


class Event:
    """One event: ``pos`` (offset in its file), ``header`` (EventHeader), ``raw`` (all its bytes,
    header and CRC included). ``body`` is decoded on first access from ``payload``.

    ``h`` is the header as a plain tuple (timestamp, type_code, server_id, event_size, log_pos,
    flags): hot loops index it; ``header`` names the fields. The compiled scan leaves it unset (None)
    for the events it groups, which mostly pass through untouched: made on first read (a tuple and
    two ints less per event, made and freed).
    """

    __slots__ = ("pos", "_h", "raw", "ctx", "_body")

    def __init__(self, pos: int, h: tuple | None, raw: bytes, ctx: FormatContext) -> None:
        self.pos = pos
        self._h = h
        self.raw = raw
        self.ctx = ctx
        self._body = _UNSET

    @property
    def h(self) -> tuple:
        h = self._h
        if h is None:
            h = self._h = HEADER_STRUCT.unpack_from(self.raw)
        return h

    @property
    def header(self) -> EventHeader:
        return EventHeader._make(self.h)

    @property
    def type_code(self) -> int:
        return self.h[1]

    @property
    def end_pos(self) -> int:
        return self.pos + self.h[3]

    @property
    def payload(self) -> bytes:
        """Post-header + body, without the common header and the CRC32 trailer."""
        if self.h[1] == 15:  # an FDE always carries the CRC field, even with checksums off
            return self.raw[HEADER_LEN:len(self.raw) - CRC_LEN]
        return self.raw[HEADER_LEN:len(self.raw) - self.ctx.crc_len]

    @property
    def body(self) -> Any:
        body = self._body
        if body is _UNSET:
            body = self._body = _decoder()(self.h[1], self.payload, self.ctx, offset=self.pos)
        return body

    def __repr__(self) -> str:
        from binlog.constants import EventType

        try:
            name = EventType(self.h[1]).name
        except ValueError:
            name = f"type {self.h[1]}"
        return f"<Event {name} at {self.pos}, {self.h[3]} bytes>"
