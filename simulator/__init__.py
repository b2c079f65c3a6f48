"""A PolarDB-X-like cluster that writes DN binlogs and the truth (DESIGN.md §6).

Will own: the TSO oracle, a CN running logical transactions on sharded tables, DN binlog writers in
the DN 8.0 dialect, workloads, and ``truth.json``. Public interface:
``simulate(workload, dns, seed, out) -> truth``.
"""
