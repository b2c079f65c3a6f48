"""SHOW statements over the logical schema (and the few server facts tools ask for on connect):
``SHOW DATABASES``, ``SHOW [FULL] TABLES [FROM db]``, ``SHOW CREATE TABLE|DATABASE``,
``SHOW [FULL] COLUMNS|FIELDS FROM t [FROM db]``, ``DESC t``, ``SHOW INDEX FROM t``, ``SHOW TABLE STATUS``,
``SHOW GRANTS``, ``SHOW CHARACTER SET``, ``SHOW COLLATION``, ``SHOW ENGINES``, ``SHOW [GLOBAL] STATUS``.

Every one takes ``LIKE 'pattern'`` or ``WHERE <condition>`` as MySQL does: the rows are filtered by the
engine the SELECTs use (``QueryHandler.filtered``, ``SqlEngine.filter_rows``), so any condition on
the result's column names works.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dumper.server import protocol as p
from dumper.server.catalog import Catalog, CatalogTable, quote
from dumper.server.errors import QueryError

if TYPE_CHECKING:
    from dumper.server.queries import QueryHandler, Session

L = p.TYPE_LONGLONG
# (charset, default collation, description, maxlen), as MySQL lists them; the ones the shaper knows.
CHARSETS = [("ascii", "ascii_general_ci", "US ASCII", 1), ("binary", "binary", "Binary pseudo charset", 1),
            ("gbk", "gbk_chinese_ci", "GBK Simplified Chinese", 2),
            ("latin1", "latin1_swedish_ci", "cp1252 West European", 1),
            ("utf8mb3", "utf8mb3_general_ci", "UTF-8 Unicode", 3), ("utf8mb4", "utf8mb4_general_ci", "UTF-8 Unicode", 4)]
COLLATIONS = [("ascii_general_ci", "ascii", 11), ("binary", "binary", 63), ("gbk_chinese_ci", "gbk", 28),
              ("latin1_swedish_ci", "latin1", 8), ("utf8mb3_general_ci", "utf8mb3", 33),
              ("utf8mb4_general_ci", "utf8mb4", 45), ("utf8mb4_bin", "utf8mb4", 46)]


# A SHOW statement's error is any statement's (an ERR packet)
ShowError = QueryError


class ShowSchema:
    """Answers the SHOW statements above for one session; ``handler`` renders result sets."""

    def __init__(self, handler: QueryHandler) -> None:
        self.handler = handler

    def catalog(self) -> Catalog:
        return self.handler.catalog()

    # -- entry point -------------------------------------------------------------------------------
    def answer(self, session: Session, words: list[str], toks: list, sql: str) -> list[bytes] | None:
        """The reply to ``SHOW <words…>`` (``words``/``toks`` after SHOW and GLOBAL/SESSION), or None
        when the statement is not one of these."""
        full = bool(words) and words[0] == "full"
        if full:
            words, toks = words[1:], toks[1:]
        if not words:
            return None
        head = words[0]
        if head in ("databases", "schemas"):
            return self._databases(session, toks[1:], sql)
        if head == "tables":
            return self._tables(session, toks[1:], full, sql)
        if head == "table" and words[1:2] == ["status"]:
            return self._table_status(session, toks[2:], sql)
        if head == "create" and words[1:2] == ["table"]:
            return self._create_table(session, toks[2:], sql)
        if head == "create" and words[1:2] in (["database"], ["schema"]):
            return self._create_database(session, toks[2:], sql)
        if head in ("columns", "fields"):
            return self._columns(session, toks[1:], full, sql)
        if head in ("index", "indexes", "keys"):
            return self._index(session, toks[1:], sql)
        if head == "grants":
            return self._grants(session)
        if head in ("character", "charset"):
            rest = toks[2:] if head == "character" else toks[1:]
            cols = [p.Column("Charset"), p.Column("Description"), p.Column("Default collation"),
                    p.Column("Maxlen", L)]
            return self._filtered(session, cols, [[c, d, coll, m] for c, coll, d, m in CHARSETS], rest, sql)
        if head == "collation":
            cols = [p.Column("Collation"), p.Column("Charset"), p.Column("Id", L), p.Column("Default"),
                    p.Column("Compiled"), p.Column("Sortlen", L), p.Column("Pad_attribute")]
            rows = [[n, cs, i, "Yes" if any(d == n for _, d, _, _ in CHARSETS) else "", "Yes", 1, "PAD SPACE"]
                    for n, cs, i in COLLATIONS]
            return self._filtered(session, cols, rows, toks[1:], sql)
        if head in ("engines", "storage") and words[-1] == "engines":
            from dumper.server.infoschema import ENGINES  # (infoschema imports this module)
            cols = [p.Column(n) for n in ("Engine", "Support", "Comment", "Transactions", "XA", "Savepoints")]
            return self.handler.result(cols, [list(e) for e in ENGINES], session)    # as information_schema.ENGINES
        if head == "status":
            cols = [p.Column("Variable_name"), p.Column("Value")]
            rows = [[name, str(value)] for name, value in self.handler.status_rows()]
            return self._filtered(session, cols, rows, toks[1:], sql)
        return None

    # -- helpers -----------------------------------------------------------------------------------
    def _filtered(self, session: Session, cols: list[p.Column], rows: list[list], toks: list, sql: str,
                  like_column: int = 0) -> list[bytes]:
        return self.handler.filtered(session, cols, rows, toks, sql, like_column)

    def _db_name(self, session: Session, name: str | None) -> str:
        db = name or session.db
        if not db:
            raise ShowError(1046, "No database selected", "3D000")
        if db.lower() != "information_schema" and self.catalog().database(db) is None:
            raise ShowError(1049, f"Unknown database '{db}'", "42000")
        return db

    def _table(self, session: Session, db: str | None, name: str) -> CatalogTable:
        db = self._db_name(session, db)
        table = self.catalog().table(db, name)
        if table is None:
            raise ShowError(1146, f"Table '{db}.{name}' doesn't exist", "42S02")
        return table

    def _table_ref(self, toks: list, sql: str) -> tuple[str | None, str, list]:
        """``[db.]name`` at the start of ``toks``: (db, name, the tokens after it)."""
        if not toks or toks[0][0] not in ("ident", "str"):
            raise self.handler.parse_error(sql)
        first = _ident(toks[0][1])
        if len(toks) >= 3 and toks[1] == ("op", ".") and toks[2][0] in ("ident", "str"):
            return first, _ident(toks[2][1]), toks[3:]
        return None, first, toks[1:]

    @staticmethod
    def _from_db(toks: list) -> tuple[str | None, list]:
        if len(toks) >= 2 and toks[0][1].lower() in ("from", "in") and toks[1][0] in ("ident", "str"):
            return _ident(toks[1][1]), toks[2:]
        return None, toks

    # -- the statements ----------------------------------------------------------------------------
    def _databases(self, session: Session, toks: list, sql: str) -> list[bytes]:
        names = ["information_schema"] + sorted(name for name, _, _ in self.catalog().databases.values())
        return self._filtered(session, [p.Column("Database")], [[n] for n in names], toks, sql)

    def _tables(self, session: Session, toks: list, full: bool, sql: str) -> list[bytes]:
        db, toks = self._from_db(toks)
        db = self._db_name(session, db)
        like = f" ({self.handler.unquote(toks[1][1])})" if len(toks) == 2 and toks[0][1].lower() == "like" \
            and toks[1][0] == "str" else ""          # MySQL names the column after the pattern too
        cols = [p.Column(f"Tables_in_{db}{like}")] + ([p.Column("Table_type")] if full else [])
        rows = [[t.name] + (["BASE TABLE"] if full else []) for t in self.catalog().tables_of(db)]
        return self._filtered(session, cols, rows, toks, sql)

    def _table_status(self, session: Session, toks: list, sql: str) -> list[bytes]:
        db, toks = self._from_db(toks)
        db = self._db_name(session, db)
        names = ["Name", "Engine", "Version", "Row_format", "Rows", "Avg_row_length", "Data_length",
                 "Max_data_length", "Index_length", "Data_free", "Auto_increment", "Create_time", "Update_time",
                 "Check_time", "Collation", "Checksum", "Create_options", "Comment"]
        ints = {"Version", "Rows", "Avg_row_length", "Data_length", "Max_data_length", "Index_length",
                "Data_free", "Auto_increment", "Checksum"}
        cols = [p.Column(n, L if n in ints else p.TYPE_VAR_STRING) for n in names]
        rows = [[t.name, "InnoDB", 10, "Dynamic", 0, 0, 0, 0, 0, 0, None, None, None, None, t.collation, None,
                 "", ""] for t in self.catalog().tables_of(db)]
        return self._filtered(session, cols, rows, toks, sql)

    def _create_table(self, session: Session, toks: list, sql: str) -> list[bytes]:
        db, name, rest = self._table_ref(toks, sql)
        if rest:
            raise self.handler.parse_error(sql)
        table = self._table(session, db, name)
        return self.handler.result([p.Column("Table"), p.Column("Create Table")],
                                   [[table.name, table.create_sql()]], session)

    def _create_database(self, session: Session, toks: list, sql: str) -> list[bytes]:
        if toks and toks[0][1].lower() == "if":
            toks = toks[3:]  # IF NOT EXISTS
        if len(toks) != 1:
            raise self.handler.parse_error(sql)
        db = self._db_name(session, _ident(toks[0][1]))
        found = self.catalog().database(db)
        name, charset, collation = found if found else ("information_schema", "utf8mb3", "utf8mb3_general_ci")
        text = f"CREATE DATABASE {quote(name)} /*!40100 DEFAULT CHARACTER SET {charset} COLLATE {collation} */"
        return self.handler.result([p.Column("Database"), p.Column("Create Database")], [[name, text]], session)

    def _columns(self, session: Session, toks: list, full: bool, sql: str) -> list[bytes]:
        if not toks or toks[0][1].lower() not in ("from", "in"):
            raise self.handler.parse_error(sql)
        db, name, rest = self._table_ref(toks[1:], sql)
        db2, rest = self._from_db(rest)
        return self.describe(session, db2 or db, name, full, rest, sql)

    def describe(self, session: Session, db: str | None, name: str, full: bool, rest: list,
                 sql: str) -> list[bytes]:
        """SHOW [FULL] COLUMNS / DESC rows."""
        table = self._table(session, db, name)
        names = ["Field", "Type"] + (["Collation"] if full else []) + ["Null", "Key", "Default", "Extra"] + (
            ["Privileges", "Comment"] if full else [])
        rows = []
        for c in table.columns:
            row = [c.name, c.column_type] + ([c.collation] if full else []) + [
                "YES" if c.nullable else "NO", c.key, c.default, c.extra]
            rows.append(row + (["select", ""] if full else []))
        return self._filtered(session, [p.Column(n) for n in names], rows, rest, sql)

    def _index(self, session: Session, toks: list, sql: str) -> list[bytes]:
        if not toks or toks[0][1].lower() not in ("from", "in"):
            raise self.handler.parse_error(sql)
        db, name, rest = self._table_ref(toks[1:], sql)
        db2, rest = self._from_db(rest)
        table = self._table(session, db2 or db, name)
        nullable = {c.name.lower(): c.nullable for c in table.columns}
        names = ["Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation", "Cardinality",
                 "Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment", "Visible", "Expression"]
        ints = {"Non_unique", "Seq_in_index", "Cardinality", "Sub_part"}
        cols = [p.Column(n, L if n in ints else p.TYPE_VAR_STRING) for n in names]
        rows = [[table.name, 0 if ix.unique else 1, ix.name, seq, col, "A", 0, None, None,
                 "YES" if nullable.get(col.lower()) else "", "BTREE", "", "", "YES", None]
                for ix in table.indexes for seq, col in enumerate(ix.columns, 1)]
        return self._filtered(session, cols, rows, rest, sql)

    def _grants(self, session: Session) -> list[bytes]:
        # What a replication/CDC user needs and all this endpoint serves; admins may PURGE too.
        privileges = "SELECT, RELOAD, SHOW DATABASES, LOCK TABLES, REPLICATION SLAVE, REPLICATION CLIENT"
        if session.admin:
            privileges += ", SUPER"
        text = f"GRANT {privileges} ON *.* TO `{session.user}`@`%`"
        return self.handler.result([p.Column(f"Grants for {session.user}@%")], [[text]], session)


def _ident(text: str) -> str:
    if text[:1] == "`":
        return text[1:-1].replace("``", "`")
    if text[:1] in "'\"":
        return text[1:-1]
    return text


def _after_keyword(sql: str, keyword: str) -> str:
    """The text after the last top-level ``keyword`` (outside quotes) of ``sql``."""
    pattern = re.compile(rf"\b{keyword}\b", re.I)
    last = None
    for m in pattern.finditer(sql):
        before = sql[:m.start()]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0 and before.count("`") % 2 == 0:
            last = m
    return sql[last.end():].strip().rstrip(";") if last else ""

