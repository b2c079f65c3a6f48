"""Byte ranges of DN binlogs (input partitions) and vtso ranges of the output (global binlog files).

* ``RangeSource``: the events of one DN from a position up to (not including) an end position — a
  batch partition cut at a restart point, or a streaming micro-batch up to the bytes the DN had
  written when the batch was planned (a partial event at the end is left for the next batch).
* ``tso_samples`` / ``range_bounds``: output range boundaries from cheap per-DN TSO bounds — the
  first commit TSO of every DN file (a few events read per file) and the file sizes; the end of the
  last file is extrapolated from the DN's byte rate, or read (headers only, GCNs decoded) when the
  DN has a single file. Boundaries only balance the ranges: any boundaries give the same output
  bytes, because every transaction lands in exactly one range and each range is merged in order.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path

from binlog import Event, read_events
from binlog.errors import TruncatedEvent
from binlog.reader import BinlogFile
from extractor import decode
from extractor.model import Pos
from extractor.source import DnSource, FileEvents, list_binlog_files

_GCN, _SEQUENCE, _XID, _XA_PREPARE = 105, 80, 16, 38
_HAVE_COMMITTED_SEQ = 0x04
_SEQ_COMMIT = 1


class RangeSource(DnSource):
    """The files of a DN directory from ``start`` (default: the first event) up to ``end``
    (default: the end of the last file listed). An event at or past ``end``, or running past it, is
    not yielded; a partial event there (the DN still writing it) is not an error."""

    def __init__(self, directory: str | os.PathLike, dn_id: str, start: Pos | None = None,
                 end: Pos | None = None) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"DN binlog directory {self.directory} does not exist")
        self.dn_id = dn_id
        self.start, self.end = start, end

    def files(self) -> Iterator[FileEvents]:
        names = list_binlog_files(self.directory)
        if self.start is not None:
            if self.start.file not in names:
                raise FileNotFoundError(f"DN {self.dn_id}: {self.start.file} is not in {self.directory}")
            names = names[names.index(self.start.file):]
        for name in names:
            start = self.start.offset if self.start is not None and name == self.start.file else 4
            if self.end is not None and name == self.end.file:
                yield name, self._bounded(self.directory / name, start, self.end.offset)
                return
            # a whole file (or its tail) takes the extractor's fast path: ``BinlogFile.records``, the
            # compiled scan (from position 4), as ``DirSource`` gives the local engine
            yield name, BinlogFile(self.directory / name, start=start)

    @staticmethod
    def _bounded(path: Path, start: int, end: int) -> Iterator[Event]:
        if start >= end or end <= 4:
            return  # nothing, or a file the DN has only just created
        try:
            for ev in read_events(path, start=start):
                if ev.pos + ev.h[3] > end:
                    return
                yield ev
        except TruncatedEvent as exc:
            if exc.offset < end and os.path.getsize(path) >= end:
                raise  # the bytes before ``end`` were complete when planned: a real truncation


def raw_commit_tso(raw, crc_len: int) -> int | None:
    """The commit TSO an event carries (a GCN with a committed sequence, or a commit SEQUENCE)."""
    t = raw[4]
    if t == _GCN and raw[19] & _HAVE_COMMITTED_SEQ:
        return decode.gcn(raw, crc_len)[1]
    if t == _SEQUENCE:
        kind, value = decode.sequence(raw, crc_len)
        if kind == _SEQ_COMMIT:
            return value
    return None


def _commit_tso(ev: Event) -> int | None:
    return raw_commit_tso(ev.raw, ev.ctx.crc_len)


def first_commit_tso(path: Path, max_events: int = 100_000) -> int | None:
    """The first commit TSO in a DN binlog file (reads only until it is found)."""
    for i, ev in enumerate(read_events(path)):
        tso = _commit_tso(ev)
        if tso is not None:
            return tso
        if i >= max_events:
            return None
    return None


def _headers(data, off: int, max_events: int) -> Iterator[tuple[int, int, int]]:
    """``(offset, type, size)`` of the whole events in ``data`` (a mapped DN binlog file) from the
    event starting at ``off``, at most ``max_events``: the headers walked, nothing checked."""
    n = len(data)
    for _ in range(max_events):
        if off + 19 > n:
            return
        size = int.from_bytes(data[off + 9:off + 13], "little")
        if size < 19 or off + size > n:
            return
        yield off, data[off + 4], size
        off += size


def group_start_after(data, off: int, max_events: int = 100_000) -> int | None:
    """The start of the event after the first XID or XA_PREPARE event in ``data`` from the event
    starting at ``off``: a group's first event, where a reading can begin outside any transaction
    (``None``: none within ``max_events``)."""
    for at, kind, size in _headers(data, off, max_events):
        if kind == _XID or kind == _XA_PREPARE:
            return at + size if at + size + 19 <= len(data) else None
    return None


def commit_tso_after(data, off: int, crc_len: int, max_events: int = 10_000) -> int | None:
    """The first commit TSO in ``data`` from the event starting at ``off``, no checksum checked
    (a probe: ``speculate.lead_in_offset``)."""
    for at, kind, size in _headers(data, off, max_events):
        if kind in (_GCN, _SEQUENCE) and size >= 19 + 9:
            tso = raw_commit_tso(data[at:at + size], crc_len)
            if tso is not None:
                return tso
    return None


def max_commit_tso(path: Path) -> int | None:
    """The largest commit TSO of a file (walks its headers, decodes only commit GCNs)."""
    best = None
    for ev in read_events(path):
        tso = _commit_tso(ev)
        if tso is not None and (best is None or tso > best):
            best = tso
    return best


def tso_samples(directory: str | os.PathLike) -> list[tuple[int, int]]:
    """``(tso, bytes before it)`` points of a DN, ascending in both: the first commit TSO of every
    file at the file's starting byte, and an end point at the DN's total size."""
    directory = Path(directory)
    names = list_binlog_files(directory)
    points: list[tuple[int, int]] = []
    total = 0
    for name in names:
        tso = first_commit_tso(directory / name)
        if tso is not None and (not points or tso > points[-1][0]):
            points.append((tso, total))
        total += (directory / name).stat().st_size
    if not points:
        return []
    if len(points) >= 2:
        # bytes per TSO unit over the DN so far carries the last file to its end
        (t0, b0), (t1, b1) = points[0], points[-1]
        rate = (b1 - b0) / (t1 - t0) if b1 > b0 and t1 > t0 else 0.0
        end_tso = t1 + int((total - b1) / rate) if rate > 0 else t1 + 1
    else:
        end_tso = max_commit_tso(directory / names[-1]) or points[0][0]
        end_tso = max(end_tso, points[0][0] + 1)
    points.append((end_tso, total))
    return points


def _bytes_below(points: list[tuple[int, int]], tso: int) -> float:
    """Interpolated bytes of a DN with TSO below ``tso``."""
    if not points or tso <= points[0][0]:
        return 0.0
    if tso >= points[-1][0]:
        return float(points[-1][1])
    i = bisect.bisect_right([p[0] for p in points], tso)
    (t0, b0), (t1, b1) = points[i - 1], points[i]
    return b0 + (b1 - b0) * (tso - t0) / (t1 - t0)


def samples_above(points: list[tuple[int, int]], tso: int) -> list[tuple[int, int]]:
    """A DN's ``tso_samples`` from ``tso`` on (a resumed build cuts only what is left above its
    last transaction done), bytes counted from there."""
    if not points or tso >= points[-1][0]:
        return []
    base = _bytes_below(points, tso)
    head = [(tso, 0)] if tso > points[0][0] else []
    return head + [(t, b - base) for t, b in points if t > tso or (not head and t == points[0][0])]


def range_bounds(samples: list[list[tuple[int, int]]], n: int, first_share: float = 1.0) -> list[str]:
    """``n - 1`` vtso boundaries splitting all DNs' bytes into ``n`` ranges of about equal size
    (by the interpolated TSO → bytes curves), the first one ``first_share`` of the others' size.
    ``bounds[i]`` is the first vtso of range ``i + 1``."""
    samples = [s for s in samples if s]
    if n <= 1 or not samples:
        return []
    lo = min(s[0][0] for s in samples)
    hi = max(s[-1][0] for s in samples)
    total = sum(s[-1][1] for s in samples)
    bounds: list[str] = []
    for k in range(1, n):
        target = total * (first_share + k - 1) / (first_share + n - 1)
        a, b = lo, hi
        while a < b:  # smallest TSO with at least ``target`` bytes below it
            mid = (a + b) // 2
            if sum(_bytes_below(s, mid) for s in samples) >= target:
                b = mid
            else:
                a = mid + 1
        bound = f"{a:019d}"
        if not bounds or bound > bounds[-1]:
            bounds.append(bound)
    return bounds
