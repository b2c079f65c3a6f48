"""First-level sort of one DN's committed transactions: the hole repair (docs/architecture.md).

A DN writes a commit when it happens, so its binlog order differs from commit-TSO order whenever
another transaction's prepare/commit falls inside a transaction's prepare..commit window (a
"hole": P1 P2 C2 C1). The ``Sorter`` holds committed transactions in a vtso heap and releases them
by exactly the CDC rule (``extractor/sort/Sorter.java``), see ``Sorter.release``.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable
from typing import Any

from binlog.kernel import compiled_twin
from extractor.errors import tso_went_back
from extractor.vtso import tso_vtso, vtso_for_commit

_PREWRITE = 0
_DONE = 1  # Commit or Rollback


class SorterError(Exception):
    """A sort item that contradicts the items before it (the caller adds the position)."""


class PySorter:
    """``items`` (sort items in binlog order) + ``wait`` (keys prewritten, not yet committed or
    rolled back) + ``heap`` (committed transactions by vtso) + ``watermark`` (W, monotone).

    Push one PreWrite when a transaction starts, one Commit or Rollback when it ends; call
    ``release`` after every Commit/Rollback.
    """

    __slots__ = ("items", "wait", "trans", "heap", "watermark", "_n")

    def __init__(self) -> None:
        self.items: deque[tuple[int, Any]] = deque()
        self.wait: set[Hashable] = set()
        self.trans: dict[Hashable, Any] = {}
        self.heap: list[tuple[str, int, Any]] = []
        self.watermark: str | None = None
        self._n = 0

    def prewrite(self, key: Hashable, txn: Any) -> None:
        if key in self.trans:
            raise SorterError(f"duplicate transaction key {key!r}")
        self.wait.add(key)
        self.trans[key] = txn
        self.items.append((_PREWRITE, key))

    def commit(self, key: Hashable, vtso: str) -> None:
        txn = self.trans.get(key)
        if txn is None:
            raise SorterError(f"commit of unknown transaction key {key!r}")
        if self.watermark is not None and vtso < self.watermark:
            # W only counts commits written before the oldest open prepare, so before this one's:
            # its TSO, fetched after its prepare, is above them all
            raise tso_went_back(txn, vtso, self.watermark)
        self.wait.discard(key)
        # The counter breaks vtso ties (branches of one txn on one DN) in commit order.
        self._n += 1
        heapq.heappush(self.heap, (vtso, self._n, key))
        self.items.append((_DONE, vtso))

    def rollback(self, key: Hashable, vtso: str) -> None:
        if self.trans.pop(key, None) is None:
            raise SorterError(f"rollback of unknown transaction key {key!r}")
        self.wait.discard(key)
        self.items.append((_DONE, vtso))

    def release(self) -> list[Any]:
        """The release rule: committed transactions with vtso ≤ W, in ascending vtso.

        W = the largest vtso among the Commit/Rollback items that lie before the first
        still-open PreWrite in binlog order; W never decreases. Safe because any transaction whose
        prepare comes after a commit C in the binlog fetched its commit TSO after C was written, so
        its TSO is larger than C's: nothing still open can sort below W. (``P1 P2 C1 P3 C2 C3``:
        after C1, P2 is open, W = C1; T1 is released iff vtso(T1) ≤ W — it is W.)
        """
        items, wait = self.items, self.wait
        w = self.watermark
        while items:
            kind, value = items[0]
            if kind == _PREWRITE:
                if value in wait:
                    break  # the oldest still-open transaction stops the scan
            elif w is None or value > w:
                w = value
            items.popleft()
        self.watermark = w
        out = []
        heap, trans = self.heap, self.trans
        while heap and w is not None and heap[0][0] <= w:
            key = heapq.heappop(heap)[2]
            out.append(trans.pop(key))
        return out

    def commit_tso(self, key: Hashable, txn: Any, tso: int, state: Any) -> list[Any]:
        """The commit of ``txn`` with commit TSO ``tso`` > 0 (its ``vtso`` and ``tso`` set, ``state``, the
        DN's ``VtsoState``, advanced: ``vtso_for_commit``), then ``release()``; in one call."""
        txn.vtso = vtso = vtso_for_commit(state, tso, txn.txn_id, "")
        txn.tso = tso
        self.commit(key, vtso)
        return self.release()

    def commit_alone(self, txn: Any, tso: int, state: Any) -> bool:
        """When nothing is held (no item, nothing open or committed): ``prewrite``, ``commit_tso`` and
        the ``release`` that gives ``txn`` back at once, without holding it (its ``vtso`` and ``tso``
        set, ``state`` advanced, the watermark moved as they would); False (nothing changed) else."""
        if self.items or self.wait or self.heap:
            return False
        vtso = tso_vtso(tso, txn.txn_id)
        if self.watermark is not None and vtso < self.watermark:
            raise tso_went_back(txn, vtso, self.watermark)
        vtso_for_commit(state, tso, txn.txn_id, "")     # the DN's vtso state moves on (the same vtso)
        txn.vtso = vtso
        txn.tso = tso
        self._n += 1
        if self.watermark is None or vtso > self.watermark:
            self.watermark = vtso
        return True

    def open_keys(self) -> list[Hashable]:
        """Keys prewritten and not yet committed or rolled back, oldest first."""
        return [v for k, v in self.items if k == _PREWRITE and v in self.wait]

    def oldest_open(self) -> Any | None:
        """The transaction that blocks release (the first open PreWrite), if any."""
        if self.items:
            kind, key = self.items[0]
            if kind == _PREWRITE and key in self.wait:
                return self.trans[key]
        return None

    def __len__(self) -> int:
        return len(self.trans)


# The compiled twin (extractor/_sort.pyx: the same rules, items as a list and a head index) when built.
Sorter = compiled_twin("extractor._sort", "Sorter") or PySorter
