"""DDL text → statements of the schema model, parsed with sqlglot (MySQL dialect).

``parse_ddl(sql)`` returns one of ``CreateDatabase``, ``DropDatabase``, ``CreateTable`` (with a
``TableSchema``, or ``like``), ``DropTable``, ``RenameTable``, ``TruncateTable``, ``AlterTable``
(with ``apply(schema) -> schema`` and an optional new name), or ``Other`` for statements that change
no table (GRANT, ANALYZE, CREATE VIEW …). Text it cannot understand raises ``ValueError``.

Before sqlglot sees it the text loses leading comments and hints, PolarDB-X-only clauses
(``strip_polardbx``, also used for the MySQL-compatible DDL of the output), and spatial subtypes
(POINT, POLYGON …, which sqlglot does not parse) become GEOMETRY: all travel as GEOMETRY in binlog.
``RENAME TABLE`` is read here (sqlglot has no node for it).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from schema_shaper.schema import ColumnSpec, TableSchema
from schema_shaper.types import (
    DEFAULT_CHARSET,
    binlog_column,
    charset_of_collation,
    default_of,
    type_sql,
)

Name = tuple[str | None, str]  # (db or None for the statement's default db, table)


@dataclass(slots=True)
class CreateDatabase:
    name: str
    charset: str | None = None


@dataclass(slots=True)
class DropDatabase:
    name: str


@dataclass(slots=True)
class CreateTable:
    table: Name
    schema: TableSchema | None = None
    like: Name | None = None


@dataclass(slots=True)
class DropTable:
    tables: list[Name]


@dataclass(slots=True)
class RenameTable:
    pairs: list[tuple[Name, Name]]


@dataclass(slots=True)
class TruncateTable:
    table: Name


@dataclass(slots=True)
class AlterTable:
    table: Name
    changes: list[Callable[[TableSchema], TableSchema]] = field(default_factory=list)
    rename_to: Name | None = None

    def apply(self, schema: TableSchema) -> TableSchema:
        for change in self.changes:
            schema = change(schema)
        return schema


@dataclass(slots=True)
class Other:
    """A statement that changes no table definition."""

    verb: str


Statement = CreateDatabase | DropDatabase | CreateTable | DropTable | RenameTable | TruncateTable | \
    AlterTable | Other

# -- text clean-up ---------------------------------------------------------------------------------
_QUOTED = re.compile(r"`(?:[^`]|``)*`|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.S)
_LEADING_COMMENT = re.compile(r"\A\s*(?:/\*.*?\*/|--[^\n]*(?:\n|\Z)|#[^\n]*(?:\n|\Z))", re.S)


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _QUOTED.finditer(text)]


def _outside(spans: list[tuple[int, int]], pos: int) -> bool:
    return not any(a <= pos < b for a, b in spans)


def strip_comments(sql: str) -> str:
    """Leading comments and hints (``/* … */``, ``-- …``, ``# …``) and trailing ``;`` removed."""
    while True:
        m = _LEADING_COMMENT.match(sql)
        if not m:
            break
        sql = sql[m.end():]
    return sql.strip().rstrip(";").rstrip()


def _body_end(sql: str, spans: list[tuple[int, int]]) -> int | None:
    """Index just after the closing parenthesis of a CREATE TABLE's definition list."""
    depth = 0
    for i, ch in enumerate(sql):
        if ch not in "()" or not _outside(spans, i):
            continue
        depth += 1 if ch == "(" else -1
        if depth == 0:
            return i + 1
    return None


_PX_TABLE_TAIL = re.compile(r"\b(?:dbpartition|tbpartition|tbpartitions|broadcast|single|locality|"
                            r"tablegroup|partition\s+by|partitions|auto_partition|with\s+tablegroup)\b",
                            re.I)
_PX_DB_OPTION = re.compile(r"\s*(?:default\s+)?\b(?:mode|partition_mode|locality|default_single|"
                           r"storage_pool|sharding)\b\s*=?\s*(?:'[^']*'|\"[^\"]*\"|\w+)", re.I)
_CREATE_TABLE = re.compile(r"\s*create\s+(?:temporary\s+)?(?:partition\s+|broadcast\s+|single\s+)?table\b",
                           re.I)
_CREATE_DB = re.compile(r"\s*create\s+(?:database|schema)\b", re.I)


def strip_polardbx(sql: str) -> str:
    """The MySQL-compatible form of a PolarDB-X DDL: partitioning / broadcast / single / locality /
    tablegroup clauses of CREATE TABLE and the PolarDB-X options of CREATE DATABASE removed
    (polardbx-cdc's ``DDLConverter``). Other statements are returned as given."""
    sql = strip_comments(sql)
    m = _CREATE_TABLE.match(sql)
    if m:
        sql = re.sub(r"\A(\s*create\s+)(?:partition\s+|broadcast\s+|single\s+)(table\b)", r"\1\2", sql,
                     flags=re.I)
        spans = _quoted_spans(sql)
        end = _body_end(sql, spans)
        if end is None:
            return sql
        for km in _PX_TABLE_TAIL.finditer(sql, end):
            if _outside(spans, km.start()):
                return sql[:km.start()].rstrip()
        return sql
    if _CREATE_DB.match(sql):
        spans = _quoted_spans(sql)
        out, last = [], 0
        for om in _PX_DB_OPTION.finditer(sql):
            if _outside(spans, om.start() + len(om.group(0)) - len(om.group(0).lstrip())):
                out.append(sql[last:om.start()])
                last = om.end()
        out.append(sql[last:])
        return "".join(out).rstrip()
    return sql


_SPATIAL = re.compile(
    r"((?:`(?:[^`]|``)+`|\b[\w$]+)\s+)"
    r"(point|linestring|polygon|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)"
    r"\b(?=\s*(?:not\b|null\b|default\b|srid\b|comment\b|after\b|first\b|invisible\b|visible\b|,|\)|$))",
    re.I)
_NOT_A_COLUMN = {"column", "table", "key", "index", "exists", "after", "to", "on", "by", "drop", "change",
                 "modify", "rename", "first", "add", "alter"}


def _spatial_to_geometry(sql: str) -> str:
    spans = _quoted_spans(sql)

    def repl(m: re.Match) -> str:
        ident = m.group(1).strip()
        if not _outside(spans, m.start(2)) or ident.lower() in _NOT_A_COLUMN:
            return m.group(0)
        return m.group(1) + "geometry"
    return _SPATIAL.sub(repl, sql)


# -- identifiers (RENAME TABLE) --------------------------------------------------------------------
_IDENT = r"(?:`(?:[^`]|``)+`|[^\s`.,;]+)"
_QUALIFIED = re.compile(rf"\s*({_IDENT})(?:\s*\.\s*({_IDENT}))?\s*")
_RENAME = re.compile(r"\s*rename\s+tables?\s+", re.I)


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _parse_rename(sql: str) -> RenameTable:
    pos = _RENAME.match(sql).end()  # type: ignore[union-attr]
    pairs = []
    while True:
        names = []
        for i in range(2):
            m = _QUALIFIED.match(sql, pos)
            if not m:
                raise ValueError(f"cannot read the table names of {sql!r}")
            a, b = m.group(1), m.group(2)
            names.append((_unquote(a), _unquote(b)) if b else (None, _unquote(a)))
            pos = m.end()
            if i == 0:
                to = re.compile(r"to\s+", re.I).match(sql, pos)
                if not to:
                    raise ValueError(f"RENAME TABLE without TO: {sql!r}")
                pos = to.end()
        pairs.append((names[0], names[1]))
        if pos >= len(sql):
            return RenameTable(pairs)
        if sql[pos] != ",":
            raise ValueError(f"unexpected text in RENAME TABLE at {sql[pos:pos + 20]!r}")
        pos += 1


# -- sqlglot nodes → model -----------------------------------------------------------------------------
def _name_of(table: exp.Table) -> Name:
    db = table.args.get("db")
    return (db.name if db is not None else None, table.name)


def _ident(node: exp.Expression) -> str:
    if isinstance(node, exp.ColumnPrefix):
        node = node.this
    if isinstance(node, exp.Ordered):
        node = node.this
    return node.name


def column_spec(cd: exp.ColumnDef, charset: str) -> tuple[ColumnSpec, bool, bool]:
    """(spec, is primary key, is unique) of a column definition; ``charset`` is the table's."""
    name = cd.name
    dtype = cd.args.get("kind")
    if not isinstance(dtype, exp.DataType):
        raise ValueError(f"column {name} has no type")
    nullable = True
    primary = unique = auto = False
    default_node = None
    col_charset, binary = charset, False
    for c in cd.args.get("constraints") or []:
        kind = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            primary, nullable = True, False
        elif isinstance(kind, exp.UniqueColumnConstraint):
            unique = True
        elif isinstance(kind, exp.AutoIncrementColumnConstraint):
            auto = True
        elif isinstance(kind, exp.DefaultColumnConstraint):
            default_node = kind.this
        elif isinstance(kind, exp.CharacterSetColumnConstraint):
            col_charset = kind.name.lower()
        elif isinstance(kind, exp.CollateColumnConstraint):
            collation = kind.name.lower()
            binary = collation.endswith("_bin")
            if col_charset == charset:
                col_charset = charset_of_collation(collation)
    if dtype.this == exp.DataType.Type.SERIAL:  # BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
        dtype = exp.DataType.build("bigint unsigned", dialect="mysql")
        nullable, auto, unique = False, True, True
    column = binlog_column(name, dtype, nullable=nullable, charset=col_charset, binary=binary)
    default, expr, has_default = None, None, False
    if default_node is not None:
        default, expr = default_of(default_node, column, dtype)
        has_default = True
    spec = ColumnSpec(name, type_sql(dtype), column, default, expr, has_default, auto)
    return spec, primary, unique


def _table_charset(props: exp.Properties | None, default: str) -> str:
    charset = default
    for p in props.expressions if props is not None else []:
        if isinstance(p, exp.CharacterSetProperty):
            return p.name.lower()
        if isinstance(p, exp.CollateProperty):
            charset = charset_of_collation(p.name)
    return charset


def _index_parts(node: exp.Expression) -> tuple[str | None, tuple[str, ...], bool, bool] | None:
    """(name, columns, unique, primary) of a table-level key definition; None for foreign keys and
    checks (no effect on rows)."""
    if isinstance(node, exp.Constraint):
        for inner in node.expressions:
            got = _index_parts(inner)
            if got is not None:
                name, cols, unique, primary = got
                return name or node.name, cols, unique, primary
        return None
    if isinstance(node, exp.PrimaryKey):
        return None, tuple(_ident(e) for e in node.expressions), True, True
    if isinstance(node, exp.IndexColumnConstraint):
        this = node.args.get("this")
        return (this.name if this is not None else None,
                tuple(_ident(e) for e in node.expressions), False, False)
    if isinstance(node, exp.UniqueColumnConstraint):
        schema = node.this
        if isinstance(schema, exp.Schema):
            this = schema.this
            return (this.name if this is not None else None,
                    tuple(_ident(e) for e in schema.expressions), True, False)
        return None
    return None


def _create_table(node: exp.Create, default_charset: str) -> CreateTable:
    target = node.this
    props = node.args.get("properties")
    if not isinstance(target, exp.Schema):
        like = next((p for p in (props.expressions if props else []) if isinstance(p, exp.LikeProperty)), None)
        if like is None:
            raise ValueError("CREATE TABLE without columns or LIKE (CREATE TABLE … SELECT is not supported)")
        return CreateTable(_name_of(target), like=_name_of(like.this))
    table = _name_of(target.this)
    charset = _table_charset(props, default_charset)
    schema = TableSchema(table[1], (), charset=charset)
    keys: list[tuple[str | None, tuple[str, ...], bool, bool]] = []
    for item in target.expressions:
        if isinstance(item, exp.ColumnDef):
            spec, primary, unique = column_spec(item, charset)
            schema = schema.add_column(spec)
            if primary:
                keys.append((None, (spec.name,), True, True))
            elif unique:
                keys.append((None, (spec.name,), True, False))
        elif isinstance(item, exp.LikeProperty):
            return CreateTable(table, like=_name_of(item.this))
        else:
            got = _index_parts(item)
            if got is not None:
                keys.append(got)
    for name, cols, unique, primary in keys:
        schema = schema.set_primary_key(cols) if primary else schema.add_index(name, cols, unique)
    return CreateTable(table, schema)


def _position(node: exp.Expression) -> tuple[bool, str | None]:
    pos = node.args.get("position")
    if pos is None:
        return False, None
    where = (pos.args.get("position") or "").upper()
    if where == "FIRST":
        return True, None
    return False, _ident(pos.this)


def _alter_changes(node: exp.Alter, charset: str) -> AlterTable:
    alter = AlterTable(_name_of(node.this))
    for action in node.args.get("actions") or []:
        alter.changes.extend(_action(action, alter, charset))
    return alter


def _action(action: exp.Expression, alter: AlterTable, charset: str) -> list[Callable[[TableSchema], TableSchema]]:
    if isinstance(action, (exp.ColumnDef, exp.ModifyColumn)):
        cd = action if isinstance(action, exp.ColumnDef) else action.this
        old = action.args.get("rename_from") if isinstance(action, exp.ModifyColumn) else None
        # Read once now so a bad definition fails at parse time; built again against the table's
        # own character set when applied.
        spec, primary, unique = column_spec(cd, charset)
        first, after = _position(cd)
        name = spec.name

        def change(s: TableSchema) -> TableSchema:
            new = column_spec(cd, s.charset)[0]
            if isinstance(action, exp.ColumnDef):
                return s.add_column(new, first=first, after=after)
            return s.change_column(old.name if old is not None else name, new, first=first, after=after)
        out = [change]
        if primary:
            out.append(lambda s: s.set_primary_key(s.primary_key + (name,)))
        if unique:
            out.append(lambda s: s.add_index(None, (name,), True))
        return out
    if isinstance(action, exp.Drop):
        kind = (action.args.get("kind") or "").upper()
        names = [t.name for t in action.args.get("tables") or []]
        if kind == "COLUMN":
            return [lambda s, n=n: s.drop_column(n) for n in names]
        if kind in ("INDEX", "KEY"):
            return [lambda s, n=n: s.drop_index(n) for n in names]
        if kind in ("FOREIGN KEY", "CONSTRAINT", "CHECK"):
            return []
        raise ValueError(f"ALTER TABLE … DROP {kind or '?'} is not supported")
    if isinstance(action, exp.DropPrimaryKey):
        return [lambda s: s.set_primary_key(())]
    if isinstance(action, exp.AddConstraint):
        out = []
        for item in action.expressions:
            got = _index_parts(item)
            if got is None:
                continue
            name, cols, unique, primary = got
            if primary:
                out.append(lambda s, cols=cols: s.set_primary_key(cols))
            else:
                out.append(lambda s, name=name, cols=cols, unique=unique: s.add_index(name, cols, unique))
        return out
    if isinstance(action, exp.AlterColumn):
        name = action.name
        if action.args.get("drop"):
            return [lambda s: s.set_default(name, None, None, False)]
        node = action.args.get("default")
        if node is None:
            return []  # SET VISIBLE / INVISIBLE and the like: rows unchanged

        def set_default(s: TableSchema) -> TableSchema:
            col = s.column(name)
            dtype = exp.DataType.build(col.type_sql, dialect="mysql")
            value, expr = default_of(node, col.column, dtype)
            return s.set_default(name, value, expr, True)
        return [set_default]
    if isinstance(action, exp.RenameColumn):
        old, new = _ident(action.this), _ident(action.args["to"])
        return [lambda s: s.rename_column(old, new)]
    if isinstance(action, exp.RenameIndex):
        old, new = action.this.name, action.args["to"].name
        return [lambda s: s.rename_index(old, new)]
    if isinstance(action, exp.AlterRename):
        alter.rename_to = _name_of(action.this)
        return []
    raise ValueError(f"ALTER TABLE action {action.sql('mysql')!r} is not supported")


_CONVERT = re.compile(rf"\s*alter\s+table\s+({_IDENT})(?:\s*\.\s*({_IDENT}))?\s+convert\s+to\s+"
                      r"(?:character\s+set|charset)\s*=?\s*(\w+)(?:\s+collate\s*=?\s*(\w+))?\s*$", re.I)


def _convert_charset(m: re.Match) -> AlterTable:
    """``ALTER TABLE t CONVERT TO CHARACTER SET cs [COLLATE c]`` (sqlglot has no node for it): the
    table's and every text column's character set change, and with them VARCHAR/CHAR byte lengths."""
    a, b = m.group(1), m.group(2)
    name: Name = (_unquote(a), _unquote(b)) if b else (None, _unquote(a))
    charset = m.group(3).lower()
    binary_collation = (m.group(4) or "").lower().endswith("_bin")

    def convert(s: TableSchema) -> TableSchema:
        cols = []
        for c in s.columns:
            if c.column.charset is not None and c.column.charset != 63:
                dtype = exp.DataType.build(c.type_sql, dialect="mysql")
                column = binlog_column(c.name, dtype, nullable=c.nullable, charset=charset, binary=binary_collation)
                c = dataclasses.replace(c, column=column)
            cols.append(c)
        return dataclasses.replace(s, columns=tuple(cols), charset=charset)
    return AlterTable(name, [convert])


def _create_index(node: exp.Create) -> AlterTable:
    index = node.this
    table = _name_of(index.args["table"])
    params = index.args.get("params")
    cols = tuple(_ident(c) for c in (params.args.get("columns") if params else None) or [])
    name, unique = index.name, bool(node.args.get("unique"))
    return AlterTable(table, [lambda s: s.add_index(name, cols, unique)])


_DDL_VERB = re.compile(r"\s*(create|alter|drop|rename|truncate)\b", re.I)
_SCHEMA_OBJECT = re.compile(r"\s*(?:create|alter|drop|truncate)\s+(?:temporary\s+|unique\s+|fulltext\s+|"
                            r"spatial\s+|or\s+replace\s+|online\s+|offline\s+|if\s+not\s+exists\s+)*"
                            r"(table|database|schema|index)\b", re.I)


# A CREATE DATABASE as a DN's binlog has one for each physical database (``CREATE DATABASE IF NOT
# EXISTS `bank_p00001` CHARACTER SET utf8mb4 COLLATE …``, one per DN and group, so their number grows
# with the DNs): read here, with what sqlglot would give (tests/test_schema_state.py) for a
# thousandth of its cost; any other form (CREATE SCHEMA, an unquoted name, a quoted option …) goes
# to sqlglot (which reads ``CREATE SCHEMA `x` COLLATE c`` as a database named '', for one).
_PLAIN_CREATE_DB = re.compile(r"\s*create\s+database\s+(?:if\s+not\s+exists\s+)?(`(?:[^`]|``)+`)"
                              r"((?:\s+(?:default\s+)?(?:character\s+set|charset|collate)(?:\s*=\s*|\s+)"
                              r"[A-Za-z0-9_]+)*)\s*", re.I)
_DB_OPTION = re.compile(r"(character\s+set|charset|collate)(?:\s*=\s*|\s+)([A-Za-z0-9_]+)", re.I)


def _plain_create_database(text: str) -> CreateDatabase | None:
    m = _PLAIN_CREATE_DB.fullmatch(text)
    if m is None:
        return None
    charset = ""    # as _table_charset: the first CHARACTER SET, else the last COLLATE's
    for kind, name in _DB_OPTION.findall(m.group(2)):
        if kind.lower() != "collate":
            charset = name.lower()
            break
        charset = charset_of_collation(name)
    return CreateDatabase(_unquote(m.group(1)), charset or None)


def parse_ddl(sql: str, *, charset: str = DEFAULT_CHARSET) -> Statement:
    """One DDL statement → a model statement. ``charset``: the database's default character set (for
    columns and tables that name none). Raises ValueError for text it cannot read.

    Cached: rebuilding a shaper from history parses the same few statements again, and sqlglot
    costs milliseconds a statement. The statements are never modified (schemas are immutable and
    ALTER changes are pure functions), so sharing them is safe."""
    return _parse_ddl(sql, charset.lower())


@lru_cache(maxsize=1024)
def _parse_ddl(sql: str, charset: str) -> Statement:
    text = strip_polardbx(sql)
    verb = _DDL_VERB.match(text)
    if not verb:
        return Other(text.split(None, 1)[0].upper() if text.split() else "")
    convert = _CONVERT.match(text)
    if convert:
        return _convert_charset(convert)
    if verb.group(1).lower() == "rename":
        if not _RENAME.match(text):
            return Other("RENAME")  # RENAME USER
        return _parse_rename(text)
    if not _SCHEMA_OBJECT.match(text) and verb.group(1).lower() != "truncate":
        return Other(verb.group(1).upper())  # CREATE VIEW / PROCEDURE / USER …
    plain = _plain_create_database(text)
    if plain is not None:
        return plain
    try:
        node = sqlglot.parse_one(_spatial_to_geometry(text), read="mysql")
    except SqlglotError as exc:
        raise ValueError(f"cannot parse: {str(exc).splitlines()[0]}") from None
    if isinstance(node, exp.Create):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("DATABASE", "SCHEMA"):
            return CreateDatabase(node.this.name, _table_charset(node.args.get("properties"), "") or None)
        if kind == "TABLE":
            return _create_table(node, charset)
        if kind == "INDEX":
            return _create_index(node)
        return Other(f"CREATE {kind}")
    if isinstance(node, exp.Drop):
        kind = (node.args.get("kind") or "").upper()
        if kind in ("DATABASE", "SCHEMA"):
            return DropDatabase(node.this.name if isinstance(node.this, exp.Table) else
                                node.args["tables"][0].name)
        if kind == "TABLE":
            return DropTable([_name_of(t) for t in node.args.get("tables") or []])
        if kind == "INDEX":
            on = node.args.get("cluster")
            if on is None:
                raise ValueError("DROP INDEX without ON <table>")
            name = node.args["tables"][0].name
            return AlterTable(_name_of(on.this), [lambda s: s.drop_index(name)])
        return Other(f"DROP {kind}")
    if isinstance(node, exp.TruncateTable):
        if node.args.get("is_database"):
            return Other("TRUNCATE DATABASE")
        return TruncateTable(_name_of(node.expressions[0]))
    if isinstance(node, exp.Alter):
        if (node.args.get("kind") or "").upper() != "TABLE":
            return Other(f"ALTER {node.args.get('kind')}")
        return _alter_changes(node, charset)
    raise ValueError(f"statement not understood ({type(node).__name__})")
