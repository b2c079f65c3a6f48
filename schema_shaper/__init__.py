"""Logical schema shaping (DESIGN.md §3, reference §5).

Topology, logical and physical schema history (meta store), DDL marks turned into one logical DDL,
physical DDL hidden, rows reshaped to the logical columns, table-id assignment.
Public interface: ``shape(txns) -> Iterator[LogicalTxn]``.
"""

from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn

__all__ = ["LogicalBlock", "LogicalKind", "LogicalTxn"]
