"""The components behind ``--workload``: bank, drift, ddl, mixed, scale (``all`` runs them together)."""

from __future__ import annotations

import random
from typing import Any

from simulator import ddl, rebalance
from simulator.cluster import Plan
from simulator.schema import TableSchema, col
from simulator.state import LogicalTable
from simulator.types import random_value
from simulator.workloads import (
    BANK_INITIAL_BALANCE,
    BIG_TXN_ROWS,
    Component,
    Step,
    current,
    job_step,
    load_step,
    new_pk,
    pick_keys,
    random_changes,
    random_row,
)


class BankComponent(Component):
    """Accounts across all DNs; transfers between two random accounts as distributed txns. The
    total balance never changes (checked after every txn by the tests)."""

    weight = 3.0

    def n_accounts(self) -> int:
        return 40 * max(1, len(self.cl.cdc_dns))

    def setup(self) -> list[Step]:
        schema = TableSchema([col("id", "bigint", nullable=False), col("name", "varchar(32)", nullable=False),
                              col("balance", "bigint", nullable=False)], pk="id")

        def account(table: LogicalTable, pk: int) -> dict[str, Any]:
            return {"id": pk, "name": f"acct-{pk:05d}".encode(), "balance": BANK_INITIAL_BALANCE}
        # An audit trail next to the accounts (rows written by some transfers): what an operator
        # leaves out of the global binlog with ``[filter] exclude = ["bank.audit*"]``.
        audit = TableSchema([col("id", "bigint", nullable=False), col("src", "bigint", nullable=False),
                             col("dst", "bigint", nullable=False), col("amount", "bigint", nullable=False)],
                            pk="id")
        self.cl.bank_accounts = 0
        return [self.create_db_step("bank"),
                self.create_table_step("accounts", "bank", "accounts", schema, "id"),
                self.create_table_step("audit_log", "bank", "audit_log", audit, "id"),
                load_step(self.cl, self._load(account))]

    def _load(self, account: Any) -> Any:
        def make() -> list[Plan]:
            n = self.n_accounts()
            self.cl.bank_accounts = n
            return self.insert_plans("accounts", n, 40, account)()
        return make

    def plan(self, rng: random.Random) -> Plan | None:
        table = self.table("accounts")
        if table is None:
            return None
        keys = pick_keys(self.cl, table, rng, 2)
        if keys is None:
            return None
        src_row, dst_row = current(self.cl, table, keys[0]), current(self.cl, table, keys[1])
        if src_row["balance"] == 0:
            src_row, dst_row = dst_row, src_row
        balance = src_row["balance"]
        if balance == 0:
            return None
        amount = 1 + int(rng.random() * min(100, balance))
        ops = [("update", table, [(src_row["id"], {"balance": balance - amount})]),
               ("update", table, [(dst_row["id"], {"balance": dst_row["balance"] + amount})])]
        audit = self.table("audit_log")
        if audit is not None and rng.random() < 0.3:
            ops.append(("insert", audit, [{"id": new_pk(audit), "src": src_row["id"], "dst": dst_row["id"],
                                           "amount": amount}]))
        return Plan(ops, rollback=rng.random() < 0.03)


class DriftComponent(Component):
    """Rows whose shard key changes: the CN deletes on one DN and inserts on another in one txn."""

    weight = 2.0

    def setup(self) -> list[Step]:
        schema = TableSchema([col("id", "bigint", nullable=False), col("k", "int", nullable=False),
                              col("v", "varchar(20)"), col("qty", "int", nullable=False, default=0)],
                             pk="id")

        def item(table: LogicalTable, pk: int) -> dict[str, Any]:
            return {"id": pk, "k": pk * 7, "v": f"item{pk}".encode(), "qty": 1}
        n = 30 * max(1, len(self.cl.cdc_dns))
        return [self.create_db_step("drift"),
                self.create_table_step("items", "drift", "items", schema, "k"),
                load_step(self.cl, self.insert_plans("items", n, 30, item))]

    def plan(self, rng: random.Random) -> Plan | None:
        table = self.table("items")
        if table is None:
            return None
        r = rng.random()
        n_ops = 1 if rng.random() < 0.7 else rng.randint(2, 3)
        keys = pick_keys(self.cl, table, rng, n_ops)
        if keys is None:
            return None
        ops: list[tuple[str, LogicalTable, list[Any]]] = []
        for pk in keys:
            if r < 0.55:
                ops.append(("update", table, [(pk, {"k": rng.randint(0, 1_000_000)})]))
            elif r < 0.75:
                ops.append(("update", table, [(pk, {"qty": rng.randint(0, 500), "v": b"moved" if rng.random() < 0.5 else b"kept"})]))
            elif r < 0.88:
                pk_new = new_pk(table)
                ops.append(("insert", table, [{"id": pk_new, "k": rng.randint(0, 1_000_000),
                                               "v": f"new{pk_new}".encode(), "qty": 0}]))
            else:
                ops.append(("delete", table, [pk]))
        mode = "local" if rng.random() < 0.15 else "xa"
        return Plan(ops, mode=mode, rollback=rng.random() < 0.03)


class DdlComponent(Component):
    """Tables that change under traffic: create/drop table, add/drop/modify column, add index,
    rename, truncate, create/drop database; a unicode table name."""

    weight = 2.0

    def setup(self) -> list[Step]:
        t1 = TableSchema([col("id", "bigint", nullable=False), col("name", "varchar(20)"),
                          col("amount", "int", nullable=False, default=0),
                          col("note", "varchar(20)", default=b"n/a")], pk="id")
        uni = TableSchema([col("id", "bigint", nullable=False), col("名字", "varchar(30)"),
                           col("score", "int")], pk="id")
        n = 15 * max(1, len(self.cl.cdc_dns))
        return [self.create_db_step("ddl"),
                self.create_table_step("t1", "ddl", "t1", t1, "id"),
                self.create_table_step("uni", "ddl", "客户", uni, "id"),
                load_step(self.cl, self.insert_plans("t1", n, 20, self.row)),
                load_step(self.cl, self.insert_plans("uni", n, 20, self.row))]

    def jobs(self) -> list[tuple[float, Step]]:
        cl = self.cl
        t2 = TableSchema([col("id", "bigint", nullable=False), col("a", "int"), col("b", "varchar(10)")],
                         pk="id")
        t = self.tables
        steps: list[Step] = [
            self.create_table_step("t2", "ddl", "t2", t2, "id"),
            job_step(lambda: ddl.add_column(cl, t["t1"], col("c", "varchar(16)", default=b"x"), after="name")),
            job_step(lambda: ddl.modify_column(cl, t["t1"], col("amount", "bigint", nullable=False, default=0))),
            job_step(lambda: ddl.modify_column(cl, t["t1"], col("name", "varchar(64)"))),
            job_step(lambda: ddl.add_index(cl, t["t1"], "idx_amount", ("amount",))),
            job_step(lambda: ddl.add_column(cl, t["uni"], col("等级", "int", default=3))),
            job_step(lambda: ddl.drop_column(cl, t["t1"], "note")),
            job_step(lambda: ddl.rename_table(cl, t["t2"], "t2_renamed")),
            job_step(lambda: ddl.truncate_table(cl, t["t2"])),
            job_step(lambda: ddl.drop_column(cl, t["uni"], "score")),
            self.create_db_step("ddl_extra"),
            self.create_table_step("x", "ddl_extra", "x", t2, "id"),
            job_step(lambda: ddl.drop_table(cl, t["t2"])),
            job_step(lambda: ddl.drop_database(cl, cl.dbs["ddl_extra"])),
        ]
        return [((i + 1) / (len(steps) + 1), s) for i, s in enumerate(steps)]

    def plan(self, rng: random.Random) -> Plan | None:
        tables = [t for t in (self.table(k) for k in ("t1", "uni", "t2", "x")) if t is not None]
        if not tables:
            return None
        # Half the traffic on t1, the table most DDLs change, so every DDL window sees rows.
        table = tables[0] if tables[0].name == "t1" and rng.random() < 0.5 else rng.choice(tables)
        r = rng.random()
        if r < 0.35 or len(table.keys) < 4:
            ops = [("insert", table, [random_row(table, rng, new_pk(table)) for _ in range(rng.randint(1, 3))])]
        elif r < 0.85:
            keys = pick_keys(self.cl, table, rng, rng.randint(1, 2))
            if keys is None:
                return None
            ops = [("update", table, [(k, random_changes(table, rng)) for k in keys])]
        else:
            keys = pick_keys(self.cl, table, rng, 1)
            if keys is None:
                return None
            ops = [("delete", table, keys)]
        mode = rng.choice(["xa", "xa", "local", "autocommit"])
        return Plan(ops, mode=mode, rollback=rng.random() < 0.03)


ALL_TYPES = [
    ("id", "bigint"), ("c_tiny", "tinyint"), ("c_utiny", "tinyint unsigned"), ("c_small", "smallint"),
    ("c_medium", "mediumint"), ("c_umedium", "mediumint unsigned"), ("c_int", "int"),
    ("c_uint", "int unsigned"), ("c_big", "bigint"), ("c_ubig", "bigint unsigned"), ("c_float", "float"),
    ("c_double", "double"), ("c_dec", "decimal(20,6)"), ("c_udec", "decimal(8,0) unsigned"),
    ("c_date", "date"), ("c_time", "time(3)"), ("c_time0", "time"), ("c_dt", "datetime(6)"),
    ("c_dt0", "datetime"), ("c_ts", "timestamp(2)"), ("c_year", "year"), ("c_char", "char(10)"),
    ("c_vc", "varchar(100)"), ("c_bin", "binary(8)"), ("c_vbin", "varbinary(32)"), ("c_text", "text"),
    ("c_ttext", "tinytext"), ("c_blob", "blob"), ("c_mblob", "mediumblob"),
    ("c_enum", "enum('red','green','blue')"), ("c_set", "set('a','b','c','d')"), ("c_bit", "bit(13)"),
    ("c_geo", "point"),
]
# No JSON column: MySQL's binary JSON (type 245) stops mariadb-binlog 10.11 (exit 1, no message) and
# MariaDB replicas cannot apply it, so a DN file with one would fail every MariaDB-based check.
# The value encoding and generator support JSON for when a MySQL downstream exists.


class MixedComponent(Component):
    """Every column type MariaDB can read (all but JSON, see ``ALL_TYPES``); 1PC, autocommit, one-phase XA, 2PC, rollbacks, two read views on one
    group, hints with a server id, and big txns of over 10k rows."""

    weight = 2.0

    def setup(self) -> list[Step]:
        cols = [col(n, t, nullable=n != "id") for n, t in ALL_TYPES]
        big = TableSchema([col("id", "bigint", nullable=False), col("v", "int", nullable=False)], pk="id")
        n = 10 * max(1, len(self.cl.cdc_dns))
        return [self.create_db_step("mixed"),
                self.create_table_step("all", "mixed", "all_types", TableSchema(cols, pk="id"), "id"),
                self.create_table_step("big", "mixed", "big", big, "id"),
                load_step(self.cl, self.insert_plans("all", n, 10, self.row))]

    def jobs(self) -> list[tuple[float, Step]]:
        # Insert then update (rows events of single and paired images split at 8 KB); a big delete
        # would add nothing new and double the fixture.
        return [(0.3, self._big_step("insert")), (0.7, self._big_step("update"))]

    def _big_step(self, kind: str) -> Step:
        """A big txn (> 10k rows) run as a scheduled step so it happens exactly once."""
        cl = self.cl

        def run(then: Any) -> None:
            table = self.tables["big"]
            if kind == "insert":
                rows = [{"id": new_pk(table), "v": i} for i in range(BIG_TXN_ROWS)]
                plan = Plan([("insert", table, rows)], one_phase_rate=0.0)
            elif kind == "update":
                plan = Plan([("update", table, [(k, {"v": current(cl, table, k)["v"] + 1})
                                                for k in sorted(table.keys.keys)])], one_phase_rate=0.0)
            else:
                plan = Plan([("delete", table, sorted(table.keys.keys))], one_phase_rate=0.0)

            def attempt() -> None:
                txn = cl.execute(plan, "big")
                if txn is None:
                    cl.after(1000, attempt)
                    return
                txn.on_done = lambda t: then()
            attempt()
        return run

    def plan(self, rng: random.Random) -> Plan | None:
        table = self.table("all")
        if table is None:
            return None
        r = rng.random()
        hint_server = "7001" if rng.random() < 0.1 else ""
        if r < 0.2:          # autocommit single statement
            if rng.random() < 0.5 or len(table.keys) < 3:
                ops = [("insert", table, [random_row(table, rng, new_pk(table))])]
            else:
                keys = pick_keys(self.cl, table, rng, 1)
                if keys is None:
                    return None
                ops = [("update", table, [(keys[0], random_changes(table, rng, 4))])]
            return Plan(ops, mode="autocommit", hint_server=hint_server)
        if r < 0.45:         # 1PC on one shard, several statements
            keys = pick_keys(self.cl, table, rng, rng.randint(2, 3), same_shard=True)
            if keys is None:
                return None
            ops = [("update", table, [(k, random_changes(table, rng, 3))]) for k in keys]
            if rng.random() < 0.3:
                ops.append(("delete", table, [keys[-1]]))
            return Plan(ops, mode="local", hint_server=hint_server)
        keys = pick_keys(self.cl, table, rng, rng.randint(1, 4))
        if keys is None:
            return None
        ops = [("update", table, [(k, random_changes(table, rng, 5))]) for k in keys]
        ops.append(("insert", table, [random_row(table, rng, new_pk(table)) for _ in range(rng.randint(1, 3))]))
        return Plan(ops, rollback=rng.random() < 0.12, hint_server=hint_server,
                    two_read_views=rng.random() < 0.15, one_phase_rate=0.6)


class ScaleComponent(Component):
    """A DN joins mid-run and another leaves later: at 40 % a new DN gets a copy of
    ``scale``'s first group (physical DDL before its join), the StorageInstChange instruction adds
    it, the group switches to it; then a new database spread over every DN including the new one;
    at 75 % the second-to-last DN's groups move to the others and an instruction removes it.
    Traffic on old and new tables throughout."""

    weight = 2.0

    def setup(self) -> list[Step]:
        kv = TableSchema([col("id", "bigint", nullable=False), col("val", "int", nullable=False)], pk="id")
        n = 20 * max(1, len(self.cl.cdc_dns))
        return [self.create_db_step("scale"),
                self.create_table_step("kv", "scale", "kv", kv, "id"),
                load_step(self.cl, self.insert_plans("kv", n, 20, lambda t, pk: {"id": pk, "val": 0}))]

    def jobs(self) -> list[tuple[float, Step]]:
        cl = self.cl
        kv2 = TableSchema([col("id", "bigint", nullable=False), col("val", "int", nullable=False),
                           col("tag", "varchar(8)")], pk="id")
        return [(0.4, lambda then: rebalance.scale_out(cl, then, move=[(cl.dbs["scale"], 0)])),
                (0.41, self.create_db_step("scale_new")),
                (0.42, self.create_table_step("kv2", "scale_new", "kv2", kv2, "id")),
                (0.75, lambda then: rebalance.scale_in(cl, cl.cdc_dns[-2], then))]

    def plan(self, rng: random.Random) -> Plan | None:
        tables = [t for t in (self.table("kv"), self.table("kv2")) if t is not None]
        if not tables:
            return None
        table = tables[-1] if len(tables) > 1 and rng.random() < 0.6 else tables[0]
        if len(table.keys) < 5 or rng.random() < 0.3:
            rows = [{"id": new_pk(table), "val": rng.randint(0, 100)} for _ in range(rng.randint(1, 4))]
            if table.dml_schema.has("tag"):
                for row in rows:
                    row["tag"] = random_value(table.dml_schema.column("tag").type, rng, small=True)
            return Plan([("insert", table, rows)])
        keys = pick_keys(self.cl, table, rng, rng.randint(1, 3))
        if keys is None:
            return None
        return Plan([("update", table, [(k, {"val": current(self.cl, table, k)["val"] + 1}) for k in keys])])
