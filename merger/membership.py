"""Cluster membership as the merge sees it: the ``StorageInstChange`` instruction.

A scale-out or scale-in is announced by an instruction transaction (a row of the BROADCAST
``__cdc_instruction__`` table, written to every DN of the cluster) whose content lists the storage
instances from then on. ``storage_change`` reads that list; ``Membership`` records which DNs joined
and left, at which vtso — what ``state.json`` keeps so a restart reads the same DNs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from extractor.members import instruction_of
from extractor.model import DnTxn, TxnKind
from merger.emission import Held


@dataclass(slots=True)
class Membership:
    """DNs that joined (scale-out) and left (scale-in) during the merge: DN id → the vtso of the
    instruction. ``prejoin`` collects a joining DN's transactions from before it joined (its
    physical DDLs matter to the shaper; nothing of them is written). ``ended``: the DNs whose
    stream ended (a finite input read to its end), noted when the merge finds the end."""

    joined: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    prejoin: list[DnTxn] = field(default_factory=list)
    ended: set[str] = field(default_factory=set)
    #: where the merge stopped by the emission rule (a DN's input ended below the rest), or None
    held: Held | None = None
    #: the merge's next transaction of a DN (what it waits behind), for errors that name it
    head_of: Callable[[str], DnTxn | None] | None = None


def storage_change(txn: DnTxn) -> list[str] | None:
    """The storage list of a ``StorageInstChange`` instruction branch, else None (the row is read
    by ``extractor.members.instruction_of``)."""
    if txn.kind is not TxnKind.INSTRUCTION:
        return None
    found = instruction_of(txn)
    if found is None or found.type != "StorageInstChange":
        return None
    return list(found.storage)
