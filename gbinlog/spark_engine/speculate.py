"""The batch build without its scan job, when the input allows: every window starts at once.

``windows.scan_part`` extracts all input below the last window bound only to learn, per DN and
bound, the restart point a window re-reads the DN from, plus the schema history and
the ``StorageInstChange`` instructions below it. On 2 cores that scan costs about a fifth of the
build (bench/spark.py). Here each writer of a range ``r ≥ 1`` *guesses* those instead, and the
guess is checked against what the writers report, exactly:

* start points (``lead_in_start``): the DN read from the start of the newest file that begins
  below the boundary, leniently (a commit whose prepare lies in an earlier file is skipped, the
  vtso state starts empty), to the boundary; the guess is the newest restart point a transaction
  below it carries, as the scan picks it (``newest_point_below``). It is right when the reading
  had caught up with the whole DN's by then, which the check decides: window ``r - 1`` reports
  the scan's own answer for its upper bound (its restart points where each DN was cut,
  ``dumper.window.WindowDn``), and every window's guess must equal it, DN by DN.
* the schema history (``head_history``): the history transactions of each DN's head (a DN's
  CREATE TABLEs and first marks come before its first rows), read by the driver; it must equal
  what the writers below the last boundary report they met.
* no DN leaves the cluster below the last boundary: no writer below it meets a storage change.

``start_misses`` says why the start points do not hold (or a DN leaves below the last boundary,
or a writer below it failed): the driver then runs the scan and the writers again, as without
guesses. Otherwise every range read exactly its transactions, and ``history_misses`` names the
ranges shaped with a history that is not the one the ranges below met: those are written again
from their start points with that history (a DDL past the DNs' heads costs their writers twice,
not a scan). Either way the output is the scan's, byte for byte.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dumper.window import HISTORY_KINDS
from extractor.txn_codec import encode_txn
from gbinlog.spark_engine.plan import ReadPlan, dn_txns

DONE = "done"   # as windows.DONE: a DN whose transactions all lie below a boundary
HEAD_QUIET_TXNS = 1000   # the head ends after this many transactions without history
HEAD_MAX_TXNS = 20_000   # ... or after this many (dense DDLs: the writers' redo finds the rest)
_VTSO = 7                # in ``txn_fields``
LEAD_IN_FILES = 2        # files tried below a boundary before the DN is read from its start
LEAD_IN_BYTES = 8 << 20  # a lenient read begins at least this far below a boundary's first commit
MARK_BYTES = 1 << 20     # ... at one of the file's event starts this far apart


def newest_point_below(txns: Iterator, bound: str, point):
    """The scan's choice for ``bound``: the restart point carried by the newest transaction below
    it (``point`` when none carries one), or ``DONE`` when no transaction reaches ``bound``."""
    for t in txns:
        if t.vtso >= bound:
            return point
        if t.restart is not None:
            point = list(t.restart)
    return DONE


@contextmanager
def _quiet_assembler():
    """A lenient reading warns about every commit whose prepare it did not see: expected here."""
    logger = logging.getLogger("extractor.assembler")
    was, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = was


def _newest_file_below(directory: Path, names: list[str], tso: int) -> int:
    """The index of the newest file whose first commit TSO is below ``tso`` (0 when none is): a
    binary search over the files' first commits (a few events read per file probed)."""
    from gbinlog.spark_engine.ranges import first_commit_tso

    lo, hi = 0, len(names) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first = first_commit_tso(directory / names[mid])
        if first is not None and first < tso:
            lo = mid
        else:
            hi = mid - 1
    return lo


def lead_in_offset(path: Path, tso: int) -> int:
    """Where in file ``path`` to begin a lenient read for a boundary at ``tso``: the first group
    start after the mark ``LEAD_IN_BYTES`` (or more) before the last of the file's marks (event
    starts every ``MARK_BYTES``, a walk over the headers) whose first commit lies below ``tso`` — a
    binary search, a few events read per mark probed; 4 (the file's start) in a file smaller than
    that, or when no group start follows."""
    import mmap

    from binlog import read_events
    from gbinlog.spark_engine.ranges import commit_tso_after, group_start_after
    from gbinlog.spark_engine.xkernel import event_marks

    if path.stat().st_size <= LEAD_IN_BYTES + MARK_BYTES:
        return 4
    events = read_events(path)
    try:
        crc_len = next(events).ctx.crc_len   # the FDE's
    finally:
        events.close()   # its file now, not at the next garbage collection
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        marks = event_marks(data, 4, MARK_BYTES)
        if not marks:
            return 4   # no whole event: the read from the file's start says what is wrong
        lo, hi = 0, len(marks) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            first = commit_tso_after(data, marks[mid], crc_len)
            if first is not None and first < tso:
                lo = mid
            else:
                hi = mid - 1
        target = marks[lo] - LEAD_IN_BYTES
        mark = max((m for m in marks if m <= target), default=4)
        # a mark lies anywhere in a transaction: begin at the next group's first event
        return (group_start_after(data, mark) or 4) if mark > 4 else 4


def lead_in_start(plan: ReadPlan, dn_idx: int, bound: str):
    """A guess of the scan's start point of DN ``dn_idx`` for the range beginning at ``bound``:
    the DN read leniently from ``lead_in_offset`` in the newest file whose first commit lies below
    ``bound`` (then from that file's start, then likewise in the file before), else from the DN's
    start, as the scan reads it — up to the first transaction at or above ``bound``."""
    from extractor import extract
    from extractor.errors import OrderingError
    from extractor.model import Pos
    from extractor.source import list_binlog_files
    from extractor.vtso import VtsoState, vtso_tso
    from gbinlog.spark_engine.ranges import RangeSource

    dn = plan.dns[dn_idx]
    directory = Path(dn.dir)
    names = list_binlog_files(directory)
    tso = vtso_tso(bound)
    newest = _newest_file_below(directory, names, tso)
    for k in range(newest, max(-1, newest - LEAD_IN_FILES), -1):
        offset = lead_in_offset(directory / names[k], tso)
        tries = [offset] if offset > 4 else []
        if k > 0:
            tries.append(4)   # the file's start (the first file's: the strict read below)
        for at in tries:
            txns = extract(RangeSource(directory, dn.dn, Pos(names[k], at), None), dn_id=dn.dn,
                           storage_seq=dn.storage_seq, state=VtsoState(), strict=False)
            try:
                with _quiet_assembler():
                    point = newest_point_below(txns, bound, None)
            except OrderingError:
                continue   # the lenient reading could not go on from here: read from further back
            finally:
                txns.close()
            if point is not None:
                return point
    txns = dn_txns(plan.dns[dn_idx], None, None, None)
    try:
        return newest_point_below(txns, bound, None)
    finally:
        txns.close()


def head_history(plan: ReadPlan, quiet: int | None = None) -> list[tuple]:
    """Driver: the encoded history transactions of every DN's head, below the last boundary (in
    DN order, as the scan lists them); the head ends after ``quiet`` (``HEAD_QUIET_TXNS``)
    transactions without history, or ``HEAD_MAX_TXNS`` in all."""
    stop = plan.bounds[-1]
    quiet = HEAD_QUIET_TXNS if quiet is None else quiet
    entries: list[tuple] = []
    for i in range(len(plan.dns)):
        txns = dn_txns(plan.dns[i], None, None, None)
        since = read = 0
        try:
            for t in txns:
                if t.vtso >= stop or since >= quiet or read >= HEAD_MAX_TXNS:
                    break
                read += 1
                if t.kind in HISTORY_KINDS:
                    entries.append(encode_txn(t))
                    since = 0
                else:
                    since += 1
        finally:
            txns.close()
    return entries


def _same_entries(a: list, b: list) -> bool:
    return sorted(map(repr, a)) == sorted(map(repr, b))


def start_misses(rows: list[dict]) -> str | None:
    """Why the writers' guessed start points (``rows``, in range order) are not the scan's, or a
    DN leaves below the last boundary, or a writer below it failed; ``None`` when none of these:
    then every range read exactly its transactions, and ``rows[:-1]``'s history is the scan's."""
    for r in rows[:-1]:
        if "miss" in r:
            return f"range {r['rng']}: {r['miss']}"
    for lower, upper in zip(rows, rows[1:], strict=False):
        for i, (guess, truth) in enumerate(zip(upper["starts"], lower["reach"], strict=True)):
            if guess != truth:
                return f"range {upper['rng']}, DN #{i}: start point {guess} is not the scan's {truth}"
    if any(r["summary"].changes for r in rows[:-1]):
        return "a storage change below the last boundary"
    return None


def history_misses(rows: list[dict], head: list[tuple], bounds: list[str]) -> list[int]:
    """After ``start_misses`` found nothing: the ranges to write again, with the history the ranges
    below the last boundary met — those whose guessed history below their lower boundary is not
    that one, and a last range that failed."""
    met = [e for r in rows[:-1] for e in r["history"]]
    redo = []
    for r in range(1, len(rows)):
        lo = bounds[r - 1]
        if "miss" in rows[r] or not _same_entries([e for e in met if e[0][_VTSO] < lo],
                                                   [e for e in head if e[0][_VTSO] < lo]):
            redo.append(r)
    return redo
