"""The schema state's all-or-nothing rule (``SchemaState.apply_entry``) with the cheap back-up it
takes (``Topology.copy``, and none of the topology for a physical DDL that does not rename), and
the fast path of ``parse_ddl`` for a plain CREATE DATABASE (the same statement sqlglot gives)."""

from __future__ import annotations

import copy
import json

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from schema_shaper import ddl
from schema_shaper.ddl import CreateDatabase, parse_ddl
from schema_shaper.errors import BadDdl
from schema_shaper.meta_store import MarkEntry, PhysEntry
from schema_shaper.state import SchemaState

DB_META = {"schema": "bank", "charset": "utf8mb4",
           "phySchemas": [{"storageInstId": f"dn{i}", "group": f"BANK_P{i:05d}_GROUP", "schema": f"bank_p{i:05d}"}
                          for i in range(3)]}


def table_meta(name: str) -> dict:
    return {"tableName": name,
            "createSql": f"CREATE TABLE `{name}` (`id` bigint NOT NULL, `v` int, PRIMARY KEY (`id`))",
            "phySchemas": [{"storageInstId": f"dn{i}", "schema": f"bank_p{i:05d}", "phyTables": [f"{name}_x{i}"]}
                           for i in range(3)]}


def mark(n: int, table: str, sql: str, meta: dict | None = None) -> MarkEntry:
    return MarkEntry(f"{n:054d}", "bank", table, "DDL", sql, json.dumps(meta) if meta else None,
                     source=f"dn0:mysql-bin.000001:{100 * n}")


def phys(n: int, dn: str, db: str, sql: str) -> PhysEntry:
    return PhysEntry(f"{n:054d}", dn, "mysql-bin.000001", 100 * n + 50, db, sql)


def state_of(s: SchemaState) -> tuple:
    """Everything in the state, as plain comparable values."""
    topo = s.topology
    return ({k: (d.name, d.charset, list(d.shards)) for k, d in topo.dbs.items()}, dict(topo.shards),
            {k: list(v) for k, v in topo.physical.items()},
            {k: (t.db, t.name, t.schema, t.table_id) for k, t in s.tables.items()},
            dict(s.physical), dict(s.phys_dn), s.next_table_id, s.vtso)


def bank() -> SchemaState:
    s = SchemaState()
    s.apply_entry(mark(1, "", "CREATE DATABASE `bank`", {"logicDbMeta": DB_META}))
    for n, name in ((2, "accounts"), (3, "audit")):
        s.apply_entry(mark(n, name, table_meta(name)["createSql"], {"logicTableMeta": table_meta(name)}))
    return s


def test_topology_copy_equals_a_deep_copy_and_shares_nothing_mutable():
    s = bank()
    s.topology.rename_physical("bank_p00001", "audit_x1", "bank_p00001", "audit_new")
    deep, cheap = copy.deepcopy(s.topology), s.topology.copy()
    assert (deep.dbs, deep.shards, deep.physical) == (cheap.dbs, cheap.shards, cheap.physical)
    before = state_of(s)
    db = cheap.db("bank")
    db.name, db.charset = "BANK", "latin1"
    db.shards.append(("dn9", "G", "bank_p00009"))
    cheap.physical[("bank", "accounts")].append(("bank_p00009", "accounts_x9"))
    cheap.rename_table("bank", "audit", "bank", "audit2")
    cheap.drop_table("bank", "accounts")
    assert state_of(s) == before


def test_a_mark_that_fails_half_way_leaves_the_state_as_before():
    """RENAME of two pairs whose second names no table: the first pair had changed the tables and
    the topology already; the error leaves both as they were, and the vtso too."""
    s = bank()
    before = state_of(s)
    with pytest.raises(BadDdl) as info:
        s.apply_entry(mark(4, "accounts", "RENAME TABLE `accounts` TO `acc2`, `nope` TO `n2`"))
    assert (info.value.dn, info.value.file, info.value.offset) == ("dn0", "mysql-bin.000001", 400)
    assert state_of(s) == before
    s.apply_entry(mark(5, "accounts", "RENAME TABLE `accounts` TO `acc2`"))
    assert ("bank", "acc2") in s.tables and s.topology.lookup("bank_p00002", "accounts_x2").table == "acc2"


def test_physical_ddls_change_only_the_physical_model_and_fail_whole():
    s = bank()
    before = state_of(s)
    # nothing of the model: system databases, CREATE DATABASE, statements on no table
    for n, (db, sql) in enumerate([("__cdc___000001", "CREATE TABLE `__cdc_heartbeat__` (`id` bigint)"),
                                   ("", "CREATE DATABASE IF NOT EXISTS `bank_p00001` CHARACTER SET utf8mb4"),
                                   ("bank_p00001", "GRANT SELECT ON *.* TO 'u'@'%'")], start=10):
        s.apply_entry(phys(n, "dn1", db, sql))
        assert state_of(s)[:-1] == before[:-1] and s.vtso == f"{n:054d}"
    # a physical ALTER … RENAME (an online DDL's table swap) moves the shard in the topology
    s.apply_entry(phys(20, "dn1", "bank_p00001", "ALTER TABLE `audit_x1` ADD COLUMN `w` int, RENAME TO `audit_y1`"))
    assert s.topology.lookup("bank_p00001", "audit_y1").table == "audit"
    assert s.physical[("bank_p00001", "audit_y1")].names == ["id", "v", "w"]
    assert ("bank_p00001", "audit_x1") not in s.physical
    moved = state_of(s)
    # one that cannot be applied (a column it does not have): typed, named, and nothing changed
    with pytest.raises(BadDdl) as info:
        s.apply_entry(phys(21, "dn2", "bank_p00002", "ALTER TABLE `audit_x2` DROP COLUMN `zz`, RENAME TO `a3`"))
    assert (info.value.dn, info.value.file, info.value.offset) == ("dn2", "mysql-bin.000001", 2150)
    assert state_of(s) == moved


CREATE_DATABASES = [
    "CREATE DATABASE `bank_p00001`",
    "create database if not exists `__cdc___000031` character set utf8mb4 collate utf8mb4_general_ci",
    "CREATE DATABASE IF NOT EXISTS `x` DEFAULT CHARACTER SET latin1",
    "CREATE DATABASE `x` COLLATE utf8mb4_bin",
    "CREATE DATABASE `x` DEFAULT COLLATE = latin1_swedish_ci CHARACTER SET = utf8",
    "CREATE DATABASE `x` CHARSET utf8mb4 COLLATE = utf8mb4_unicode_ci",
    "CREATE DATABASE `x` DEFAULT CHARSET=gbk",
    "CREATE DATABASE `x` COLLATE latin1_bin COLLATE utf8mb4_bin",
    "CREATE DATABASE `a``b Ä 数据`",
    "  CREATE\n DATABASE\t`Mixed_Case`  ;",
    "/* hint */ CREATE DATABASE `x` CHARACTER SET utf8mb4",
]


@pytest.mark.parametrize("sql", CREATE_DATABASES)
def test_a_plain_create_database_is_read_as_sqlglot_reads_it(sql, monkeypatch):
    fast = parse_ddl(sql)
    assert isinstance(fast, CreateDatabase)
    assert ddl._plain_create_database(ddl.strip_polardbx(sql)) is not None   # it took the fast path
    ddl._parse_ddl.cache_clear()
    monkeypatch.setattr(ddl, "_plain_create_database", lambda text: None)
    assert parse_ddl(sql) == fast
    ddl._parse_ddl.cache_clear()


@pytest.mark.parametrize("sql", [
    "CREATE DATABASE x",                                   # unquoted: sqlglot decides
    "CREATE SCHEMA `x` COLLATE utf8mb4_bin",
    "CREATE DATABASE `x` CHARACTER SET 'utf8mb4'",
    "CREATE DATABASE `x` ENCRYPTION = 'N'",
    "CREATE DATABASE `x` CHARACTER SET",
    "CREATE DATABASE `x`.`y`",
])
def test_other_create_database_forms_go_to_sqlglot(sql):
    assert ddl._plain_create_database(ddl.strip_polardbx(sql)) is None
    try:
        sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.SqlglotError:
        with pytest.raises(ValueError):
            parse_ddl(sql)


_OPTION = st.tuples(st.sampled_from(["", "DEFAULT ", "default  "]),
                    st.sampled_from(["CHARACTER SET", "character\nset", "CHARSET", "COLLATE", "collate"]),
                    st.sampled_from([" ", " = ", "=", "\t"]),
                    st.sampled_from(["utf8mb4", "utf8", "latin1", "gbk", "binary", "utf8mb4_bin", "utf8mb4_general_ci",
                                     "latin1_swedish_ci", "gbk_chinese_ci", "ascii_bin", "nosuch_ci"]))


@settings(max_examples=150, deadline=None)
@given(name=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                    max_size=12),
       exists=st.booleans(), options=st.lists(_OPTION, max_size=3), upper=st.booleans())
def test_any_plain_create_database_is_read_as_sqlglot_reads_it(name, exists, options, upper):
    verb = "CREATE DATABASE " if upper else "create database "
    sql = (verb + ("IF NOT EXISTS " if exists else "") + "`" + name.replace("`", "``") + "`"
           + "".join(f" {d}{k}{eq}{v}" for d, k, eq, v in options))
    text = ddl.strip_polardbx(sql)
    fast = ddl._plain_create_database(text)
    assert fast is not None
    try:
        node = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.SqlglotError:
        pytest.fail(f"sqlglot cannot read {sql!r}, which the fast path takes")
    assert fast == CreateDatabase(node.this.name, ddl._table_charset(node.args.get("properties"), "") or None)
