"""A PolarDB-X-like cluster that writes DN binlogs and the truth (docs/architecture.md).

``simulate(workload, dns, txns, seed, out, ...)`` runs a workload on simulated DNs and writes
``out/dn0/…`` (``mysql-bin.NNNNNN`` + index in the DN 8.0 dialect) and ``out/truth.json``; the CLI is
``gbinlog simulate``. Modules: ``tso`` (oracle), ``cluster`` (scheduler, CN, 2PC, heartbeats),
``node`` / ``dn`` / ``dn_events`` (DN groups and events), ``ddl`` (DDL jobs, marks, system tables,
scale-out), ``workloads`` / ``workload_parts``, ``truth`` / ``values`` (the truth and its value
encoding), ``replay`` (truth → SQL). Layout of the output: ``fixtures/README.md``.
"""

from simulator.run import SimulateError, simulate

__all__ = ["SimulateError", "simulate"]
