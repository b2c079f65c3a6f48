"""``[filter] include / exclude``: which logical databases and tables the global binlog carries.

Patterns are ``db`` or ``db.table`` with MySQL's ``replicate-wild-do-table`` /
``replicate-wild-ignore-table`` wildcards: ``%`` any run of characters, ``_`` one character
(``*`` and ``?`` are accepted as the same), ``\\`` escapes; ``db`` alone means ``db.%``. Names
compare case-insensitively (PolarDB-X logical names are lower-cased). The decision for a table is
MySQL's order for wild rules: a table matching an include pattern is kept; else one matching an
exclude pattern is dropped; else it is kept only when there are no include patterns.

Applied after shaping (``filter_txn``), on logical names: the rows of a dropped table leave their
transaction (a transaction left with no rows is written as nothing, like a physical DDL), and so
does the DDL of a dropped table; a database-level DDL is dropped when the filter drops every table
of that database. Filters change the output bytes: they are one of the settings a resume checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from schema_shaper.model import LogicalKind, LogicalTxn


class FilterError(ValueError):
    """A pattern that is not ``db`` or ``db.table``."""


def like_regex_source(pattern: str, globs: bool = False) -> str:
    """The regex of a SQL LIKE pattern (``%`` any run, ``_`` one character, ``\\`` escapes; with
    ``globs`` also ``*`` and ``?``, as the filters accept) — also what the endpoint's SHOW … LIKE uses."""
    many, one = ("%*", "_?") if globs else ("%", "_")
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c in many else "." if c in one else re.escape(c))
        i += 1
    return "".join(out)


def like_regex(pattern: str) -> re.Pattern:
    """A compiled, whole-string, case-insensitive SQL LIKE."""
    return re.compile(like_regex_source(pattern) + r"\Z", re.I | re.S)


def compile_pattern(pattern: str) -> tuple[re.Pattern, re.Pattern, bool]:
    """(db regex, table regex, whether the table part matches every table)."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise FilterError(f"filter pattern {pattern!r}: expected 'db' or 'db.table'")
    db, dot, table = pattern.strip().partition(".")
    if not db or (dot and not table) or "." in table:
        raise FilterError(f"filter pattern {pattern!r}: expected 'db' or 'db.table'")
    table = table if dot else "%"
    return (re.compile(like_regex_source(db, True), re.I | re.S), re.compile(like_regex_source(table, True), re.I | re.S),
            table in ("%", "*"))


@dataclass
class TableFilter:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._inc = [compile_pattern(p) for p in self.include]
        self._exc = [compile_pattern(p) for p in self.exclude]
        self._cache: dict[tuple[str, str], bool] = {}

    @classmethod
    def from_settings(cls, value: dict | None) -> TableFilter | None:
        if not value:
            return None
        return cls(list(value.get("include") or []), list(value.get("exclude") or []))

    def settings(self) -> dict:
        return {"include": list(self.include), "exclude": list(self.exclude)}

    def wants_table(self, db: str, table: str) -> bool:
        """MySQL's wild-table rule order: include match → keep; exclude match → drop; else keep
        only when there is no include pattern."""
        key = (db, table)
        hit = self._cache.get(key)
        if hit is None:
            if any(d.fullmatch(db) and t.fullmatch(table) for d, t, _ in self._inc):
                hit = True
            elif any(d.fullmatch(db) and t.fullmatch(table) for d, t, _ in self._exc):
                hit = False
            else:
                hit = not self._inc
            self._cache[key] = hit
        return hit

    def wants_database(self, db: str) -> bool:
        """A database-level DDL goes out unless the filter drops every table of the database."""
        if any(d.fullmatch(db) for d, _, _ in self._inc):
            return True
        if any(d.fullmatch(db) and every for d, _, every in self._exc):
            return False
        return not self._inc


def filter_txn(lt: LogicalTxn, f: TableFilter) -> LogicalTxn:
    """``lt`` without what ``f`` drops (a ``NONE`` transaction when nothing is left)."""
    if lt.kind is LogicalKind.DML:
        kept = [b for b in lt.blocks if f.wants_table(b.db, b.table)]
        if len(kept) == len(lt.blocks):
            return lt
        if not kept:
            return LogicalTxn(lt.vtso, LogicalKind.NONE, archive=lt.archive, source=lt.source)
        lt.blocks = kept
        return lt
    if lt.kind is LogicalKind.DDL and lt.target is not None:
        db, table = lt.target
        wanted = f.wants_table(db, table) if table else f.wants_database(db)
        if not wanted:
            return LogicalTxn(lt.vtso, LogicalKind.NONE, archive=lt.archive, source=lt.source)
    return lt


def with_filter(shape: Callable[..., LogicalTxn], f: TableFilter | None) -> Callable[..., LogicalTxn]:
    """``shape`` followed by ``filter_txn`` (``shape`` itself when there is no filter)."""
    if f is None:
        return shape

    def shaped_and_filtered(g):
        return filter_txn(shape(g), f)
    return shaped_and_filtered
