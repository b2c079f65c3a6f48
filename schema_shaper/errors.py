"""Typed errors of the schema shaper: each names the DN, the position (file:offset) and the table.

The shaper's rule is "never a wrong-shaped row": a row it cannot put in the logical form (no topology
entry, no known physical columns, a value that does not fit the logical type) and a DDL it cannot
parse stop the stream with one of these, or, with ``on_error="skip"``, drop the offending block or
DDL with a ``logging.warning`` that carries the same text.
"""

from __future__ import annotations


class ShapeError(Exception):
    """Input the shaper cannot put in logical form, at DN ``dn``, ``file``:``offset``, on ``table``
    (``db.table`` as the input names it: physical for rows and physical DDL, logical for marks)."""

    def __init__(self, message: str, *, dn: str | None = None, file: str | None = None,
                 offset: int | None = None, table: str | None = None, vtso: str | None = None) -> None:
        self.message = message
        self.dn = dn
        self.file = file
        self.offset = offset
        self.table = table
        self.vtso = vtso
        where = f"DN {dn if dn is not None else '?'}"
        if file is not None or offset is not None:
            where += f" at {file or '?'}:{offset if offset is not None else '?'}"
        if table is not None:
            where += f", table {table}"
        if vtso is not None:
            where += f", vtso {vtso}"
        super().__init__(f"{where}: {message}")

    def at(self, **where: object) -> ShapeError:
        """The same error with the missing location fields filled in (raised deep in a helper that
        does not know the DN or position, completed by the caller that does)."""
        fields = {"dn": self.dn, "file": self.file, "offset": self.offset, "table": self.table,
                  "vtso": self.vtso}
        for key, value in where.items():
            if fields.get(key) is None:
                fields[key] = value
        return type(self)(self.message, **fields)  # type: ignore[arg-type]


class UnknownTable(ShapeError):
    """Rows for a physical table that no topology entry maps to a logical table."""


class UnknownPhysicalSchema(ShapeError):
    """Rows whose TABLE_MAP carries no column names, for a physical table the physical schema model
    does not know either (or knows with another column count): the columns cannot be matched."""


class ValueMismatch(ShapeError):
    """A physical value that does not fit the logical column (out of range, too long, NULL into NOT
    NULL, a type conversion the shaper does not do)."""


class BadDdl(ShapeError):
    """A DDL (logical in a mark, or physical) that cannot be parsed or applied to the schema model."""


class BadMark(ShapeError):
    """A ``__cdc_ddl_record__`` row that cannot be read (missing columns, META_INFO not JSON …)."""
