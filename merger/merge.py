"""The global merge (reference §4.3–§4.4): blocking k-way merge by vtso, branch join, heartbeats."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from extractor.model import DnTxn, TxnKind
from extractor.vtso import vtso_is_tso
from merger.errors import BranchConflict, NonMonotonicMerge
from merger.model import GlobalTxn
from merger.trace_merge import merge_by_trace


def merge(streams: Iterable[Iterable[DnTxn]]) -> Iterator[GlobalTxn]:
    """Merge every DN's ascending-vtso stream into whole transactions in global commit order.

    Blocking: a transaction is taken only while every DN stream that has not ended has a head item,
    so nothing newer can still arrive below it; a DN that delivers nothing (no heartbeat, a held
    prepare) stops the merge — correct, since an older transaction may yet come from it. After
    taking a DN's head the merge waits for that DN's next item before judging whether a branch
    group is complete.

    Branch join (MergeBarrier): TSO XA branches with the same vtso (hence the same first 38 chars,
    tso + txnId) are one transaction; a group completes when the smallest head differs. Heartbeat
    branches form a heartbeat window, emitted once with one branch per DN. DML branches are merged
    by trace id (``merge_by_trace``). Non-TSO transactions are never joined.

    The output vtso is strictly increasing; a decrease (or two different transactions with one
    vtso) raises ``NonMonotonicMerge`` naming the DN, file and offset.
    """
    its = [iter(s) for s in streams]
    heap: list[tuple[str, int, DnTxn]] = []
    for i, it in enumerate(its):
        first = next(it, None)
        if first is not None:
            heap.append((first.vtso, i, first))
    heapq.heapify(heap)
    last: DnTxn | None = None
    held: list[DnTxn] = []
    while heap:
        vtso, i, txn = heapq.heappop(heap)
        if last is not None and vtso <= last.vtso and not (held and vtso == last.vtso):
            end = txn.end or txn.start
            what = "goes down after" if vtso < last.vtso else "repeats"
            raise NonMonotonicMerge(f"vtso {vtso} {what} {last.vtso} (DN {last.dn} at {last.end})",
                                    dn=txn.dn, file=end.file, offset=end.offset)
        last = txn
        if txn.xid is None or not vtso_is_tso(vtso):
            yield _one(txn)
            _refill(heap, its, i)
            continue
        if held:
            _check_join(held, txn)
        held.append(txn)
        _refill(heap, its, i)
        if not heap or heap[0][0] != vtso:
            yield _join(held)
            held = []


def _refill(heap: list, its: list[Iterator[DnTxn]], i: int) -> None:
    """Wait for DN ``i``'s next transaction (blocking) and put it in the heap."""
    nxt = next(its[i], None)
    if nxt is not None:
        heapq.heappush(heap, (nxt.vtso, i, nxt))


def _one(txn: DnTxn) -> GlobalTxn:
    blocks = merge_by_trace([txn]) if txn.kind is TxnKind.DML else txn.blocks
    return GlobalTxn(txn.vtso, txn.kind, blocks, [txn])


def _check_join(held: list[DnTxn], txn: DnTxn) -> None:
    first = held[0]
    end = txn.end or txn.start
    if txn.kind is not first.kind:
        raise BranchConflict(f"branch of kind {txn.kind} joins {first.kind} branch(es) of vtso {txn.vtso}",
                             dn=txn.dn, file=end.file, offset=end.offset)
    for h in held:
        if h.dn == txn.dn and (h.branch == txn.branch or txn.kind is TxnKind.HEARTBEAT):
            raise BranchConflict(f"second {txn.kind} branch {txn.branch} of vtso {txn.vtso} on one DN "
                                 f"(first at {h.end})", dn=txn.dn, file=end.file, offset=end.offset)


def _join(branches: list[DnTxn]) -> GlobalTxn:
    first = branches[0]
    kind = first.kind
    if kind is TxnKind.HEARTBEAT:
        blocks = []
    elif kind is TxnKind.DML:
        blocks = merge_by_trace(branches)
    else:
        # DDL marks / instructions: every DN wrote the same row; not buffer-merged (§4.3 Collector).
        blocks = first.blocks
    return GlobalTxn(first.vtso, kind, blocks, list(branches))
