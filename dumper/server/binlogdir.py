"""A directory of binlog files as the server sees it: the index, file sizes, FDEs, purge.

Any directory of ``<base>.NNNNNN`` files plus ``<base>.index`` (a global binlog's ``binlog.*`` or a DN's
``mysql-bin.*``) is served; the base name comes from the one ``*.index`` file. Files may grow while
served: the index is re-read when its size or mtime changes (one stat per call).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from binlog.constants import BINLOG_MAGIC, CRC_LEN, HEADER_LEN, MAX_EVENT_SIZE, EventFlag, EventType
from binlog.header import HEADER_STRUCT, crc_bytes, crc_ok
from binlog.index_lock import index_lock

_U32 = struct.Struct("<I")
# FDE body: binlog_version u16, server_version[50], created u32 -> 'created' sits at 19 + 2 + 50.
FDE_CREATED_OFFSET = HEADER_LEN + 2 + 50


class BinlogDirError(Exception):
    """The directory cannot be served (no index, several indexes, a missing file)."""


@dataclass(frozen=True, slots=True)
class Fde:
    """The FORMAT_DESCRIPTION at offset 4 of a file (``raw`` is None for a file without one)."""

    raw: bytes | None
    checksum: bool
    end: int               # where the first event after it starts

    @property
    def server_version(self) -> str:
        if self.raw is None:
            return ""
        return self.raw[HEADER_LEN + 2:HEADER_LEN + 52].split(b"\0", 1)[0].decode("ascii", "replace")


class BinlogDir:
    """The served directory. ``files()`` is the index order; paths are resolved inside the directory."""

    def __init__(self, path: str | os.PathLike, base: str | None = None) -> None:
        self.path = Path(path)
        self._base = base
        self._index_sig: tuple[int, int] | None = None
        self._files: list[str] = []
        self._fde_cache: dict[str, Fde] = {}

    @property
    def base(self) -> str | None:
        if self._base is None:
            indexes = sorted(p.name for p in self.path.glob("*.index"))
            if len(indexes) > 1:
                raise BinlogDirError(f"{self.path}: several index files ({', '.join(indexes)}); "
                                     "name the base explicitly")
            if indexes:
                self._base = indexes[0][:-len(".index")]
        return self._base

    @property
    def index_path(self) -> Path | None:
        base = self.base
        return None if base is None else self.path / f"{base}.index"

    def files(self) -> list[str]:
        """File names in index order (empty while no index exists yet)."""
        index = self.index_path
        if index is None:
            return []
        try:
            st = os.stat(index)
        except FileNotFoundError:
            return []
        sig = (st.st_size, st.st_mtime_ns)
        if sig != self._index_sig:
            with open(index, encoding="utf-8", errors="surrogateescape") as fh:
                text = fh.read()
            # A line being appended may be cut: only whole lines count.
            lines = text.split("\n")
            if not text.endswith("\n"):
                lines = lines[:-1]
            self._files = [os.path.basename(line.strip()) for line in lines if line.strip()]
            self._index_sig = sig
        return self._files

    def file_path(self, name: str) -> Path:
        return self.path / name

    def size(self, name: str) -> int:
        return os.stat(self.path / name).st_size

    def read_fde(self, name: str) -> Fde | None:
        """The FDE of ``name``; None while the file is too short to hold a complete first event."""
        cached = self._fde_cache.get(name)
        if cached is not None:
            return cached
        with open(self.path / name, "rb") as fh:
            head = fh.read(4 + HEADER_LEN)
            if len(head) < 4 + HEADER_LEN:
                return None
            if head[:4] != BINLOG_MAGIC:
                raise BinlogDirError(f"{self.path / name}: bad magic {head[:4].hex()}")
            h = HEADER_STRUCT.unpack_from(head, 4)
            if h[1] != EventType.FORMAT_DESCRIPTION:
                # A fragment without an FDE (a DN binlog cut mid-file): MySQL 8.0 with CRC32.
                fde = Fde(None, True, 4)
            else:
                size = h[3]
                if not HEADER_LEN + 57 <= size <= 4096:
                    raise BinlogDirError(f"{self.path / name}: FORMAT_DESCRIPTION of {size} bytes at 4")
                rest = fh.read(size - HEADER_LEN)
                if len(rest) < size - HEADER_LEN:
                    return None
                raw = head[4:] + rest
                fde = Fde(raw, raw[-CRC_LEN - 1] == 1, 4 + size)
        self._fde_cache[name] = fde
        return fde

    def checksum_name(self) -> str:
        """``CRC32`` or ``NONE``: what the newest file's FDE says (what @@binlog_checksum reports)."""
        files = self.files()
        if files:
            try:
                fde = self.read_fde(files[-1])
            except (OSError, BinlogDirError):
                fde = None
            if fde is not None and not fde.checksum:
                return "NONE"
        return "CRC32"

    def forget(self, name: str) -> None:
        self._fde_cache.pop(name, None)

    def purge(self, keep_from: str) -> list[str]:
        """Remove every file before ``keep_from``: from disk, then from the index (re-read and replaced
        atomically under ``index_lock``). Files first: a writer that starts a file meanwhile lists
        only files that exist (GlobalBinlog), so the index never ends up naming a removed file, and
        the lock keeps the purge from replacing the index with a copy read before the writer's."""
        files = self.files()
        cut = files.index(keep_from)
        gone = files[:cut]
        if not gone:
            return []
        for name in gone:
            try:
                os.unlink(self.path / name)
            except FileNotFoundError:
                pass
            self.forget(name)
        index = self.index_path
        assert index is not None
        gone_set = set(gone)
        with index_lock(self.path):      # a writer starting a file meanwhile waits, then keeps its entry
            with open(index, encoding="utf-8", errors="surrogateescape") as fh:
                lines = [line for line in fh.read().split("\n") if line.strip()]
            new_lines = [line for line in lines if os.path.basename(line.strip()) not in gone_set]
            tmp = index.with_name(index.name + ".purge-tmp")
            with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
                fh.write("".join(line + "\n" for line in new_lines))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, index)
        self._index_sig = None
        return gone

    def mtime(self, name: str) -> float:
        try:
            return os.stat(self.path / name).st_mtime
        except FileNotFoundError:
            return time.time()


def patch_fde(raw: bytes, start_pos: int) -> bytes:
    """The FDE as sent after a fake ROTATE, as a MySQL master sends it.

    The in-use flag 0x01 is cleared (the CRC is computed with it cleared, so it stays valid). Starting
    past 4, log_pos and ``created`` become 0 so the replica neither counts it nor drops temp tables,
    and the CRC is recomputed.
    """
    buf = bytearray(raw)
    flags = int.from_bytes(buf[17:19], "little") & ~EventFlag.BINLOG_IN_USE
    buf[17:19] = flags.to_bytes(2, "little")
    if start_pos > 4:
        buf[13:17] = b"\0\0\0\0"
        buf[FDE_CREATED_OFFSET:FDE_CREATED_OFFSET + 4] = b"\0\0\0\0"
        if raw[-CRC_LEN - 1] == 1:
            buf[-CRC_LEN:] = crc_bytes(buf[:-CRC_LEN])
    return bytes(buf)


def artificial_event(type_code: int, body: bytes, *, server_id: int, log_pos: int, flags: int,
                     checksum: bool) -> bytes:
    """A server-made event (fake ROTATE, HEARTBEAT): ts 0, CRC32 when the stream is checksummed."""
    size = HEADER_LEN + len(body) + (CRC_LEN if checksum else 0)
    event = HEADER_STRUCT.pack(0, type_code, server_id, size, log_pos, flags) + body
    if checksum:
        event += crc_bytes(event)
    return event


def fake_rotate(name: str, position: int, *, server_id: int, checksum: bool) -> bytes:
    return artificial_event(EventType.ROTATE, struct.pack("<Q", position) + name.encode("utf-8", "surrogateescape"),
                            server_id=server_id, log_pos=0, flags=EventFlag.ARTIFICIAL, checksum=checksum)


def heartbeat(name: str, position: int, *, server_id: int, checksum: bool) -> bytes:
    """HEARTBEAT_LOG_EVENT v1 (27): log_pos = end of the last event sent in ``name``."""
    return artificial_event(EventType.HEARTBEAT, name.encode("utf-8", "surrogateescape"),
                            server_id=server_id, log_pos=position & 0xFFFFFFFF, flags=0, checksum=checksum)


def event_at(fh, pos: int, checksum: bool) -> str | None:
    """Why ``pos`` is not the start of an event in the open file ``fh`` (None when it is).

    Cheap and strong: the header's log_pos must be pos + size and, with checksums, the CRC32 must
    match — a random offset passes both with odds of about 2^-32.
    """
    fh.seek(pos)
    head = fh.read(HEADER_LEN)
    if len(head) < HEADER_LEN:
        return "no complete event header there"
    h = HEADER_STRUCT.unpack(head)
    size = h[3]
    if size < HEADER_LEN or size > MAX_EVENT_SIZE:
        return f"impossible event size {size}"
    if h[4] != pos + size and h[4] != 0:
        return "the event there does not end where its header says"
    if checksum:
        fh.seek(pos)
        raw = fh.read(size)
        if len(raw) < size:
            return "no complete event there"
        if not crc_ok(raw):
            return "CRC32 mismatch"
    return None


__all__ = ["BinlogDir", "BinlogDirError", "Fde", "patch_fde", "fake_rotate", "heartbeat", "event_at",
           "artificial_event"]
