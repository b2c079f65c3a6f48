"""Logical schema shaping (docs/architecture.md).

Topology, logical and physical schema history (meta store), DDL marks turned into one logical DDL,
physical DDL hidden, rows reshaped to the logical columns, table-id assignment.
Public interface: ``shape(txns) -> Iterator[LogicalTxn]`` and ``Shaper`` (``Shaper.as_of(store, vtso)``
on restart, ``Shaper.from_history(collect_history(txns), vtso)`` for an engine that gathers marks
first); ``MetaStore.open(path_or_url)``.
"""

from schema_shaper.errors import (
    BadDdl,
    BadMark,
    ShapeError,
    UnknownPhysicalSchema,
    UnknownTable,
    ValueMismatch,
)
from schema_shaper.marks import collect_history, snapshot_entries
from schema_shaper.meta_store import MarkEntry, MetaStore, PhysEntry
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn, PassBlock
from schema_shaper.shaper import Shaper, is_system, shape

__all__ = [
    "BadDdl", "BadMark", "LogicalBlock", "LogicalKind", "LogicalTxn", "MarkEntry", "MetaStore", "PassBlock",
    "PhysEntry", "ShapeError", "Shaper", "UnknownPhysicalSchema", "UnknownTable", "ValueMismatch",
    "collect_history", "is_system", "shape", "snapshot_entries",
]
