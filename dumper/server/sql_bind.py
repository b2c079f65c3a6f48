"""A statement parsed, and the session bound into it: ``parse_statement``, ``bind_session``.

sqlglot (MySQL dialect) parses each statement once; what belongs to the session — ``@@variables``,
``@user`` variables, DATABASE(), USER(), CONNECTION_ID(), NOW(), CHARSET(), GTID_SUBTRACT(…) … —
is then bound into a copy of the tree as literals (``bind_session``), so a SELECT of constants (nearly
every connect-time query of a driver or connector) is answered without an engine
(``constant_row``), and MySQL names its columns as typed (``select_item_texts``, ``column_names``).
``SessionView`` is what a statement may read of its session and server.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from dumper.gtid import GtidError, format_gtid_set, is_subset, parse_gtid_set, subtract
from dumper.server import protocol as p
from dumper.server.errors import (
    ER_UNKNOWN_SYSTEM_VARIABLE,
    QueryError,
    syntax_error,
)
from dumper.server.mysql_variables import selected_value
from dumper.server.show_schema import CHARSETS


@dataclass
class SessionView:
    """What a statement may read of its session and server (built by the query handler)."""

    conn_id: int
    user: str
    host: str
    db: str | None
    user_vars: dict[str, object]
    variable: Callable[[str, str], object]         # (name, "session"|"global") → value; KeyError if unknown
    version: str
    server_variables: Callable[[str], list[tuple[str, object]]]   # "session"|"global" → (name, value) rows
    status_rows: Callable[[], list[tuple[str, object]]]
    processlist_rows: Callable[[], list[tuple]]
    time_budget: float                              # seconds
    max_rows: int
    # told the running statement's interrupt while it runs, then None (KILL QUERY calls it)
    running: Callable[[Callable[[], None] | None], None] = lambda interrupt: None


class Answer:
    """A result: column names, MySQL column types, rows of Python values."""

    def __init__(self, names: list[str], types: list[int], rows: list[list[object]]) -> None:
        self.names = names
        self.types = types
        self.rows = rows

    def columns(self) -> list[p.Column]:
        return [p.Column(n, t) for n, t in zip(self.names, self.types, strict=True)]


# -- parsing ------------------------------------------------------------------------------------------

def load_dialects() -> None:
    """Load sqlglot's MySQL and DuckDB dialects now, in one thread. sqlglot loads a dialect at its
    first use; two threads first using it at once (the event loop and a query worker) can see the
    registry before it holds the dialect, and one parses with the generic one: `SET NAMES utf8`
    became a whole command once in a long run."""
    sqlglot.parse_one("SET NAMES utf8", read="mysql").sql(dialect="duckdb")
    sqlglot.parse_one("SELECT 1", read="mysql").sql(dialect="duckdb")


def parse_statement(text: str) -> exp.Expression:
    """One statement (comments already removed: ``sqltext``) as a sqlglot tree; ERR 1064 if it is not
    SQL that sqlglot's MySQL dialect reads."""
    try:
        trees = sqlglot.parse(text, read="mysql")
    except SqlglotError as exc:
        raise syntax_error(text, str(exc).splitlines()[0]) from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise syntax_error(text)
    return trees[0]


_ITEM_STOP = {TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING, TokenType.ORDER_BY,
              TokenType.LIMIT, TokenType.UNION, TokenType.INTO, TokenType.WINDOW, TokenType.FOR,
              TokenType.LOCK, TokenType.SEMICOLON, TokenType.EXCEPT, TokenType.INTERSECT}
_SELECT_MODIFIERS = {"distinct", "all", "distinctrow", "high_priority", "straight_join", "sql_small_result",
                     "sql_big_result", "sql_buffer_result", "sql_no_cache", "sql_cache", "sql_calc_found_rows"}


def select_item_texts(text: str) -> list[str] | None:
    """The text of each item of the outermost SELECT list, as typed: MySQL names an unaliased
    column by it (``@@session.auto_increment_increment``, ``version()``, ``1+1``)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("mysql").tokenize(text)
    except SqlglotError:
        return None
    start = 0
    if tokens and tokens[0].token_type == TokenType.WITH:     # WITH … AS (…) SELECT: the main SELECT's items
        depth = 0
        while start < len(tokens) - 1 and not (depth == 0 and tokens[start].token_type == TokenType.SELECT):
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tokens[start].token_type, 0)
            start += 1
    if not tokens or tokens[start].token_type != TokenType.SELECT:
        return None
    items: list[str] = []
    depth = 0
    first = None
    last = None
    for tok in tokens[start + 1:]:
        if depth == 0 and first is None and tok.text.lower() in _SELECT_MODIFIERS:
            continue
        if tok.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
        elif tok.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1
        elif depth == 0 and (tok.token_type in _ITEM_STOP or tok.token_type == TokenType.COMMA):
            if first is None:
                return None
            items.append(text[first:last + 1])
            first = None
            if tok.token_type != TokenType.COMMA:
                return items
            continue
        if first is None:
            first = tok.start
        last = tok.end
    if first is not None:
        items.append(text[first:last + 1])
    return items


def column_names(tree: exp.Expression, texts: list[str] | None) -> list[str] | None:
    """MySQL's names for the select list (of a UNION: its first SELECT's), read from the statement as
    the client wrote it (before ``bind_session``): the alias, a column's own name (``t.TABLE_NAME`` is
    ``TABLE_NAME``), a string literal's value (``_utf8mb4'x'``, ``N'y'`` and ``'a' 'b'`` too), else
    the item's text."""
    while isinstance(tree, exp.Union):
        tree = tree.this
    if not isinstance(tree, exp.Select):
        return None
    items = tree.expressions
    if texts is None or len(texts) != len(items) or any(isinstance(e, exp.Star) or e.is_star for e in items):
        return None
    names = []
    for item, text in zip(items, texts, strict=True):
        value = item.expression if isinstance(item, exp.Introducer) else item
        if isinstance(item, exp.Alias):
            names.append(item.alias)
        elif isinstance(item, exp.Column):
            names.append(item.name)
        elif isinstance(value, exp.Literal) and value.is_string:
            names.append(value.this)
        elif isinstance(item, exp.National):
            names.append(item.name)
        elif (isinstance(item, exp.Concat) and text.lstrip()[:1] in ("'", '"')
              and all(isinstance(e, exp.Literal) and e.is_string for e in item.expressions)):
            names.append("".join(e.this for e in item.expressions))     # 'a' 'b': adjacent literals
        else:
            names.append(text.strip())
    return names


# -- binding the session ------------------------------------------------------------------------------

def literal(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, (int, float, Decimal)):
        return exp.Literal.number(value) if value >= 0 else exp.Neg(this=exp.Literal.number(-value))
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.strftime("%Y-%m-%d %H:%M:%S")), exp.DataType.Type.DATETIME)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return exp.Literal.string(str(value))


def _gtid_call(name: str, args: list[object]) -> object:
    if len(args) != 2:
        raise QueryError(1582, f"Incorrect parameter count in the call to native function '{name}'", "42000")
    if any(a is None for a in args):
        return None
    try:
        a, b = (parse_gtid_set(str(x)) for x in args)
    except GtidError as exc:
        raise QueryError(1772, str(exc).replace("malformed", "Malformed")) from None
    return format_gtid_set(subtract(a, b)) if name == "GTID_SUBTRACT" else int(is_subset(a, b))


def constant_value(node: exp.Expression) -> tuple[bool, object]:
    """(True, value) for a literal the binding made (or the client wrote)."""
    if isinstance(node, exp.Null):
        return True, None
    if isinstance(node, exp.Boolean):
        return True, int(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.this
        text = node.this
        return True, int(text) if re.fullmatch(r"\d+", text) else Decimal(text)
    if isinstance(node, exp.Neg):
        ok, value = constant_value(node.this)
        if ok and isinstance(value, (int, Decimal)):
            return True, -value
    return False, None


def _clock_literal(clock: dt.datetime, kind: str, precision: exp.Expression | None) -> exp.Expression:
    """NOW(n) / UTC_TIMESTAMP(n) / CURTIME(n) …: the statement's one moment (``clock``, local) with n
    fractional digits, a DATETIME, or for a time of day a TIME (an INTERVAL here, as MySQL's TIME
    spans ±838 hours and subtracts)."""
    ok, digits = constant_value(precision) if precision is not None else (True, 0)
    if not ok or not isinstance(digits, int) or not 0 <= digits <= 6:
        raise QueryError(1426, f"Too-big precision {precision.sql('mysql') if precision else ''} specified. "
                               "Maximum is 6.", "42000")
    moment = clock if kind in ("local", "time") else clock.astimezone(dt.UTC).replace(tzinfo=None)
    text = moment.strftime("%Y-%m-%d %H:%M:%S") + (f".{moment.microsecond:06d}"[:digits + 1] if digits else "")
    if kind in ("time", "utc_time"):
        return exp.cast(exp.Literal.string(text[11:]), exp.DataType.Type.INTERVAL)
    return exp.cast(exp.Literal.string(text), exp.DataType.Type.DATETIME)


# Functions and keywords that read the clock: whether they give the local or UTC time, a date or a time.
_CLOCKS: dict[str, str] = {"NOW": "local", "SYSDATE": "local", "LOCALTIME": "local", "LOCALTIMESTAMP": "local",
                           "CURRENT_TIMESTAMP": "local", "UTC_TIMESTAMP": "utc", "CURTIME": "time",
                           "CURRENT_TIME": "time", "UTC_TIME": "utc_time"}
_CLOCK_NODES: list[tuple[type, str]] = [(exp.CurrentTimestamp, "local"), (exp.CurrentDatetime, "local"),
                                        (exp.Localtime, "local"), (exp.Localtimestamp, "local"),
                                        (exp.UtcTimestamp, "utc"), (exp.CurrentTime, "time"),
                                        (exp.UtcTime, "utc_time")]


def _charset_of(node: exp.Expression, view: SessionView) -> str:
    """CHARSET(x): what CONVERT(… USING cs) or an introducer names, ``binary`` for numbers, utf8mb3
    for information_schema's columns, else the connection's character set."""
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.CHARACTER_SET:
        name = node.to.args["kind"].name.lower()
        return "utf8mb3" if name == "utf8" else name
    if isinstance(node, exp.Introducer):
        return node.name.lstrip("_").lower()
    if isinstance(node, exp.Cast) and node.to.this in (exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY):
        return "binary"
    numeric = isinstance(node, (exp.Binary, exp.Neg)) and not isinstance(node, exp.DPipe)   # 1 + 1, 1 = 1
    if numeric or (isinstance(node, exp.Literal) and not node.is_string):
        return "binary"
    if isinstance(node, exp.Column):
        return "utf8mb3"
    return str(view.variable("character_set_connection", "session"))


def _collation_of(node: exp.Expression, view: SessionView) -> str:
    charset = _charset_of(node, view)
    if charset == str(view.variable("character_set_connection", "session")):
        return str(view.variable("collation_connection", "session"))
    return next((coll for cs, coll, _, _ in CHARSETS if cs == charset), "binary")


def bind_session(tree: exp.Expression, view: SessionView) -> exp.Expression:
    """The tree with every value that belongs to the session or server replaced by a literal."""
    clock = dt.datetime.now()              # one moment per statement, as MySQL's
    now = clock.replace(microsecond=0)

    def bind(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.SessionParameter):
            name = node.name.lower()
            scope = "global" if str(node.args.get("kind") or "").lower() == "global" else "session"
            try:
                return literal(selected_value(name, view.variable(name, scope)))
            except KeyError:
                raise QueryError(ER_UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'") from None
        if isinstance(node, exp.Parameter):
            return literal(view.user_vars.get(node.name.lower()))
        if isinstance(node, exp.CurrentSchema):
            return literal(view.db)
        if isinstance(node, exp.CurrentUser):
            return literal(f"{view.user}@%")
        if isinstance(node, exp.SessionUser):
            return literal(f"{view.user}@{view.host}")
        if isinstance(node, exp.CurrentVersion):
            return literal(view.version)
        if isinstance(node, exp.Uuid):
            return literal(str(uuid.uuid4()))
        for kind_of_node, kind in _CLOCK_NODES:
            if isinstance(node, kind_of_node):
                return _clock_literal(clock, kind, node.args.get("this"))
        if isinstance(node, exp.CurrentDate):
            return literal(now.date())
        if isinstance(node, exp.UtcDate):
            return literal(clock.astimezone(dt.UTC).date())
        if isinstance(node, exp.Collation):
            return literal(_collation_of(node.this, view))
        if isinstance(node, exp.Anonymous):
            name = str(node.this).upper()
            if name in _CLOCKS and len(node.expressions) <= 1:
                return _clock_literal(clock, _CLOCKS[name], node.expressions[0] if node.expressions else None)
            if name == "CHARSET" and len(node.expressions) == 1:
                return literal(_charset_of(node.expressions[0], view))
            fixed = _SESSION_FUNCTIONS.get(name)
            if fixed is not None and (not node.expressions or name in _ANY_ARGUMENTS):
                return literal(fixed(view, now))
            if name in ("GTID_SUBTRACT", "GTID_SUBSET"):
                args = [bind_session(a, view) for a in node.expressions]
                values = [constant_value(a) for a in args]
                if all(ok for ok, _ in values):
                    return literal(_gtid_call(name, [v for _, v in values]))
        return node

    return tree.transform(bind, copy=True)


_ANY_ARGUMENTS = frozenset({"BINLOG_GTID_POS"})
_SESSION_FUNCTIONS: dict[str, Callable[[SessionView, dt.datetime], object]] = {
    "USER": lambda v, now: f"{v.user}@{v.host}",
    "SYSTEM_USER": lambda v, now: f"{v.user}@{v.host}",
    "CONNECTION_ID": lambda v, now: v.conn_id,
    "LAST_INSERT_ID": lambda v, now: 0,
    "FOUND_ROWS": lambda v, now: 0,
    "ROW_COUNT": lambda v, now: -1,
    "CURDATE": lambda v, now: now.date(),
    "UTC_DATE": lambda v, now: now.astimezone(dt.UTC).date(),
    "UNIX_TIMESTAMP": lambda v, now: int(now.timestamp()),
    "BINLOG_GTID_POS": lambda v, now: None,   # MariaDB replicas ask; a position here has no MariaDB GTID
}


def constant_row(tree: exp.Expression) -> list[object] | None:
    """The values of a SELECT of constants only (no FROM but DUAL, no WHERE …), else None."""
    if not isinstance(tree, exp.Select):
        return None
    src = tree.args.get("from_") or tree.args.get("from")     # sqlglot 26+ names it from_
    if src is not None and not (isinstance(src.this, exp.Table) and src.this.name.lower() == "dual"
                                and not src.this.db):
        return None
    if any(tree.args.get(k) for k in ("where", "group", "having", "order", "joins", "offset", "distinct")):
        return None
    values = []
    for item in tree.expressions:
        ok, value = constant_value(item.this if isinstance(item, exp.Alias) else item)
        if not ok:
            return None
        values.append(value)
    return values


def constant_limit(tree: exp.Select) -> int | None:
    limit = tree.args.get("limit")
    if limit is None:
        return None
    ok, value = constant_value(limit.expression)
    return int(value) if ok and value is not None else None
