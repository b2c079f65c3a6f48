"""The schema model: ``ColumnSpec`` and ``TableSchema`` (immutable), and the table changes an ALTER
TABLE makes (add / drop / modify / change / rename column with FIRST / AFTER, indexes, primary key,
defaults). Logical and physical tables use the same model.

Column names compare case-insensitively, as MySQL's do; the spelling of the DDL is kept for output.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from binlog.columns import Column
from schema_shaper.types import CURRENT_TIMESTAMP, implicit_default, now_value


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One column: its name, type text, the binlog ``Column`` (type byte, meta, signedness,
    nullability, charset), and its default as a row value (``default_expr`` =
    ``CURRENT_TIMESTAMP`` for defaults evaluated at the row's commit time)."""

    name: str
    type_sql: str
    column: Column
    default: Any = None
    default_expr: str | None = None
    has_default: bool = False
    auto_increment: bool = False

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def nullable(self) -> bool:
        return self.column.nullable

    def default_value(self, tso: int) -> Any:
        """The value a row that lacks this column gets (the logical default, NULL if none;
        a NOT NULL column without DEFAULT takes MySQL's implicit default)."""
        if self.default_expr == CURRENT_TIMESTAMP:
            return now_value(self.column, tso)
        if self.has_default and (self.default is not None or self.nullable):
            return self.default
        if self.nullable:
            return None
        return implicit_default(self.column)

    def renamed(self, name: str) -> ColumnSpec:
        return dataclasses.replace(self, name=name, column=dataclasses.replace(self.column, name=name))


@dataclass(frozen=True, slots=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool = False


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's columns in order, primary key, secondary indexes and default character set."""

    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()
    charset: str = "utf8mb4"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def position(self, name: str) -> int | None:
        key = name.lower()
        for i, c in enumerate(self.columns):
            if c.key == key:
                return i
        return None

    def column(self, name: str) -> ColumnSpec:
        i = self.position(name)
        if i is None:
            raise KeyError(name)
        return self.columns[i]

    def binlog_columns(self) -> tuple[Column, ...]:
        """The TABLE_MAP columns of this table (names and primary-key flags filled in)."""
        pk = {n.lower() for n in self.primary_key}
        return tuple(c.column if c.column.primary_key == (c.key in pk)
                     else dataclasses.replace(c.column, primary_key=c.key in pk) for c in self.columns)

    def renamed(self, name: str) -> TableSchema:
        return dataclasses.replace(self, name=name)

    def shape_equal(self, other: TableSchema) -> bool:
        """Same column names, types and nullability in the same order (what rows depend on)."""
        return len(self.columns) == len(other.columns) and all(
            a.key == b.key and (a.column.type, a.column.meta, a.column.unsigned, a.column.nullable)
            == (b.column.type, b.column.meta, b.column.unsigned, b.column.nullable)
            for a, b in zip(self.columns, other.columns, strict=True))

    # -- changes (ALTER TABLE); each returns a new schema --------------------------------------------
    def _insert_at(self, cols: list[ColumnSpec], spec: ColumnSpec, first: bool, after: str | None) -> None:
        if first:
            cols.insert(0, spec)
        elif after is not None:
            key = after.lower()
            at = next((i for i, c in enumerate(cols) if c.key == key), None)
            if at is None:
                raise ValueError(f"AFTER {after}: no such column in {self.name}")
            cols.insert(at + 1, spec)
        else:
            cols.append(spec)

    def add_column(self, spec: ColumnSpec, *, first: bool = False, after: str | None = None,
                   primary_key: bool = False) -> TableSchema:
        if self.position(spec.name) is not None:
            raise ValueError(f"column {spec.name} already exists in {self.name}")
        cols = list(self.columns)
        self._insert_at(cols, spec, first, after)
        pk = self.primary_key + (spec.name,) if primary_key else self.primary_key
        return dataclasses.replace(self, columns=tuple(cols), primary_key=pk)

    def drop_column(self, name: str) -> TableSchema:
        i = self.position(name)
        if i is None:
            raise ValueError(f"DROP COLUMN {name}: no such column in {self.name}")
        key = name.lower()
        cols = self.columns[:i] + self.columns[i + 1:]
        # MySQL removes a dropped column from its indexes and drops an index left with none.
        indexes = tuple(Index(ix.name, tuple(c for c in ix.columns if c.lower() != key), ix.unique)
                        for ix in self.indexes)
        indexes = tuple(ix for ix in indexes if ix.columns)
        pk = tuple(c for c in self.primary_key if c.lower() != key)
        return dataclasses.replace(self, columns=cols, indexes=indexes, primary_key=pk)

    def change_column(self, old: str, spec: ColumnSpec, *, first: bool = False,
                      after: str | None = None, primary_key: bool = False) -> TableSchema:
        """MODIFY (``old`` == spec.name) or CHANGE old new; without FIRST/AFTER the column keeps its
        place."""
        i = self.position(old)
        if i is None:
            raise ValueError(f"column {old} does not exist in {self.name}")
        if spec.key != old.lower() and self.position(spec.name) is not None:
            raise ValueError(f"column {spec.name} already exists in {self.name}")
        cols = list(self.columns)
        if first or after is not None:
            del cols[i]
            self._insert_at(cols, spec, first, after)
        else:
            cols[i] = spec
        changed = self._rename_refs(old, spec.name)
        pk = changed.primary_key + (spec.name,) if primary_key and spec.key not in {
            c.lower() for c in changed.primary_key} else changed.primary_key
        return dataclasses.replace(changed, columns=tuple(cols), primary_key=pk)

    def rename_column(self, old: str, new: str) -> TableSchema:
        i = self.position(old)
        if i is None:
            raise ValueError(f"RENAME COLUMN {old}: no such column in {self.name}")
        cols = list(self.columns)
        cols[i] = cols[i].renamed(new)
        return dataclasses.replace(self._rename_refs(old, new), columns=tuple(cols))

    def _rename_refs(self, old: str, new: str) -> TableSchema:
        key = old.lower()

        def fix(names: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(new if n.lower() == key else n for n in names)
        return dataclasses.replace(self, primary_key=fix(self.primary_key),
                                   indexes=tuple(Index(ix.name, fix(ix.columns), ix.unique)
                                                 for ix in self.indexes))

    def set_default(self, name: str, value: Any, expr: str | None, has_default: bool) -> TableSchema:
        i = self.position(name)
        if i is None:
            raise ValueError(f"ALTER COLUMN {name}: no such column in {self.name}")
        cols = list(self.columns)
        cols[i] = dataclasses.replace(cols[i], default=value, default_expr=expr, has_default=has_default)
        return dataclasses.replace(self, columns=tuple(cols))

    def index_name_for(self, columns: tuple[str, ...]) -> str:
        """MySQL's name for an unnamed index: its first column, then ``_2``, ``_3`` … when taken."""
        base = columns[0]
        taken = {ix.name.lower() for ix in self.indexes}
        if base.lower() not in taken:
            return base
        n = 2
        while f"{base}_{n}".lower() in taken:
            n += 1
        return f"{base}_{n}"

    def add_index(self, name: str | None, columns: tuple[str, ...], unique: bool = False) -> TableSchema:
        for c in columns:
            if self.position(c) is None:
                raise ValueError(f"index on {c}: no such column in {self.name}")
        name = name or self.index_name_for(columns)
        if any(ix.name.lower() == name.lower() for ix in self.indexes):
            raise ValueError(f"index {name} already exists in {self.name}")
        return dataclasses.replace(self, indexes=self.indexes + (Index(name, columns, unique),))

    def drop_index(self, name: str) -> TableSchema:
        if name.lower() == "primary":
            return self.set_primary_key(())
        kept = tuple(ix for ix in self.indexes if ix.name.lower() != name.lower())
        if len(kept) == len(self.indexes):
            raise ValueError(f"DROP INDEX {name}: no such index in {self.name}")
        return dataclasses.replace(self, indexes=kept)

    def rename_index(self, old: str, new: str) -> TableSchema:
        if not any(ix.name.lower() == old.lower() for ix in self.indexes):
            raise ValueError(f"RENAME INDEX {old}: no such index in {self.name}")
        return dataclasses.replace(self, indexes=tuple(
            Index(new, ix.columns, ix.unique) if ix.name.lower() == old.lower() else ix
            for ix in self.indexes))

    def set_primary_key(self, columns: tuple[str, ...]) -> TableSchema:
        for c in columns:
            if self.position(c) is None:
                raise ValueError(f"PRIMARY KEY on {c}: no such column in {self.name}")
        cols = self.columns
        if columns:  # primary key columns are NOT NULL
            keys = {c.lower() for c in columns}
            cols = tuple(dataclasses.replace(c, column=dataclasses.replace(c.column, nullable=False))
                         if c.key in keys else c for c in cols)
        return dataclasses.replace(self, columns=cols, primary_key=columns)
