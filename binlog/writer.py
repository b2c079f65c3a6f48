"""``BinlogWriter``: magic + FDE, events with ``log_pos`` and CRC32 computed, rotation, index file."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from binlog.constants import (
    BINLOG_MAGIC,
    CRC_LEN,
    HEADER_LEN,
    POST_HEADER_LEN_57,
    ChecksumAlg,
    EventFlag,
    EventType,
)
from binlog.events import encode_body
from binlog.header import EVENT_SIZE_OFFSET, HEADER_STRUCT, LOG_POS_OFFSET


def file_name(base: str, seq: int) -> str:
    """``binlog.000001``; six digits as MySQL and PolarDB-X write them."""
    return f"{base}.{seq:06d}"


def with_crc(event_without_crc: bytes) -> bytes:
    return event_without_crc + zlib.crc32(event_without_crc).to_bytes(4, "little")


def build_event(type_code: int, payload: bytes, *, timestamp: int, server_id: int, log_pos: int,
                flags: int = 0, checksum: bool = True) -> bytes:
    """Header + payload (+ CRC32). ``log_pos`` is the end position the caller computed."""
    size = HEADER_LEN + len(payload) + (CRC_LEN if checksum else 0)
    head = HEADER_STRUCT.pack(timestamp, type_code, server_id, size, log_pos, flags)
    return with_crc(head + payload) if checksum else head + payload


def build_fde(*, server_version: str, timestamp: int, server_id: int, checksum: bool,
              post_header_len: bytes = POST_HEADER_LEN_57, log_pos: int | None = None,
              flags: int = 0) -> bytes:
    """A complete FORMAT_DESCRIPTION event as written at offset 4 (log_pos = its end)."""
    alg = ChecksumAlg.CRC32 if checksum else ChecksumAlg.OFF
    payload = encode_body(EventType.FORMAT_DESCRIPTION, binlog_version=4,
                          server_version=server_version, created=timestamp, header_length=HEADER_LEN,
                          post_header_len=post_header_len, checksum_alg=alg)
    size = HEADER_LEN + len(payload) + CRC_LEN
    end = 4 + size if log_pos is None else log_pos
    head = HEADER_STRUCT.pack(timestamp, EventType.FORMAT_DESCRIPTION, server_id, size, end, flags)
    # The FDE always carries the 4-byte CRC field; with checksums off it stays zero.
    if checksum:
        clean = HEADER_STRUCT.pack(timestamp, EventType.FORMAT_DESCRIPTION, server_id, size, end,
                                   flags & ~EventFlag.BINLOG_IN_USE)
        crc = zlib.crc32(payload, zlib.crc32(clean))
        return head + payload + crc.to_bytes(4, "little")
    return head + payload + b"\0\0\0\0"


class BinlogWriter:
    """Writes ``<base>.NNNNNN`` files and ``<base>.index`` in ``directory``.

    ``append`` takes a payload and builds the event; ``append_raw`` takes a whole event (as read from
    another binlog) and rewrites only its ``log_pos`` (and server id / timestamp if given) and CRC.
    ``rotate`` ends the file with a ROTATE event and opens the next one; callers rotate only at
    transaction boundaries (``rotate_if_full``).
    """

    def __init__(self, directory: str | os.PathLike, base: str = "binlog", *, server_id: int = 1,
                 server_version: str = "5.7.44-log", checksum: bool = True,
                 post_header_len: bytes = POST_HEADER_LEN_57, max_file_size: int = 500 * 1024 * 1024,
                 timestamp: int = 0, first_seq: int = 1, write_index: bool = True) -> None:
        self.directory = Path(directory)
        self.base = base
        self.server_id = server_id
        self.server_version = server_version
        self.checksum = checksum
        self.post_header_len = post_header_len
        self.max_file_size = max_file_size
        self.write_index = write_index
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fh = None
        self.seq = first_seq
        self.position = 0
        self._open(first_seq, timestamp)

    # -- files ------------------------------------------------------------------------------------
    @property
    def file_name(self) -> str:
        return file_name(self.base, self.seq)

    @property
    def path(self) -> Path:
        return self.directory / self.file_name

    def _open(self, seq: int, timestamp: int) -> None:
        self.seq = seq
        self._fh = open(self.path, "wb")
        self._fh.write(BINLOG_MAGIC)
        fde = build_fde(server_version=self.server_version, timestamp=timestamp,
                        server_id=self.server_id, checksum=self.checksum,
                        post_header_len=self.post_header_len)
        self._fh.write(fde)
        self.position = 4 + len(fde)
        if self.write_index:
            with open(self.directory / f"{self.base}.index", "a", encoding="ascii") as idx:
                idx.write(f"./{self.file_name}\n")

    # -- events -----------------------------------------------------------------------------------
    def append(self, type_code: int, payload: bytes, *, timestamp: int, server_id: int | None = None,
               flags: int = 0) -> int:
        """Write one event; returns the position it starts at."""
        start = self.position
        size = HEADER_LEN + len(payload) + (CRC_LEN if self.checksum else 0)
        event = build_event(type_code, payload, timestamp=timestamp,
                            server_id=self.server_id if server_id is None else server_id,
                            log_pos=start + size, flags=flags, checksum=self.checksum)
        self._fh.write(event)
        self.position = start + size
        return start

    def append_raw(self, event: bytes | memoryview, *, source_checksum: bool = True) -> int:
        """Write an event taken from another binlog: ``log_pos`` rewritten, CRC recomputed.

        ``source_checksum`` says whether ``event`` ends with a CRC32 (it is replaced or removed to
        match this file's setting).
        """
        start = self.position
        body_end = len(event) - (CRC_LEN if source_checksum else 0)
        size = body_end + (CRC_LEN if self.checksum else 0)
        buf = bytearray(event[:body_end])
        buf[EVENT_SIZE_OFFSET:EVENT_SIZE_OFFSET + 4] = size.to_bytes(4, "little")
        buf[LOG_POS_OFFSET:LOG_POS_OFFSET + 4] = (start + size).to_bytes(4, "little")
        if self.checksum:
            buf += zlib.crc32(buf).to_bytes(4, "little")
        self._fh.write(buf)
        self.position = start + size
        return start

    def rotate(self, *, timestamp: int = 0) -> str:
        """End this file with ROTATE and continue in the next; returns the new file name."""
        nxt = file_name(self.base, self.seq + 1)
        payload = encode_body(EventType.ROTATE, position=4, next_file=nxt)
        self.append(EventType.ROTATE, payload, timestamp=timestamp)
        self._close_file()
        self._open(self.seq + 1, timestamp)
        return nxt

    def rotate_if_full(self, *, timestamp: int = 0) -> bool:
        if self.position >= self.max_file_size:
            self.rotate(timestamp=timestamp)
            return True
        return False

    def flush(self, *, fsync: bool = False) -> None:
        self._fh.flush()
        if fsync:
            os.fsync(self._fh.fileno())

    def _close_file(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def close(self) -> None:
        self._close_file()

    def __enter__(self) -> BinlogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
