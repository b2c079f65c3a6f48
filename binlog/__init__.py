"""MySQL binlog v4: header, event bodies (construct), row image codec, reader and writer."""

from binlog.constants import ColumnType, EventFlag, EventType
from binlog.errors import (
    BadMagic,
    BinlogError,
    ChecksumMismatch,
    ImpossibleEventSize,
    MalformedEvent,
    TruncatedEvent,
)
from binlog.event import Event, FormatContext
from binlog.header import EventHeader
from binlog.reader import read_all, read_events
from binlog.writer import BinlogWriter

__all__ = [
    "BadMagic", "BinlogError", "BinlogWriter", "ChecksumMismatch", "ColumnType", "Event",
    "EventFlag", "EventHeader", "EventType", "FormatContext", "ImpossibleEventSize",
    "MalformedEvent", "TruncatedEvent", "read_all", "read_events",
]
