"""``SELECT … FROM information_schema.{SCHEMATA,TABLES,COLUMNS,STATISTICS,KEY_COLUMN_USAGE,…}`` over the
logical schema.

Why a small materialised copy queried by SQLite (with sqlglot transpiling the MySQL text): clients send
arbitrary WHERE / ORDER BY / JOIN / LIKE / aggregate forms (Debezium, Flink CDC, ORMs, BI tools), and a
real engine answers all of them with SQL semantics, where a hand-written matcher would answer the few
forms someone thought of and fail the rest. The copy is a few rows per column, rebuilt only when the
catalog changes (``Catalog.vtso``); SQLite's in-memory database costs ~1 ms to fill for hundreds of
columns. Anything that names another table is refused with MySQL's ERR 1146 — the endpoint serves
binlogs and the schema, never table data.
"""

from __future__ import annotations

import sqlite3
import threading

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dumper.server.catalog import Catalog
from dumper.server.show_schema import CHARSETS, COLLATIONS

INFO_SCHEMA = "information_schema"

_TABLES = {
    "SCHEMATA": ["CATALOG_NAME", "SCHEMA_NAME", "DEFAULT_CHARACTER_SET_NAME", "DEFAULT_COLLATION_NAME",
                 "SQL_PATH", "DEFAULT_ENCRYPTION"],
    "TABLES": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE", "ENGINE", "VERSION", "ROW_FORMAT",
               "TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH", "INDEX_LENGTH", "DATA_FREE",
               "AUTO_INCREMENT", "CREATE_TIME", "UPDATE_TIME", "CHECK_TIME", "TABLE_COLLATION", "CHECKSUM",
               "CREATE_OPTIONS", "TABLE_COMMENT"],
    "COLUMNS": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION",
                "COLUMN_DEFAULT", "IS_NULLABLE", "DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH",
                "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION",
                "CHARACTER_SET_NAME", "COLLATION_NAME", "COLUMN_TYPE", "COLUMN_KEY", "EXTRA", "PRIVILEGES",
                "COLUMN_COMMENT", "GENERATION_EXPRESSION", "SRS_ID"],
    "STATISTICS": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "NON_UNIQUE", "INDEX_SCHEMA", "INDEX_NAME",
                   "SEQ_IN_INDEX", "COLUMN_NAME", "COLLATION", "CARDINALITY", "SUB_PART", "PACKED", "NULLABLE",
                   "INDEX_TYPE", "COMMENT", "INDEX_COMMENT", "IS_VISIBLE", "EXPRESSION"],
    "KEY_COLUMN_USAGE": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_CATALOG",
                         "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION",
                         "POSITION_IN_UNIQUE_CONSTRAINT", "REFERENCED_TABLE_SCHEMA", "REFERENCED_TABLE_NAME",
                         "REFERENCED_COLUMN_NAME"],
    "CHARACTER_SETS": ["CHARACTER_SET_NAME", "DEFAULT_COLLATE_NAME", "DESCRIPTION", "MAXLEN"],
    "COLLATIONS": ["COLLATION_NAME", "CHARACTER_SET_NAME", "ID", "IS_DEFAULT", "IS_COMPILED", "SORTLEN",
                   "PAD_ATTRIBUTE"],
    "COLLATION_CHARACTER_SET_APPLICABILITY": ["COLLATION_NAME", "CHARACTER_SET_NAME"],
}
# Integer columns (the rest are text): the result set types them LONGLONG.
INT_COLUMNS = frozenset({"TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH", "INDEX_LENGTH",
                         "DATA_FREE", "AUTO_INCREMENT", "VERSION", "ORDINAL_POSITION",
                         "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION",
                         "NUMERIC_SCALE", "DATETIME_PRECISION", "NON_UNIQUE", "SEQ_IN_INDEX", "CARDINALITY",
                         "SUB_PART", "CHECKSUM", "SRS_ID", "POSITION_IN_UNIQUE_CONSTRAINT", "MAXLEN", "ID",
                         "SORTLEN"})


class InfoSchemaError(Exception):
    def __init__(self, code: int, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sqlstate = sqlstate


def catalog_rows(catalog: Catalog) -> dict[str, list[tuple]]:
    """The rows of each information_schema table for ``catalog``."""
    rows: dict[str, list[tuple]] = {name: [] for name in _TABLES}
    rows["SCHEMATA"].append(("def", INFO_SCHEMA, "utf8mb3", "utf8mb3_general_ci", None, "NO"))
    for name, charset, collation in sorted(catalog.databases.values()):
        rows["SCHEMATA"].append(("def", name, charset, collation, None, "NO"))
    for table in sorted(catalog.tables.values(), key=lambda t: (t.db, t.name)):
        rows["TABLES"].append(("def", table.db, table.name, "BASE TABLE", "InnoDB", 10, "Dynamic", 0, 0, 0, 0, 0,
                               0, None, None, None, None, table.collation, None, "", ""))
        for c in table.columns:
            rows["COLUMNS"].append((
                "def", table.db, table.name, c.name, c.ordinal, c.default, "YES" if c.nullable else "NO",
                c.data_type, c.char_max, c.octet_max, c.num_precision, c.num_scale, c.datetime_precision,
                c.charset, c.collation, c.column_type, c.key, c.extra, "select", "", "", None))
        nullable = {c.name.lower(): c.nullable for c in table.columns}
        for ix in table.indexes:
            for seq, col in enumerate(ix.columns, 1):
                rows["STATISTICS"].append((
                    "def", table.db, table.name, 0 if ix.unique else 1, table.db, ix.name, seq, col, "A", 0,
                    None, None, "YES" if nullable.get(col.lower()) else "", "BTREE", "", "", "YES", None))
                if ix.unique:
                    rows["KEY_COLUMN_USAGE"].append(("def", table.db, ix.name, "def", table.db, table.name, col,
                                                     seq, None, None, None, None))
    for charset, collation, description, maxlen in CHARSETS:
        rows["CHARACTER_SETS"].append((charset, collation, description, maxlen))
    defaults = {collation for _, collation, _, _ in CHARSETS}
    for collation, charset, cid in COLLATIONS:
        rows["COLLATIONS"].append((collation, charset, cid, "Yes" if collation in defaults else "", "Yes", 1,
                                   "PAD SPACE"))
        rows["COLLATION_CHARACTER_SET_APPLICABILITY"].append((collation, charset))
    return rows


class InfoSchema:
    """An in-memory SQLite copy of the catalog's information_schema tables, for one catalog version.
    Queries run under a lock (one SQLite connection, shared by the server's threads)."""

    def __init__(self, catalog: Catalog) -> None:
        self.vtso = catalog.vtso
        self.logical_table = lambda db, name: catalog.table(db, name) is not None
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"ATTACH DATABASE ':memory:' AS {INFO_SCHEMA}")
        for name, rows in catalog_rows(catalog).items():
            cols = ", ".join(f"{c} {'INTEGER' if c in INT_COLUMNS else 'TEXT COLLATE NOCASE'}" for c in _TABLES[name])
            self._db.execute(f"CREATE TABLE {INFO_SCHEMA}.{name} ({cols})")
            marks = ", ".join("?" * len(_TABLES[name]))
            self._db.executemany(f"INSERT INTO {INFO_SCHEMA}.{name} VALUES ({marks})", rows)

    def query(self, sql: str, current_db: str | None = None) -> tuple[list[str], list[tuple]]:
        """Run one MySQL SELECT; (column names, rows). InfoSchemaError for anything else."""
        try:
            tree = sqlglot.parse_one(sql, read="mysql")
        except SqlglotError as exc:
            raise InfoSchemaError(1064, f"You have an error in your SQL syntax: {str(exc).splitlines()[0]}",
                                  "42000") from None
        if not isinstance(tree, (exp.Select, exp.Union)):
            raise InfoSchemaError(1064, "only SELECT reads information_schema here", "42000")
        for table in tree.find_all(exp.Table):
            db = (table.db or current_db or "").lower()
            if table.name.upper() not in _TABLES or db != INFO_SCHEMA:
                shown = f"{table.db or current_db or ''}.{table.name}".lstrip(".")
                if self.logical_table(table.db or current_db or "", table.name):
                    raise InfoSchemaError(1142, f"SELECT command denied for table '{shown}': gbinlog serves the "
                                                "binlog and the schema, not table data", "42000")
                raise InfoSchemaError(1146, f"Table '{shown}' doesn't exist (gbinlog serves the binlog and "
                                            f"information_schema.{{{','.join(_TABLES)}}})", "42S02")
            table.set("db", exp.to_identifier(INFO_SCHEMA))
            table.set("catalog", None)
        try:
            text = tree.sql(dialect="sqlite")
        except SqlglotError as exc:
            raise InfoSchemaError(1235, f"This query is not supported here: {exc}", "42000") from None
        with self._lock:
            try:
                cur = self._db.execute(text)
                rows = cur.fetchall()
            except sqlite3.Error as exc:
                raise InfoSchemaError(1054, f"Cannot answer this information_schema query: {exc}", "42S22") from None
        names = [d[0] for d in cur.description or ()]
        return names, rows


class InfoSchemaCache:
    """One ``InfoSchema`` per catalog version."""

    def __init__(self) -> None:
        self._current: InfoSchema | None = None
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()

    def get(self, catalog: Catalog) -> InfoSchema:
        with self._lock:
            if self._current is None or self._catalog is not catalog:
                self._current = InfoSchema(catalog)
                self._catalog = catalog
            return self._current
