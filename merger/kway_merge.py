"""The global merge (docs/architecture.md): blocking k-way merge by vtso, branch join, heartbeats,
cluster membership (DNs join and leave at ``StorageInstChange``), a clean stop between groups."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping

from binlog.kernel import compiled_twin
from extractor.model import DnTxn, TxnKind
from extractor.vtso import vtso_is_tso
from merger.emission import PASSED_ALL, Held, passed_at_end
from merger.errors import BranchConflict, BranchTsoMismatch, NonMonotonicMerge
from merger.membership import Membership, storage_change
from merger.model import GlobalTxn
from merger.trace_merge import merge_by_trace

#: What a live DN stream yields instead of a transaction when a stop is pending and the DN has
#: nothing newer yet: the merge ends there if the output is at a whole transaction.
IDLE = object()
_BROADCAST = (TxnKind.HEARTBEAT, TxnKind.DDL_MARK, TxnKind.INSTRUCTION)
_DML, _INSTRUCTION = TxnKind.DML, TxnKind.INSTRUCTION
_END = object()
#: how many recent TSO transactions the branch consistency check remembers (about 1 MB)
BRANCH_TSO_WINDOW = 4096
#: ``join(dn_id, vtso)`` → ``(rank, stream)`` of a DN that a ``StorageInstChange`` at ``vtso`` adds
#: (rank: its place in the DN order, which orders the branches of one transaction), or None.
Join = Callable[[str, str], "tuple[int, Iterable[DnTxn]] | None"]


def merge(streams: Iterable[Iterable[DnTxn]] | Mapping[str, Iterable[DnTxn]], *,
          ranks: Mapping[str, int] | None = None, join: Join | None = None,
          should_stop: Callable[[], bool] | None = None,
          membership: Membership | None = None, passed: str | None = None) -> Iterator[GlobalTxn]:
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

    Ties (the branches of one transaction) go in stream order, or by ``ranks`` (DN id → rank) when
    ``streams`` maps DN ids to streams — the DN order, which a DN that joins later keeps.

    Membership: at a ``StorageInstChange`` instruction, a listed DN that is not merged yet joins
    (``join`` gives its stream; its transactions below the instruction go to
    ``membership.prejoin``) and a merged DN that is not listed leaves after its branch of the
    instruction (its stream is not read any more); a DN whose stream ends is added to
    ``membership.ended``. ``should_stop()`` (checked after each output
    transaction) ends the merge there; a live stream yields ``IDLE`` when a stop is pending and it
    has nothing newer, and the merge ends at once if the output is at a whole transaction.

    Emission rule (``merger.emission``): a transaction is taken only when every DN still in the
    cluster has passed its vtso. A DN whose stream ended has passed only its last transaction (or
    what an ``EndsPassing`` stream says; ``passed``: what every DN had passed where the merge
    resumes), so the merge stops below the first transaction above that and says why in
    ``membership.held`` (with the number of transactions held back).

    The output vtso is strictly increasing; a decrease (or two different transactions with one
    vtso) raises ``NonMonotonicMerge`` naming the DN, file and offset.
    """
    return iter(_Merge(streams, ranks, join, should_stop, membership or Membership(), passed))


class _Merge:
    def __init__(self, streams, ranks: Mapping[str, int] | None, join: Join | None,
                 should_stop: Callable[[], bool] | None, membership: Membership, passed: str | None) -> None:
        self.join = join
        self.should_stop = should_stop
        self.m = membership
        self.heap: list[tuple[str, int, DnTxn]] = []
        self.its: dict[int, Iterator] = {}
        self.sources: dict[int, object] = {}
        self.dn_of: dict[int, str] = {}
        self.leaving: set[int] = set()
        self.idle_start = False
        # the emission rule's bound: the least vtso an ended DN has passed (PASSED_ALL: none ended)
        self.horizon = PASSED_ALL
        self.horizon_of: tuple[str, object] | None = None
        self.passed = passed
        self.counting = False               # merging what the rule held back, only to count it
        # branch consistency: txnId → (vtso, DN, start) of the recent TSO transactions
        self.tso_of_txn: dict[int, tuple[str, str, object]] = {}
        self.tso_order: deque[int] = deque()
        membership.head_of = self._head_of
        if isinstance(streams, Mapping):
            streams = [(ranks[dn] if ranks else rank, dn, s) for rank, (dn, s) in enumerate(streams.items())]
        else:
            streams = [(rank, None, s) for rank, s in enumerate(streams)]
        for rank, dn, s in streams:
            if dn is not None:
                self.dn_of[rank] = dn
            self.sources[rank] = s
            self.its[rank] = iter(s)
            if not self._refill(rank):
                self.idle_start = True      # stopped while starting: nothing handed out

    def _refill(self, rank: int, floor: str | None = None, last: DnTxn | None = None) -> bool:
        """Wait for DN ``rank``'s next transaction and put it in the heap (nothing when its stream
        ended or the DN left). False: ``IDLE`` (a stop is pending, the DN has nothing newer).
        ``last``: the DN's transaction just taken (what it passed if its stream ends here)."""
        it = self.its.get(rank)
        if it is None:
            return True
        if rank in self.leaving:
            del self.its[rank]              # scale-in: nothing after its branch of the instruction
            return True
        for txn in it:
            if txn is IDLE:
                return False
            if floor is not None and txn.vtso < floor:
                self.m.prejoin.append(txn)  # a joining DN's history before it joined
                continue
            self.dn_of[rank] = txn.dn
            heapq.heappush(self.heap, (txn.vtso, rank, txn))
            return True
        self._ended(rank, last)
        return True

    def _ended(self, rank: int, last: DnTxn | None = None) -> None:
        """DN ``rank``'s stream ended: not read any more, noted in ``membership.ended``; what it
        passed bounds what the merge may still take (``merger.emission.passed_at_end``)."""
        del self.its[rank]
        dn = self.dn_of.get(rank)
        if dn is not None:
            self.m.ended.add(dn)
        passed = passed_at_end(self.sources.get(rank), last, self.passed)
        if passed < self.horizon and not self.counting:
            self.horizon = passed
            self.horizon_of = (dn or f"#{rank}", (last.end or last.start) if last is not None else None)

    def _hold(self, vtso: str, rank: int, txn: DnTxn) -> None:
        """Emission rule: ``txn`` (vtso above what an ended DN passed) is not taken; the merge stops
        and says why in ``membership.held``."""
        heapq.heappush(self.heap, (vtso, rank, txn))    # back: counted with the rest
        dn, at = self.horizon_of
        self.m.held = Held(dn, self.horizon, at, vtso)

    def _count_held(self) -> int:
        """The global transactions the merge holds back: the rest merged and counted, not taken.
        Nothing of it may count as done: the membership it changes is restored, no DN joins."""
        m = self.m
        held, joined, left, prejoin, ended = m.held, dict(m.joined), dict(m.left), list(m.prejoin), set(m.ended)
        self.horizon, self.join, self.should_stop, self.counting = PASSED_ALL, None, None, True
        try:
            return sum(1 for _ in self.iterate())
        finally:
            m.held = held
            m.joined.clear()
            m.joined.update(joined)
            m.left.clear()
            m.left.update(left)
            m.prejoin[:] = prejoin
            m.ended.clear()
            m.ended.update(ended)

    def _head_of(self, dn: str) -> DnTxn | None:
        """DN ``dn``'s transaction the merge holds as its next (None: none, or not merged)."""
        return next((txn for _, rank, txn in self.heap if self.dn_of.get(rank) == dn), None)

    def _one_tso(self, group: list[DnTxn]) -> None:
        """Branch consistency: every branch of one distributed transaction carries one commit TSO,
        so a txnId met again (within the last ``BRANCH_TSO_WINDOW`` TSO transactions) under another
        vtso is a typed error naming both branches, not a transaction split in two."""
        first = group[0]
        txn_id = first.txn_id
        seen = self.tso_of_txn
        before = seen.get(txn_id)
        if before is None:
            seen[txn_id] = (first.vtso, first.dn, first.start)    # not the branch: its rows would stay
            order = self.tso_order
            order.append(txn_id)
            if len(order) > BRANCH_TSO_WINDOW:
                del seen[order.popleft()]
            return
        vtso, dn, start = before
        if vtso != first.vtso:
            raise BranchTsoMismatch(
                f"distributed transaction {first.txn_id} commits with TSO {first.vtso[:19]} here and with TSO "
                f"{vtso[:19]} on DN {dn} (its branch begun at {start.file}:{start.offset}): the branches of "
                "one transaction commit with one TSO; the input is damaged or not one cluster's",
                dn=first.dn, file=first.start.file, offset=first.start.offset)

    def _wait(self, rank: int, floor: str | None = None, last: DnTxn | None = None) -> None:
        """``_refill`` that waits through ``IDLE`` (the group is not provably whole yet)."""
        while not self._refill(rank, floor, last):
            pass

    def _membership(self, txn: DnTxn) -> None:
        dns = storage_change(txn)
        if dns is None:
            return
        merged = {dn: rank for rank, dn in self.dn_of.items() if rank in self.its or rank in self.leaving}
        for rank, dn in self.dn_of.items():
            if dn not in dns and rank in self.its and dn not in self.m.left:
                self.m.left[dn] = txn.vtso
                self.leaving.add(rank)
        for dn in dns:
            if dn in merged or dn in self.m.left or self.join is None:
                continue
            added = self.join(dn, txn.vtso)
            if added is None:
                continue
            rank, stream = added
            self.m.joined[dn] = txn.vtso
            self.dn_of[rank] = dn
            self.its[rank] = iter(stream)
            self._wait(rank, floor=txn.vtso)

    def __iter__(self) -> Iterator[GlobalTxn]:
        yield from merge_loop(self) if merge_loop is not None else self.iterate()
        if self.m.held is not None:
            self.m.held.txns = self._count_held()

    def iterate(self) -> Iterator[GlobalTxn]:
        """The merge loop (``merger._merge.merge_loop`` is its compiled twin)."""
        if self.idle_start:
            return
        heap, should_stop, its, leaving, dn_of = self.heap, self.should_stop, self.its, self.leaving, self.dn_of
        heappop, heappush = heapq.heappop, heapq.heappush
        last: DnTxn | None = None
        last_vtso = ""
        held: list[DnTxn] = []
        held_rank = -1
        while heap:
            vtso, rank, txn = heappop(heap)
            if vtso <= last_vtso and not (held and vtso == last_vtso):
                raise _non_monotonic(txn, last)
            if vtso > self.horizon:
                self._hold(vtso, rank, txn)
                return
            last, last_vtso = txn, vtso
            kind = txn.kind
            if kind is _INSTRUCTION and not held:
                self._membership(txn)
            # (a txn popped while a group is held has the group's vtso, a TSO one)
            if txn.xid is None or (not held and not vtso_is_tso(vtso)):
                yield _one(txn)
                if (should_stop is not None and should_stop()) or not self._refill(rank, None, txn):
                    return
                continue
            # Pops go in (vtso, rank) order (a DN's next transaction is never below the one taken),
            # so two branches of one DN in a group come one after the other: same rank as before.
            if held and (kind is not held[0].kind or rank == held_rank):
                _check_join(held, txn)
            held.append(txn)
            held_rank = rank
            # the DN's next transaction: ``_refill``'s common case inline (one per DN transaction)
            it = its.get(rank)
            if it is None or rank in leaving:
                got = self._refill(rank)
            else:
                nxt = next(it, _END)
                got = nxt is not IDLE
                if nxt is _END:
                    self._ended(rank, txn)
                elif got:
                    dn_of[rank] = nxt.dn
                    heappush(heap, (nxt.vtso, rank, nxt))
            if not got:
                if kind in _BROADCAST:
                    # one branch per DN: the others' branches of this group are in the heap
                    while heap and heap[0][0] == vtso:
                        held.append(heappop(heap)[2])
                    self._one_tso(held)
                    yield _join(held)
                    return
                self._wait(rank, None, txn)     # not provably whole: wait for the DN after all
            if not heap or heap[0][0] != vtso:
                self._one_tso(held)
                yield _join(held)
                held = []
                if should_stop is not None and should_stop():
                    return


# the compiled twin of ``_Merge.iterate`` (merger/_merge.pyx), None when not built or GBINLOG_PURE_PYTHON=1
merge_loop = compiled_twin("merger._merge", "merge_loop")


def _non_monotonic(txn: DnTxn, last: DnTxn) -> NonMonotonicMerge:
    vtso = txn.vtso
    end = txn.end or txn.start
    what = "goes down after" if vtso < last.vtso else "repeats"
    return NonMonotonicMerge(f"vtso {vtso} {what} {last.vtso} (DN {last.dn} at {last.end})",
                             dn=txn.dn, file=end.file, offset=end.offset)


def _one(txn: DnTxn) -> GlobalTxn:
    kind = txn.kind
    return GlobalTxn(txn.vtso, kind, merge_by_trace((txn,)) if kind is _DML else txn.blocks, [txn])


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
    """The transaction of a group of branches (``branches`` becomes its list: not reused)."""
    first = branches[0]
    kind = first.kind
    if kind is _DML:
        blocks = merge_by_trace(branches)
    elif kind is TxnKind.HEARTBEAT:
        blocks = []
    else:
        # DDL marks / instructions: every DN wrote the same row; not buffer-merged.
        blocks = first.blocks
    return GlobalTxn(first.vtso, kind, blocks, branches)
