"""Global binlog output (DESIGN.md §3, reference §3.3, §6).

Will own: the global binlog writer (BEGIN / hint+CTS / TABLE_MAP / rows / XID / CTS, rotation,
index, recovery) and the replication endpoint. Public interface: ``GlobalBinlog(dir).append(txn)``,
``serve(dir, cfg)``.
"""
