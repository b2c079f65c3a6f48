"""Merging the branches of one transaction by trace id (CDC ``TxnBuffer.mergeTwoSortList``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from binlog import kernel
from extractor.model import Block, DnTxn


def merge_by_trace(branches: Sequence[DnTxn]) -> list[Block]:
    """The branches' table-map blocks in one list ordered by trace id.

    Only table maps are compared; a table map and its rows events move as one block. The merge is
    stable: on equal trace ids the earlier branch's blocks come first (the CDC merges the other
    buffers into the first one, taking from the first on ties). When consecutive blocks share a
    trace id, the later one's hint is dropped so the hint is written once (also within a single
    branch). Branch blocks are never modified; a compressed block is a copy.
    """
    # A stable sort of the concatenation is the stable k-way merge of the (non-decreasing) branch
    # lists: one kernel call (``binlog.kernel.by_trace``) also says whether neighbours share an id.
    merged, repeated = kernel.by_trace(branches)
    if repeated:
        _drop_repeated_hints(merged)
    return merged


def _drop_repeated_hints(merged: list[Block]) -> None:
    """A block whose trace id is the one before it loses its hint (sorted: equal ids are adjacent)."""
    last = None
    for i, block in enumerate(merged):
        trace = block.trace_id
        if trace == last and block.hint is not None:
            merged[i] = replace(block, hint=None, rows_query=None)
        last = trace
