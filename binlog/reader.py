"""``read_events``: iterate the events of a binlog file, byte string or stream.

Every event is checked as it is read (size, CRC32 when the FDE says so); bad input raises a typed
``BinlogError`` naming the source and offset, never a silent stop. Event bytes are kept as they
arrived; bodies are decoded only when asked (``Event.body``).
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

from binlog import kernel
from binlog.constants import (
    BINLOG_MAGIC,
    CRC_LEN,
    HEADER_LEN,
    MAX_EVENT_SIZE,
    ChecksumAlg,
    EventFlag,
    EventType,
)
from binlog.errors import (
    BadMagic,
    ChecksumMismatch,
    ImpossibleEventSize,
    MalformedEvent,
    TruncatedEvent,
)
from binlog.event import Event, FormatContext
from binlog.header import CRC_RESIDUE, HEADER_STRUCT, crc32

Source = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO

_CHUNK = 1 << 22
# A mapped file's pages behind the scan are given back 256 kB at a time, so a DN's share of the RSS
# is a fraction of a MB whatever its file size (32 DNs × their current files were most of a 32-DN
# build's RSS: 146 → 57 MB).
_RELEASE = 1 << 18
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)     # not on every platform: then nothing is given back
_FDE = EventType.FORMAT_DESCRIPTION
# The shortest FDE: version(2) + server version(50) + created(4) + header len(1) + alg(1) + CRC(4).
_MIN_FDE_SIZE = HEADER_LEN + 57 + 1 + CRC_LEN


def fde_checksum_ok(raw: bytes) -> bool:
    """The CRC32 of an FDE is computed with LOG_EVENT_BINLOG_IN_USE_F cleared."""
    flags = int.from_bytes(raw[17:19], "little") & ~EventFlag.BINLOG_IN_USE
    crc = crc32(raw[:17])
    crc = crc32(flags.to_bytes(2, "little"), crc)
    crc = crc32(raw[19:-CRC_LEN], crc)
    return crc == int.from_bytes(raw[-CRC_LEN:], "little")


def context_from_fde(raw: bytes, ctx: FormatContext, pos: int) -> FormatContext:
    """Check an FDE and return the format it announces for the events after it."""
    source = ctx.source
    if len(raw) < _MIN_FDE_SIZE:
        raise MalformedEvent(f"FORMAT_DESCRIPTION of {len(raw)} bytes is too short", source=source,
                             offset=pos)
    alg = raw[-CRC_LEN - 1]
    if alg not in (ChecksumAlg.OFF, ChecksumAlg.CRC32):
        raise MalformedEvent(f"unknown checksum algorithm {alg} in FORMAT_DESCRIPTION",
                             source=source, offset=pos)
    stored = raw[-CRC_LEN:]
    # A writer with checksums off leaves the FDE's CRC field zero; anything else must match.
    if (alg == ChecksumAlg.CRC32 or stored != b"\0\0\0\0") and not fde_checksum_ok(raw):
        raise ChecksumMismatch("CRC32 mismatch in FORMAT_DESCRIPTION", source=source, offset=pos)
    binlog_version = int.from_bytes(raw[19:21], "little")
    server_version = raw[21:71].split(b"\0", 1)[0].decode("ascii", "replace")
    header_len = raw[75]
    if binlog_version != 4 or header_len != HEADER_LEN:
        raise MalformedEvent(
            f"unsupported binlog version {binlog_version} / header length {header_len}",
            source=source, offset=pos)
    return FormatContext(checksum=alg == ChecksumAlg.CRC32, server_version=server_version,
                         binlog_version=binlog_version, post_header_len=bytes(raw[76:-CRC_LEN - 1]),
                         source=source, table_maps=ctx.table_maps)


def _source_name(source: Source, name: str | None) -> str:
    if name:
        return name
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or "<bytes>"


def read_events(
    source: Source,
    *,
    start: int = 4,
    follow: bool = False,
    verify_checksum: bool = True,
    poll_interval: float = 0.1,
    should_stop: Callable[[], bool] | None = None,
    name: str | None = None,
    context: FormatContext | None = None,
) -> Iterator[Event]:
    """Yield every event of ``source`` from ``start`` (a position; 4 = first event).

    ``source`` is a path, a bytes-like object or a binary stream. A fragment with no FDE is read as
    MySQL 8.0 with CRC32 unless ``context`` says otherwise. Starting past 4 in a file, the FDE at 4
    is read first (not yielded) so checksums are known. ``follow=True`` waits for a growing file
    (polling every ``poll_interval`` s) until ``should_stop()`` is true or a ROTATE/STOP ends it.
    """
    src_name = _source_name(source, name)
    ctx = context or FormatContext(source=src_name)
    if context is not None and context.source != src_name:
        ctx = FormatContext(ctx.checksum, ctx.server_version, ctx.binlog_version, ctx.post_header_len,
                            src_name, ctx.table_maps)

    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        yield from _parse(data, 0, lambda: b"", ctx, start, verify_checksum, False, 0, None)
        return
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            if not follow:
                size = os.fstat(fh.fileno()).st_size
                if size == 0:
                    raise BadMagic("empty file, no binlog magic", source=src_name, offset=0)
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    yield from _parse(mm, 0, lambda: b"", ctx, start, verify_checksum, False, 0, None)
                return
            yield from _parse(b"", 0, lambda: fh.read(_CHUNK), ctx, start, verify_checksum, True,
                              poll_interval, should_stop)
        return
    stream: BinaryIO = source
    yield from _parse(b"", 0, lambda: stream.read(_CHUNK) or b"", ctx, start, verify_checksum, follow,
                      poll_interval, should_stop)


def _parse(data, base: int, read_more: Callable[[], bytes], ctx: FormatContext, start: int,
           verify: bool, follow: bool, poll_interval: float,
           should_stop: Callable[[], bool] | None) -> Iterator[Event]:
    """The event loop over a growing buffer. ``data[i]`` is at file offset ``base + i``."""
    source = ctx.source
    unpack = HEADER_STRUCT.unpack_from
    crc_residue = CRC_RESIDUE

    def fill(data: bytes | mmap.mmap, off: int, base: int) -> tuple[bytes, int, int, bool]:
        """Append more input; returns (data, off, base, got_more)."""
        while True:
            chunk = read_more()
            if chunk:
                return bytes(data[off:]) + chunk, 0, base + off, True
            if not follow or (should_stop is not None and should_stop()):
                return data, off, base, False
            time.sleep(poll_interval)

    off = 0
    while len(data) - off < 4:
        data, off, base, more = fill(data, off, base)
        if not more:
            raise BadMagic(f"{len(data)} bytes, shorter than the binlog magic", source=source, offset=0)
    if data[0:4] != BINLOG_MAGIC:
        raise BadMagic(f"bad magic {bytes(data[0:4]).hex()}", source=source, offset=0)
    off = 4
    skip_to = start if start > 4 else 0
    if skip_to and not isinstance(data, (bytes, mmap.mmap)):
        raise ValueError("start needs a path or bytes")

    fde_type = int(_FDE)
    header_len = HEADER_LEN
    max_size = MAX_EVENT_SIZE
    stop_types = (int(EventType.ROTATE), int(EventType.STOP))
    while True:
        n = len(data)
        checksum = verify and ctx.checksum
        while off + header_len <= n:
            h = unpack(data, off)
            size = h[3]
            if size < header_len or size > max_size:
                raise ImpossibleEventSize(f"event size {size}", source=source, offset=base + off)
            end = off + size
            if end > n:
                break
            raw = data[off:end]
            if h[1] == fde_type:
                ctx = context_from_fde(raw, ctx, base + off) if verify else context_from_fde_unchecked(raw, ctx)
                checksum = verify and ctx.checksum
            elif checksum and crc32(raw) != crc_residue:
                # crc32(event + its CRC32) is a constant when the stored CRC is right.
                if size < header_len + CRC_LEN:
                    raise ImpossibleEventSize(f"event size {size} leaves no room for its CRC32",
                                              source=source, offset=base + off)
                raise ChecksumMismatch(f"CRC32 mismatch in event type {h[1]}", source=source,
                                       offset=base + off)
            pos = base + off
            off = end
            if skip_to:
                if pos < skip_to and h[1] != fde_type and pos + size > skip_to:
                    raise MalformedEvent(f"start position {skip_to} is inside an event", source=source,
                                         offset=pos)
                if pos < skip_to:
                    continue
                if pos > skip_to:
                    raise MalformedEvent(f"start position {skip_to} is not an event boundary",
                                         source=source, offset=pos)
                skip_to = 0
            yield Event(pos, h, raw, ctx)
            if follow and h[1] in stop_types and not h[5] & 0x20:
                return
        data, off, base, more = fill(data, off, base)
        if not more:
            if off < len(data):
                raise TruncatedEvent(f"input ends {len(data) - off} bytes into an event",
                                     source=source, offset=base + off)
            if skip_to:
                raise MalformedEvent(f"start position {skip_to} is past the end", source=source,
                                     offset=base + off)
            return


def context_from_fde_unchecked(raw: bytes, ctx: FormatContext) -> FormatContext:
    alg = raw[-CRC_LEN - 1]
    return FormatContext(checksum=alg == ChecksumAlg.CRC32,
                         server_version=raw[21:71].split(b"\0", 1)[0].decode("ascii", "replace"),
                         post_header_len=bytes(raw[76:-CRC_LEN - 1]), source=ctx.source,
                         table_maps=ctx.table_maps)


class BinlogFile:
    """The events of a finite binlog file from ``start``: iterating it is ``read_events(path,
    start=start)``; ``records(kinds)`` is the fast path for a reader that wants only some events
    (``binlog.kernel.scan``: the byte loop in C, only the wanted events made ``Event`` objects),
    from any event boundary (a start past 4 — a restart point — is walked to by the kernel after
    the FDE, checked as ``read_events`` checks it). ``events`` counts the events read so far.

    ``records(kinds, grouped=maker)`` is ``binlog.kernel.scan_txns`` (the assembler's table
    ``kinds`` and ``binlog.kernel.Maker``): the common XA shapes come as one record each; ``replay(offset, n)`` gives the ``n``
    plain records a group stands for (while the records are being read)."""

    __slots__ = ("path", "start", "name", "events", "_replay")

    def __init__(self, path: str | os.PathLike, start: int = 4, name: str | None = None) -> None:
        self.path, self.start, self.name = path, start, name
        self.events = 0
        self._replay: tuple | None = None

    @property
    def scannable(self) -> bool:
        return True

    @property
    def grouped_records(self) -> bool:
        """``records(grouped=maker)`` and ``replay`` are there (the assembler's grouped path)."""
        return True

    def __iter__(self) -> Iterator[Event]:
        for ev in read_events(self.path, start=self.start, name=self.name):
            self.events += 1
            yield ev

    def records(self, kinds: bytes, batch: int = 512, grouped=None) -> Iterator[list[tuple[int, Event, int]]]:
        """Lists of at most ``batch`` ``(kind, Event, q)`` (``binlog.kernel.scan``) for the whole file (512:
        the records in flight stay a few hundred kB per DN); the same checks
        and typed errors as ``read_events``. ``grouped``: a ``binlog.kernel.Maker`` for
        ``binlog.kernel.scan_txns``; None = plain records."""
        source = _source_name(self.path, self.name)
        with open(self.path, "rb") as fh:
            n = os.fstat(fh.fileno()).st_size
            if n == 0:
                raise BadMagic("empty file, no binlog magic", source=source, offset=0)
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                try:
                    yield from self._scan(mm, n, FormatContext(source=source), kinds, batch, grouped)
                finally:
                    self._replay = None

    def replay(self, offset: int, n: int) -> list[tuple[int, Event, int]]:
        """The ``n`` records ``binlog.kernel.scan`` gives from ``offset`` (a group's first event)."""
        data, ctx, kinds, query_phl = self._replay
        return kernel.scan(data, offset, ctx.checksum, kinds, query_phl, Event, ctx, n)[0]

    def _scan(self, data, n: int, ctx: FormatContext, kinds: bytes, batch: int, grouped) -> Iterator[list]:
        source = ctx.source
        if n < 4:
            raise BadMagic(f"{n} bytes, shorter than the binlog magic", source=source, offset=0)
        if data[0:4] != BINLOG_MAGIC:
            raise BadMagic(f"bad magic {bytes(data[0:4]).hex()}", source=source, offset=0)
        off = 4
        released = 0
        scan = kernel.scan_txns if grouped is not None else kernel.scan
        while True:
            # what the format says, once per FDE; then the scan goes on batch after batch
            phl = ctx.post_header_len
            query_phl = phl[EventType.QUERY - 1] if len(phl) >= EventType.QUERY else 13
            self._replay = (data, ctx, kinds, query_phl)
            checksum = ctx.checksum
            tid_len = 4 if len(phl) >= EventType.TABLE_MAP and phl[EventType.TABLE_MAP - 1] == 6 else 6
            while True:
                if grouped is not None:
                    records, off, status, walked = scan(data, off, checksum, kinds, query_phl, Event, ctx, batch,
                                                        tid_len, grouped)
                else:
                    records, off, status, walked = scan(data, off, checksum, kinds, query_phl, Event, ctx, batch)
                self.events += walked
                if records:
                    yield records
                if off - released >= _RELEASE:
                    released = _release(data, released, off)
                if status != kernel.ST_MORE or len(records) < batch:
                    break
            if status == kernel.ST_MORE:
                if off < n:
                    raise TruncatedEvent(f"input ends {n - off} bytes into an event", source=source, offset=off)
                return
            h = HEADER_STRUCT.unpack_from(data, off)
            size = h[3]
            if status == kernel.ST_FDE:
                ctx = context_from_fde(data[off:off + size], ctx, off)
                if self.start <= off:   # an FDE before a mid-file start is read, not counted (as iterating)
                    self.events += 1
                off += size
                if self.start > off:
                    off = self._walk_to(data, off, ctx)
                elif 4 < self.start < off and off - size == 4:
                    raise MalformedEvent(f"start position {self.start} is not an event boundary",
                                         source=source, offset=4)
            elif status == kernel.ST_BAD_SIZE:
                raise ImpossibleEventSize(f"event size {size}", source=source, offset=off)
            elif size < HEADER_LEN + CRC_LEN:
                raise ImpossibleEventSize(f"event size {size} leaves no room for its CRC32", source=source,
                                          offset=off)
            else:
                raise ChecksumMismatch(f"CRC32 mismatch in event type {h[1]}", source=source, offset=off)


    def _walk_to(self, data, off: int, ctx: FormatContext) -> int:
        """A start mid-file: the events from ``off`` (after the FDE) up to ``self.start`` walked
        and checked by the kernel with no record made; ``self.start`` if it is an event boundary."""
        start, source = self.start, ctx.source
        if start > len(data):
            raise MalformedEvent(f"start position {start} is past the end", source=source, offset=len(data))
        phl = ctx.post_header_len
        query_phl = phl[EventType.QUERY - 1] if len(phl) >= EventType.QUERY else 13
        with memoryview(data) as view, view[:start] as head:
            _, at, status, _ = kernel.scan(head, off, ctx.checksum, _NO_KINDS, query_phl, Event, ctx, 1)
        if status == kernel.ST_MORE and at == start:
            return start
        if status == kernel.ST_BAD_CRC:
            raise ChecksumMismatch("CRC32 mismatch before the start position", source=source, offset=at)
        raise MalformedEvent(f"start position {start} is not an event boundary", source=source, offset=at)


_NO_KINDS = bytes(256)   # no event wanted: the kernel only walks (and checks) them


def _release(data: mmap.mmap, start: int, end: int) -> int:
    """Unmap the whole pages of ``data`` in [start, end): the bytes stay in the page cache (a
    ``replay`` behind the scan reads them again), the process no longer counts them in its RSS."""
    end -= end % mmap.PAGESIZE
    if end <= start:
        return start
    if _DONTNEED is not None:
        data.madvise(_DONTNEED, start, end - start)
    return end


def read_all(source: Source, **kwargs) -> list[Event]:
    """All events of a finite source, as a list (for tests and small files)."""
    return list(read_events(source, **kwargs))


__all__ = ["BinlogFile", "read_events", "read_all", "context_from_fde", "fde_checksum_ok"]
