"""Workloads: what the simulated application does (``--workload``).

Each workload is a list of components. A component sets up its schema (DDL jobs with marks, then
initial rows), offers transaction plans, and may schedule DDL jobs at fractions of the run. The
``Driver`` runs setup steps one after another, starts the client sessions, and starts scheduled
jobs one at a time as the run progresses.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from simulator import ddl
from simulator.cluster import Cluster, Plan
from simulator.schema import TableSchema
from simulator.state import LogicalTable
from simulator.types import random_value

WORKLOADS = ("bank", "drift", "ddl", "mixed", "scale", "all")
BANK_INITIAL_BALANCE = 1000
BIG_TXN_ROWS = 10_001

Step = Callable[[Callable[[], None]], None]      # runs, then calls its argument when done


def job_step(make: Callable[[], ddl.DdlJob | None]) -> Step:
    def run(then: Callable[[], None]) -> None:
        job = make()
        if job is None:
            then()
        else:
            job.run(then)
    return run


def load_step(cl: Cluster, plans: Callable[[], list[Plan]]) -> Step:
    """Initial rows, one txn after another (logical txns in the truth, not counted in --txns)."""
    def run(then: Callable[[], None]) -> None:
        pending = plans()

        def next_one(_: Any = None) -> None:
            if not pending:
                then()
                return
            txn = cl.execute(pending.pop(0), "loader")
            if txn is None:
                raise RuntimeError("initial load blocked")
            txn.on_done = lambda t: cl.after(500, next_one)
        next_one()
    return run


def pick_keys(cl: Cluster, table: LogicalTable, rng: random.Random, n: int,
              same_shard: bool = False) -> list[Any] | None:
    """``n`` distinct unlocked primary keys (all on one shard if asked), or None."""
    keys: list[Any] = []
    shard = None
    for _ in range(8 * n + 8):
        if len(table.keys) == 0:
            return None
        k = table.keys.pick(rng)
        if k in keys or (table.uid, k) in cl.locks:
            continue
        if same_shard:
            if shard is None:
                shard = table.location[k]
            elif table.location[k] != shard:
                continue
        keys.append(k)
        if len(keys) == n:
            return keys
    return None


def current(cl: Cluster, table: LogicalTable, pk: Any) -> dict[str, Any]:
    return cl.phys(table, table.location[pk]).rows[pk]


def random_row(table: LogicalTable, rng: random.Random, pk: Any) -> dict[str, Any]:
    """A row in the application's current column list (``dml_schema``)."""
    row = {c.name: random_value(c.type, rng, small=True) for c in table.dml_schema.columns}
    row[table.schema.pk] = pk
    return row


def random_changes(table: LogicalTable, rng: random.Random, k: int = 2) -> dict[str, Any]:
    cols = [c for c in table.dml_schema.columns if c.name not in (table.schema.pk, table.shard_key)]
    chosen = rng.sample(cols, min(k, len(cols)))
    return {c.name: random_value(c.type, rng, small=True) for c in chosen}


def new_pk(table: LogicalTable) -> int:
    pk = table.next_pk
    table.next_pk += 1
    return pk


class Component:
    """One part of a workload. ``tables`` maps short names to its logical tables once created."""

    weight = 1.0

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.tables: dict[str, LogicalTable] = {}

    def setup(self) -> list[Step]:
        return []

    def row(self, table: LogicalTable, pk: int) -> dict[str, Any]:
        return random_row(table, self.cl.rng, pk)

    def jobs(self) -> list[tuple[float, Step]]:
        return []

    def plan(self, rng: random.Random) -> Plan | None:
        return None

    # helpers ------------------------------------------------------------------------------------
    def create_db_step(self, name: str, dns: Callable[[], list[int]] | None = None) -> Step:
        cl = self.cl
        return job_step(lambda: ddl.create_database(
            cl, name, dns() if dns else [n.index for n in cl.cdc_dns]))

    def create_table_step(self, key: str, db: str, name: str, schema: TableSchema, shard_key: str) -> Step:
        cl = self.cl

        def make() -> ddl.DdlJob:
            table = ddl.create_table(cl, cl.dbs[db], name, schema, shard_key)
            self.tables[key] = table
            return ddl.create_table_job(cl, table)
        return job_step(make)

    def table(self, key: str) -> LogicalTable | None:
        t = self.tables.get(key)
        return t if t is not None and t.available else None

    def insert_plans(self, key: str, n_rows: int, per_txn: int,
                     row: Callable[[LogicalTable, int], dict[str, Any]]) -> Callable[[], list[Plan]]:
        def make() -> list[Plan]:
            table = self.tables[key]
            plans = []
            for start in range(0, n_rows, per_txn):
                rows = [row(table, new_pk(table)) for _ in range(min(per_txn, n_rows - start))]
                plans.append(Plan([("insert", table, rows)], one_phase_rate=0.0))
            return plans
        return make


class Driver:
    """Runs the setup steps, starts the sessions, and starts scheduled jobs as the run progresses."""

    def __init__(self, cl: Cluster, components: list[Component]) -> None:
        self.cl = cl
        self.components = components
        self.weights = [c.weight for c in components]
        scheduled = [(frac, i, step) for i, c in enumerate(components) for frac, step in c.jobs()]
        scheduled.sort(key=lambda x: (x[0], x[1]))
        self.scheduled = [(frac, step) for frac, _, step in scheduled]
        self.job_active = False

    def start(self) -> None:
        steps = [s for c in self.components for s in c.setup()]

        def run(i: int) -> None:
            if i == len(steps):
                self.cl.start_sessions()
                return
            steps[i](lambda: run(i + 1))
        run(0)

    def next_plan(self, cl: Cluster, rng: random.Random) -> Plan | None:
        if len(self.components) == 1:
            return self.components[0].plan(rng)
        return rng.choices(self.components, self.weights)[0].plan(rng)

    def on_progress(self, cl: Cluster) -> None:
        if self.job_active or not self.scheduled:
            return
        frac, step = self.scheduled[0]
        if cl.done < frac * cl.cfg.txns:
            return
        self.scheduled.pop(0)
        self.job_active = True

        def done() -> None:
            self.job_active = False
            self.on_progress(cl)
        step(done)

    def has_pending_jobs(self) -> bool:
        if self.scheduled and not self.job_active:
            # Txns are all done: run what is left now rather than never.
            self.scheduled = [(0.0, s) for _, s in self.scheduled]
            self.on_progress(self.cl)
        return self.job_active or bool(self.scheduled)


def make_driver(cl: Cluster, workload: str) -> Driver:
    from simulator.workload_parts import (
        BankComponent,
        DdlComponent,
        DriftComponent,
        MixedComponent,
        ScaleComponent,
    )
    parts: dict[str, type[Component]] = {"bank": BankComponent, "drift": DriftComponent,
                                         "ddl": DdlComponent, "mixed": MixedComponent,
                                         "scale": ScaleComponent}
    names = list(parts) if workload == "all" else [workload]
    return Driver(cl, [parts[n](cl) for n in names])

