"""From range files to the local engine's files: same boundaries, same bytes.

The writer tasks render each vtso range into a file of its own (events positioned as if that file
were a binlog file: FDE first). The local writer instead rotates when a file reaches
``max_file_size`` (``GlobalBinlog.append``: after the transaction that reaches it, ROTATE, the next
file starts with an FDE stamped with that transaction's timestamp). Each writer reports the size and
timestamp of every transaction it wrote, so the driver knows where the local writer would have put
each one (``plan_files``, the rotation rule replayed over the sizes); tasks then copy every range's
bytes to their final offsets (``relocate``: only ``log_pos`` and the CRC32 of each event depend on
where a file starts), and the driver writes each file's FDE and ROTATE. A range whose bytes already
sit where they belong (one range, one file) is renamed instead of copied.
"""

from __future__ import annotations

import os
import time
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from binlog.writer import next_file_name, rotation_due
from gbinlog.spark_engine.errors import in_task, reraise


@dataclass
class Segment:
    """Bytes ``[rel_start, rel_end)`` of range file ``rng`` go to ``file`` at offset ``start``; with
    GTIDs, its first transaction is ``first_gno``, the ``first_seq``-th of its file."""

    rng: int
    rel_start: int
    rel_end: int
    file: str
    start: int
    first_gno: int = 0
    first_seq: int = 0


@dataclass
class FilePlan:
    name: str
    fde_ts: int
    end: int = 0                   # where the ROTATE starts (or the file ends)
    rotate_ts: int | None = None   # None: the last file, no ROTATE
    segments: list[Segment] = field(default_factory=list)
    gno_before: int = 0            # GTIDs: transactions written before this file
    in_place: bool = False         # written by the first range's writer (its head, and ROTATE if ended)


@dataclass
class Layout:
    files: list[FilePlan]
    last_mark: tuple[str, int] | None   # end of the last written transaction (file, offset)


def unpack_u32(data: bytes) -> array:
    a = array("I")
    a.frombytes(data)
    return a


def resume_layout(placed: dict | None) -> tuple[list[FilePlan], FilePlan | None, int, int, int, tuple | None]:
    """``(files, current file, position, gno, transactions in it, last mark)`` where ``plan_files``
    goes on: after the files the first range's writer ``placed``, else from nothing."""
    if not placed or not placed["files"]:
        return [], None, 0, 0, 0, None
    files = [FilePlan(name, 0, in_place=True) for name in placed["files"]]
    cur = files[-1]
    cur.end = placed["position"]
    last_mark = tuple(placed["last_marker"]) if placed["last_marker"] else None
    return files, cur, cur.end, placed["gno"], placed["file_txns"], last_mark


def rotate(files: list[FilePlan], cur: FilePlan, ts: int, gno: int, file_name) -> FilePlan:
    """The local writer's rotation in the plan: ``cur`` ends with a ROTATE stamped ``ts`` and the
    next file, its FDE stamped ``ts`` too, opens at once."""
    cur.rotate_ts = ts
    files.append(FilePlan(file_name(len(files) + 1), ts, gno_before=gno))
    return files[-1]


def plan_files(ranges: list[tuple[int, array, array]], *, max_file_size: int, fde_len: int,
               file_name, gtids: bool = False, placed: dict | None = None,
               segment_size: int | None = None) -> Layout:
    """``ranges``: ``(rng, sizes, timestamps)`` of the written transactions of each range, in range
    order (each range file starts with an FDE of ``fde_len`` bytes). The files the local writer
    makes of the same transactions: it opens a file at the first written transaction (FDE stamped
    with its timestamp), and after a transaction that takes the file to ``max_file_size`` or more
    it ends the file with ROTATE and opens the next one (FDE stamped with that transaction's
    timestamp) at once. ``gtids``: the final files also hold a PREVIOUS_GTIDS after each FDE and a
    GTID event before each transaction (``dumper.gtid``), which the range files lack.

    ``placed``: what the first range's writer already wrote in the output directory (its files,
    the end of the last one, the last gno and the transactions in that file: ``render.FinalFiles``), where the layout goes on. ``segment_size``: a segment ends after the transaction
    that takes it to this size (more, smaller copy tasks)."""
    from dumper.gtid import GTID_EVENT_LEN, previous_gtids_len

    files, cur, pos, gno, seq, last_mark = resume_layout(placed)
    extra = GTID_EVENT_LEN if gtids else 0

    def head() -> int:
        return fde_len + (previous_gtids_len(gno) if gtids else 0)

    cap = segment_size or 1 << 62
    for rng, sizes, stamps in ranges:
        n = len(sizes)
        if len(stamps) != n:
            raise ValueError(f"range {rng}: {n} sizes but {len(stamps)} timestamps")
        # before[k]: bytes of the range's first k transactions; with_extra[k]: the same in the
        # final files (their GTID events too). Searched, not walked one by one: 0.10 → 0.06 s of
        # the driver's critical path for 440 k transactions (bench/spark.py, 2.35 GB).
        before = list(accumulate(sizes, initial=0))
        with_extra = [b + extra * k for k, b in enumerate(before)] if extra else before
        i = 0
        while i < n:
            if cur is None:
                cur = FilePlan(file_name(len(files) + 1), stamps[i], gno_before=gno)
                files.append(cur)
                pos = head()
                seq = 0
            # the file takes transactions up to the first that brings it to max_file_size
            # (``rotation_due``, a threshold: found by bisection), or the range's end
            end = min(bisect_left(with_extra, max_file_size - pos + with_extra[i], i + 1), n)
            s = i
            while s < end:   # segments: each ends with the transaction that takes it to ``cap``
                t = min(bisect_left(before, before[s] + cap, s + 1), end)
                cur.segments.append(Segment(rng, fde_len + before[s], fde_len + before[t], cur.name,
                                            pos + with_extra[s] - with_extra[i], gno + 1 + s - i, seq + 1 + s - i))
                s = t
            pos += with_extra[end] - with_extra[i]
            gno += end - i
            seq += end - i
            cur.end = pos
            last_mark = (cur.name, pos)
            i = end
            if rotation_due(pos, max_file_size):
                cur = rotate(files, cur, stamps[end - 1], gno, file_name)
                pos = cur.end = head()
                seq = 0
    return Layout(files, last_mark)


COPY_SEGMENT = 64 << 20    # bytes of range file per copy task, at most about (whole transactions)


def copy_segments(src: str, out_dir: str, segments: list[tuple], release: bool = False) -> int:
    """Task: copy ``(rel_start, rel_end, file, start, first_gno, first_seq, sid)`` pieces of range
    file ``src`` into the (pre-sized) final files, relocated (and with GTID events put in when
    ``sid``). Returns the bytes copied. With ``release``, each piece's pages are given back once it
    is written (``release_pages``) and a piece found released (a retried task) was written, so it
    is left; only where no two attempts of a copy can run at once (``copies_may_release``)."""
    import mmap

    from gbinlog.spark_engine.xkernel import place

    done = 0
    with open(src, "r+b" if release else "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for rel_start, rel_end, name, start, first_gno, first_seq, sid in segments:
            if rel_end > len(mm):
                raise ValueError(f"{src}: {len(mm)} bytes, a segment ends at {rel_end}")
            if release and rel_end > rel_start and mm[rel_start + 9:rel_start + 13] == b"\0\0\0\0":
                continue   # no event has size 0: released, after it was written
            view = memoryview(mm)[rel_start:rel_end]
            try:
                buf = place(view, start, rel_start, first_gno, first_seq, sid)
            finally:
                view.release()
            _write_all(Path(out_dir, name), buf, start)
            done += len(buf)
            del buf
            if release:
                release_pages(fh.fileno(), rel_start, rel_end - rel_start)
    return done


def copies_may_release(conf) -> bool:
    """Whether copy tasks may release the range files' pages behind them (``copy_segments``):
    only on a local master without speculation, where a copy task never runs twice at once — a
    second attempt reading a piece while the first releases it would place zeros."""
    return (conf.get("spark.master", "") or "").startswith("local") \
        and (conf.get("spark.speculation", "false") or "false").lower() != "true"


def write_file_head(path: Path, f: FilePlan, *, server_id: int, server_version: str, sid: bytes | None,
                    gtids: bool) -> None:
    """A new file of the layout, sized to where its ROTATE goes (or its end), its FDE (and
    PREVIOUS_GTIDS) written: the local writer's head of that file."""
    from dumper.global_binlog import file_start

    with open(path, "wb") as fh:
        fh.truncate(f.end)
        fh.write(file_start(server_id=server_id, server_version=server_version, timestamp=f.fde_ts,
                            previous_gtids=(sid, f.gno_before) if gtids else None))


def write_rotate(path: Path, f: FilePlan, *, server_id: int) -> None:
    """The ROTATE that ends file ``f`` (at ``f.end``), the file cut right after it."""
    from dumper.global_binlog import rotate_event

    with open(path, "r+b") as fh:
        fh.seek(f.end)
        fh.write(rotate_event(f.end, next_file_name(f.name), timestamp=f.rotate_ts, server_id=server_id))
        fh.truncate()


def _write_all(path: Path, data, offset: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            if n <= 0:
                raise OSError(f"{path}: nothing written at {offset}")
            view, offset = view[n:], offset + n
    finally:
        os.close(fd)


_LIBC = None
_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01   # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (linux/falloc.h)


def release_pages(fd: int, offset: int, length: int) -> bool:
    """Free ``[offset, offset + length)`` of a temporary file (Linux ``fallocate`` punching a hole;
    best effort, False where that is not there). Why: the copies' writes then take the page-cache
    pages just freed. On this VM writing 64 MB into fresh pages takes 0.16 s, into pages just freed
    0.015 s; 5 × 64 MB copied: 1.07–1.34 s → 0.44–0.47 s."""
    global _LIBC
    try:
        if _LIBC is None:
            import ctypes

            _LIBC = ctypes.CDLL(None, use_errno=True)
            _LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        return _LIBC.fallocate(fd, _PUNCH_HOLE_KEEP_SIZE, offset, length) == 0
    except (OSError, AttributeError):
        return False


def finish_files(spark, out: Path, tmp: Path, windows: list, result, *, settings):
    """The windows' bytes → the local engine's ``binlog.NNNNNN``: the driver plans the files
    (``plan_files``, going on after the first window's final files, which it moves in) and writes
    each FDE and ROTATE; a range file already where it belongs (one file, no GTIDs) is renamed,
    the others are copied to their offsets by tasks (in parallel, ``COPY_SEGMENT`` bytes each);
    then fsync, ``binlog.index``. ``windows``: ``dumper.window.WindowSummary``s in order. Fills
    ``result`` (a ``BuildResult``)."""
    from dumper.global_binlog import BASE, file_name, file_start, write_index
    from dumper.gtid import cluster_identity, gtid_uuid, sid_of

    t0 = time.perf_counter()
    server_id, gtids = settings.server_id, settings.gtids
    fde_len = len(file_start(server_id=server_id, server_version=settings.server_version))
    first = windows[0] if windows and windows[0].final else None
    layout = plan_files([(w.index, unpack_u32(w.sizes), unpack_u32(w.stamps)) for w in windows if w is not first],
                        max_file_size=settings.max_file_size, fde_len=fde_len, file_name=file_name, gtids=gtids,
                        placed=first.final if first else None, segment_size=COPY_SEGMENT)
    written = next((w.first_written_vtso for w in windows if w.written), None)
    sid = sid_of(gtid_uuid(cluster_identity(written))) if gtids and written else None
    if gtids and first is not None and first.final.get("sid"):   # a resumed output's own GTIDs
        sid = bytes.fromhex(first.final["sid"])
    result.range_seconds = [w.seconds for w in windows]
    file_of = {w.index: Path(w.range_file) for w in windows if w.range_file}
    release = copies_may_release(spark.sparkContext.getConf())
    # every file is made in the build's temporary directory (the first window's files in its own)
    # and moved into ``out`` once whole, in order: a build killed meanwhile leaves only whole
    # files there; a resumed output's last file is extended in place (its recovery cuts a torn end)
    staging = tmp / "placed"
    staging.mkdir(exist_ok=True)
    home = {f.name: Path(first.final["dir"]) if f.in_place else staging for f in layout.files}
    jobs: list[tuple] = []
    for f in layout.files:
        path = home[f.name] / f.name
        segs = f.segments
        result.files.append(f.name)
        if f.in_place:
            pass          # the first window wrote its head (and its ROTATE, if it ended it)
        elif sid is None and len(segs) == 1 and segs[0].start == segs[0].rel_start == fde_len \
                and segs[0].rel_end == file_of[segs[0].rng].stat().st_size:
            os.replace(file_of[segs[0].rng], path)   # already where it belongs
            segs = []
        else:
            write_file_head(path, f, server_id=server_id, server_version=settings.server_version, sid=sid,
                            gtids=gtids)
        jobs += [(str(file_of[sg.rng]), str(home[f.name]),
                  [(sg.rel_start, sg.rel_end, sg.file, sg.start, sg.first_gno, sg.first_seq, sid)], release)
                 for sg in segs]
        if f.in_place and (segs or f.rotate_ts is not None):
            os.truncate(path, f.end)     # room for the later windows' bytes after the first window's
        if f.rotate_ts is not None:
            write_rotate(path, f, server_id=server_id)
    t1 = time.perf_counter()
    if jobs:
        try:
            spark.sparkContext.parallelize(jobs, len(jobs)).map(_copy_task).collect()
        except Exception as exc:
            reraise(exc)
    t2 = time.perf_counter()
    for name in result.files:
        fd = os.open(home[name] / name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if home[name] != out:
            os.replace(home[name] / name, out / name)
    write_index(out, result.files, BASE)
    result.timings.update({"files: layout": t1 - t0, "files: copies": t2 - t1, "files: fsync": time.perf_counter() - t2})
    result.txns = sum(w.txns for w in windows)
    result.written = sum(w.written for w in windows)
    result.events = sum(w.events for w in windows)
    result.bytes = sum(w.bytes for w in windows)
    result.last_vtso = next((w.last_vtso for w in reversed(windows) if w.last_vtso), None)
    result.last_mark = layout.last_mark
    result.range_sizes = [w.sizes for w in windows]
    return result


@in_task
def _copy_task_gen(task) -> Iterator[int]:
    from gbinlog.spark_engine.layout import copy_segments

    yield copy_segments(*task)


def _copy_task(task) -> int:
    return next(_copy_task_gen(task))
