"""Cluster membership as the merge sees it (reference §5.1): the ``StorageInstChange`` instruction.

A scale-out or scale-in is announced by an instruction transaction (a row of the BROADCAST
``__cdc_instruction__`` table, written to every DN of the cluster) whose content lists the storage
instances from then on. ``storage_change`` reads that list; ``Membership`` records which DNs joined
and left, at which vtso — what ``state.json`` keeps so a restart reads the same DNs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from extractor.model import DnTxn, TxnKind


@dataclass(slots=True)
class Membership:
    """DNs that joined (scale-out) and left (scale-in) during the merge: DN id → the vtso of the
    instruction. ``prejoin`` collects a joining DN's transactions from before it joined (its
    physical DDLs matter to the shaper; nothing of them is written)."""

    joined: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    prejoin: list[DnTxn] = field(default_factory=list)


def storage_change(txn: DnTxn) -> list[str] | None:
    """The storage list of a ``StorageInstChange`` instruction branch, else None.

    The instruction row's columns are found by value: the type column reads ``StorageInstChange``
    and the content column is JSON with ``storageInstList`` — no column names needed (a DN's table
    map may carry none)."""
    if txn.kind is not TxnKind.INSTRUCTION or not txn.blocks:
        return None
    from binlog.rows_events import decode_rows_event
    from binlog.table_map import decode_table_map

    block = txn.blocks[0]
    tm = block.events[0]
    table_map = decode_table_map(tm.payload, tm.ctx)
    for ev in block.events[1:]:
        for row in decode_rows_event(ev.type_code, ev.payload, ev.ctx).rows(table_map):
            values = row if isinstance(row, (list, tuple)) else list(row.values())
            texts = [v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v for v in values]
            if "StorageInstChange" not in texts:
                continue
            for v in texts:
                if isinstance(v, str) and "storageInstList" in v:
                    try:
                        return [str(x) for x in json.loads(v)["storageInstList"]]
                    except (ValueError, KeyError, TypeError):
                        return None
    return None
