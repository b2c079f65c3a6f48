"""Event framing and file rotation, in one place, and ``BinlogWriter``.

Every binlog this project writes (the global binlog, its recovery, the Spark layout, the
simulator's DN files, test binlogs) frames its events with ``put_event``/``build_event``, starts a
file with ``file_start`` (magic + FDE), ends it with ``rotate_event``, names it with ``file_name``
and rotates by ``rotation_due``; ``relocate`` moves whole events to another offset. ``BinlogWriter``
is the general writer (any checksum setting, pass-through events) built on those.
"""

from __future__ import annotations

import os
import struct
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
from binlog.header import (
    EVENT_SIZE_OFFSET,
    HEADER_STRUCT,
    LOG_POS_OFFSET,
    crc32,
    crc_bytes,
    with_crc,
)

__all__ = ["BinlogWriter", "build_event", "build_fde", "file_name", "file_seq", "file_start", "next_file_name",
           "put_event", "relocate", "rotate_event", "rotation_due", "with_crc"]

_pack_header = HEADER_STRUCT.pack
_pack_crc = struct.Struct("<I").pack
_pack_u32_into = struct.Struct("<I").pack_into


def file_name(seq: int, base: str = "binlog") -> str:
    """``binlog.000001``; six digits as MySQL and PolarDB-X write them."""
    return f"{base}.{seq:06d}"


def file_seq(name: str) -> int:
    """The sequence number of ``<base>.NNNNNN``."""
    return int(name.rsplit(".", 1)[1])


def next_file_name(name: str) -> str:
    """The file a ROTATE at the end of ``name`` points to."""
    base, _, seq = name.rpartition(".")
    return file_name(int(seq) + 1, base)


def rotation_due(position: int, max_file_size: int) -> bool:
    """The rotation rule: after the transaction that takes a file to ``max_file_size`` or more,
    the file ends with ROTATE and the next one starts (rotation happens only at transaction
    boundaries, so a file can exceed the limit by its last transaction)."""
    return position >= max_file_size


def put_event(out: bytearray, pos: int, timestamp: int, type_code: int, server_id: int, payload: bytes,
              flags: int) -> int:
    """Append one checksummed event (header, payload, CRC32) starting at file offset ``pos`` to
    ``out``; returns its end (the hot path: one call per event)."""
    size = HEADER_LEN + 4 + len(payload)
    pos += size
    head = _pack_header(timestamp, type_code, server_id, size, pos, flags)
    out += head
    out += payload
    out += _pack_crc(crc32(payload, crc32(head)))
    return pos


def build_event(type_code: int, payload: bytes, *, timestamp: int, server_id: int, log_pos: int,
                flags: int = 0, checksum: bool = True) -> bytes:
    """Header + payload (+ CRC32). ``log_pos`` is the end position the caller computed."""
    size = HEADER_LEN + len(payload) + (CRC_LEN if checksum else 0)
    head = _pack_header(timestamp, type_code, server_id, size, log_pos, flags)
    return head + payload + crc_bytes(payload, crc32(head)) if checksum else head + payload


def build_fde(*, server_version: str, timestamp: int, server_id: int, checksum: bool,
              post_header_len: bytes = POST_HEADER_LEN_57, log_pos: int | None = None,
              flags: int = 0, created: int | None = None) -> bytes:
    """A complete FORMAT_DESCRIPTION event as written at offset 4 (log_pos = its end).
    ``created`` defaults to ``timestamp``; 0 says "a rotated file, not a server start"."""
    alg = ChecksumAlg.CRC32 if checksum else ChecksumAlg.OFF
    payload = encode_body(EventType.FORMAT_DESCRIPTION, binlog_version=4,
                          server_version=server_version, created=timestamp if created is None else created,
                          header_length=HEADER_LEN, post_header_len=post_header_len, checksum_alg=alg)
    size = HEADER_LEN + len(payload) + CRC_LEN
    end = 4 + size if log_pos is None else log_pos
    head = _pack_header(timestamp, EventType.FORMAT_DESCRIPTION, server_id, size, end, flags)
    # The FDE always carries the 4-byte CRC field; with checksums off it stays zero. Its CRC is
    # computed with LOG_EVENT_BINLOG_IN_USE_F cleared.
    if checksum:
        clean = _pack_header(timestamp, EventType.FORMAT_DESCRIPTION, server_id, size, end,
                             flags & ~EventFlag.BINLOG_IN_USE)
        return head + payload + crc_bytes(payload, crc32(clean))
    return head + payload + b"\0\0\0\0"


def file_start(*, server_id: int, server_version: str, timestamp: int = 0, checksum: bool = True,
               post_header_len: bytes = POST_HEADER_LEN_57, created: int | None = None) -> bytes:
    """Magic + FORMAT_DESCRIPTION: the first 4 + FDE bytes of every binlog file."""
    return BINLOG_MAGIC + build_fde(server_version=server_version, timestamp=timestamp, server_id=server_id,
                                    checksum=checksum, post_header_len=post_header_len, created=created)


def rotate_event(pos: int, next_file: str, *, timestamp: int, server_id: int, checksum: bool = True) -> bytes:
    """ROTATE starting at ``pos`` naming the next file (position 4)."""
    payload = encode_body(EventType.ROTATE, position=4, next_file=next_file)
    size = HEADER_LEN + len(payload) + (CRC_LEN if checksum else 0)
    return build_event(EventType.ROTATE, payload, timestamp=timestamp, server_id=server_id, log_pos=pos + size,
                       checksum=checksum)


def relocate(buf: bytearray, delta: int) -> None:
    """Move a run of whole checksummed events by ``delta`` bytes: rewrite each ``log_pos`` and CRC32
    in place (nothing else depends on where a file puts an event)."""
    view = memoryview(buf)
    off, n = 0, len(buf)
    try:
        while off < n:
            size = int.from_bytes(view[off + EVENT_SIZE_OFFSET:off + EVENT_SIZE_OFFSET + 4], "little")
            end = off + size
            if size < HEADER_LEN + CRC_LEN or end > n:
                raise ValueError(f"event of {size} bytes at {off} runs past the segment ({n} bytes)")
            at = off + LOG_POS_OFFSET
            _pack_u32_into(buf, at, int.from_bytes(view[at:at + 4], "little") + delta)
            _pack_u32_into(buf, end - CRC_LEN, crc32(view[off:end - CRC_LEN]))
            off = end
    finally:
        view.release()


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
        return file_name(self.seq, self.base)

    @property
    def path(self) -> Path:
        return self.directory / self.file_name

    def _open(self, seq: int, timestamp: int) -> None:
        self.seq = seq
        self._fh = open(self.path, "wb")
        head = file_start(server_version=self.server_version, timestamp=timestamp, server_id=self.server_id,
                          checksum=self.checksum, post_header_len=self.post_header_len)
        self._fh.write(head)
        self.position = len(head)
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
            buf += crc_bytes(buf)
        self._fh.write(buf)
        self.position = start + size
        return start

    def rotate(self, *, timestamp: int = 0) -> str:
        """End this file with ROTATE and continue in the next; returns the new file name."""
        nxt = file_name(self.seq + 1, self.base)
        self._fh.write(rotate_event(self.position, nxt, timestamp=timestamp, server_id=self.server_id,
                                    checksum=self.checksum))
        self._close_file()
        self._open(self.seq + 1, timestamp)
        return nxt

    def rotate_if_full(self, *, timestamp: int = 0) -> bool:
        if rotation_due(self.position, self.max_file_size):
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
