"""Merging the branches of one transaction by trace id (reference §2, ``TxnBuffer.mergeTwoSortList``)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace
from operator import attrgetter

from extractor.model import Block, DnTxn

_TRACE = attrgetter("trace_id")


def merge_by_trace(branches: Sequence[DnTxn]) -> list[Block]:
    """The branches' table-map blocks in one list ordered by trace id.

    Only table maps are compared; a table map and its rows events move as one block. The merge is
    stable: on equal trace ids the earlier branch's blocks come first (the CDC merges the other
    buffers into the first one, taking from the first on ties). When consecutive blocks share a
    trace id, the later one's hint is dropped so the hint is written once (also within a single
    branch). Branch blocks are never modified; a compressed block is a copy.
    """
    if len(branches) == 1:
        merged = branches[0].blocks
    else:
        merged = list(heapq.merge(*(b.blocks for b in branches), key=_TRACE))
    out: list[Block] = []
    last = None
    for block in merged:
        if block.trace_id == last and block.hint is not None:
            block = replace(block, hint=None, rows_query=None)
        last = block.trace_id
        out.append(block)
    return out
