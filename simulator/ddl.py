"""Distributed DDL as PolarDB-X runs it, and the CDC system tables (docs/formats.md).

A DDL job: CN metadata step → the physical DDL on each shard at a different time (each waits for the
shard's MDL while DML continues elsewhere) → the mark: a TSO XA insert into ``__cdc_ddl_record__`` on
every DN with META_INFO as TopologyRecord JSON → CN metadata switch. Jobs run one at a time.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from typing import Any

from simulator.naming import (
    CDC_LOGIC_DB,
    DDL_RECORD_TABLE,
    HEARTBEAT_TABLE,
    INSTRUCTION_TABLE,
    cdc_group,
    cdc_phys_db,
    dn_id,
    group_name,
    phys_db,
    phys_table_name,
)
from simulator.schema import TABLE_COLLATION, ColumnDef, TableSchema, col, quote_ident
from simulator.state import LogicalDb, LogicalTable, PhysTable, Shard
from simulator.txn import PhysOp

UTC = dt.UTC
SQL_MODE = "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"

HEARTBEAT_SCHEMA = TableSchema([
    col("id", "bigint(20)", nullable=False, auto_increment=True),
    col("sname", "varchar(10)"),
    col("gmt_modified", "datetime(3)"),
], pk="id")

DDL_RECORD_SCHEMA = TableSchema([
    col("ID", "bigint(20)", nullable=False, auto_increment=True),
    col("JOB_ID", "bigint(20)"),
    col("SQL_KIND", "varchar(50)", nullable=False),
    col("SCHEMA_NAME", "varchar(200)", nullable=False),
    col("TABLE_NAME", "varchar(200)"),
    col("GMT_CREATED", "timestamp", nullable=False, default_sql="CURRENT_TIMESTAMP"),
    col("DDL_SQL", "mediumtext", nullable=False),
    col("META_INFO", "longtext"),
    col("VISIBILITY", "bigint(10)", nullable=False),
    col("EXT", "mediumtext"),
], pk="ID", indexes={"idx_job_id": ("JOB_ID",)})

INSTRUCTION_SCHEMA = TableSchema([
    col("ID", "bigint(20)", nullable=False, auto_increment=True),
    col("INSTRUCTION_TYPE", "varchar(50)", nullable=False),
    col("INSTRUCTION_CONTENT", "longtext", nullable=False),
    col("GMT_CREATED", "timestamp", nullable=False, default_sql="CURRENT_TIMESTAMP"),
    col("INSTRUCTION_ID", "varchar(120)", nullable=False),
    col("CLUSTER_ID", "varchar(64)", nullable=False, default=b"0"),
], pk="ID", unique={"uk_instruction": ("INSTRUCTION_TYPE", "INSTRUCTION_ID")})

SYSTEM_TABLES = ((HEARTBEAT_TABLE, HEARTBEAT_SCHEMA), (DDL_RECORD_TABLE, DDL_RECORD_SCHEMA),
                 (INSTRUCTION_TABLE, INSTRUCTION_SCHEMA))


def sim_datetime(now_us: int, *, aware: bool = False, digits: int = 0) -> dt.datetime:
    """Simulated time as a DATETIME(digits) value (or a TIMESTAMP: aware UTC)."""
    us = now_us % 1_000_000
    us -= us % 10 ** (6 - digits)
    when = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=now_us // 1_000_000, microseconds=us)
    return when.replace(tzinfo=UTC) if aware else when


def create_cdc_tables(cl: Any, node: Any) -> None:
    """The broadcast ``__cdc__`` schema's physical copy on a (new) DN, as physical DDL groups."""
    db = cdc_phys_db(node.index)
    node.write_ddl("", f"CREATE DATABASE IF NOT EXISTS {quote_ident(db)} CHARACTER SET utf8mb4 "
                   f"COLLATE {TABLE_COLLATION}", cl.now)
    for name, schema in SYSTEM_TABLES:
        node.write_ddl(db, schema.create_sql(name), cl.now)
        node.tables[(db, name)] = PhysTable(db, name, schema.copy(), node.new_table_id())


def _system_op(node: Any, pt: PhysTable, kind: str, table: str) -> PhysOp:
    shard = Shard(0, node.index, pt.db, cdc_group(node.index), pt.name)
    return PhysOp(1, 1, shard, pt, kind, None, CDC_LOGIC_DB, table)


def heartbeat_op(cl: Any, pt: PhysTable) -> PhysOp:
    """REPLACE of row 1: a WRITE the first time, an UPDATE afterwards (as InnoDB logs it)."""
    node = cl.dns[int(pt.db[-6:])]
    row = {"id": 1, "sname": b"heartbeat", "gmt_modified": sim_datetime(cl.now, digits=3)}
    old = pt.rows.get(1)
    op = _system_op(node, pt, "insert" if old is None else "update", HEARTBEAT_TABLE)
    op.rows.append(row if old is None else (old, row))
    pt.rows[1] = row
    return op


def _insert_op(cl: Any, table: str, row: dict[str, Any]) -> Callable[[Any, PhysTable], PhysOp]:
    def make(node: Any, pt: PhysTable) -> PhysOp:
        op = _system_op(node, pt, "insert", table)
        full = pt.conform(row)
        op.rows.append(full)
        pt.rows[full["ID"]] = full
        return op
    return make


def _json(obj: Any) -> bytes:
    """Compact JSON as fastjson writes it, non-ASCII kept as UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# -- META_INFO (TopologyRecord, docs/formats.md) ---------------------------------------------------
def db_meta(db: LogicalDb) -> dict[str, Any]:
    return {"schema": db.name, "charset": "utf8mb4",
            "phySchemas": [{"storageInstId": dn_id(dn), "group": group, "schema": pdb}
                           for dn, group, pdb in db.shards]}


def table_meta(table: LogicalTable, schema: TableSchema) -> dict[str, Any]:
    phy_name = table.shards[0].table
    return {"tableName": table.name, "tableCollation": TABLE_COLLATION, "tableType": 0,
            "createSql": schema.create_sql(table.name),
            "createSql4Phy": schema.create_sql(phy_name),
            "phySchemas": [{"storageInstId": dn_id(sh.dn), "group": sh.group, "schema": sh.db,
                            "phyTables": [sh.table]} for sh in table.shards]}


def topology_record(db: LogicalDb | None, table: LogicalTable | None,
                    schema: TableSchema | None) -> dict[str, Any]:
    record: dict[str, Any] = {"lowerCased": True}
    if db is not None:
        record["logicDbMeta"] = db_meta(db)
    if table is not None and schema is not None:
        record["logicTableMeta"] = table_meta(table, schema)
    return record


# -- jobs ---------------------------------------------------------------------------------------------
class DdlJob:
    """One logical DDL. ``targets`` are (node, physical db, physical SQL, PhysTable or None, apply)."""

    def __init__(self, cl: Any, sql_kind: str, db: LogicalDb, table: LogicalTable | None, sql: str,
                 mysql_sql: str | None = None) -> None:
        self.cl = cl
        self.sql_kind = sql_kind
        self.db = db
        self.table = table
        self.sql = sql
        self.mysql_sql = sql if mysql_sql is None else mysql_sql
        self.targets: list[tuple[Any, str, str, PhysTable | None, Callable[[], None]]] = []
        self.effect: tuple = ()
        self.meta: dict[str, Any] | None = None
        self.finish: Callable[[], None] = lambda: None
        self.then: Callable[[], None] = lambda: None

    def run(self, then: Callable[[], None]) -> None:
        self.then = then
        self.cl.jobs_running += 1
        left = {"n": len(self.targets)}
        self.cl.rng.shuffle(self.targets)     # the CN runs shards in parallel: any order
        delay = 0
        for target in self.targets:
            # Shards change at clearly different times while DML goes on.
            delay += self.cl.randint(10_000, 40_000)
            self.cl.after(delay, self._physical, target, left)
        if not self.targets:
            self.cl.after(1_000, self._mark)

    def _physical(self, target: tuple, left: dict[str, int]) -> None:
        node, db, sql, pt, apply = target
        if pt is not None:
            pt.ddl_pending = True
            if pt.open_branches:              # MDL: wait for branches that use the table
                self.cl.after(200, self._physical, target, left)
                return
        node.write_ddl(db, sql, self.cl.now)
        apply()
        if pt is not None:
            pt.ddl_pending = False
        left["n"] -= 1
        if not left["n"]:
            self.cl.after(self.cl.randint(1_000, 5_000), self._mark)

    def _mark(self) -> None:
        cl = self.cl
        cl.ddl_record_id += 1
        cl.job_seq += 1
        job_id = ((cl.now // 1000) << 22) | cl.job_seq
        ext = {"taskId": job_id, "taskSubSeq": 1, "serverId": None, "useOMC": False,
               "sqlMode": SQL_MODE, "originalDdl": "", "isGsi": False, "isCci": False,
               "groupName": None, "flags2": 0, "ddlId": job_id}
        row = {"ID": cl.ddl_record_id, "JOB_ID": job_id, "SQL_KIND": self.sql_kind.encode(),
               "SCHEMA_NAME": self.db.name.encode(),
               "TABLE_NAME": self.table.name.encode() if self.table is not None else None,
               "GMT_CREATED": sim_datetime(cl.now, aware=True),
               "DDL_SQL": self.sql.encode(),
               "META_INFO": _json(self.meta) if self.meta is not None else None,
               "VISIBILITY": 1, "EXT": _json(ext)}
        txn = cl.system_txn("ddl", DDL_RECORD_TABLE, _insert_op(cl, DDL_RECORD_TABLE, row),
                            list(cl.cdc_dns), self._marked)
        txn.info["ddl"] = {"sql_kind": self.sql_kind, "db": self.db.name,
                           "table": self.table.name if self.table is not None else None,
                           "sql": self.sql, "mysql_sql": self.mysql_sql, "job_id": job_id,
                           "record_id": cl.ddl_record_id, "meta_info": self.meta}
        txn.info["effect"] = self.effect

    def _marked(self, txn: Any) -> None:
        self.finish()
        self.cl.jobs_running -= 1
        self.then()
        self.cl.maybe_finish()


def _shard_targets(job: DdlJob, table: LogicalTable, sql_for: Callable[[str], str],
                   apply_for: Callable[[Any, PhysTable, int], Callable[[], None]]) -> None:
    cl = job.cl
    for i, sh in enumerate(table.shards):
        node = cl.dns[sh.dn]
        pt = node.tables[(sh.db, sh.table)]
        job.targets.append((node, sh.db, sql_for(sh.table), pt, apply_for(node, pt, i)))


def create_database(cl: Any, name: str, dn_indexes: list[int]) -> DdlJob:
    db = LogicalDb(name, [(dn, group_name(name, i), phys_db(name, i)) for i, dn in enumerate(dn_indexes)])
    job = DdlJob(cl, "CREATE_DATABASE", db, None, f"CREATE DATABASE {quote_ident(name)}")
    for dn, _, pdb in db.shards:
        job.targets.append((cl.dns[dn], "", f"CREATE DATABASE IF NOT EXISTS {quote_ident(pdb)} "
                            f"CHARACTER SET utf8mb4 COLLATE {TABLE_COLLATION}", None, lambda: None))
    job.meta = topology_record(db, None, None)
    job.effect = ("create_db", name)

    def finish() -> None:
        cl.dbs[name] = db
    job.finish = finish
    return job


def drop_database(cl: Any, db: LogicalDb) -> DdlJob:
    job = DdlJob(cl, "DROP_DATABASE", db, None, f"DROP DATABASE {quote_ident(db.name)}")
    tables = [t for (dbn, _), t in cl.tables.items() if dbn == db.name]
    for t in tables:
        t.available = False
    for dn, _, pdb in db.shards:
        node = cl.dns[dn]
        pts = [pt for (d, _), pt in node.tables.items() if d == pdb]

        def apply(node: Any = node, pdb: str = pdb) -> None:
            for key in [k for k in node.tables if k[0] == pdb]:
                del node.tables[key]
        job.targets.append((node, "", f"DROP DATABASE IF EXISTS {quote_ident(pdb)}",
                            pts[0] if pts else None, apply))
    job.meta = topology_record(db, None, None)
    job.effect = ("drop_db", db.name)

    def finish() -> None:
        del cl.dbs[db.name]
        for t in tables:
            del cl.tables[(db.name, t.name)]
    job.finish = finish
    return job


def create_table(cl: Any, db: LogicalDb, name: str, schema: TableSchema, shard_key: str) -> LogicalTable:
    """Registers the table (not yet available) and returns it; ``create_table_job`` builds its job."""
    cl.table_uid += 1
    phys = phys_table_name(name, cl.rng)
    shards = [Shard(i, dn, pdb, group, phys) for i, (dn, group, pdb) in enumerate(db.shards)]
    table = LogicalTable(cl.table_uid, db, name, schema.copy(), schema.copy(), shard_key, shards)
    return table


def create_table_job(cl: Any, table: LogicalTable) -> DdlJob:
    schema = table.schema
    sql = schema.create_sql(table.name, f" dbpartition by hash({quote_ident(table.shard_key)})")
    job = DdlJob(cl, "CREATE_TABLE", table.db, table, sql, schema.create_sql(table.name))
    for sh in table.shards:
        node = cl.dns[sh.dn]

        def apply(node: Any = node, sh: Shard = sh) -> None:
            node.tables[(sh.db, sh.table)] = PhysTable(sh.db, sh.table, schema.copy(), node.new_table_id())
        job.targets.append((node, sh.db, schema.create_sql(sh.table), None, apply))
    job.meta = topology_record(None, table, schema)
    job.effect = ("create_table", table.db.name, table.name, schema.copy())

    def finish() -> None:
        cl.tables[(table.db.name, table.name)] = table
        table.available = True
    job.finish = finish
    return job


def _alter(cl: Any, table: LogicalTable, clause: str, change: Callable[[TableSchema], None],
           convert_rows: Callable[[PhysTable], None]) -> DdlJob:
    """ALTER TABLE on every shard; the logical schema switches at the mark."""
    new_schema = table.schema.copy()
    change(new_schema)
    job = DdlJob(cl, "ALTER_TABLE", table.db, table,
                 f"ALTER TABLE {quote_ident(table.name)} {clause}")

    def apply_for(node: Any, pt: PhysTable, i: int) -> Callable[[], None]:
        def apply() -> None:
            schema = pt.schema.copy()
            change(schema)
            pt.set_schema(schema, node.new_table_id())
            convert_rows(pt)
        return apply
    _shard_targets(job, table, lambda phys: f"ALTER TABLE {quote_ident(phys)} {clause}", apply_for)
    job.meta = topology_record(None, table, new_schema)
    job.effect = ("alter", table.db.name, table.name, new_schema.copy())

    def finish() -> None:
        table.schema = new_schema.copy()
        table.dml_schema = new_schema.copy()
    job.finish = finish
    return job


def _conform_rows(pt: PhysTable) -> None:
    pt.rows = {pk: pt.conform(row) for pk, row in pt.rows.items()}


def add_column(cl: Any, table: LogicalTable, c: ColumnDef, after: str | None = None) -> DdlJob:
    where = f" AFTER {quote_ident(after)}" if after else ""
    return _alter(cl, table, f"ADD COLUMN {c.sql()}{where}",
                  lambda s: s.add_column(c, after=after), _conform_rows)


def drop_column(cl: Any, table: LogicalTable, name: str) -> DdlJob:
    # PolarDB-X hides the column from the CN first: the application stops writing it at once.
    table.dml_schema.drop_column(name)
    return _alter(cl, table, f"DROP COLUMN {quote_ident(name)}", lambda s: s.drop_column(name),
                  _conform_rows)


def modify_column(cl: Any, table: LogicalTable, c: ColumnDef) -> DdlJob:
    return _alter(cl, table, f"MODIFY COLUMN {c.sql()}", lambda s: s.modify_column(c.name, c),
                  lambda pt: None)


def add_index(cl: Any, table: LogicalTable, name: str, cols: tuple[str, ...]) -> DdlJob:
    clause = f"ADD INDEX {quote_ident(name)} ({', '.join(quote_ident(c) for c in cols)})"
    return _alter(cl, table, clause, lambda s: s.indexes.__setitem__(name, cols), lambda pt: None)


def rename_table(cl: Any, table: LogicalTable, new_name: str) -> DdlJob:
    table.available = False
    old_name = table.name
    new_phys = phys_table_name(new_name, cl.rng)
    job = DdlJob(cl, "RENAME_TABLE", table.db, table,
                 f"RENAME TABLE {quote_ident(old_name)} TO {quote_ident(new_name)}")

    def apply_for(node: Any, pt: PhysTable, i: int) -> Callable[[], None]:
        def apply() -> None:
            sh = table.shards[i]
            del node.tables[(sh.db, sh.table)]
            pt.name = new_phys
            pt.set_schema(pt.schema, node.new_table_id())
            sh.table = new_phys
            node.tables[(sh.db, new_phys)] = pt
        return apply
    _shard_targets(job, table, lambda phys: f"RENAME TABLE {quote_ident(phys)} TO {quote_ident(new_phys)}",
                   apply_for)

    def finish() -> None:
        del cl.tables[(table.db.name, old_name)]
        table.name = new_name
        cl.tables[(table.db.name, new_name)] = table
        table.available = True
    job.finish = finish
    # META_INFO describes the table under its new name (CN: TABLE_NEW_NAME).
    renamed = LogicalTable(table.uid, table.db, new_name, table.schema, table.schema, table.shard_key,
                           [Shard(s.index, s.dn, s.db, s.group, new_phys) for s in table.shards])
    job.meta = topology_record(None, renamed, table.schema)
    job.effect = ("rename", table.db.name, old_name, new_name)
    return job


def truncate_table(cl: Any, table: LogicalTable) -> DdlJob:
    table.available = False
    job = DdlJob(cl, "TRUNCATE_TABLE", table.db, table, f"TRUNCATE TABLE {quote_ident(table.name)}")

    def apply_for(node: Any, pt: PhysTable, i: int) -> Callable[[], None]:
        def apply() -> None:
            pt.rows = {}
            pt.set_schema(pt.schema, node.new_table_id())
        return apply
    _shard_targets(job, table, lambda phys: f"TRUNCATE TABLE {quote_ident(phys)}", apply_for)

    def finish() -> None:
        table.location.clear()
        table.keys.keys.clear()
        table.keys.pos.clear()
        table.available = True
    job.finish = finish
    job.meta = topology_record(None, table, table.schema)
    job.effect = ("truncate", table.db.name, table.name)
    return job


def drop_table(cl: Any, table: LogicalTable) -> DdlJob:
    table.available = False
    job = DdlJob(cl, "DROP_TABLE", table.db, table, f"DROP TABLE {quote_ident(table.name)}")

    def apply_for(node: Any, pt: PhysTable, i: int) -> Callable[[], None]:
        sh = table.shards[i]
        return lambda: node.tables.pop((sh.db, sh.table))
    _shard_targets(job, table, lambda phys: f"DROP TABLE IF EXISTS {quote_ident(phys)}", apply_for)

    def finish() -> None:
        del cl.tables[(table.db.name, table.name)]
    job.finish = finish
    # META_INFO of a drop describes the table being dropped.
    job.meta = topology_record(None, table, table.schema)
    job.effect = ("drop_table", table.db.name, table.name)
    return job


def cdc_start(cl: Any) -> Any:
    """CDC start: the CN writes a ``CdcStart`` instruction (TSO XA on every DN) whose content is the
    initial logical topology (``LogicMetaTopology`` JSON, as galaxysql's ``CdcManager`` sends it):
    here the broadcast ``__cdc__`` database with one physical schema per DN, so the storage
    instances of the cluster are known from the DN binlogs themselves. Its INSTRUCTION_ID (a
    random UUID) identifies the cluster's start: DNs of two clusters have different ones."""
    dns = list(cl.cdc_dns)
    cl.instruction_id += 1
    content = {"logicDbMetas": [{"schema": CDC_LOGIC_DB, "charset": "utf8mb4",
                                 "phySchemas": [{"storageInstId": n.id, "group": cdc_group(n.index),
                                                 "schema": cdc_phys_db(n.index)} for n in dns]}]}
    # a live cluster also mixes in its wall-clock start: two live runs of one seed are two clusters
    bits = cl.rng.getrandbits(128) ^ getattr(cl, "start_salt", 0)
    row = {"ID": cl.instruction_id, "INSTRUCTION_TYPE": b"CdcStart",
           "INSTRUCTION_CONTENT": _json(content), "GMT_CREATED": sim_datetime(cl.now, aware=True),
           "INSTRUCTION_ID": str(uuid.UUID(int=bits, version=4)).encode(),
           "CLUSTER_ID": b"0"}
    txn = cl.system_txn("instruction", INSTRUCTION_TABLE, _insert_op(cl, INSTRUCTION_TABLE, row), dns, None)
    txn.info["instruction"] = {"type": "CdcStart", "content": content, "id": row["INSTRUCTION_ID"].decode(),
                               "new_dn": None}
    return txn
