"""MySQL column types of the schema model: a parsed type → the binlog ``Column`` (type byte and meta as
a TABLE_MAP carries them), character sets, DEFAULT literals → values in the binlog library's Python
conventions (``binlog.columns``), implicit defaults, and the SQL_MODE bit mask.

Only cold paths (DDL) come here; the row hot path uses the ``Column``s built once per table version.
"""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

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
from binlog.value_formats import parse_datetime_text

log = logging.getLogger(__name__)
D = exp.DataType.Type

# -- character sets --------------------------------------------------------------------------------
# Bytes per character (mbmaxlen): CHAR/VARCHAR lengths are characters, TABLE_MAP metas are bytes.
MBMAXLEN = {"utf8mb4": 4, "utf8": 3, "utf8mb3": 3, "latin1": 1, "binary": 1, "ascii": 1, "gbk": 2,
            "gb18030": 4, "gb2312": 2, "big5": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "ucs2": 2,
            "ujis": 3, "sjis": 2, "euckr": 2, "cp1251": 1, "cp1252": 1, "latin2": 1, "greek": 1,
            "hebrew": 1, "koi8r": 1, "tis620": 1, "cp932": 2, "eucjpms": 3}
# Default collation id of a character set: only the ids MariaDB knows are ever written.
MARIADB_CHARSET_IDS = {"utf8mb4": 45, "utf8": 33, "utf8mb3": 33, "latin1": 8, "binary": 63}
DEFAULT_CHARSET = "utf8mb4"


def charset_of_collation(collation: str) -> str:
    """``utf8mb4_general_ci`` → ``utf8mb4``; ``binary`` → ``binary``."""
    name = collation.lower()
    if name == "binary":
        return "binary"
    for charset in sorted(MBMAXLEN, key=len, reverse=True):
        if name.startswith(charset + "_"):
            return charset
    return name.split("_", 1)[0]


def mbmaxlen(charset: str) -> int:
    return MBMAXLEN.get(charset.lower(), 4)  # unknown: assume the widest, as utf8mb4


def mariadb_charset_id(charset: str | None) -> int:
    """The collation id written for a character set in QUERY status vars: 45/33/8/63 only; anything
    MariaDB might not know (255 = utf8mb4_0900_ai_ci, gbk, …) falls back to utf8mb4_general_ci."""
    return MARIADB_CHARSET_IDS.get((charset or DEFAULT_CHARSET).lower(), 45)


# -- SQL_MODE ----------------------------------------------------------------------------------------
# MySQL 5.7 / MariaDB share bits 0..31; MySQL 8's TIME_TRUNCATE_FRACTIONAL (bit 32) means
# EMPTY_STRING_IS_NULL to MariaDB, so nothing above bit 31 is written.
SQL_MODE_BITS = {name: 1 << i for i, name in enumerate((
    "REAL_AS_FLOAT", "PIPES_AS_CONCAT", "ANSI_QUOTES", "IGNORE_SPACE", "NOT_USED", "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION", "NO_DIR_IN_CREATE", "POSTGRESQL", "ORACLE", "MSSQL", "DB2", "MAXDB",
    "NO_KEY_OPTIONS", "NO_TABLE_OPTIONS", "NO_FIELD_OPTIONS", "MYSQL323", "MYSQL40", "ANSI",
    "NO_AUTO_VALUE_ON_ZERO", "NO_BACKSLASH_ESCAPES", "STRICT_TRANS_TABLES", "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE", "NO_ZERO_DATE", "INVALID_DATES", "ERROR_FOR_DIVISION_BY_ZERO", "TRADITIONAL",
    "NO_AUTO_CREATE_USER", "HIGH_NOT_PRECEDENCE", "NO_ENGINE_SUBSTITUTION", "PAD_CHAR_TO_FULL_LENGTH"))}


def sql_mode_bits(text: str | None) -> int:
    """``"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION"`` → the Q_SQL_MODE bit mask; unknown names
    (MySQL-8-only modes) are left out."""
    bits = 0
    for name in (text or "").upper().replace(" ", "").split(","):
        if name:
            bit = SQL_MODE_BITS.get(name)
            if bit is None:
                log.debug("sql_mode %s has no bit MariaDB shares; left out", name)
            else:
                bits |= bit
    return bits


# -- types -----------------------------------------------------------------------------------------
_INTS = {D.TINYINT: T.TINY, D.UTINYINT: T.TINY, D.SMALLINT: T.SHORT, D.USMALLINT: T.SHORT,
         D.MEDIUMINT: T.INT24, D.UMEDIUMINT: T.INT24, D.INT: T.LONG, D.UINT: T.LONG,
         D.BIGINT: T.LONGLONG, D.UBIGINT: T.LONGLONG, D.BOOLEAN: T.TINY}
_UNSIGNED = {D.UTINYINT, D.USMALLINT, D.UMEDIUMINT, D.UINT, D.UBIGINT, D.UDECIMAL, D.UDOUBLE}
_TEXT_LENGTH_BYTES = {D.TINYTEXT: 1, D.TEXT: 2, D.MEDIUMTEXT: 3, D.LONGTEXT: 4,
                      D.TINYBLOB: 1, D.BLOB: 2, D.MEDIUMBLOB: 3, D.LONGBLOB: 4}
_BLOBS = {D.TINYBLOB, D.BLOB, D.MEDIUMBLOB, D.LONGBLOB}
INT_BITS = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}


def _params(dtype: exp.DataType) -> list[int]:
    out = []
    for p in dtype.expressions:
        node = p.this if isinstance(p, exp.DataTypeParam) else p
        try:
            out.append(int(node.name if hasattr(node, "name") else str(node)))
        except (TypeError, ValueError):
            continue
    return out


def _members(dtype: exp.DataType) -> tuple[str, ...]:
    out = []
    for p in dtype.expressions:
        node = p.this if isinstance(p, exp.DataTypeParam) else p
        out.append(node.name if isinstance(node, exp.Literal) else node.sql("mysql").strip("'"))
    return tuple(out)


def type_sql(dtype: exp.DataType) -> str:
    """The type as MySQL text, lower case (``varchar(20)``, ``bigint unsigned``)."""
    return dtype.sql("mysql").lower().replace(", ", ",")


def binlog_column(name: str, dtype: exp.DataType, *, nullable: bool, charset: str, binary: bool = False,
                  primary_key: bool = False, spatial: bool = False) -> Column:
    """The TABLE_MAP column a MySQL 5.7/8.0 server writes for a column of ``dtype`` in ``charset``
    (``binary``: the BINARY attribute / a *_bin collation does not change the wire format)."""
    t = dtype.this
    common: dict[str, Any] = {"nullable": nullable, "name": name, "primary_key": primary_key}
    params = _params(dtype)
    if spatial or t == D.GEOMETRY:
        return Column(T.GEOMETRY, 4, **common)
    if t in _INTS:
        return Column(_INTS[t], 0, unsigned=t in _UNSIGNED, **common)
    if t in (D.FLOAT,):
        # FLOAT(p) with p > 24 is a DOUBLE; FLOAT(M,D) stays FLOAT.
        if len(params) == 1 and params[0] > 24:
            return Column(T.DOUBLE, 8, **common)
        return Column(T.FLOAT, 4, **common)
    if t in (D.DOUBLE, D.UDOUBLE):
        return Column(T.DOUBLE, 8, unsigned=t in _UNSIGNED, **common)
    if t in (D.DECIMAL, D.UDECIMAL, D.BIGDECIMAL):
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        return decimal_column(precision, scale, unsigned=t in _UNSIGNED, **common)
    if t == D.DATE:
        return Column(T.DATE, 0, **common)
    if t == D.YEAR:
        return Column(T.YEAR, 0, **common)
    if t == D.TIME:
        return Column(T.TIME2, params[0] if params else 0, **common)
    if t == D.DATETIME:
        return Column(T.DATETIME2, params[0] if params else 0, **common)
    if t in (D.TIMESTAMP, D.TIMESTAMPTZ, D.TIMESTAMPLTZ):
        return Column(T.TIMESTAMP2, params[0] if params else 0, **common)
    cs = "binary" if binary and t in (D.BINARY, D.VARBINARY) else charset
    if t in (D.CHAR, D.NCHAR):
        n = params[0] if params else 1
        return char_column(n * mbmaxlen(cs), charset=mariadb_charset_id(cs), **common)
    if t in (D.VARCHAR, D.NVARCHAR):
        if not params:
            raise ValueError(f"VARCHAR column {name} needs a length")
        return varchar_column(params[0] * mbmaxlen(cs), charset=mariadb_charset_id(cs), **common)
    if t == D.BINARY:
        return char_column(params[0] if params else 1, charset=63, **common)
    if t == D.VARBINARY:
        if not params:
            raise ValueError(f"VARBINARY column {name} needs a length")
        return varchar_column(params[0], charset=63, **common)
    if t in _TEXT_LENGTH_BYTES:
        length_bytes = _TEXT_LENGTH_BYTES[t]
        if t in (D.TEXT, D.BLOB) and params:  # TEXT(n) / BLOB(n): the smallest type that holds n bytes
            n = params[0] * (1 if t == D.BLOB else mbmaxlen(cs))
            length_bytes = 1 if n < 256 else 2 if n < 65536 else 3 if n < 1 << 24 else 4
        blob = t in _BLOBS
        return blob_column(length_bytes, charset=63 if blob else mariadb_charset_id(cs), **common)
    if t == D.ENUM:
        return enum_column(_members(dtype), charset=mariadb_charset_id(charset), **common)
    if t == D.SET:
        return set_column(_members(dtype), charset=mariadb_charset_id(charset), **common)
    if t == D.BIT:
        return bit_column(params[0] if params else 1, **common)
    if t == D.JSON:
        return Column(T.JSON, 4, **common)
    raise ValueError(f"column {name}: type {dtype.sql('mysql')} has no binlog form known here")


# -- defaults --------------------------------------------------------------------------------------
CURRENT_TIMESTAMP = "CURRENT_TIMESTAMP"
_NOW_FUNCS = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"}


def default_of(node: exp.Expression, col: Column, dtype: exp.DataType) -> tuple[Any, str | None]:
    """(value, expression) of a DEFAULT clause: the value in binlog conventions, or for
    CURRENT_TIMESTAMP-like defaults ``(None, "CURRENT_TIMESTAMP")`` (evaluated per row from the
    transaction's TSO)."""
    if isinstance(node, exp.Paren):          # MySQL 8 expression default: (expr)
        node = node.this
    if isinstance(node, exp.Null):
        return None, None
    if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDatetime)) or (
            isinstance(node, (exp.Anonymous, exp.Func)) and node.sql("mysql").split("(")[0].upper() in _NOW_FUNCS):
        return None, CURRENT_TIMESTAMP
    if isinstance(node, exp.Column) and node.name.upper() in _NOW_FUNCS:
        return None, CURRENT_TIMESTAMP
    if isinstance(node, exp.Boolean):
        return value_for(col, dtype, 1 if node.this else 0), None
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return value_for(col, dtype, "-" + node.this.name), None
    if isinstance(node, exp.Introducer):     # _utf8mb4'abc'
        node = node.expression
    if isinstance(node, exp.BitString):
        return value_for(col, dtype, int(node.name, 2)), None
    if isinstance(node, exp.HexString):
        return value_for(col, dtype, bytes.fromhex(node.name)), None
    if isinstance(node, exp.Literal):
        return value_for(col, dtype, node.name if node.is_string else _number(node.name)), None
    raise ValueError(f"DEFAULT {node.sql('mysql')} is not a literal the shaper evaluates")


def _number(text: str) -> int | float | Decimal:
    try:
        return int(text)
    except ValueError:
        pass
    return float(text) if "e" in text.lower() else Decimal(text)


def value_for(col: Column, dtype: exp.DataType, literal: Any) -> Any:
    """A literal (str, int, float, Decimal, bytes) as the value a row image of ``col`` holds."""
    t = col.real_type
    if t in INT_BITS or t == T.YEAR:
        if isinstance(literal, bytes):
            return int.from_bytes(literal, "big")
        return int(Decimal(str(literal)).to_integral_value())
    if t in (T.FLOAT, T.DOUBLE):
        return float(literal)
    if t == T.NEWDECIMAL:
        scale = col.meta & 0xFF
        try:
            return Decimal(str(literal)).quantize(Decimal(1).scaleb(-scale))
        except InvalidOperation as exc:
            raise ValueError(f"DEFAULT {literal!r} is not a DECIMAL") from exc
    if t == T.BIT:
        return literal if isinstance(literal, int) else int.from_bytes(_text_bytes(literal), "big")
    if t == T.ENUM:
        members = [m.lower() for m in col.enum_values or ()]
        text = str(literal).lower()
        return members.index(text) + 1 if text in members else 0
    if t == T.SET:
        members = [m.lower() for m in col.set_values or ()]
        mask = 0
        for item in str(literal).lower().split(","):
            if item:
                mask |= 1 << members.index(item)
        return mask
    if t in (T.DATE, T.NEWDATE):
        y, m, d = parse_datetime_text(str(literal))[:3]
        try:
            return dt.date(y, m, d)
        except ValueError:
            return f"{y:04d}-{m:02d}-{d:02d}"
    if t in (T.DATETIME2, T.DATETIME, T.TIMESTAMP2, T.TIMESTAMP):
        y, mo, d, h, mi, s, us = parse_datetime_text(str(literal))
        try:
            value = dt.datetime(y, mo, d, h, mi, s, us)
        except ValueError:
            return str(literal)
        # TIMESTAMP literals are read in UTC (the shaper's session time zone).
        return value.replace(tzinfo=dt.UTC) if t in (T.TIMESTAMP2, T.TIMESTAMP) else value
    if t in (T.TIME2, T.TIME):
        return _time_value(str(literal))
    data = _text_bytes(literal)
    if t == T.STRING:  # CHAR drops trailing spaces, BINARY trailing zero bytes, in the row image
        return data.rstrip(b"\0") if col.charset == 63 else data.rstrip(b" ")
    return data


def _text_bytes(literal: Any) -> bytes:
    if isinstance(literal, bytes):
        return literal
    if isinstance(literal, (int, float, Decimal)):
        return str(literal).encode()
    return str(literal).encode("utf-8")


def _time_value(text: str) -> dt.timedelta:
    negative = text.startswith("-")
    body = text.lstrip("-")
    days = 0
    if " " in body:
        day_text, body = body.split(" ", 1)
        days = int(day_text)
    hms, _, frac = body.partition(".")
    parts = [int(x) for x in hms.split(":")] + [0, 0]
    delta = dt.timedelta(days=days, hours=parts[0], minutes=parts[1], seconds=parts[2],
                         microseconds=int((frac + "000000")[:6]) if frac else 0)
    return -delta if negative else delta


def implicit_default(col: Column) -> Any:
    """MySQL's implicit default of a NOT NULL column without DEFAULT (0, '', zero date, first ENUM
    member)."""
    t = col.real_type
    if t in INT_BITS or t in (T.YEAR, T.BIT, T.SET):
        return 0
    if t in (T.FLOAT, T.DOUBLE):
        return 0.0
    if t == T.NEWDECIMAL:
        return Decimal(0).quantize(Decimal(1).scaleb(-(col.meta & 0xFF)))
    if t == T.ENUM:
        return 1
    if t in (T.DATE, T.NEWDATE):
        return "0000-00-00"
    if t in (T.DATETIME2, T.DATETIME):
        return "0000-00-00 00:00:00"
    if t in (T.TIMESTAMP2, T.TIMESTAMP):
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # epoch 0: MySQL's zero timestamp
    if t in (T.TIME2, T.TIME):
        return dt.timedelta(0)
    if t == T.JSON:
        return None
    return b""


def now_value(col: Column, tso: int) -> Any:
    """CURRENT_TIMESTAMP for ``col`` at commit TSO ``tso`` (milliseconds in its high bits), cut to
    the column's fractional precision; the session time zone is UTC."""
    ms = tso >> 22
    fsp = col.meta if col.real_type in (T.DATETIME2, T.TIMESTAMP2, T.TIME2) else 0
    us = (ms % 1000) * 1000
    us -= us % 10 ** (6 - fsp)
    when = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=ms // 1000, microseconds=us)
    t = col.real_type
    if t in (T.TIMESTAMP2, T.TIMESTAMP):
        return when.replace(tzinfo=dt.UTC)
    if t in (T.DATE, T.NEWDATE):
        return when.date()
    if t in INT_BITS or t == T.YEAR:
        return when.year if t == T.YEAR else int(when.strftime("%Y%m%d%H%M%S"))
    return when
