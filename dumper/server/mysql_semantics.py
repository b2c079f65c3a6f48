"""MySQL's semantics on DuckDB: ``mysql_semantics`` rewrites a bound statement's tree where DuckDB
would answer otherwise than MySQL (case-insensitive LIKE and REGEXP, implicit string to number,
division's extra decimals, date arithmetic on string literals and compound INTERVAL units,
GROUP_CONCAT, JSON printing, non-grouped columns, …); ``MACROS`` and ``register_functions`` add the
MySQL functions DuckDB lacks (SUBSTRING_INDEX, STRCMP, FIND_IN_SET, CRC32, UNIX_TIMESTAMP, …).
Each rule is checked against a real MariaDB by ``tests/test_consumers_statements.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import zlib
from collections.abc import Callable

from sqlglot import exp

from dumper.server import protocol as p
from dumper.server.errors import QueryError
from dumper.server.infoschema import DYNAMIC_TABLES, INT_COLUMNS, STATIC_TABLES
from dumper.server.sql_bind import constant_value

_T = exp.DataType.Type
# How MySQL reads a string where it wants a date, a datetime or a time.
_DATE_TEXT = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
_DATETIME_TEXT = re.compile(r"\d{4}-\d{1,2}-\d{1,2}[ T]\d{1,2}:\d{1,2}(?::\d{1,2}(?:\.\d{1,6})?)?")
_TIME_TEXT = re.compile(r"-?\d{1,3}:\d{1,2}(?::\d{1,2}(?:\.\d{1,6})?)?")
_NUMBER_PREFIX = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE_UNITS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY"})
# MySQL's compound INTERVAL units and the parts their value ('1:30', '2 3:04') gives, left to right.
_COMPOUND_UNITS = {"YEAR_MONTH": ("year", "month"), "DAY_HOUR": ("day", "hour"),
                   "DAY_MINUTE": ("day", "hour", "minute"), "DAY_SECOND": ("day", "hour", "minute", "second"),
                   "HOUR_MINUTE": ("hour", "minute"), "HOUR_SECOND": ("hour", "minute", "second"),
                   "MINUTE_SECOND": ("minute", "second")}
# Functions of one date, datetime or time: a string argument is read as the value it spells.
_TEMPORAL_FUNCTIONS = (exp.Year, exp.Month, exp.Day, exp.DayOfMonth, exp.DayOfYear, exp.Quarter, exp.Hour,
                       exp.Minute, exp.Second, exp.Dayname, exp.Monthname, exp.LastDay, exp.TsOrDsToDate,
                       exp.WeekOfYear, exp.DateDiff, exp.TimestampDiff, exp.Extract)
_UNSIGNED_64 = exp.cast(exp.Literal.number("18446744073709551615"), _T.INT128)


def _temporal_kind(node: exp.Expression) -> str | None:
    """'date', 'datetime' or 'time' when the tree shows the value's temporal type."""
    if isinstance(node, exp.Cast):
        return {_T.DATE: "date", _T.DATETIME: "datetime", _T.TIMESTAMP: "datetime", _T.TIME: "time",
                _T.INTERVAL: "time"}.get(node.to.this)
    return "date" if isinstance(node, exp.TsOrDsToDate) else None


def _typed(node: exp.Expression) -> exp.Expression:
    """A string literal where MySQL wants a temporal value, as the DATE, DATETIME or TIME it spells (a
    TIME is an INTERVAL here: MySQL's spans ±838 hours and subtracts); anything else as it is."""
    if isinstance(node, exp.Literal) and node.is_string:
        text = node.this.strip()
        for pattern, to in ((_DATETIME_TEXT, _T.DATETIME), (_DATE_TEXT, _T.DATE), (_TIME_TEXT, _T.INTERVAL)):
            if pattern.fullmatch(text):
                return exp.cast(exp.Literal.string(text), to)
    return node


def _interval(amount: exp.Expression, unit: str) -> tuple[exp.Expression, int]:
    """MySQL's ``INTERVAL amount unit`` as DuckDB's, with its sign: a compound unit (HOUR_MINUTE '1:30')
    has no DuckDB form, so its parts are spelled out ('1 hour 30 minute')."""
    parts = _COMPOUND_UNITS.get(unit)
    if parts is None:
        return exp.Interval(this=amount, unit=exp.var(unit)), 1
    ok, value = constant_value(amount)
    if not ok or value is None:
        raise QueryError(p.ER_NOT_SUPPORTED, f"INTERVAL … {unit} takes a constant here", "42000")
    text = str(value).strip()
    numbers = re.findall(r"\d+", text)[-len(parts):]         # too few: the leftmost parts are left out
    spelled = " ".join(f"{n} {part}" for n, part in zip(numbers, parts[len(parts) - len(numbers):], strict=True))
    return exp.Interval(this=exp.Literal.string(spelled or "0 second")), -1 if text.startswith("-") else 1


def _shift(base: exp.Expression, interval: exp.Interval, subtract: bool) -> exp.Expression:
    """``base ± INTERVAL …`` (DATE_ADD, DATE_SUB, ADDDATE, ``+ INTERVAL``): a DATE moved by days or
    more stays a DATE, as in MySQL (DuckDB makes it a TIMESTAMP)."""
    unit = (interval.text("unit") or "DAY").upper()
    step, sign = _interval(interval.this, unit)
    base = _typed(base)
    moved = (exp.Sub if (sign < 0) != subtract else exp.Add)(this=base, expression=step)
    return exp.cast(moved, _T.DATE) if _temporal_kind(base) == "date" and unit in _DATE_UNITS else moved


def _as_double(node: exp.Expression) -> exp.Expression:
    """A string literal in arithmetic as MySQL reads it: the number it starts with, a DOUBLE."""
    if isinstance(node, exp.Literal) and node.is_string:
        m = _NUMBER_PREFIX.match(node.this)
        value = float(m.group(0)) if m else 0.0
        return exp.cast(exp.Literal.number(repr(value)), _T.DOUBLE)
    return node


def _exact_scale(node: exp.Expression) -> int | None:
    """The scale of an exact (integer or DECIMAL) value, None for a DOUBLE or a value of unknown type."""
    if isinstance(node, exp.Literal) and not node.is_string:
        text = node.this.lower()
        return None if "e" in text else len(text.partition(".")[2])
    if isinstance(node, (exp.Paren, exp.Neg, exp.Sum, exp.Max, exp.Min, exp.Abs)):
        return _exact_scale(node.this)
    if isinstance(node, exp.Column):
        return 0 if node.name.upper() in INT_COLUMNS else None
    if isinstance(node, exp.Count):
        return 0
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        a, b = _exact_scale(node.this), _exact_scale(node.expression)
        if a is None or b is None:
            return None
        return a + b if isinstance(node, exp.Mul) else max(a, b)
    if isinstance(node, exp.Cast):
        if node.to.this in (_T.BIGINT, _T.UBIGINT, _T.INT, _T.UINT):
            return 0
        if node.to.this == _T.DECIMAL:
            params = node.to.expressions
            return int(params[1].name) if len(params) > 1 else 0
    return None


def _decimal(node: exp.Expression, scale: int) -> exp.Expression:
    """MySQL's exact division (and AVG): a DECIMAL with div_precision_increment (4) more digits than
    the dividend has (10 / 4 is 2.5000), where DuckDB gives a DOUBLE."""
    return exp.cast(node, exp.DataType.build(f"DECIMAL(38, {min(scale + 4, 30)})"))


def _group_concat(node: exp.GroupConcat) -> exp.Expression:
    """GROUP_CONCAT(DISTINCT x ORDER BY k): DuckDB wants DISTINCT's order keys among its arguments,
    MySQL does not; the ordered list of x without repeats (``group_concat_distinct``) is the same."""
    order = node.this
    if not (isinstance(order, exp.Order) and isinstance(order.this, exp.Distinct)):
        return node
    args = order.this.expressions
    if {o.this.sql() for o in order.expressions} <= {a.sql() for a in args}:
        return node
    value = args[0] if len(args) == 1 else exp.Concat(expressions=args)
    agg = exp.ArrayAgg(this=exp.Order(this=exp.cast(value, _T.TEXT), expressions=order.expressions))
    return exp.Anonymous(this="group_concat_distinct",
                         expressions=[agg, node.args.get("separator") or exp.Literal.string(",")])


def _anonymous(node: exp.Anonymous) -> exp.Expression:
    """MySQL functions sqlglot leaves by name that DuckDB lacks or spells otherwise."""
    name = str(node.this).upper()
    args = node.expressions
    if name == "MID":
        return exp.Substring(this=args[0], start=args[1], length=args[2] if len(args) > 2 else None)
    if name in ("ADDDATE", "SUBDATE") and len(args) == 2:
        step = args[1] if isinstance(args[1], exp.Interval) else exp.Interval(this=args[1], unit=exp.var("DAY"))
        return _shift(args[0], step, name == "SUBDATE")
    if name == "TIMEDIFF" and len(args) == 2:
        return exp.Sub(this=_typed(args[0]), expression=_typed(args[1]))
    if name == "TIME_TO_SEC" and len(args) == 1:
        value = _typed(args[0])
        if _temporal_kind(value) == "datetime":
            value = exp.cast(value, _T.TIME)
        return exp.cast(exp.Anonymous(this="epoch", expressions=[value]), _T.BIGINT)
    if name == "SEC_TO_TIME" and len(args) == 1:
        return exp.Anonymous(this="to_seconds", expressions=args)
    if name == "UNIX_TIMESTAMP" and len(args) == 1:
        return exp.Anonymous(this="mysql_unix_timestamp", expressions=[exp.cast(_typed(args[0]), _T.TEXT)])
    if name in ("CRC32", "OCTET_LENGTH") and len(args) == 1:
        return exp.Anonymous(this="mysql_crc32" if name == "CRC32" else "strlen",
                             expressions=[exp.cast(args[0], _T.TEXT)])
    if name == "FIELD" and len(args) >= 2:
        return exp.Case(ifs=[exp.If(this=exp.EQ(this=args[0].copy(), expression=a), true=exp.Literal.number(i))
                             for i, a in enumerate(args[1:], 1)], default=exp.Literal.number(0))
    if name == "JSON_ARRAY":
        return _json_text(node)
    return node


def _json_text(node: exp.Expression) -> exp.Expression:
    """A JSON value as MySQL writes it ({"a": 1}, [1, 2]), not DuckDB's compact form."""
    if node.find_ancestor(exp.JSONObject, exp.JSONArray, exp.Anonymous):
        return node        # inside another JSON constructor (or function): that one writes it
    return exp.Anonymous(this="mysql_json", expressions=[exp.cast(node, _T.TEXT)])


def _adapt(node: exp.Expression) -> exp.Expression:
    """One node of the tree in MySQL's sense, for DuckDB (its children are done already)."""
    if isinstance(node, exp.Like):            # case-insensitive collation, and \ escapes as in MySQL
        ilike = exp.ILike(this=node.this, expression=node.expression, negate=node.args.get("negate"))
        return ilike if isinstance(node.parent, exp.Escape) else exp.Escape(this=ilike,
                                                                            expression=exp.Literal.string("\\"))
    if isinstance(node, exp.RegexpLike) and not node.args.get("flag"):
        node.set("flag", exp.Literal.string("i"))
    if isinstance(node, exp.Select):
        src = node.args.get("from_") or node.args.get("from")
        if src is not None and isinstance(src.this, exp.Table) and src.this.name.lower() == "dual" \
                and not src.this.db and not node.args.get("joins"):
            node.set("from_" if "from_" in node.args else "from", None)      # FROM DUAL: no table
    if isinstance(node, (exp.DateAdd, exp.DateSub)):
        return _shift(node.this, exp.Interval(this=node.expression, unit=node.args.get("unit")),
                      isinstance(node, exp.DateSub))
    if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
        return _shift(node.this, node.expression, isinstance(node, exp.Sub))
    if isinstance(node, exp.Add) and isinstance(node.this, exp.Interval):
        return _shift(node.expression, node.this, False)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)):
        node.set("this", _as_double(node.this))
        node.set("expression", _as_double(node.expression))
    if isinstance(node, exp.Div):
        a, b = _exact_scale(node.this), _exact_scale(node.expression)
        if a is not None and b is not None:
            return _decimal(node, a)
    if isinstance(node, exp.Avg) and (scale := _exact_scale(node.this)) is not None:
        return _decimal(node, scale)
    if isinstance(node, _TEMPORAL_FUNCTIONS):
        for key in ("this", "expression"):
            if isinstance(node.args.get(key), exp.Literal):
                node.set(key, _typed(node.args[key]))
        if isinstance(node, exp.Extract) and node.name.upper() == "YEAR_MONTH":
            value = node.expression
            return exp.Add(this=exp.Mul(this=exp.Year(this=value), expression=exp.Literal.number(100)),
                           expression=exp.Month(this=value.copy()))
    if isinstance(node, exp.DayOfWeek):                  # MySQL: 1 = Sunday; DuckDB: 0
        return exp.Add(this=exp.DayOfWeek(this=_typed(node.this)), expression=exp.Literal.number(1))
    if isinstance(node, exp.Length) and node.args.get("binary"):     # LENGTH counts bytes
        return exp.Anonymous(this="strlen", expressions=[exp.cast(node.this, _T.TEXT)])
    if isinstance(node, exp.BitwiseNot):                 # an UNSIGNED BIGINT in MySQL: ~0 is 2^64 - 1
        return exp.BitwiseAnd(this=exp.BitwiseNot(this=exp.cast(node.this, _T.INT128)),
                              expression=_UNSIGNED_64.copy())
    if isinstance(node, exp.Introducer):                 # _utf8mb4'x': the string
        return node.expression
    if isinstance(node, exp.National):
        return exp.Literal.string(node.name)
    if isinstance(node, exp.Cast) and node.to.this == _T.CHARACTER_SET:   # CONVERT(x USING cs), CHAR CHARACTER SET
        return exp.cast(node.this, _T.TEXT)
    if isinstance(node, exp.Elt):
        return exp.Case(this=node.this, ifs=[exp.If(this=exp.Literal.number(i), true=e)
                                             for i, e in enumerate(node.expressions, 1)])
    if isinstance(node, exp.UnixToTime):                 # FROM_UNIXTIME: the session's (local) time
        moment = exp.Anonymous(this="mysql_from_unixtime", expressions=[exp.cast(node.this, _T.DOUBLE)])
        return exp.TimeToStr(this=moment, format=node.args["format"]) if node.args.get("format") else moment
    if isinstance(node, exp.GroupConcat):
        return _group_concat(node)
    if isinstance(node, (exp.JSONObject, exp.JSONArray, exp.JSONExtract)):
        return _json_text(node)
    if isinstance(node, exp.Anonymous):
        return _anonymous(node)
    return node


def _any_value(select: exp.Select) -> None:
    """MySQL lets a grouped SELECT name a column it does not group by (any row's value: pg_chameleon's
    index query reads ``t.table_schema`` in a correlated subquery); DuckDB wants ANY_VALUE(column)."""
    group = select.args.get("group")
    if group is None and not any(_aggregates(item) for item in select.expressions):
        return
    sources = _sources(select)
    keys = []
    for g in group.expressions if group else []:
        ok, position = constant_value(g)          # GROUP BY 2: the second item of the select list
        if ok and isinstance(position, int) and 0 < position <= len(select.expressions):
            item = select.expressions[position - 1]
            g = item.this if isinstance(item, exp.Alias) else item
        keys.append(g)
    grouped = {g.sql().lower() for g in keys}
    grouped_kinds = tuple({type(g) for g in keys})      # only a node of these kinds can be a GROUP BY key
    grouped_names = {g.name.lower() for g in keys if isinstance(g, exp.Column)}
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}

    def visit(node: exp.Expression, inner: frozenset[str] | None) -> None:
        """``inner``: the sources of the subqueries ``node`` is in (None: in ``select`` itself)."""
        if isinstance(node, (exp.AggFunc, exp.Window)) or \
                (isinstance(node, grouped_kinds) and node.sql().lower() in grouped):
            return
        if isinstance(node, exp.Column):
            table = node.table.lower()
            mine = (table in sources and (inner is None or table not in inner)) if table else inner is None
            alias = not table and inner is None and node.name.lower() in aliases
            if mine and not alias and node.name.lower() not in grouped_names:
                node.replace(exp.AnyValue(this=node.copy()))
            return
        if isinstance(node, exp.Select):
            inner = (inner or frozenset()) | _sources(node)
        for child in list(node.iter_expressions()):
            visit(child, inner)

    for item in select.expressions:
        if isinstance(item, exp.Alias) and item.alias.lower() in grouped_names - _TABLE_COLUMNS:
            continue                                  # GROUP BY its alias: grouped as it is
        visit(item.this if isinstance(item, exp.Alias) else item, None)
    for key in ("having", "order"):
        if select.args.get(key) is not None:
            visit(select.args[key], None)


# The columns of the tables a SELECT reads here: GROUP BY one of these names the column, not an alias
# (MySQL looks in FROM before the select list, DuckDB too).
_TABLE_COLUMNS = frozenset(c.lower() for cols in [*STATIC_TABLES.values(), *DYNAMIC_TABLES.values()] for c in cols)


def _sources(select: exp.Select) -> set[str]:
    """The names a SELECT's FROM and JOINs give their tables (aliases, else names), lower-case."""
    src = select.args.get("from_") or select.args.get("from")
    return {s.alias_or_name.lower() for s in ([src.this] if src else []) + [j.this for j in
                                                                           select.args.get("joins") or []]}


def _aggregates(node: exp.Expression) -> bool:
    """Whether ``node`` aggregates its own query's rows (not a subquery's, not a window's)."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, (exp.Select, exp.Subquery, exp.Window)):
        return False
    return any(_aggregates(c) for c in node.iter_expressions())


def mysql_semantics(tree: exp.Expression) -> exp.Expression:
    """The statement as DuckDB must read it to answer what MySQL answers (a case-insensitive collation,
    MySQL's LIKE escapes, date arithmetic on strings, exact division, unsigned bit operations, the
    functions DuckDB lacks or names otherwise …): each node rewritten after its children."""
    for select in list(tree.find_all(exp.Select)):
        _any_value(select)
    for node in reversed(list(tree.dfs())):
        new = _adapt(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


# MySQL functions DuckDB lacks, as macros (shared by every connection to the database).
MACROS = [
    "CREATE MACRO substring_index(s, d, n) AS CASE WHEN n = 0 THEN '' WHEN n > 0 THEN "
    "array_to_string(string_split(s, d)[1:n], d) ELSE array_to_string(string_split(s, d)[n:], d) END",
    "CREATE MACRO strcmp(a, b) AS CASE WHEN a IS NULL OR b IS NULL THEN NULL WHEN a = b THEN 0 "
    "WHEN a < b THEN -1 ELSE 1 END",
    "CREATE MACRO find_in_set(s, l) AS CASE WHEN s IS NULL OR l IS NULL THEN NULL WHEN l = '' THEN 0 "
    "ELSE coalesce(list_position(string_split(l, ','), s), 0) END",
    "CREATE MACRO quote(s) AS CASE WHEN s IS NULL THEN 'NULL' ELSE '''' || replace(replace(replace("
    "CAST(s AS VARCHAR), '\\', '\\\\'), '''', '\\'''), chr(0), '\\0') || '''' END",
    "CREATE MACRO json_unquote(j) AS CASE WHEN json_valid(j) AND json_type(CAST(j AS JSON)) = 'VARCHAR' "
    "THEN json_extract_string(CAST(j AS JSON), '$') ELSE CAST(j AS VARCHAR) END",
    # GROUP_CONCAT(DISTINCT …): the ordered values without repeats or NULLs; NULL when there are none
    "CREATE MACRO group_concat_distinct(l, sep) AS CASE WHEN len(list_filter(l, lambda v: v IS NOT NULL)) = 0 "
    "THEN NULL ELSE array_to_string(list_filter(l, lambda v, i: v IS NOT NULL AND list_position(l, v) = i), "
    "sep) END",
]


def _unix_timestamp(text: str) -> object:
    """UNIX_TIMESTAMP('2024-01-01 00:00:00'): seconds since the epoch of that local time."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return int(moment.timestamp())


def _from_unixtime(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds)


def _json_key(key: str) -> tuple[int, str]:
    return len(key.encode()), key


def _mysql_json(text: str) -> str:
    """JSON text as MySQL writes a JSON value: ", " and ": " between items, an object's keys by length
    then bytes."""
    def normal(value: object) -> object:
        if isinstance(value, dict):
            return {k: normal(value[k]) for k in sorted(value, key=_json_key)}
        if isinstance(value, list):
            return [normal(v) for v in value]
        return value
    try:
        return json.dumps(normal(json.loads(text)), separators=(", ", ": "), ensure_ascii=False)
    except ValueError:
        return text


# MySQL functions that need Python: (name, function, parameter types, result type).
FUNCTIONS: list[tuple[str, Callable[..., object], list[str], str]] = [
    ("mysql_crc32", lambda s: zlib.crc32(s.encode()), ["VARCHAR"], "UBIGINT"),
    ("mysql_unix_timestamp", _unix_timestamp, ["VARCHAR"], "BIGINT"),
    ("mysql_from_unixtime", _from_unixtime, ["DOUBLE"], "TIMESTAMP"),
    ("mysql_json", _mysql_json, ["VARCHAR"], "VARCHAR"),
]
