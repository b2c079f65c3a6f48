"""The batch build without a data exchange: each range writer re-reads its DNs from restart points.

With the exchange (``exchange.py``) every DN transaction is encoded by the extraction task, written,
read back and decoded by its range's writer: on the bank workload that cost more CPU than the
extraction itself (bench/spark.py). Here nothing but small summaries leaves a task:

1. ``scan_part`` (one task per input partition): extracts it up to the last range boundary and
   keeps, for each boundary, the restart point carried by the newest transaction below it —
   re-reading the DN from that point (with its ``VtsoState``) regenerates exactly the transactions
   after that one (``extractor.model.RestartPoint``) — plus what the ranges need before shaping:
   the schema history (DDL marks, physical DDLs) and the ``StorageInstChange`` instructions below
   the last boundary, and where the DN stands (``exchange.scale_in``: which DNs left, and where).
2. ``write_range_reread`` (one task per output range): per DN, ``extract`` from the range's start
   point, transactions below the range skipped, stopped at the first one at or above its end →
   ``render.render_range``, as with the exchange. The last range, which the scan did not read,
   reports its own history entries and the DNs that left in it (its merge decides that as a
   whole build's merge does: each DN's stream there runs to the DN's end). The first range is
   written in place by the local engine's writer (``render.FinalFiles``): only the
   others' bytes are copied into the files afterwards.

Ranges default to one per executor core: the scan then reads all but the last 1/cores of the
input, and each writer re-reads its share once. Measured on 2.35 GB (bench/spark.py): the scan and
the writers cost about half the CPU of the exchange's extraction and writers.

By default the scan job is skipped (``speculate.py``): the writers guess its answers from the
files just below their boundaries and the DNs' heads, the driver checks every guess against what
the writers below report; a wrong start point costs the scan and a second round of writers, a
wrong history a second round of the ranges it touched.
On the 2.35 GB bank input that takes the scan's 3.1 CPU-seconds down to 0.1.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from itertools import dropwhile, takewhile

from gbinlog.spark_engine.errors import in_task
from gbinlog.spark_engine.exchange import HISTORY_KINDS, history_entry
from gbinlog.spark_engine.plan import ReadPlan, dn_txns, part_txns
from merger import EndsPassing

log = logging.getLogger(__name__)
DONE = "done"   # a DN whose transactions all lie below a range: it gives that range nothing


@in_task
def scan_part(plan: ReadPlan, index: int) -> Iterator[dict]:
    """Task: input partition ``index`` → ``{"part", "dn", "crossed": {range: point}, "history",
    "instructions", "last", "cpu"}`` of its transactions below the last boundary
    (``last``: the vtso of the first one at or above it, if any). ``crossed[r]`` (``r`` ≥ 1) is the restart point to
    read the DN from for range ``r`` (``None``: from the DN's first event), for every boundary
    ``bounds[r - 1]`` that a transaction of this partition reaches: the newest point carried by a
    transaction of the partition below it, else the partition's own start (a restart point)."""
    from dumper.pipeline import fewer_gc_passes
    from extractor.model import TxnKind
    from merger.membership import storage_change

    cpu = time.process_time()
    part = plan.parts[index]
    bounds = plan.bounds
    point = list(part.start) + list(part.state) if part.start is not None else None
    crossed: dict[int, list | None] = {}
    history: list[tuple] = []
    instructions: list[list] = []
    last = ""
    k, nxt = 0, bounds[0] if bounds else None
    instruction = TxnKind.INSTRUCTION
    stop = bounds[-1] if bounds else ""
    with fewer_gc_passes():   # as the local pipeline's loop
        for t in part_txns(plan, index):
            v = t.vtso
            while nxt is not None and v >= nxt:
                k += 1
                crossed[k] = point
                nxt = bounds[k] if k < len(bounds) else None
            last = v
            if v >= stop:     # the last range reports the rest itself
                break
            if t.restart is not None:
                point = list(t.restart)
            kind = t.kind
            if kind in HISTORY_KINDS:
                history.append(history_entry(t))
            elif kind is instruction and (storage := storage_change(t)) is not None:
                instructions.append([v, storage])
    yield {"part": index, "dn": plan.dns[part.dn_idx].dn, "crossed": crossed, "history": history,
           "instructions": instructions, "last": last, "cpu": time.process_time() - cpu}


def start_points(plan: ReadPlan, parts: list[dict]) -> list[list]:
    """``starts[dn_idx][r]``: where range ``r`` reads DN ``dn_idx`` from — a restart point
    ``[file, offset, tso, txn_id, seq]``, ``None`` (the DN's first event) or ``DONE``. A DN's
    partitions are in position order, so the first one to cross a boundary decides it; a boundary
    no partition crosses lies above the DN's last transaction."""
    n = len(plan.bounds) + 1
    starts: list[list] = [[None] + [DONE] * (n - 1) for _ in plan.dns]
    seen: list[set] = [set() for _ in plan.dns]
    for p in sorted(parts, key=lambda p: p["part"]):
        i = plan.parts[p["part"]].dn_idx
        for r, point in p["crossed"].items():
            r = int(r)
            if r not in seen[i]:
                seen[i].add(r)
                starts[i][r] = point
    return starts


def _extract_from(plan: ReadPlan, dn_idx: int, start) -> Iterator:
    """DN ``dn_idx`` extracted from ``start`` (``start_points``: file, offset, then the vtso state
    there; None: from its first event; ``DONE``: nothing) to its end."""
    if start == DONE:
        return iter(())
    return dn_txns(plan.dns[dn_idx], start[:2] if start else None, None, start[2:] if start else None)


def range_stream(plan: ReadPlan, dn_idx: int, start, lo: str | None, hi: str | None) -> EndsPassing:
    """The transactions of DN ``dn_idx`` in ``[lo, hi)``, extracted from ``start``
    (``start_points``). Once a transaction at or above ``hi`` ends it, the stream says the DN passed
    ``hi`` (the emission rule, ``merger.emission``); a DN whose input ends inside the range passed
    only its last transaction."""
    stream = EndsPassing((), None)
    stream.stream = _in_range(_extract_from(plan, dn_idx, start), lo, hi, stream)
    return stream


def _in_range(txns: Iterator, lo: str | None, hi: str | None, stream: EndsPassing) -> Iterator:
    def below_hi(t) -> bool:
        if t.vtso < hi:
            return True
        stream.passed = hi
        return False

    try:
        # dropwhile tests only up to the first transaction in range, then hands the rest on in C
        rest = dropwhile(lambda t: t.vtso < lo, txns) if lo is not None else txns
        yield from rest if hi is None else takewhile(below_hi, rest)
    finally:
        close = getattr(txns, "close", None)
        if close is not None:
            close()


def _capture(txns: Iterator, into: list) -> Iterator:
    """``txns``, with the schema history's ones (DDL marks, physical DDLs) encoded into ``into``."""

    for t in txns:
        if t.kind in HISTORY_KINDS:
            into.append(history_entry(t))
        yield t


@in_task
def write_range_reread(settings, plan: ReadPlan, history, starts: list[list] | None, rng: int) -> Iterator[dict]:
    """Task (``exchange=reread``): output range ``rng``, its DNs read from ``starts`` →
    ``render.render_range``. The last range also returns its history transactions (``history``)
    and the DNs its merge saw leave (``left``).

    ``starts=None``: the start points are guessed (``speculate``): the row then also carries the
    guesses (``starts``), the scan's start points for the range's upper boundary (``reach``), and
    the history transactions and storage changes the range met (``history``, ``changes``).

    With ``settings.follow`` (``follow.py``) the second range publishes its progress from the
    task's start (``progress``, its row carries the job's token) and the first range's task, its
    own files done, follows it (``followed`` in its row)."""
    from gbinlog.spark_engine.follow import FOLLOWED, Progress

    progress = Progress(settings.tmp_dir, rng, settings.follow) if settings.follow and rng == FOLLOWED else None
    ok = False
    try:
        row = _write_range(settings, plan, history, starts, rng, progress)
        ok = True
    finally:
        if progress is not None:
            progress.close(ok)   # (a row saying the range failed closed it with FAILED already)
    yield row


def _write_range(settings, plan: ReadPlan, history, starts, rng: int, progress) -> dict:
    from gbinlog.spark_engine.follow import follow
    from gbinlog.spark_engine.render import render_range
    from gbinlog.spark_engine.speculate import lead_in_start, watch
    from merger.membership import Membership

    entries = history.value if hasattr(history, "value") else history
    bounds = plan.bounds
    lo = bounds[rng - 1] if rng > 0 else None
    hi = bounds[rng] if rng < len(bounds) else None
    cpu = time.process_time()
    n = len(plan.dns)
    captured: list[list[tuple]] = [[] for _ in range(n)]
    guessing = starts is None
    if guessing:
        mine = [lead_in_start(plan, i, lo) if lo is not None else None for i in range(n)]
        lead_cpu = time.process_time() - cpu
        reach: list = [DONE] * n
        changes: list[list] = []
        streams = [EndsPassing((), None) for _ in range(n)]
        for i, stream in enumerate(streams):
            stream.stream = watch(_extract_from(plan, i, mine[i]), lo, hi, mine[i], i, reach, captured[i],
                                  changes, stream)
    else:
        streams = [range_stream(plan, i, starts[i][rng], lo, hi) for i in range(n)]
    membership = None
    if hi is None:
        if not guessing:
            streams = [_capture(s, into) for s, into in zip(streams, captured, strict=True)]
        membership = Membership()
    try:
        row = render_range(settings, entries, rng, streams, membership, direct=rng == 0, progress=progress)
    except Exception as exc:
        if not guessing or rng == 0:
            raise
        # a wrong guess can fail the shaping (a table its guessed history lacks): the driver
        # redoes the range from the scan's answers, and an error of the input itself then recurs
        if progress is not None:
            progress.close(False)
        return {"rng": rng, "miss": f"{type(exc).__name__}: {exc}", "cpu": time.process_time() - cpu,
                "lead_cpu": lead_cpu, "starts": mine}
    if progress is not None:
        row["progress"] = settings.follow
    if rng == 0 and settings.follow:
        row["followed"] = follow(settings, row["direct"])
    if membership is not None or guessing:
        # in DN order, as the scan's: of a mark every DN carries, the first DN's is kept
        row["history"] = [e for into in captured for e in into]
    if membership is not None:
        row["left"] = dict(membership.left)
    if guessing:
        row.update(starts=mine, reach=reach, changes=changes, lead_cpu=lead_cpu)
    row["cpu"] = time.process_time() - cpu
    return row


def _write_job(sc, plan: ReadPlan, settings, history, starts, ranges: list[int] | None = None) -> list[dict]:
    """One writer task per range (``ranges``: only those), in range order."""
    from functools import partial

    from gbinlog.spark_engine.batch import _one_task

    # the last range first: with one range per core it is as long as the others
    order = sorted(range(len(plan.bounds) + 1) if ranges is None else ranges, reverse=True)
    settings.follow = uuid.uuid4().hex[:16] if settings.may_follow and {0, 1} <= set(order) else None
    rows = sc.parallelize(order, len(order)).mapPartitions(
        _one_task(partial(write_range_reread, settings, plan, history, starts))).collect()
    return sorted(rows, key=lambda r: r["rng"])


def _speculative_job(sc, plan: ReadPlan, settings, timings: dict) -> tuple[list[dict], list[tuple]] | None:
    """The writers with guessed start points and history (``speculate``): their rows and the
    history transactions below the last boundary; ``None`` when a start point was wrong (or a DN
    left, or a writer below the last range failed). Ranges shaped with a wrong history are written
    again from their (checked) start points with the history the ranges below met."""
    from extractor.txn_codec import BodyDecoder
    from gbinlog.spark_engine.exchange import decode_txns
    from gbinlog.spark_engine.speculate import head_history, history_misses, start_misses
    from schema_shaper import collect_history

    t0 = time.perf_counter()
    try:
        head = head_history(plan)
    except Exception as exc:  # noqa: BLE001 - the scan's task meets it again and reports it typed
        log.warning("spark build: reading the DNs' heads failed (%s): scanning the input", exc)
        return None
    settings.left = {}
    timings["extract+history"] = time.perf_counter() - t0
    rows = _write_job(sc, plan, settings, collect_history(decode_txns(head, BodyDecoder())), None)
    timings["extract tasks cpu"] = sum(r["lead_cpu"] for r in rows)
    miss = start_misses(rows)
    if miss is not None:
        log.warning("spark build: the ranges' guessed start points did not hold (%s): "
                    "scanning the input and writing the ranges again", miss)
        timings["guess missed"] = time.perf_counter() - t0
        return None
    met = [e for r in rows[:-1] for e in r["history"]]
    redo = history_misses(rows, head, plan.bounds)
    if redo:
        log.warning("spark build: the schema history guessed from the DNs' heads was not the one met "
                    "below range(s) %s: writing them again with that", redo)
        t1 = time.perf_counter()
        starts = [[None] + [r["starts"][i] for r in rows[1:]] for i in range(len(plan.dns))]
        exact = collect_history(decode_txns(met, BodyDecoder()))
        for row in _write_job(sc, plan, settings, exact, starts, redo):
            rows[row["rng"]] = row
        timings["guess redone"] = time.perf_counter() - t1
    return rows, met


def reread_jobs(spark, plan: ReadPlan, settings, timings: dict[str, float],
                speculate: bool = True) -> tuple[list[dict], list]:
    """The two jobs: scan every input partition (start points, schema history), then one writer
    per range — or, with ``speculate`` and more than one range, the writers alone with guessed
    start points, the scan only when a guess was wrong. Returns the writers' summaries and the
    history."""
    from functools import partial

    from extractor.txn_codec import BodyDecoder
    from gbinlog.spark_engine.batch import _one_task
    from gbinlog.spark_engine.exchange import before_leaving, decode_txns, scale_in
    from schema_shaper import collect_history

    sc = spark.sparkContext
    n_parts = len(plan.parts)
    guessed = _speculative_job(sc, plan, settings, timings) if speculate and plan.bounds else None
    if guessed is not None:
        rows, below = guessed
        scanned = list(decode_txns(below, BodyDecoder()))
        timings["write tasks cpu"] = sum(r["cpu"] for r in rows)
    else:
        t0 = time.perf_counter()
        parts = []
        if plan.bounds:   # one range: nothing to scan for, the writer reads every DN from its start
            parts = sc.parallelize(range(n_parts), n_parts).mapPartitions(
                _one_task(partial(scan_part, plan))).collect()
        scanned = list(decode_txns((e for p in parts for e in p["history"]), BodyDecoder()))
        settings.left = scale_in(parts, settings.dns)
        history = collect_history(before_leaving(scanned, settings.left))
        starts = start_points(plan, parts)
        timings["extract+history"] = timings.get("guess missed", 0.0) + time.perf_counter() - t0
        rows = _write_job(sc, plan, settings, history, starts)
        timings["extract tasks cpu"] = sum(p["cpu"] for p in parts)
        timings["write tasks cpu"] = sum(r["cpu"] for r in rows)
    tail = rows[-1]
    for dn, vtso in tail.pop("left").items():
        settings.left.setdefault(dn, vtso)
    scanned += decode_txns(tail.pop("history"), BodyDecoder())
    history = collect_history(before_leaving(scanned, settings.left))
    return rows, history
