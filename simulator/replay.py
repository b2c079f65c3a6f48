"""Render ``truth.json`` as SQL for a MySQL/MariaDB server: the logical DDLs at their marks and the
logical row changes in vtso order. Used by the tests that replay the truth into a real MariaDB;
usable by any stage that wants a reference downstream state.

Run the statements with ``SET time_zone = '+00:00'`` (TIMESTAMP literals are UTC).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from simulator.schema import quote_ident
from simulator.types import parse_type, sql_literal
from simulator.values import decode_value


def literal(value: Any, column: dict[str, Any]) -> str:
    """A truth value (JSON form) as a SQL literal for ``column`` ({name, type, ...})."""
    return sql_literal(decode_value(value), parse_type(column["type"]))


def row_values(row: list[Any], columns: list[dict[str, Any]]) -> str:
    return "(" + ", ".join(literal(v, c) for v, c in zip(row, columns, strict=True)) + ")"


def where_pk(schema: dict[str, Any], rows: list[list[Any]]) -> str:
    """``pk IN (...)`` for the given rows (value lists in ``schema`` column order)."""
    names = [c["name"] for c in schema["columns"]]
    i = names.index(schema["pk"])
    col = schema["columns"][i]
    return f"{quote_ident(schema['pk'])} IN ({', '.join(literal(r[i], col) for r in rows)})"


def change_statements(change: dict[str, Any], schema: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """(SQL, rows it must affect) for one truth change (one physical statement's rows) on the
    logical table; an UPDATE counts matched rows (connect with CLIENT.FOUND_ROWS)."""
    table = quote_ident(change["table"])
    columns = schema["columns"]
    names = ", ".join(quote_ident(c["name"]) for c in columns)
    rows = change["rows"]
    if change["op"] == "insert":
        for start in range(0, len(rows), 1000):
            batch = rows[start:start + 1000]
            yield (f"INSERT INTO {table} ({names}) VALUES "
                   + ", ".join(row_values(r, columns) for r in batch)), len(batch)
    elif change["op"] == "delete":
        for start in range(0, len(rows), 1000):
            batch = rows[start:start + 1000]
            yield f"DELETE FROM {table} WHERE {where_pk(schema, batch)}", len(batch)
    else:
        pk = schema["pk"]
        for _, after in rows:
            sets = ", ".join(f"{quote_ident(c['name'])} = {literal(v, c)}"
                             for v, c in zip(after, columns, strict=True) if c["name"] != pk)
            yield f"UPDATE {table} SET {sets} WHERE {where_pk(schema, [after])}", 1


def ddl_statement(ddl: dict[str, Any]) -> tuple[str | None, str]:
    """(db to USE or None, MySQL-compatible DDL) of a mark."""
    if ddl["sql_kind"] in ("CREATE_DATABASE", "DROP_DATABASE"):
        return None, ddl["mysql_sql"]
    return ddl["db"], ddl["mysql_sql"]
