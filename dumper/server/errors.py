"""The error a statement answers with: MySQL's code, message and SQLSTATE (an ERR packet)."""

from __future__ import annotations

ER_PARSE = 1064
ER_TOO_BIG_SELECT = 1104
ER_TABLEACCESS_DENIED = 1142
ER_NO_SUCH_TABLE = 1146
ER_UNKNOWN_SYSTEM_VARIABLE = 1193
ER_QUERY_TIMEOUT = 3024


class QueryError(Exception):
    def __init__(self, code: int, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sqlstate = sqlstate


def syntax_error(near: str, why: str = "") -> QueryError:
    """MySQL's ERR 1064, naming the text it stopped at (and, here, why)."""
    reason = f" ({why})" if why else ""
    return QueryError(ER_PARSE, f"You have an error in your SQL syntax{reason} near '{near[:80]}' at line 1",
                      "42000")
