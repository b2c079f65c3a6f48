"""The schema model against a real MariaDB: the same DDL statements (CREATE/DROP DATABASE, CREATE
TABLE incl. LIKE, DROP/RENAME/TRUNCATE TABLE, ALTER TABLE ADD/DROP/MODIFY/CHANGE/RENAME COLUMN with
FIRST/AFTER, ADD/DROP INDEX, primary keys, defaults, RENAME TO; names with backticks, unicode, spaces
and mixed case) go through the shaper's model (as marks without META_INFO, so only the sqlglot-based
engine decides) and through MariaDB; after each one the model's columns, nullability, defaults, primary
key and indexes equal what the server reports. The binlog column types of the model equal the
TABLE_MAP MariaDB writes for the same table.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from binlog import read_events
from binlog.constants import ColumnType as T
from binlog.constants import EventType
from binlog.rows_events import decode_table_map
from schema_shaper import MarkEntry, Shaper
from schema_shaper.ddl import parse_ddl, strip_polardbx
from simulator.schema import quote_ident

DB = "Shape`Db 数据"
T1 = "Mixed`Case 表"

STATEMENTS = [
    f"CREATE TABLE {quote_ident(T1)} (`Id` bigint NOT NULL, `名字` varchar(20) DEFAULT 'a''b', "
    "`amount` int NOT NULL DEFAULT 0, c_dec decimal(10,2) DEFAULT '1.50', `e` enum('x','y') NOT NULL, "
    "`t` datetime(3) DEFAULT '2024-01-02 03:04:05.678', `u` int unsigned NOT NULL, "
    "PRIMARY KEY (`Id`), KEY `k_amount` (`amount`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    f"ALTER TABLE {quote_ident(T1)} ADD COLUMN `first` int FIRST",
    f"ALTER TABLE {quote_ident(T1)} ADD COLUMN `after_name` varchar(5) NOT NULL AFTER `名字`",
    f"ALTER TABLE {quote_ident(T1)} MODIFY COLUMN `amount` bigint NULL",
    f"ALTER TABLE {quote_ident(T1)} CHANGE COLUMN `名字` `姓名` varchar(64) DEFAULT NULL AFTER `e`",
    f"ALTER TABLE {quote_ident(T1)} DROP COLUMN `first`",
    f"ALTER TABLE {quote_ident(T1)} ADD INDEX `idx_n` (`姓名`, `amount`), ADD UNIQUE KEY (`after_name`)",
    f"ALTER TABLE {quote_ident(T1)} DROP INDEX `k_amount`",
    f"ALTER TABLE {quote_ident(T1)} RENAME COLUMN `after_name` TO `AfterName`",
    f"ALTER TABLE {quote_ident(T1)} RENAME TO `Renamed 表`",
    "CREATE TABLE `Copy` LIKE `Renamed 表`",
    "RENAME TABLE `Copy` TO `Copy2`, `Renamed 表` TO `R2`",
    "TRUNCATE TABLE `R2`",
    "ALTER TABLE `R2` ALTER COLUMN `amount` SET DEFAULT 7",
    "CREATE INDEX `ci` ON `R2` (`e`)",
    "DROP INDEX `ci` ON `R2`",
    "ALTER TABLE `R2` DROP PRIMARY KEY, ADD PRIMARY KEY (`Id`, `AfterName`)",
    "ALTER TABLE `Copy2` ADD COLUMN `p` point, ADD COLUMN `b` bit(5) DEFAULT b'101'",
    "DROP TABLE `Copy2`",
]


def server_tables(cur) -> dict:
    """{table: (columns [(name, nullable)], primary key, {index: (columns, unique)})}."""
    cur.execute("SELECT table_name, column_name, is_nullable FROM information_schema.columns "
                "WHERE table_schema = %s ORDER BY table_name, ordinal_position", (DB,))
    out: dict = {}
    for table, column, nullable in cur.fetchall():
        out.setdefault(table, ([], [], {}))[0].append((column, nullable == "YES"))
    cur.execute("SELECT table_name, index_name, column_name, non_unique FROM information_schema.statistics "
                "WHERE table_schema = %s ORDER BY table_name, index_name, seq_in_index", (DB,))
    for table, index, column, non_unique in cur.fetchall():
        if index == "PRIMARY":
            out[table][1].append(column)
        else:
            cols, _ = out[table][2].get(index, ((), False))
            out[table][2][index] = (cols + (column,), not non_unique)
    return out


def model_tables(shaper: Shaper) -> dict:
    return {t.name: ([(c.name, c.nullable) for c in t.schema.columns], list(t.schema.primary_key),
                     {ix.name: (ix.columns, ix.unique) for ix in t.schema.indexes})
            for (db, _), t in shaper.tables.items() if db == DB.lower()}


def defaults_on_server(cur, table: str) -> list:
    """A row of only defaults (implicit ones for NOT NULL columns without DEFAULT: sql_mode '')."""
    cur.execute("SET SESSION sql_mode = ''")
    cur.execute(f"CREATE TEMPORARY TABLE `scratch` LIKE {quote_ident(table)}")
    cur.execute("INSERT INTO `scratch` () VALUES ()")
    cur.execute("SELECT * FROM `scratch`")
    row = list(cur.fetchone())
    cur.execute("DROP TEMPORARY TABLE `scratch`")
    cur.execute("SET SESSION sql_mode = DEFAULT")
    return row


def as_server(value, spec):
    """A model default as pymysql returns it."""
    if isinstance(value, bytes) and spec.column.real_type not in (T.BIT,) and spec.column.charset != 63:
        return value.decode()
    if spec.column.real_type == T.ENUM:
        return spec.column.enum_values[value - 1] if value else ""
    if spec.column.real_type == T.BIT and value is not None:
        return value.to_bytes(((spec.column.meta >> 8) * 8 + (spec.column.meta & 0xFF) + 7) // 8, "big")
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def test_model_follows_mariadb_through_every_statement(mariadb):
    shaper = Shaper()
    cur = mariadb.connect().cursor()
    for i, sql in enumerate([f"CREATE DATABASE {quote_ident(DB)}", *STATEMENTS, f"DROP DATABASE {quote_ident(DB)}"]):
        shaper.apply(MarkEntry(f"{i + 1:054d}", DB, "", "DDL", sql))
        cur.execute(sql)
        if i == 0:
            cur.execute(f"USE {quote_ident(DB)}")
        if "DROP DATABASE" in sql:
            assert model_tables(shaper) == {}
            break
        assert model_tables(shaper) == server_tables(cur), sql
        for t in shaper.tables.values():
            got = defaults_on_server(cur, t.name)
            want = [as_server(c.default_value(0), c) for c in t.schema.columns]
            assert got == want, (sql, t.name)
    assert Decimal("1.50") in want


def test_binlog_columns_equal_mariadb_table_map(mariadb_binlogged):
    """The TABLE_MAP column types and metas of the model equal what MariaDB writes (every type but
    JSON, which MariaDB stores as LONGTEXT)."""
    types = ["tinyint", "tinyint unsigned", "smallint", "mediumint", "int", "int unsigned", "bigint",
             "float", "double", "decimal(20,6)", "decimal(8,0) unsigned", "date", "time(3)", "time",
             "datetime(6)", "datetime", "timestamp(2) NULL", "year", "char(10)", "char(100)", "varchar(100)",
             "varchar(20)", "varchar(64)", "binary(8)", "varbinary(32)", "text", "tinytext", "mediumtext",
             "longtext", "blob", "tinyblob", "mediumblob", "longblob", "enum('red','green','blue')",
             "set('a','b','c','d')", "bit(13)", "bit(1)", "point", "geometry", "polygon",
             "varchar(10) CHARACTER SET latin1", "char(4) CHARACTER SET utf8mb3", "bool"]
    cols = ", ".join(f"`c{i}` {t}" for i, t in enumerate(types))
    create = f"CREATE TABLE `all` (`id` int NOT NULL, {cols}, PRIMARY KEY (`id`)) DEFAULT CHARSET=utf8mb4"
    mariadb_binlogged.query("CREATE DATABASE d")
    mariadb_binlogged.query(create, "d")
    mariadb_binlogged.query("INSERT INTO `all` (id) VALUES (1)", "d")
    stmt = parse_ddl(create)
    model = [(c.type, c.meta) for c in stmt.schema.binlog_columns()]
    maps = []
    for path in mariadb_binlogged.binlog_files():
        for ev in read_events(path):
            if ev.type_code == EventType.TABLE_MAP:
                maps.append(decode_table_map(ev.payload, ev.ctx))
    written = next(m for m in maps if m.table == "all")
    assert [(c.type, c.meta) for c in written.columns] == model
    assert [c.nullable for c in written.columns] == [c.nullable for c in stmt.schema.binlog_columns()]
    # CONVERT TO CHARACTER SET changes every text column's byte lengths.
    convert = "ALTER TABLE `all` CONVERT TO CHARACTER SET latin1"
    mariadb_binlogged.query(convert, "d")
    mariadb_binlogged.query("INSERT INTO `all` (id) VALUES (2)", "d")
    converted = parse_ddl(convert).apply(stmt.schema)
    maps = [decode_table_map(ev.payload, ev.ctx) for path in mariadb_binlogged.binlog_files()
            for ev in read_events(path) if ev.type_code == EventType.TABLE_MAP]
    assert [(c.type, c.meta) for c in maps[-1].columns] == [(c.type, c.meta) for c in converted.binlog_columns()]
    assert [(c.type, c.meta) for c in maps[-1].columns] != model


def test_polardbx_clauses_are_stripped():
    sql = ("/*+TDDL: cmd_extra()*/ CREATE PARTITION TABLE `t` (`id` bigint, `single` int COMMENT 'broadcast', "
           "PRIMARY KEY (`id`)) ENGINE=InnoDB COMMENT='dbpartition by' dbpartition by hash(`id`) "
           "tbpartition by hash(`id`) tbpartitions 4;")
    assert strip_polardbx(sql) == ("CREATE TABLE `t` (`id` bigint, `single` int COMMENT 'broadcast', "
                                   "PRIMARY KEY (`id`)) ENGINE=InnoDB COMMENT='dbpartition by'")
    assert strip_polardbx("CREATE TABLE `b` (`id` int) BROADCAST") == "CREATE TABLE `b` (`id` int)"
    assert strip_polardbx("CREATE TABLE `p` (`id` int) PARTITION BY KEY(`id`) PARTITIONS 16") == \
        "CREATE TABLE `p` (`id` int)"
    assert strip_polardbx("CREATE DATABASE `d` MODE = 'auto' DEFAULT CHARACTER SET utf8mb4") == \
        "CREATE DATABASE `d` DEFAULT CHARACTER SET utf8mb4"
    assert strip_polardbx("ALTER TABLE `t` ADD COLUMN `x` int") == "ALTER TABLE `t` ADD COLUMN `x` int"
