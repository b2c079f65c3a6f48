"""Typed errors for bad binlog input: every one names the source and the byte offset."""

from __future__ import annotations


class BinlogError(Exception):
    """Bad binlog bytes at ``source`` (a file name or description) and ``offset``."""

    def __init__(self, message: str, *, source: str = "<bytes>", offset: int = 0) -> None:
        self.message = message
        self.source = source
        self.offset = offset
        super().__init__(f"{source}: offset {offset}: {message}")


class BadMagic(BinlogError):
    """The file does not start with the binlog magic ``fe 62 69 6e``."""


class TruncatedEvent(BinlogError):
    """The input ends inside an event."""


class ImpossibleEventSize(BinlogError):
    """An event header declares a size smaller than a header or larger than any real event."""


class ChecksumMismatch(BinlogError):
    """The CRC32 stored at the end of an event does not match its bytes."""


class MalformedEvent(BinlogError):
    """An event's body cannot be decoded as its type says."""
