"""The rows of information_schema's tables over the logical schema (``catalog_rows``), as a MySQL 8
server shows them: SCHEMATA, TABLES, COLUMNS, STATISTICS, KEY_COLUMN_USAGE, TABLE_CONSTRAINTS,
ENGINES, CHARACTER_SETS, COLLATIONS, and the empty ones tools join against (VIEWS, ROUTINES, …).

``dumper.server.sql_engine`` loads them into its database once per catalog version and answers
SELECTs over them; clients send arbitrary WHERE / ORDER BY / JOIN / LIKE / aggregate forms (Debezium,
Flink CDC, pg_chameleon, ORMs), which a real engine answers with SQL semantics.
"""

from __future__ import annotations

from dumper.server.catalog import Catalog
from dumper.server.show_schema import CHARSETS, COLLATIONS

INFO_SCHEMA = "information_schema"

INFO_SCHEMA = "information_schema"
PERF_SCHEMA = "performance_schema"

STATIC_TABLES: dict[str, list[str]] = {
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
    "TABLE_CONSTRAINTS": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "TABLE_SCHEMA",
                          "TABLE_NAME", "CONSTRAINT_TYPE", "ENFORCED"],
    "REFERENTIAL_CONSTRAINTS": ["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME",
                                "UNIQUE_CONSTRAINT_CATALOG", "UNIQUE_CONSTRAINT_SCHEMA", "UNIQUE_CONSTRAINT_NAME",
                                "MATCH_OPTION", "UPDATE_RULE", "DELETE_RULE", "TABLE_NAME",
                                "REFERENCED_TABLE_NAME"],
    "ENGINES": ["ENGINE", "SUPPORT", "COMMENT", "TRANSACTIONS", "XA", "SAVEPOINTS"],
    "VIEWS": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "VIEW_DEFINITION", "CHECK_OPTION", "IS_UPDATABLE",
              "DEFINER", "SECURITY_TYPE", "CHARACTER_SET_CLIENT", "COLLATION_CONNECTION"],
    "ROUTINES": ["SPECIFIC_NAME", "ROUTINE_CATALOG", "ROUTINE_SCHEMA", "ROUTINE_NAME", "ROUTINE_TYPE",
                 "DATA_TYPE", "ROUTINE_DEFINITION", "DEFINER"],
    "TRIGGERS": ["TRIGGER_CATALOG", "TRIGGER_SCHEMA", "TRIGGER_NAME", "EVENT_MANIPULATION",
                 "EVENT_OBJECT_SCHEMA", "EVENT_OBJECT_TABLE", "ACTION_STATEMENT", "ACTION_TIMING", "DEFINER"],
    "PARTITIONS": ["TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "PARTITION_NAME", "SUBPARTITION_NAME",
                   "PARTITION_ORDINAL_POSITION", "PARTITION_METHOD", "PARTITION_EXPRESSION", "TABLE_ROWS"],
}
# The server's own tables, given to each statement as VALUES of their rows at that moment
# (``dumper.server.sql_engine.route_tables``).
DYNAMIC_TABLES: dict[tuple[str, str], tuple[str, ...]] = {
    (INFO_SCHEMA, "processlist"): ("ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO"),
    (INFO_SCHEMA, "global_variables"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (INFO_SCHEMA, "session_variables"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (INFO_SCHEMA, "global_status"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (INFO_SCHEMA, "session_status"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (PERF_SCHEMA, "global_variables"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (PERF_SCHEMA, "session_variables"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (PERF_SCHEMA, "global_status"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
    (PERF_SCHEMA, "session_status"): ("VARIABLE_NAME", "VARIABLE_VALUE"),
}
# What a MySQL 8 server lists in information_schema.ENGINES (InnoDB the default).
ENGINES = [("InnoDB", "DEFAULT", "Supports transactions, row-level locking, and foreign keys", "YES", "YES", "YES"),
           ("MyISAM", "YES", "MyISAM storage engine", "NO", "NO", "NO"),
           ("MEMORY", "YES", "Hash based, stored in memory, useful for temporary tables", "NO", "NO", "NO"),
           ("CSV", "YES", "CSV storage engine", "NO", "NO", "NO"),
           ("PERFORMANCE_SCHEMA", "YES", "Performance Schema", "NO", "NO", "NO"),
           ("BLACKHOLE", "YES", "/dev/null storage engine (anything you write to it disappears)", "NO", "NO", "NO"),
           ("ARCHIVE", "YES", "Archive storage engine", "NO", "NO", "NO")]
# Integer columns (the rest are text): the result set types them LONGLONG.
INT_COLUMNS = frozenset({"TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "MAX_DATA_LENGTH", "INDEX_LENGTH",
                         "DATA_FREE", "AUTO_INCREMENT", "VERSION", "ORDINAL_POSITION",
                         "CHARACTER_MAXIMUM_LENGTH", "CHARACTER_OCTET_LENGTH", "NUMERIC_PRECISION",
                         "NUMERIC_SCALE", "DATETIME_PRECISION", "NON_UNIQUE", "SEQ_IN_INDEX", "CARDINALITY",
                         "SUB_PART", "CHECKSUM", "SRS_ID", "POSITION_IN_UNIQUE_CONSTRAINT", "MAXLEN", "ID",
                         "SORTLEN", "PARTITION_ORDINAL_POSITION"})


def catalog_rows(catalog: Catalog) -> dict[str, list[tuple]]:
    """The rows of each information_schema table for ``catalog``."""
    rows: dict[str, list[tuple]] = {name: [] for name in STATIC_TABLES}
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
        rows["PARTITIONS"].append(("def", table.db, table.name, None, None, None, None, None, 0))
        for ix in table.indexes:
            if ix.unique:
                kind = "PRIMARY KEY" if ix.name == "PRIMARY" else "UNIQUE"
                rows["TABLE_CONSTRAINTS"].append(("def", table.db, ix.name, table.db, table.name, kind, "YES"))
        nullable = {c.name.lower(): c.nullable for c in table.columns}
        for ix in table.indexes:
            for seq, col in enumerate(ix.columns, 1):
                rows["STATISTICS"].append((
                    "def", table.db, table.name, 0 if ix.unique else 1, table.db, ix.name, seq, col, "A", 0,
                    None, None, "YES" if nullable.get(col.lower()) else "", "BTREE", "", "", "YES", None))
                if ix.unique:
                    rows["KEY_COLUMN_USAGE"].append(("def", table.db, ix.name, "def", table.db, table.name, col,
                                                     seq, None, None, None, None))
    rows["ENGINES"] = list(ENGINES)
    for charset, collation, description, maxlen in CHARSETS:
        rows["CHARACTER_SETS"].append((charset, collation, description, maxlen))
    defaults = {collation for _, collation, _, _ in CHARSETS}
    for collation, charset, cid in COLLATIONS:
        rows["COLLATIONS"].append((collation, charset, cid, "Yes" if collation in defaults else "", "Yes", 1,
                                   "PAD SPACE"))
        rows["COLLATION_CHARACTER_SET_APPLICABILITY"].append((collation, charset))
    return rows
