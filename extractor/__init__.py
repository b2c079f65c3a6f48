"""Per-DN extraction (DESIGN.md §3, reference §4.1–§4.2).

Will own: DN sources (binlog directories, follow mode, live DNs over the replication protocol),
transaction assembly, XID/branch keys, trace ids, vtso generation and the Sorter (first-level sort
that repairs 2PC holes). Public interface: ``extract(dn) -> Iterator[DnTxn]`` in ascending vtso.
"""
