"""The Spark batch build's jobs: one ``dumper.window.run_window`` task per vtso window.

Window ``r`` holds the transactions in ``(bounds[r - 1], bounds[r]]``. Its task reads every DN from
a restart point at or below the window's lower bound and runs the pipeline as a resume does
(``dumper.window``); only small summaries leave it. What the driver must give each window:

* **start points**: per DN, the restart point carried by the newest transaction below the lower
  bound (re-reading the DN from it regenerates exactly the transactions after that one), ``None``
  (the DN's first event) or ``DONE`` (the DN has nothing above the bound);
* **the schema history** below the lower bound (DDL marks, physical DDLs), for
  ``Shaper.from_history``;
* **the DNs that left** the cluster at or below the bound (scale-in).

Two ways to know them. By default the windows *guess* (``speculate``): each task reads a little
below its bound for its start points, and the driver guesses the history from the DNs' heads;
each window reports the start points for its upper bound and the history it met, and the driver
checks every guess against them. A wrong start point (or a storage change below the last bound)
costs ``scan_part`` over the input and a second round of windows; a wrong history a second round
of the windows it touched. Either way the output is the scan's, byte for byte. With
``spark.gbinlog.guess=false`` the scan always runs first.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial

from dumper.pipeline import Settings
from dumper.window import HISTORY_KINDS
from extractor.model import DnTxn, TxnKind
from extractor.txn_codec import BodyDecoder, encode_txn, txn_from_fields
from gbinlog.spark_engine.errors import in_task
from gbinlog.spark_engine.plan import ReadPlan, part_txns

log = logging.getLogger(__name__)
DONE = "done"   # a DN whose transactions all lie below a window: it gives that window nothing


@dataclass
class WindowJob:
    """What every window task needs (pickled with it)."""

    tmp_dir: str
    settings: Settings
    server_ids: dict[str, int | None]
    cluster_stopped: bool = False
    left: dict[str, str] = field(default_factory=dict)   # scale-in: DN → instruction vtso (``scale_in``)
    # a resumed output: its directory (the first window resumes the pipeline there), its last vtso
    # done and the schema history up to it (from its meta store)
    resume_in: str | None = None
    floor: str | None = None
    base_history: list = field(default_factory=list)

    def resume(self, out_dir: str, state) -> None:
        """Go on from an output directory's ``state``: the first window is its ordinary resume."""
        from dumper.state import meta_store_location
        from schema_shaper import MetaStore

        self.resume_in, self.floor, self.left = out_dir, state.last_vtso, dict(state.left)
        if state.last_vtso is not None:
            store = MetaStore.open(meta_store_location(out_dir, state.meta_store))
            try:
                self.base_history = list(store.history(state.last_vtso))
            finally:
                store.close()


def one_task(fn):
    """For ``parallelize(range(n), n).mapPartitions``: ``fn(i)`` on the partition's one index ``i``."""
    def run(indexes: Iterator[int]) -> Iterator:
        for i in indexes:
            yield from fn(i)
    return run


# -- the schema history and scale-in, from what the tasks report ----------------------------------

def decode_txns(encoded: Iterable[tuple]) -> Iterator[DnTxn]:
    decoder = BodyDecoder()
    for fields, body in encoded:
        t = txn_from_fields(fields)
        decoder.decode(body, t)
        yield t


def scale_in(parts: list[dict], dns: list[str]) -> dict[str, str]:
    """DN id → the vtso of the ``StorageInstChange`` instruction it left the cluster at (scale-in),
    as ``merger.merge`` decides it when it reads every DN from its start (``gbinlog build``): a DN
    not in an instruction's list whose stream is still open there (it carries a branch of the
    instruction, or has transactions after it)."""
    changes = sorted({v: storage for p in parts for v, storage in p["instructions"]}.items())
    last: dict[str, str] = {}
    carries: set[tuple[str, str]] = set()
    for p in parts:
        last[p["dn"]] = max(last.get(p["dn"], ""), p["last"])
        carries.update((p["dn"], v) for v, _ in p["instructions"])
    left: dict[str, str] = {}
    for vtso, storage in changes:
        for dn in dns:
            if dn not in storage and dn not in left and ((dn, vtso) in carries or last.get(dn, "") > vtso):
                left[dn] = vtso
    return left


def before_leaving(txns: Iterable[DnTxn], left: Mapping[str, str]) -> Iterator[DnTxn]:
    """``txns`` without those a DN wrote after it left the cluster: the merge never reads them, so
    their physical DDLs must not reach the schema history (``meta.db``)."""
    for t in txns:
        at = left.get(t.dn)
        if at is None or t.vtso <= at:
            yield t


# -- the scan (when the guesses do not hold) --------------------------------------------------------

@in_task
def scan_part(plan: ReadPlan, index: int) -> Iterator[dict]:
    """Task: input partition ``index`` → ``{"part", "dn", "crossed": {window: point}, "history",
    "instructions", "last", "cpu"}`` of its transactions below the last bound (``last``: the vtso
    of the first one at or above it, if any). ``crossed[r]`` (``r`` ≥ 1) is where window ``r``
    reads the DN from: the newest restart point carried by a transaction of this partition below
    ``bounds[r - 1]``, else the partition's own start."""
    from dumper.pipeline import fewer_gc_passes
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
    stop = bounds[-1] if bounds else ""
    with fewer_gc_passes():
        for t in part_txns(plan, index):
            v = t.vtso
            while nxt is not None and v >= nxt:
                k += 1
                crossed[k] = point
                nxt = bounds[k] if k < len(bounds) else None
            last = v
            if v >= stop:     # the last window reports the rest itself
                break
            if t.restart is not None:
                point = list(t.restart)
            kind = t.kind
            if kind in HISTORY_KINDS:
                history.append(encode_txn(t))
            elif kind is TxnKind.INSTRUCTION and (change := storage_change(t)) is not None:
                instructions.append([v, change])
    yield {"part": index, "dn": plan.dns[part.dn_idx].dn, "crossed": crossed, "history": history,
           "instructions": instructions, "last": last, "cpu": time.process_time() - cpu}


def start_points(plan: ReadPlan, parts: list[dict]) -> list[list]:
    """``starts[dn_idx][r]``: where window ``r`` reads DN ``dn_idx`` from (``scan_part``'s points;
    a bound no partition of the DN crosses lies above its last transaction: ``DONE``)."""
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


# -- one window (executor) ----------------------------------------------------------------------------

def window_start(job: WindowJob, plan: ReadPlan, lo: str | None, points: list):
    """The ``State`` window ``(lo, …]`` starts from: each DN's point, the DNs that left at or below
    ``lo``, the build's settings."""
    from dumper.state import State
    from extractor.model import RestartPoint

    return State(server_ids=dict(job.server_ids), storage_seqs={d.dn: d.storage_seq for d in plan.dns},
                 last_vtso=lo, settings=job.settings.output_settings(), meta_store="",
                 restart={d.dn: RestartPoint(*p) for d, p in zip(plan.dns, points, strict=True)
                          if p is not None and p != DONE},
                 left={dn: v for dn, v in job.left.items() if lo is not None and v <= lo})


@in_task
def write_window(job: WindowJob, plan: ReadPlan, history, starts: list[list] | None, rng: int) -> Iterator[dict]:
    """Task: window ``rng``, its DNs read from ``starts`` (``None``: guessed, ``speculate``) →
    ``{"rng", "summary"}`` (a ``WindowSummary`` whose history is encoded in ``"history"``) and,
    when guessing, the guesses (``starts``) and the start points for the upper bound (``reach``)."""
    from dumper.window import resume_window, run_window
    from gbinlog.local_engine import DirDn
    from gbinlog.spark_engine.speculate import lead_in_start

    entries = history.value if hasattr(history, "value") else history
    bounds = plan.bounds
    lo = bounds[rng - 1] if rng > 0 else None
    hi = bounds[rng] if rng < len(bounds) else None
    cpu = time.process_time()
    dns = [DirDn(d.dir, d.dn, complete=job.cluster_stopped) for d in plan.dns]
    if rng == 0 and job.resume_in is not None:
        yield {"rng": 0, "history": [], "summary": resume_window(dns, job.resume_in, job.settings, hi=hi),
               "cpu": time.process_time() - cpu}
        return
    guessing = starts is None
    points = [lead_in_start(plan, i, lo) if lo is not None else None for i in range(len(plan.dns))] \
        if guessing else [s[rng] for s in starts]
    lead_cpu = time.process_time() - cpu
    out = tempfile.mkdtemp(prefix=f"window-{rng:05d}-", dir=job.tmp_dir)   # each attempt its own
    try:
        summary = run_window(dns, out, job.settings, index=rng, start=window_start(job, plan, lo, points), hi=hi,
                             history=entries, final=rng == 0, watch=guessing or hi is None,
                             done=[d.dn for d, p in zip(plan.dns, points, strict=True) if p == DONE])
    except Exception as exc:
        if not guessing or rng == 0:
            raise
        # a wrong guess can fail the shaping (a table its guessed history lacks): the driver
        # redoes the window from the scan's answers, and an error of the input itself then recurs
        yield {"rng": rng, "miss": f"{type(exc).__name__}: {exc}", "starts": points, "lead_cpu": lead_cpu,
               "cpu": time.process_time() - cpu}
        return
    row = {"rng": rng, "history": [encode_txn(t) for t in summary.history], "summary": summary}
    summary.history = []
    if guessing:
        row.update(starts=points, lead_cpu=lead_cpu,
                   reach=[summary.cut_at.get(d.dn, DONE) for d in plan.dns])
    row["cpu"] = time.process_time() - cpu
    yield row


# -- the jobs (driver) ------------------------------------------------------------------------------

def _window_job(sc, plan: ReadPlan, job: WindowJob, history, starts, windows: list[int] | None = None) -> list[dict]:
    """One task per window (``windows``: only those); rows in window order."""
    # the last window first: with one window per core it is as long as the others
    order = sorted(range(len(plan.bounds) + 1) if windows is None else windows, reverse=True)
    rows = sc.parallelize(order, len(order)).mapPartitions(
        one_task(partial(write_window, job, plan, history, starts))).collect()
    return sorted(rows, key=lambda r: r["rng"])


def _speculative_job(sc, plan: ReadPlan, job: WindowJob, timings: dict) -> tuple[list[dict], list[tuple]] | None:
    """The windows with guessed start points and history: their rows and the history transactions
    below the last bound; ``None`` when a start point was wrong (or a DN left, or a window below
    the last failed). Windows shaped with a wrong history are written again from their (checked)
    start points with the history the windows below met."""
    from gbinlog.spark_engine.speculate import head_history, history_misses, start_misses
    from schema_shaper import collect_history

    t0 = time.perf_counter()
    try:
        head = head_history(plan)
    except Exception as exc:  # noqa: BLE001 - the scan's task meets it again and reports it typed
        log.warning("spark build: reading the DNs' heads failed (%s): scanning the input", exc)
        return None
    job.left = {}
    timings["extract+history"] = time.perf_counter() - t0
    rows = _window_job(sc, plan, job, collect_history(decode_txns(head)), None)
    timings["extract tasks cpu"] = sum(r["lead_cpu"] for r in rows)
    miss = start_misses(rows)
    if miss is not None:
        log.warning("spark build: the windows' guessed start points did not hold (%s): "
                    "scanning the input and writing the windows again", miss)
        timings["guess missed"] = time.perf_counter() - t0
        return None
    met = [e for r in rows[:-1] for e in r["history"]]
    redo = history_misses(rows, head, plan.bounds)
    if redo:
        log.warning("spark build: the schema history guessed from the DNs' heads was not the one met "
                    "below window(s) %s: writing them again with that", redo)
        t1 = time.perf_counter()
        starts = [[None] + [r["starts"][i] for r in rows[1:]] for i in range(len(plan.dns))]
        for row in _window_job(sc, plan, job, collect_history(decode_txns(met)), starts, redo):
            rows[row["rng"]] = row
        timings["guess redone"] = time.perf_counter() - t1
    return rows, met


def window_jobs(spark, plan: ReadPlan, job: WindowJob, timings: dict[str, float],
                guess: bool = True) -> tuple[list[dict], list]:
    """The windows (guessed, else after the scan): their rows in window order and the whole
    schema history (for the meta store)."""
    from schema_shaper import collect_history

    sc = spark.sparkContext
    n_parts = len(plan.parts)
    # a resumed output is scanned from its restart points (the guesses assume the DNs' heads)
    guess = guess and job.resume_in is None
    guessed = _speculative_job(sc, plan, job, timings) if guess and plan.bounds else None
    if guessed is not None:
        rows, below = guessed
        scanned = list(decode_txns(below))
    else:
        t0 = time.perf_counter()
        parts = []
        if plan.bounds:   # one window: nothing to scan for, it reads every DN from its start
            parts = sc.parallelize(range(n_parts), n_parts).mapPartitions(one_task(partial(scan_part, plan))).collect()
        scanned = [t for t in decode_txns(e for p in parts for e in p["history"])
                   if job.floor is None or t.vtso > job.floor]
        for dn, vtso in scale_in(parts, [d.dn for d in plan.dns]).items():
            job.left.setdefault(dn, vtso)
        history = job.base_history + collect_history(before_leaving(scanned, job.left))
        starts = start_points(plan, parts)
        timings["extract+history"] = timings.get("guess missed", 0.0) + time.perf_counter() - t0
        rows = _window_job(sc, plan, job, history, starts)
        timings["extract tasks cpu"] = sum(p["cpu"] for p in parts)
    timings["write tasks cpu"] = sum(r["cpu"] for r in rows)
    for row in rows:   # the DNs the windows' merges saw leave (the scan and the guesses saw the others)
        for dn, vtso in row["summary"].left.items():
            job.left.setdefault(dn, vtso)
    scanned += decode_txns(rows[-1]["history"])
    return rows, job.base_history + collect_history(before_leaving(scanned, job.left))
