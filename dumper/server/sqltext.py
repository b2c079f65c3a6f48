"""A query's text as a MySQL server reads it: comments and statements (``split_statements``).

MySQL skips ``/* … */``, ``-- `` (two dashes and a space or control character) and ``#`` comments,
and *executes* the body of ``/*! … */`` — and of ``/*!NNNNN … */`` when its own version is at least
NNNNN (``/*!80016 … */`` is read by 8.0.16 and later). Connector/J leads every statement with a
``/* mysql-connector-j-… */`` comment and mysqldump wraps options in versioned ones, so a statement
is only understood once they are dealt with. A query may hold several statements separated by
``;`` (the client asks for that with CLIENT_MULTI_STATEMENTS); quotes protect both.
"""

from __future__ import annotations

import re

_VERSIONED = re.compile(r"/\*!(\d{5,6})?")
_MARIADB_ONLY = "/*M!"


class UnclosedComment(ValueError):
    """A ``/*`` comment that the query never closes (MySQL: a syntax error)."""


def version_number(version: str) -> int:
    """``8.0.36-log`` → 80036, as versioned comments write it."""
    parts = (re.findall(r"\d+", version) + ["0", "0", "0"])[:3]
    major, minor, patch = (int(x) for x in parts)
    return major * 10000 + minor * 100 + patch


def split_statements(sql: str, version: int) -> list[str]:
    """The statements of ``sql`` with comments removed (each replaced by a space) and the bodies of
    the versioned comments this ``version`` executes kept; empty statements are dropped."""
    out: list[str] = []
    current: list[str] = []
    i, n = 0, len(sql)
    open_versioned = 0              # inside /*! … */ whose body we keep: its */ ends it
    start = 0
    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = _quote_end(sql, i)
            current.append(sql[start:j])
            i = start = j
            continue
        if c == "*" and open_versioned and sql.startswith("*/", i):
            current.append(sql[start:i])
            current.append(" ")
            open_versioned -= 1
            i = start = i + 2
            continue
        if c == "/" and sql.startswith("/*", i):
            current.append(sql[start:i])
            m = _VERSIONED.match(sql, i)
            if m and not sql.startswith(_MARIADB_ONLY, i) and (m.group(1) is None or int(m.group(1)) <= version):
                open_versioned += 1
                i = start = m.end()
                continue
            end = sql.find("*/", i + 2)
            if end < 0:
                raise UnclosedComment(f"unclosed comment at offset {i}")
            current.append(" ")
            i = start = end + 2
            continue
        if c == "#" or (c == "-" and sql.startswith("--", i) and (i + 2 == n or sql[i + 2] <= " ")):
            current.append(sql[start:i])
            end = sql.find("\n", i)
            i = start = n if end < 0 else end
            continue
        if c == ";":
            current.append(sql[start:i])
            out.append("".join(current))
            current = []
            i = start = i + 1
            continue
        i += 1
    current.append(sql[start:])
    out.append("".join(current))
    return [s.strip() for s in out if s.strip()]


def _quote_end(sql: str, i: int) -> int:
    """The offset after the quoted text starting at ``i`` (a doubled quote, or a backslash in
    '…' and "…", escapes; an unclosed quote runs to the end: the parser reports it)."""
    q = sql[i]
    j = i + 1
    n = len(sql)
    while j < n:
        c = sql[j]
        if c == "\\" and q != "`":
            j += 2
            continue
        if c == q:
            if j + 1 < n and sql[j + 1] == q:
                j += 2
                continue
            return j + 1
        j += 1
    return n
