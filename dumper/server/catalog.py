"""The logical schema at the head of the served global binlog, as SQL clients ask for it.

``load_catalog(directory)`` replays the meta store's history (``meta.db`` or the ``meta_store`` that
``state.json`` names) up to the last ``CTS::`` marker in the files into a ``SchemaState`` — the same
rules the shaper applies — and describes every logical table the way ``information_schema`` and
``SHOW CREATE TABLE`` of a MySQL 8 server do (``CatalogTable``). ``Catalog.cached`` rebuilds only when
the head moved. A directory without a meta store (a DN's binlog directory) has an empty catalog.

Facts come from the schema model: type text, nullability, DEFAULT (as the row value the shaper uses,
rendered back), the binlog column's charset id, primary key and indexes. What the model does not keep
is answered as MySQL's default: a spatial subtype (POINT, …) is GEOMETRY, a column collation is its
charset's default one, no comments.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from binlog.constants import ColumnType as T

CTS_MARKER = re.compile(rb"\x01CTS::(\d{54})")
# The collation ids the shaper writes (``schema_shaper.types.MARIADB_CHARSET_IDS``) → charset, collation.
_CHARSET_OF_ID = {45: ("utf8mb4", "utf8mb4_general_ci"), 33: ("utf8mb3", "utf8mb3_general_ci"),
                  8: ("latin1", "latin1_swedish_ci"), 63: ("binary", "binary")}
_DEFAULT_COLLATION = {cs: coll for cs, coll in _CHARSET_OF_ID.values()} | {"utf8": "utf8mb3_general_ci",
                                                                        "ascii": "ascii_general_ci",
                                                                        "gbk": "gbk_chinese_ci"}
_INT_PRECISION = {"tinyint": (3, 3), "smallint": (5, 5), "mediumint": (7, 8), "int": (10, 10),
                  "integer": (10, 10), "bigint": (19, 20)}
_TEXT_LENGTH = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295,
                "tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
_TYPE_TEXT = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?((?:\s+(?:unsigned|signed|zerofill))*)\s*$", re.I | re.S)


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """One row of ``information_schema.COLUMNS`` (MySQL 8 forms: COLUMN_TYPE without display widths,
    COLUMN_DEFAULT unquoted)."""

    name: str
    ordinal: int
    default: str | None
    nullable: bool
    data_type: str
    char_max: int | None
    octet_max: int | None
    num_precision: int | None
    num_scale: int | None
    datetime_precision: int | None
    charset: str | None
    collation: str | None
    column_type: str
    key: str
    extra: str
    default_sql: str | None       # the DEFAULT clause's literal as SHOW CREATE TABLE writes it


@dataclass(frozen=True, slots=True)
class CatalogIndex:
    name: str
    columns: tuple[str, ...]
    unique: bool


@dataclass(frozen=True, slots=True)
class CatalogTable:
    db: str
    name: str
    columns: tuple[CatalogColumn, ...]
    indexes: tuple[CatalogIndex, ...]     # PRIMARY first
    charset: str
    collation: str

    def create_sql(self) -> str:
        """``SHOW CREATE TABLE`` text, MySQL 8 style."""
        lines = [f"  {column_definition(c, self.charset)}" for c in self.columns]
        for ix in self.indexes:
            cols = ",".join(quote(c) for c in ix.columns)
            if ix.name == "PRIMARY":
                lines.append(f"  PRIMARY KEY ({cols})")
            else:
                lines.append(f"  {'UNIQUE KEY' if ix.unique else 'KEY'} {quote(ix.name)} ({cols})")
        body = ",\n".join(lines)
        return (f"CREATE TABLE {quote(self.name)} (\n{body}\n) ENGINE=InnoDB DEFAULT CHARSET={self.charset} "
                f"COLLATE={self.collation}")


@dataclass
class Catalog:
    """Databases (name → (charset, collation)) and tables by (db, table) lower-case."""

    vtso: str = ""
    databases: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # lower → (name, cs, coll)
    tables: dict[tuple[str, str], CatalogTable] = field(default_factory=dict)

    def database(self, name: str) -> tuple[str, str, str] | None:
        return self.databases.get(name.lower())

    def table(self, db: str, name: str) -> CatalogTable | None:
        return self.tables.get((db.lower(), name.lower()))

    def tables_of(self, db: str) -> list[CatalogTable]:
        return sorted((t for (d, _), t in self.tables.items() if d == db.lower()), key=lambda t: t.name)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def column_definition(c: CatalogColumn, table_charset: str) -> str:
    parts = [quote(c.name), c.column_type]
    if c.charset not in (None, "binary") and c.charset != table_charset:
        parts.append(f"CHARACTER SET {c.charset} COLLATE {c.collation}")
    if not c.nullable:
        parts.append("NOT NULL")
    elif c.data_type == "timestamp":
        parts.append("NULL")
    if c.default_sql is not None:
        parts.append(f"DEFAULT {c.default_sql}")
    elif c.nullable and c.data_type not in ("text", "tinytext", "mediumtext", "longtext", "blob", "tinyblob",
                                            "mediumblob", "longblob", "json", "geometry"):
        parts.append("DEFAULT NULL")
    if c.extra:
        parts.append(c.extra)
    return " ".join(parts)


# -- the head of the binlog and the meta store ------------------------------------------------------------

def head_vtso(directory: Path, files: list[str]) -> str | None:
    """The vtso of the last ``CTS::`` marker in the files (newest first, the tail of each first)."""
    for name in reversed(files):
        path = directory / name
        try:
            size = path.stat().st_size
            with open(path, "rb") as fh:
                for tail in (1 << 18, size):
                    fh.seek(max(0, size - tail))
                    found = CTS_MARKER.findall(fh.read())
                    if found:
                        return found[-1].decode()
                    if tail >= size:
                        break
        except OSError:
            continue
    return None


def meta_store_location(directory: Path) -> str | None:
    """The meta store the pipeline writing ``directory`` uses (``state.json``), else ``meta.db``."""
    target: str | None = None
    try:
        target = json.loads((directory / "state.json").read_text()).get("meta_store")
    except (OSError, ValueError, AttributeError):
        pass
    target = target or "meta.db"
    if "://" in target:
        return target
    path = Path(target) if os.path.isabs(target) else directory / target
    return str(path) if path.exists() else None


def load_catalog(directory: str | os.PathLike, files: list[str]) -> Catalog:
    """The logical schema at the head of the binlog files in ``directory``."""
    from schema_shaper.errors import ShapeError
    from schema_shaper.meta_store import MetaStore
    from schema_shaper.state import SYSTEM_PREFIXES, SchemaState

    directory = Path(directory)
    head = head_vtso(directory, files)
    catalog = Catalog(vtso=head or "")
    where = meta_store_location(directory)
    if where is None or head is None:
        return catalog
    state = SchemaState()
    with MetaStore.open(where) as store:
        for entry in store.history(head):
            try:
                state.apply_entry(entry)
            except (ShapeError, ValueError):  # skipped by the shaper too (on_error=skip) or never applied
                continue
    for db in state.topology.dbs.values():
        if db.name.lower().startswith(SYSTEM_PREFIXES):
            continue
        charset = db.charset if db.charset != "utf8" else "utf8mb3"
        catalog.databases[db.name.lower()] = (db.name, charset, _DEFAULT_COLLATION.get(charset, f"{charset}_general_ci"))
    for (db_key, _), logical in state.tables.items():
        if db_key not in catalog.databases:
            continue
        table = describe_table(catalog.databases[db_key][0], logical.name, logical.schema)
        catalog.tables[(db_key, logical.name.lower())] = table
    return catalog


class CachedCatalog:
    """``load_catalog`` again only when the head of the binlog or the meta store changed."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._key: tuple | None = None
        self._catalog = Catalog()
        self._lock = threading.Lock()

    def get(self, files: list[str]) -> Catalog:
        with self._lock:
            return self._get(files)

    def _get(self, files: list[str]) -> Catalog:
        head = head_vtso(self.directory, files)
        where = meta_store_location(self.directory)
        try:
            mtime = os.stat(where).st_mtime_ns if where and "://" not in where else 0
        except OSError:
            mtime = 0
        key = (head, where, mtime)
        if key != self._key:
            self._catalog = load_catalog(self.directory, files)
            self._key = key
        return self._catalog


# -- one table --------------------------------------------------------------------------------------------

def describe_table(db: str, name: str, schema: Any) -> CatalogTable:
    """A ``schema_shaper.schema.TableSchema`` as information_schema describes it."""
    charset = schema.charset if schema.charset != "utf8" else "utf8mb3"
    collation = _DEFAULT_COLLATION.get(charset, f"{charset}_general_ci")
    pk = [c.lower() for c in schema.primary_key]
    uniques = {ix.columns[0].lower() for ix in schema.indexes if ix.unique and len(ix.columns) == 1}
    firsts = {ix.columns[0].lower() for ix in schema.indexes}
    columns = []
    for i, spec in enumerate(schema.columns, 1):
        key = "PRI" if spec.key in pk else "UNI" if spec.key in uniques else "MUL" if spec.key in firsts else ""
        columns.append(describe_column(spec, i, key, charset))
    indexes = []
    if schema.primary_key:
        indexes.append(CatalogIndex("PRIMARY", tuple(schema.primary_key), True))
    indexes += [CatalogIndex(ix.name, tuple(ix.columns), ix.unique) for ix in schema.indexes]
    return CatalogTable(db, name, tuple(columns), tuple(indexes), charset, collation)


def describe_column(spec: Any, ordinal: int, key: str, table_charset: str) -> CatalogColumn:
    m = _TYPE_TEXT.match(spec.type_sql)
    base = m.group(1).lower() if m else spec.type_sql.split("(")[0].lower()
    args = m.group(2) if m else None
    unsigned = bool(m and "unsigned" in m.group(3).lower())
    col = spec.column
    nums = [int(x) for x in re.findall(r"\d+", args)] if args and base not in ("enum", "set") else []
    char_max = octet = precision = scale = dt_precision = None
    charset = collation = None
    if base == "integer":
        base = "int"
    if base in _INT_PRECISION:
        precision, scale = _INT_PRECISION[base][1 if unsigned else 0], 0
    elif base in ("decimal", "numeric", "dec", "fixed"):
        base = "decimal"
        precision, scale = (nums + [10, 0][len(nums):])[:2] if nums else (10, 0)
    elif base == "float":
        precision = 12
        if len(nums) == 2:
            precision, scale = nums
    elif base in ("double", "real"):
        base = "double"
        precision = 22
        if len(nums) == 2:
            precision, scale = nums
    elif base == "bit":
        precision = nums[0] if nums else 1
    elif base in ("datetime", "timestamp", "time"):
        dt_precision = nums[0] if nums else 0
    if col.real_type in (T.STRING, T.VARCHAR, T.VAR_STRING, T.BLOB, T.ENUM, T.SET) and base != "json":
        cs_id = col.charset if col.charset is not None else 45
        charset, collation = _CHARSET_OF_ID.get(cs_id, ("utf8mb4", "utf8mb4_general_ci"))
        mbmax = {"utf8mb4": 4, "utf8mb3": 3}.get(charset, 1)
        if base in ("char", "varchar", "binary", "varbinary"):
            char_max = nums[0] if nums else 1
            octet = char_max * mbmax
        elif base in _TEXT_LENGTH:  # MySQL and MariaDB give the byte length as both
            char_max = octet = _TEXT_LENGTH[base]
        elif base in ("enum", "set"):
            members = col.enum_values if base == "enum" else col.set_values
            members = members or ()
            longest = max((len(x) for x in members), default=0)
            char_max = longest if base == "enum" else sum(len(x) for x in members) + max(len(members) - 1, 0)
            octet = char_max * mbmax
        if charset == "binary":
            charset = collation = None
    column_type = spec.type_sql.lower()
    column_type = re.sub(r"\s+", " ", column_type).strip()
    extra = "auto_increment" if spec.auto_increment else ""
    if spec.default_expr is not None and "on update" in (spec.default_expr or "").lower():
        extra = "on update CURRENT_TIMESTAMP"
    default_sql = default_literal(spec)
    shown = None
    if default_sql is not None and default_sql != "NULL":
        shown = default_sql[1:-1].replace("''", "'").replace("\\\\", "\\") if default_sql.startswith("'") \
            else default_sql
    return CatalogColumn(spec.name, ordinal, shown, spec.nullable, base, char_max, octet, precision, scale,
                         dt_precision, charset, collation, column_type, key, extra,
                         None if default_sql == "NULL" and spec.nullable else default_sql)


def default_literal(spec: Any) -> str | None:
    """The DEFAULT clause as MySQL 8 writes it (numbers and text quoted, ``b'…'`` for BIT,
    CURRENT_TIMESTAMP), or None without a DEFAULT."""
    if spec.default_expr is not None:
        precision = re.search(r"\((\d+)\)", spec.type_sql)
        return "CURRENT_TIMESTAMP" + (f"({precision.group(1)})" if precision else "")
    if not spec.has_default:
        return None
    value = spec.default
    if value is None:
        return "NULL"
    col = spec.column
    t = col.real_type
    if t == T.BIT:
        return f"b'{value:b}'"
    if t == T.ENUM and isinstance(value, int):
        members = col.enum_values or ()
        return sql_string(members[value - 1] if 0 < value <= len(members) else "")
    if t == T.SET and isinstance(value, int):
        members = col.set_values or ()
        return sql_string(",".join(m for i, m in enumerate(members) if value >> i & 1))
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    elif isinstance(value, dt.datetime):
        text = value.replace(tzinfo=None).isoformat(" ")
    elif isinstance(value, (dt.date, Decimal, int, float)):
        text = str(value)
    elif isinstance(value, dt.timedelta):
        total = int(value.total_seconds())
        sign = "-" if total < 0 else ""
        total = abs(total)
        text = f"{sign}{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
    else:
        text = str(value)
    return sql_string(text)
