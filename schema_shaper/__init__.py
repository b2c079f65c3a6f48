"""Logical schema shaping (DESIGN.md §3, reference §5).

Will own: topology, logical and physical schema history (meta store), DDL marks turned into one
logical DDL, physical DDL hidden, rows reshaped to the logical columns, table-id assignment.
Public interface: ``shape(txns) -> Iterator[LogicalTxn]``.
"""
