"""COM_QUERY: the small SQL dialect binlog clients send (replicas, ``mariadb-binlog``, PyMySQL).

``SET`` (user variables per connection, system variables accepted), ``SELECT`` of expressions
(functions, ``@var``, ``@@[global.|session.]var``, literals), ``SHOW VARIABLES``, ``SHOW MASTER STATUS``,
``SHOW BINARY LOGS``, ``SHOW BINLOG EVENTS``, ``SHOW SLAVE HOSTS``, ``PURGE BINARY LOGS``; the logical
schema: ``SHOW DATABASES/TABLES/CREATE TABLE/COLUMNS/INDEX…`` and ``DESC`` (``show_schema``), ``SELECT …
FROM information_schema.*`` (``infoschema``); the session statements drivers send on connect (``USE``,
``SET NAMES``, ``SET [SESSION] TRANSACTION …``, ``START TRANSACTION``, ``COMMIT``…). A statement that
would change data is ERR 1290 naming it (read-only). Anything else is ERR 1064, an unknown ``@@var``
ERR 1193.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from dumper.server import protocol as p
from dumper.server.binlogdir import BinlogDirError
from dumper.server.catalog import CachedCatalog, Catalog
from dumper.server.gtid_dump import GtidFiles
from dumper.server.infoschema import INT_COLUMNS, InfoSchemaCache, InfoSchemaError
from dumper.server.logtext import session_log
from dumper.server.prepared import PreparedStatements
from dumper.server.show_events import ShowEventsError, show_binlog_events
from dumper.server.show_schema import ShowError, ShowSchema, _after_keyword, filter_rows
from dumper.server.variables import ARG_FUNCTIONS, FUNCTIONS, system_variables
from schema_shaper.filters import like_regex

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer


class QueryError(Exception):
    def __init__(self, code: int, message: str, sqlstate: str = "HY000") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.sqlstate = sqlstate


def parse_error(sql: str) -> QueryError:
    near = sql[:80]
    return QueryError(p.ER_PARSE, f"You have an error in your SQL syntax; this server answers only "
                                  f"replication queries near '{near}' at line 1", "42000")


@dataclass
class Session:
    """Per-connection state: user variables live here, never shared between connections."""

    conn_id: int
    host: str
    user: str = ""
    admin: bool = False
    user_vars: dict[str, object] = field(default_factory=dict)
    autocommit: bool = True
    slave: dict | None = None          # COM_REGISTER_SLAVE fields
    db: str | None = None              # USE / COM_INIT_DB / the handshake's database
    statements: dict = field(default_factory=dict)   # prepared statements by id (``prepared``)
    next_statement: int = 1

    @property
    def status(self) -> int:
        return p.SERVER_STATUS_AUTOCOMMIT if self.autocommit else 0

    def reset(self) -> None:
        """COM_RESET_CONNECTION: user variables, autocommit and prepared statements as at login."""
        self.user_vars.clear()
        self.autocommit = True
        self.statements.clear()


class ResultSet(list):
    """The payloads of a text result set, with its columns and rows kept for the binary protocol
    (a prepared statement's EXECUTE re-renders the rows)."""

    def __init__(self, columns: list, rows: Iterable[Sequence[object]], status: int) -> None:
        self.columns = [c if isinstance(c, p.Column) else p.Column(c) for c in columns]
        self.rows = [list(r) for r in rows]
        super().__init__(p.result_set(self.columns, self.rows, status))


# Statements that change data or server state: refused, naming the statement (ER_OPTION_PREVENTS_STATEMENT).
READ_ONLY_REFUSED = frozenset({
    "insert", "update", "delete", "replace", "create", "drop", "alter", "truncate", "rename", "grant",
    "revoke", "load", "call", "handler", "lock", "flush", "optimize", "analyze", "repair", "check",
    "install", "uninstall", "import", "kill", "reset", "change", "stop", "xa", "savepoint", "release",
    "do", "cache", "shutdown", "restart", "clone", "prepare", "execute", "deallocate"})
ER_OPTION_PREVENTS_STATEMENT = 1290


def read_only_error(words: list[str]) -> QueryError:
    statement = " ".join(words[:2] if words[0] in ("create", "drop", "alter", "lock", "flush", "load",
                                                   "reset", "change", "stop") else words[:1]).upper()
    return QueryError(ER_OPTION_PREVENTS_STATEMENT,
                      f"{statement} is refused: gbinlog is read-only (the global binlog is written only by "
                      f"its pipeline); the MySQL server is running with the --read-only option so it cannot "
                      f"execute this statement")


# -- lexing ------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<num>-?\d+(?:\.\d+)?)
    | (?P<sysvar>@@(?:(?:global|session|local)\.)?`?[A-Za-z_][\w$]*`?)
    | (?P<uservar>@`?[A-Za-z_][\w$.]*`?)
    | (?P<ident>`[^`]+`|[A-Za-z_][\w$]*)
    | (?P<op>:=|[=(),.;*])
    )""", re.X | re.S | re.I)


def _unquote(text: str) -> str:
    q = text[0]
    body = text[1:-1].replace(q + q, q)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "0": "\0", "r": "\r"}.get(m.group(1), m.group(1)),
                  body)


def tokenize(sql: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    sql = sql.rstrip().rstrip(";").rstrip()
    while pos < len(sql):
        if sql[pos].isspace():
            pos += 1
            continue
        if sql.startswith("/*", pos):  # comments, incl. /*!version */ hints: skipped whole
            end = sql.find("*/", pos + 2)
            if end < 0:
                raise parse_error(sql)
            pos = end + 2
            continue
        m = _TOKEN.match(sql, pos)
        if not m or m.end() == pos:
            raise parse_error(sql[pos:])
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


# -- the handler --------------------------------------------------------------------------------------

class QueryHandler:
    """Answers one COM_QUERY: returns the payloads of the response (OK, ERR or a result set)."""

    def __init__(self, server: BinlogServer) -> None:
        self.server = server
        self._catalog = CachedCatalog(server.bdir.path)
        self._info = InfoSchemaCache()
        self.show_schema = ShowSchema(self)
        self.prepared = PreparedStatements(self)
        self.gtid_files = GtidFiles(server.bdir.path)

    def handle(self, session: Session, sql: str) -> list[bytes]:
        try:
            return self._dispatch(session, sql)
        except (QueryError, ShowError, InfoSchemaError) as exc:
            return [p.err_packet(exc.code, exc.message, exc.sqlstate)]
        except (OSError, BinlogDirError) as exc:  # e.g. a file the index lists is gone
            return [p.err_packet(1105, f"Unknown error: {exc}")]

    # -- helpers for the statement modules ------------------------------------------------------------
    def catalog(self) -> Catalog:
        return self._catalog.get(self.server.bdir.files())

    @staticmethod
    def result(columns: list[p.Column], rows: list[list], session: Session) -> ResultSet:
        return ResultSet(columns, rows, session.status)

    unquote = staticmethod(lambda text: _unquote(text))
    parse_error = staticmethod(lambda sql: parse_error(sql))

    def init_db(self, session: Session, name: bytes) -> list[bytes]:
        """COM_INIT_DB."""
        try:
            self.use(session, name.decode("utf-8", "replace"))
        except QueryError as exc:
            return [p.err_packet(exc.code, exc.message, exc.sqlstate)]
        return [p.ok_packet(status=session.status)]

    def use(self, session: Session, db: str) -> None:
        """USE / COM_INIT_DB: a logical database of the catalog or information_schema."""
        if db.lower() != "information_schema" and self.catalog().database(db) is None:
            raise QueryError(1049, f"Unknown database '{db}'", "42000")
        session.db = db

    def _dispatch(self, session: Session, sql: str) -> list[bytes]:
        toks = tokenize(sql)
        if not toks:
            raise QueryError(1065, "Query was empty", "42000")
        words = [v.lower() if k == "ident" else v for k, v in toks]
        head = words[0]
        if head == "set":
            if "transaction" in words[1:3]:  # SET [SESSION|GLOBAL] TRANSACTION ISOLATION LEVEL …/READ ONLY
                return [p.ok_packet(status=session.status)]
            self._set(session, toks[1:], sql)
            return [p.ok_packet(status=session.status)]
        if head == "select":
            if _reads_tables(words):
                return self._select_from(session, sql)
            return self._select(session, toks[1:], sql)
        if head == "show":
            return self._show(session, toks[1:], words[1:], sql)
        if head in ("desc", "describe", "explain") and len(toks) > 1 and words[1] != "select":
            return self._describe(session, toks[1:], sql)
        if head == "purge":
            return self._purge(session, toks[1:], words[1:], sql)
        if head == "use":
            if len(toks) != 2:
                raise parse_error(sql)
            self.use(session, _strip_ident(toks[1][1]))
            return [p.ok_packet(status=session.status)]
        if head in ("commit", "rollback", "begin") or words[:2] in (["start", "transaction"], ["unlock", "tables"]):
            return [p.ok_packet(status=session.status)]
        if head in READ_ONLY_REFUSED or head == "start":
            raise read_only_error(words)
        raise parse_error(sql)

    def _select_from(self, session: Session, sql: str) -> list[bytes]:
        """A SELECT that reads tables: information_schema only (``infoschema``)."""
        info = self._info.get(self.catalog())
        names, rows = info.query(sql, session.db)
        types = []
        for i, name in enumerate(names):
            values = [r[i] for r in rows if r[i] is not None]
            numeric = name.upper() in INT_COLUMNS or (values and all(isinstance(v, int) for v in values))
            types.append(p.TYPE_LONGLONG if numeric else p.TYPE_VAR_STRING)
        return self.result([p.Column(n, t) for n, t in zip(names, types, strict=True)], rows, session)

    def _describe(self, session: Session, toks: list, sql: str) -> list[bytes]:
        db, name, rest = self.show_schema._table_ref(toks, sql)
        if rest and not (len(rest) == 1 and rest[0][0] in ("ident", "str")):
            raise parse_error(sql)
        like = [("ident", "like"), ("str", "'" + _strip_ident(rest[0][1]).replace("'", "''") + "'")] if rest else []
        return self.show_schema.describe(session, db, name, False, like, sql)

    # -- expressions ----------------------------------------------------------------------------------
    def _sysvar(self, session: Session, token: str) -> object:
        name = token[2:]
        scope, _, rest = name.partition(".")
        if rest and scope.lower() in ("global", "session", "local"):
            name = rest
        name = name.strip("`").lower()
        if name == "autocommit":
            return int(session.autocommit)
        value = system_variables(self.server).get(name, _MISSING)
        if value is _MISSING:
            raise QueryError(p.ER_UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'")
        return value

    def _expr(self, session: Session, toks: list[tuple[str, str]], i: int, sql: str,
              bare_word_ok: bool = False) -> tuple[object, int]:
        """Evaluate the expression at ``toks[i]``; returns (value, index after it). ``bare_word_ok``:
        a lone identifier is its own text (SET values)."""
        if i >= len(toks):
            raise parse_error(sql)
        kind, text = toks[i]
        if kind == "str":
            return _unquote(text), i + 1
        if kind == "num":
            return (int(text) if "." not in text else text), i + 1
        if kind == "sysvar":
            return self._sysvar(session, text), i + 1
        if kind == "uservar":
            return session.user_vars.get(text[1:].strip("`").lower()), i + 1
        if kind == "ident":
            low = text.lower()
            if low == "null":
                return None, i + 1
            if low in ("true", "false"):
                return int(low == "true"), i + 1
            if i + 1 < len(toks) and toks[i + 1] == ("op", "("):
                j = i + 2
                depth = 1
                while j < len(toks) and depth:
                    if toks[j] == ("op", "("):
                        depth += 1
                    elif toks[j] == ("op", ")"):
                        depth -= 1
                    j += 1
                if depth:
                    raise parse_error(sql)
                if low in ARG_FUNCTIONS:
                    args = self._arguments(session, toks[i + 2:j - 1], sql)
                    return ARG_FUNCTIONS[low](args), j
                fn = FUNCTIONS.get(low)
                if fn is None:
                    raise QueryError(1305, f"FUNCTION {text} does not exist", "42000")
                return fn(self.server, session), j
            if low in ("current_user", "current_timestamp"):
                return FUNCTIONS[low](self.server, session), i + 1
            if bare_word_ok and i + 1 == len(toks) or bare_word_ok and toks[i + 1] == ("op", ","):
                return _strip_ident(text), i + 1  # SET x = ON / OFF / DEFAULT / utf8mb4
        raise parse_error(sql)

    def _arguments(self, session: Session, toks: list[tuple[str, str]], sql: str) -> list[object]:
        args = []
        i = 0
        while i < len(toks):
            value, i = self._expr(session, toks, i, sql)
            args.append(value)
            if i < len(toks):
                if toks[i] != ("op", ","):
                    raise parse_error(sql)
                i += 1
        return args

    # -- SET ------------------------------------------------------------------------------------------
    def _set(self, session: Session, toks: list[tuple[str, str]], sql: str) -> None:
        i = 0
        assignments: list[tuple[str, object]] = []
        while i < len(toks):
            kind, text = toks[i]
            low = text.lower()
            if kind == "ident" and low in ("names", "character"):
                # SET NAMES x [COLLATE y] / SET CHARACTER SET x: results are utf8 whatever it says.
                while i < len(toks) and toks[i] != ("op", ","):
                    i += 1
            else:
                if kind == "ident" and low in ("global", "session", "local") and i + 1 < len(toks):
                    i += 1
                    kind, text = toks[i]
                if kind not in ("uservar", "sysvar", "ident") or i + 1 >= len(toks) \
                        or toks[i + 1] not in (("op", "="), ("op", ":=")):
                    raise parse_error(sql)
                value, i = self._expr(session, toks, i + 2, sql, bare_word_ok=True)
                assignments.append((text if kind != "ident" else "@@" + text, value))
            if i < len(toks):
                if toks[i] != ("op", ","):
                    raise parse_error(sql)
                i += 1
        # All or nothing, as one statement: apply only after every value evaluated.
        for target, value in assignments:
            if target.startswith("@@"):
                if target[2:].split(".")[-1].lower() == "autocommit":
                    session.autocommit = str(value).lower() in ("1", "on", "true")
            else:
                session.user_vars[target[1:].strip("`").lower()] = value

    # -- SELECT ---------------------------------------------------------------------------------------
    def _select(self, session: Session, toks: list[tuple[str, str]], sql: str) -> list[bytes]:
        body = sql.strip().rstrip(";")[len("select"):]
        i = 0
        columns: list[p.Column] = []
        values: list[object] = []
        limit = None
        item_texts = _split_items(body)
        for text in item_texts:
            sub = tokenize(text)
            tail_low = [v.lower() for _, v in sub]
            if "limit" in tail_low:  # select @@version_comment limit 1
                k = tail_low.index("limit")
                if k + 1 >= len(sub) or sub[k + 1][0] != "num" or k + 2 != len(sub):
                    raise parse_error(sql)
                limit = int(sub[k + 1][1])
                sub = sub[:k]
                text = text[:text.lower().rindex("limit")]
            if len(tail_low) >= 2 and tail_low[-2] == "from" and tail_low[-1] == "dual":
                sub = sub[:-2]
                text = text[:text.lower().rindex("from")]
            value, j = self._expr(session, sub, 0, sql)
            name = text.strip()
            if j < len(sub):
                if sub[j][1].lower() == "as" and j + 2 == len(sub):
                    name = _strip_ident(sub[j + 1][1])
                elif j + 1 == len(sub) and sub[j][0] in ("ident", "str"):
                    name = _strip_ident(sub[j][1])
                else:
                    raise parse_error(sql)
            columns.append(p.Column(name, p.TYPE_LONGLONG if isinstance(value, int) else p.TYPE_VAR_STRING))
            values.append(value)
        del i
        rows = [values] if limit is None or limit > 0 else []
        return ResultSet(columns, rows, session.status)

    # -- SHOW -----------------------------------------------------------------------------------------
    def _show(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        server = self.server
        w = [x for x in words]
        if w and w[0] in ("global", "session", "local"):
            w = w[1:]
            toks = toks[1:]
        if w[:1] == ["variables"]:
            return self._show_variables(session, toks[1:], w[1:], sql)
        if w in (["master", "status"], ["binary", "log", "status"]):
            files = server.bdir.files()
            rows = []
            if files:
                rows = [[files[-1], server.bdir.size(files[-1]), "", "",
                         self.gtid_files.text(files, "executed")]]
            cols = [p.Column("File"), p.Column("Position", p.TYPE_LONGLONG), p.Column("Binlog_Do_DB"),
                    p.Column("Binlog_Ignore_DB"), p.Column("Executed_Gtid_Set")]
            return ResultSet(cols, rows, session.status)
        if w in (["binary", "logs"], ["master", "logs"]):
            rows = []
            for name in server.bdir.files():
                try:
                    rows.append([name, server.bdir.size(name)])
                except FileNotFoundError:
                    continue
            return ResultSet([p.Column("Log_name"), p.Column("File_size", p.TYPE_LONGLONG)], rows,
                                session.status)
        if w[:2] == ["binlog", "events"]:
            return self._show_binlog_events(session, toks[2:], sql)
        if w in (["slave", "hosts"], ["replicas"]):
            cols = [p.Column("Server_id", p.TYPE_LONGLONG), p.Column("Host"),
                    p.Column("Port", p.TYPE_LONGLONG), p.Column("Master_id", p.TYPE_LONGLONG),
                    p.Column("Slave_UUID")]
            rows = []
            for s in server.sessions():
                if s.slave is not None:
                    rows.append([s.slave["server_id"], s.slave["host"], s.slave["port"],
                                 self.server.config.server_id, str(s.user_vars.get("slave_uuid") or "")])
            return ResultSet(cols, rows, session.status)
        if w in (["warnings"], ["errors"]) or w[:2] in (["warnings", "limit"], ["errors", "limit"]):
            return ResultSet([p.Column("Level"), p.Column("Code", p.TYPE_LONGLONG), p.Column("Message")],
                                [], session.status)
        answer = self.show_schema.answer(session, w, toks, sql)
        if answer is not None:
            return answer
        raise parse_error(sql)

    def _show_variables(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        variables = system_variables(self.server)
        variables["autocommit"] = "ON" if session.autocommit else "OFF"
        match: Callable[[str], bool] = lambda name: True  # noqa: E731
        if words:
            if words[0] == "like" and len(toks) == 2 and toks[1][0] == "str":
                rx = like_regex(_unquote(toks[1][1]))
                match = lambda name: bool(rx.match(name))  # noqa: E731
            elif words[0] == "where":
                rows = [[name, "" if value is None else str(value)] for name, value in sorted(variables.items())]
                cols = [p.Column("Variable_name"), p.Column("Value")]
                return ResultSet(cols, filter_rows(cols, rows, _after_where(sql)), session.status)
            else:
                raise parse_error(sql)
        rows = [[name, "" if value is None else str(value)] for name, value in sorted(variables.items())
                if match(name)]
        return ResultSet(["Variable_name", "Value"], rows, session.status)

    def _show_binlog_events(self, session: Session, toks, sql: str) -> list[bytes]:
        name = None
        start = 4
        offset, count = 0, None
        i = 0
        while i < len(toks):
            kind, text = toks[i]
            low = text.lower()
            if low == "in" and i + 1 < len(toks) and toks[i + 1][0] == "str":
                name = _unquote(toks[i + 1][1])
                i += 2
            elif low == "from" and i + 1 < len(toks) and toks[i + 1][0] == "num":
                start = int(toks[i + 1][1])
                i += 2
            elif low == "limit" and i + 1 < len(toks) and toks[i + 1][0] == "num":
                count = int(toks[i + 1][1])
                i += 2
                if i + 1 < len(toks) and toks[i] == ("op", ",") and toks[i + 1][0] == "num":
                    offset, count = count, int(toks[i + 1][1])
                    i += 2
            else:
                raise parse_error(sql)
        files = self.server.bdir.files()
        if name is None:
            if not files:
                return ResultSet(_EVENT_COLUMNS, [], session.status)
            name = files[0]
        if name not in files:
            raise QueryError(1220, "Error when executing command SHOW BINLOG EVENTS: "
                                   "Could not find target log")
        try:
            rows = show_binlog_events(self.server.bdir.file_path(name), name, start, offset, count)
        except ShowEventsError as exc:
            raise QueryError(1220, f"Error when executing command SHOW BINLOG EVENTS: {exc}") from None
        return ResultSet(_EVENT_COLUMNS, rows, session.status)

    # -- PURGE ----------------------------------------------------------------------------------------
    def _purge(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        """PURGE BINARY LOGS, its outcome in the session log (ok, or the error the client gets)."""
        outcome = "failed"
        try:
            answer = self._purge_files(session, toks, words, sql)
        except QueryError as exc:
            outcome = f"ERROR {exc.code}: {exc.message}"
            raise
        else:
            outcome = "ok"
            return answer
        finally:
            session_log.info("%s by user=%s from=%s conn=%d: %s", " ".join(sql.split()), session.user, session.host,
                             session.conn_id, outcome)

    def _purge_files(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        if len(words) != 4 or words[0] not in ("binary", "master") or words[1] != "logs" \
                or words[2] not in ("to", "before") or toks[3][0] != "str":
            raise parse_error(sql)
        if not session.admin:
            raise QueryError(p.ER_SPECIFIC_ACCESS_DENIED, "Access denied; you need (at least one of) the "
                                                          "SUPER, BINLOG ADMIN privilege(s) for this operation",
                             "42000")
        refusal = getattr(self.server, "purge_refusal", None)    # HA: only the leader purges (gbinlog.ha)
        if refusal is not None and (why := refusal()):
            raise QueryError(1290, why, "HY000")
        bdir = self.server.bdir
        files = bdir.files()
        arg = _unquote(toks[3][1])
        if words[2] == "to":
            if arg not in files:
                raise QueryError(p.ER_UNKNOWN_TARGET_BINLOG, "Target log not found in binlog index")
            keep_from = arg
        else:
            try:
                before = datetime.fromisoformat(arg).timestamp()
            except ValueError:
                raise QueryError(1292, f"Incorrect datetime value: '{arg}'", "22007") from None
            keep_from = files[-1] if files else None
            # The newest file is never purged; older ones go while their last write is before `before`.
            for name in files[:-1]:
                if bdir.mtime(name) >= before:
                    keep_from = name
                    break
            if keep_from is None:
                return [p.ok_packet(status=session.status)]
        doomed = files[:files.index(keep_from)]
        in_use = sorted(set(doomed) & self.server.files_in_use())
        if in_use:
            raise QueryError(p.ER_LOG_IN_USE, f"A purgeable log is in use, will not purge "
                                              f"({', '.join(in_use)} still read by a connected replica)")
        try:
            bdir.purge(keep_from)
        except (OSError, BinlogDirError) as exc:
            raise QueryError(1377, f"Fatal error during log purge: {exc}") from None
        return [p.ok_packet(status=session.status)]


_MISSING = object()
_EVENT_COLUMNS = [p.Column("Log_name"), p.Column("Pos", p.TYPE_LONGLONG), p.Column("Event_type"),
                  p.Column("Server_id", p.TYPE_LONGLONG), p.Column("End_log_pos", p.TYPE_LONGLONG),
                  p.Column("Info")]


def _after_where(sql: str) -> str:
    return _after_keyword(sql, "where")


def _reads_tables(words: list[str]) -> bool:
    """A SELECT with a FROM other than DUAL (the tokens are outside quotes)."""
    for i, word in enumerate(words):
        if word == "from" and i + 1 < len(words) and words[i + 1] != "dual":
            return True
    return False


def _strip_ident(text: str) -> str:
    if text[:1] in "`'\"":
        return _unquote(text) if text[0] != "`" else text[1:-1]
    return text


def _split_items(body: str) -> list[str]:
    """Split a SELECT list at top-level commas (not inside quotes or parentheses)."""
    items, depth, quote, start = [], 0, None, 0
    i = 0
    while i < len(body):
        c = body[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    if any(not item.strip() for item in items):
        raise parse_error(body)
    return items
