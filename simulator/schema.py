"""Table schemas of the simulated cluster: columns, CREATE TABLE text, the binlog ``Column`` of each
column, and the schema changes that DDL jobs apply (to logical and physical copies alike)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from binlog.columns import (
    Column,
    bit_column,
    blob_column,
    char_column,
    decimal_column,
    enum_column,
    set_column,
    varchar_column,
)
from binlog.constants import ColumnType as T
from simulator.types import TEXT_BYTES, UTF8MB4_MAXLEN, SqlType, parse_type, sql_literal

CHARSET_UTF8MB4 = 45          # utf8mb4_general_ci: the logical dbs' collation, known to MariaDB
CHARSET_BINARY = 63
TABLE_COLLATION = "utf8mb4_general_ci"
_INT_TYPES = {"tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG,
              "bigint": T.LONGLONG}


def quote_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(slots=True)
class ColumnDef:
    """One column. ``default`` is a Python value (binlog conventions); ``None`` with ``nullable``
    means DEFAULT NULL, with NOT NULL it means no default (the column must be given)."""

    name: str
    type: SqlType
    nullable: bool = True
    default: Any = None
    auto_increment: bool = False
    default_sql: str | None = None   # overrides the literal, e.g. CURRENT_TIMESTAMP

    def sql(self) -> str:
        parts = [quote_ident(self.name), self.type.text]
        if not self.nullable:
            parts.append("NOT NULL")
        if self.auto_increment:
            parts.append("AUTO_INCREMENT")
        elif self.default_sql is not None:
            parts.append(f"DEFAULT {self.default_sql}")
        elif self.default is not None:
            parts.append(f"DEFAULT {sql_literal(self.default, self.type)}")
        elif self.nullable and self.type.family not in ("json", "geometry", "point") \
                and self.type.family not in TEXT_BYTES:
            parts.append("DEFAULT NULL")
        return " ".join(parts)


def col(name: str, type_text: str, *, nullable: bool = True, default: Any = None,
        auto_increment: bool = False, default_sql: str | None = None) -> ColumnDef:
    return ColumnDef(name, parse_type(type_text), nullable, default, auto_increment, default_sql)


def binlog_column(c: ColumnDef, *, primary_key: bool = False) -> Column:
    """The TABLE_MAP column a MySQL 8 DN writes for ``c`` (utf8mb4 text, binary for blobs)."""
    t = c.type
    f = t.family
    common = {"nullable": c.nullable, "name": c.name, "primary_key": primary_key}
    if f in _INT_TYPES:
        return Column(_INT_TYPES[f], 0, unsigned=t.unsigned, **common)
    if f == "float":
        return Column(T.FLOAT, 4, **common)
    if f == "double":
        return Column(T.DOUBLE, 8, **common)
    if f == "decimal":
        return decimal_column(t.precision, t.scale, unsigned=t.unsigned, **common)
    if f == "date":
        return Column(T.DATE, 0, **common)
    if f == "year":
        return Column(T.YEAR, 0, **common)
    if f == "time":
        return Column(T.TIME2, t.fsp, **common)
    if f == "datetime":
        return Column(T.DATETIME2, t.fsp, **common)
    if f == "timestamp":
        return Column(T.TIMESTAMP2, t.fsp, **common)
    if f == "char":
        return char_column(t.length * UTF8MB4_MAXLEN, charset=CHARSET_UTF8MB4, **common)
    if f == "varchar":
        return varchar_column(t.length * UTF8MB4_MAXLEN, charset=CHARSET_UTF8MB4, **common)
    if f == "binary":
        return char_column(t.length, charset=CHARSET_BINARY, **common)
    if f == "varbinary":
        return varchar_column(t.length, charset=CHARSET_BINARY, **common)
    if f in TEXT_BYTES:
        charset = CHARSET_BINARY if f.endswith("blob") else CHARSET_UTF8MB4
        return blob_column(TEXT_BYTES[f], charset=charset, **common)
    if f == "enum":
        return enum_column(t.members, charset=CHARSET_UTF8MB4, **common)
    if f == "set":
        return set_column(t.members, charset=CHARSET_UTF8MB4, **common)
    if f == "bit":
        return bit_column(t.length, **common)
    if f == "json":
        return Column(T.JSON, 4, **common)
    if f in ("geometry", "point"):
        return Column(T.GEOMETRY, 4, **common)
    raise ValueError(f"no binlog column for {t.text}")


@dataclass(slots=True)
class TableSchema:
    """Columns, primary key (one column) and secondary indexes of one table (logical or physical)."""

    columns: list[ColumnDef]
    pk: str
    indexes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unique: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def copy(self) -> TableSchema:
        return copy.deepcopy(self)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> ColumnDef:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return any(c.name == name for c in self.columns)

    def create_sql(self, table: str, suffix: str = "") -> str:
        """``CREATE TABLE`` as SHOW CREATE TABLE would print it (plus ``suffix``, e.g. a partition
        clause)."""
        lines = [c.sql() for c in self.columns]
        lines.append(f"PRIMARY KEY ({quote_ident(self.pk)})")
        lines += [f"UNIQUE KEY {quote_ident(name)} ({', '.join(quote_ident(c) for c in cols)})"
                  for name, cols in self.unique.items()]
        lines += [f"KEY {quote_ident(name)} ({', '.join(quote_ident(c) for c in cols)})"
                  for name, cols in self.indexes.items()]
        body = ",\n  ".join(lines)
        return (f"CREATE TABLE {quote_ident(table)} (\n  {body}\n) ENGINE=InnoDB "
                f"DEFAULT CHARSET=utf8mb4 COLLATE={TABLE_COLLATION}{suffix}")

    def binlog_columns(self) -> tuple[Column, ...]:
        return tuple(binlog_column(c, primary_key=c.name == self.pk) for c in self.columns)

    # -- changes (each returns nothing; callers copy first when they need the old schema) -------------
    def add_column(self, c: ColumnDef, after: str | None = None, first: bool = False) -> None:
        if first:
            self.columns.insert(0, c)
        elif after is not None:
            self.columns.insert(self.names.index(after) + 1, c)
        else:
            self.columns.append(c)

    def drop_column(self, name: str) -> None:
        self.columns = [c for c in self.columns if c.name != name]
        self.indexes = {k: v for k, v in self.indexes.items() if name not in v}
        self.unique = {k: v for k, v in self.unique.items() if name not in v}

    def modify_column(self, name: str, new: ColumnDef) -> None:
        self.columns = [new if c.name == name else c for c in self.columns]
