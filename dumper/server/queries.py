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
import time
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sqlglot import exp

from dumper.server import protocol as p
from dumper.server.binlogdir import BinlogDirError
from dumper.server.catalog import CachedCatalog, Catalog
from dumper.server.errors import QueryError, syntax_error
from dumper.server.gtid_dump import GtidFiles
from dumper.server.logtext import session_log
from dumper.server.operators import (
    ER_QUERY_INTERRUPTED,
    diagnostics,
    kill,
    processlist_rows,
    replica_status,
    show_processlist,
    statement_kind,
)
from dumper.server.prepared import PreparedStatements
from dumper.server.show_events import ShowEventsError, show_binlog_events
from dumper.server.show_schema import ShowSchema, _after_keyword
from dumper.server.snapshot import Pin, snapshot_statement
from dumper.server.sql_bind import SessionView, load_dialects, parse_statement
from dumper.server.sql_engine import SqlEngine
from dumper.server.sqltext import UnclosedComment, split_statements, version_number
from dumper.server.variables import system_variables
from schema_shaper.filters import like_regex

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer


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
    variables: dict[str, object] = field(default_factory=dict)   # SET [SESSION] system variables
    multi_statements: bool = False     # CLIENT_MULTI_STATEMENTS at login, or COM_SET_OPTION
    more_results: bool = False         # answering a statement that another follows in the query
    pin: Pin | None = None             # a read lock's moment (``snapshot``)
    port: int = 0                      # the client's port (PROCESSLIST's Host is host:port)
    command: str = "Sleep"             # PROCESSLIST: Sleep, Query, Binlog Dump, Binlog Dump GTID
    since: float = field(default_factory=time.monotonic)   # when the command began (PROCESSLIST's Time)
    info: str | None = None            # the statement running
    diagnostics: list[tuple[str, int, str]] = field(default_factory=list)   # SHOW WARNINGS: the last error
    interrupt: Callable[[], None] | None = None   # stops the statement running (KILL QUERY)
    killed: bool = False               # KILL QUERY asked for the running statement

    @property
    def status(self) -> int:
        return ((p.SERVER_STATUS_AUTOCOMMIT if self.autocommit else 0)
                | (p.SERVER_MORE_RESULTS_EXISTS if self.more_results else 0))

    def reset(self) -> None:
        """COM_RESET_CONNECTION: variables, autocommit and prepared statements as at login."""
        self.user_vars.clear()
        self.variables.clear()
        self.pin = None
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
    "install", "uninstall", "import", "reset", "change", "stop", "xa", "savepoint", "release",
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


# -- statements ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a query, comments removed; ``tree``: SELECT and SET parsed by sqlglot (the
    SHOW, PURGE, USE, DESCRIBE … handlers read ``text``)."""

    text: str
    tree: exp.Expression | None


_PURGE_BEFORE = re.compile(r"\s*purge\s+(?:binary|master)\s+logs\s+before\b", re.I)
_SHOW = re.compile(r"\s*show\b", re.I)
_PARSED_HEADS = ("select", "with", "(", "set", "values", "table")
# The catalog of the session being answered when it holds a read lock (``QueryHandler.catalog``).
_PINNED_CATALOG: ContextVar[Catalog | None] = ContextVar("pinned_catalog", default=None)
# SHOW statements that read a file or filter rows through the engine: a worker thread answers them.
_SLOW_SHOW = re.compile(r"\s*show\b.*\b(?:binlog\s+events|where)\b", re.I | re.S)


# The longest query the SQL layer parses. Parsing builds a tree of a few objects per token: a
# megabyte-long statement takes tens of seconds of one core and, through the garbage collector's full
# passes over millions of objects, pauses every thread for hundreds of milliseconds; no consumer or
# operator sends anything near this (the longest known connect-time statement is ~3 KB).
MAX_QUERY_TEXT = 64 * 1024


_PARSED: dict[str, Statement] = {}
_PARSED_MAX = 512
_SET_CHARSET = re.compile(r"set\s+(?:names|character\s+set|charset)\b", re.I)


def _statement(text: str) -> Statement:
    """Short statements are parsed once per distinct text (drivers send the same connect queries on
    every connection); a statement sqlglot could only read as a whole command is never kept."""
    statement = _PARSED.get(text)
    if statement is None:
        statement = _parsed(text)
        if len(text) <= 4096 and not isinstance(statement.tree, exp.Command):
            if len(_PARSED) >= _PARSED_MAX:
                _PARSED.clear()
            _PARSED[text] = statement
    return statement


def _parsed(text: str) -> Statement:
    head = re.match(r"\(|[A-Za-z]+", text)
    if head is None or head.group(0).lower() not in _PARSED_HEADS:
        return Statement(text, None)
    tree = parse_statement(text)
    if isinstance(tree, exp.Command):      # a fallback seen once in a long run: read it again
        tree = parse_statement(text)
    if isinstance(tree, exp.Command) and _SET_CHARSET.match(text):
        # SET NAMES / CHARACTER SET: answered OK whatever they name (results are UTF-8); sqlglot
        # has been seen to fall back to a whole command on `SET NAMES utf8` once in a long run
        tree = exp.Set(expressions=[])
    return Statement(text, tree)


def _running(session: Session, interrupt: Callable[[], None] | None) -> None:
    """The engine's statement of ``session`` started (its interrupt) or ended (None); a KILL QUERY
    that came before it started ends it now."""
    session.interrupt = interrupt
    if interrupt is not None and session.killed:
        raise QueryError(ER_QUERY_INTERRUPTED, "Query execution was interrupted")


def _up_to_where(sql: str) -> str:
    """``sql`` up to and with its first WHERE outside quotes (all of it when it has none)."""
    for m in re.finditer(r"\bwhere\b", sql, re.I):
        before = sql[:m.start()]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0 and before.count("`") % 2 == 0:
            return sql[:m.end()]
    return sql


def _first_words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"\(|[A-Za-z_]+", text[:200])[:4]]


def _log_text(text: str) -> str:
    """A statement as the session log shows it: whitespace folded, cut at 300 characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= 300 else folded[:300] + f"… ({len(text)} chars)"


# -- the handler --------------------------------------------------------------------------------------

class QueryHandler:
    """Answers one COM_QUERY: returns the payloads of the response (OK, ERR or a result set)."""

    def __init__(self, server: BinlogServer) -> None:
        self.server = server
        self._catalog = CachedCatalog(server.bdir.path)
        load_dialects()
        self.engine = SqlEngine(self.catalog)
        self.show_schema = ShowSchema(self)
        self.prepared = PreparedStatements(self)
        self.gtid_files = GtidFiles(server.bdir.path)
        self.version = version_number(server.config.version)

    def handle(self, session: Session, sql: str) -> list[bytes]:
        """The answer to every statement of ``sql``, in order; the first error ends it."""
        try:
            statements = self.statements(session, sql)
        except QueryError as exc:
            return [p.err_packet(exc.code, exc.message, exc.sqlstate)]
        if len(statements) == 1:      # the answer as it is (a prepared statement reads a ResultSet's rows)
            return self._answer(session, statements[0])
        out: list[bytes] = []
        for i, statement in enumerate(statements):
            session.more_results = i + 1 < len(statements)
            try:
                answer = self._answer(session, statement)
            finally:
                session.more_results = False
            out += answer
            if answer and answer[0][:1] == b"\xff":
                break
        return out

    def _answer(self, session: Session, statement: Statement) -> list[bytes]:
        """One statement's answer; the session shows it in PROCESSLIST meanwhile, and the session log
        (``-v``) records it with its outcome and time."""
        pinned = _PINNED_CATALOG.set(session.pin.catalog if session.pin else None)
        words = _first_words(statement.text)
        # SHOW WARNINGS/ERRORS and reading their counts leave the last statement's diagnostics in place
        diagnostic = (words[:1] == ["show"] and any(w in ("warnings", "errors") for w in words[1:])
                      or re.search(r"@@(?:session\.)?(?:warning|error)_count", statement.text[:200], re.I) is not None)
        started = time.monotonic()
        session.command, session.since, session.info, session.killed = "Query", started, statement.text, False
        error: QueryError | None = None
        try:
            answer = self._dispatch(session, statement)
        except QueryError as exc:
            error = exc
        except (OSError, BinlogDirError) as exc:  # e.g. a file the index lists is gone
            error = QueryError(1105, f"Unknown error: {exc}")
        finally:
            _PINNED_CATALOG.reset(pinned)
            session.command, session.since, session.info = "Sleep", time.monotonic(), None
        if error is not None and session.killed:
            error = QueryError(ER_QUERY_INTERRUPTED, "Query execution was interrupted")
        self.server.counters.statement(statement_kind(words))
        if error is not None:
            session.diagnostics = [("Error", error.code, error.message)]
            answer = [p.err_packet(error.code, error.message, error.sqlstate)]
            outcome = f"ERROR {error.code}"
        else:
            if not diagnostic:
                session.diagnostics = []
            outcome = f"{len(answer.rows)} rows" if isinstance(answer, ResultSet) else "OK"
        session_log.info("query conn=%d user=%s: %s -> %s in %.1f ms", session.conn_id, session.user,
                         _log_text(statement.text), outcome, (time.monotonic() - started) * 1000)
        return answer

    def answer_inline(self, session: Session, sql: str) -> list[bytes] | None:
        """The answer when every statement of ``sql`` is quick (constants, variables, SHOW of the
        server's state), else None: a statement that reads tables or files takes a worker thread."""
        try:
            statements = self.statements(session, sql)
        except QueryError as exc:
            return [p.err_packet(exc.code, exc.message, exc.sqlstate)]
        for statement in statements:
            if isinstance(statement.tree, (exp.Select, exp.Union, exp.Subquery)):
                try:
                    if self.engine.needs_tables(statement.tree, self.view(session)):
                        return None
                except QueryError:
                    pass                    # the answer is that error: quick
            elif statement.tree is None and _SLOW_SHOW.match(statement.text):
                return None
        return self.handle(session, sql)

    def statements(self, session: Session, sql: str) -> list[Statement]:
        """The statements of a query, comments handled as MySQL does (``sqltext``); SELECT and SET
        parsed by sqlglot."""
        if len(sql) > MAX_QUERY_TEXT:
            raise QueryError(p.ER_NOT_SUPPORTED, f"A query of {len(sql)} characters is longer than gbinlog's SQL "
                                                 f"layer reads ({MAX_QUERY_TEXT}); send shorter statements", "42000")
        try:
            texts = split_statements(sql, self.version)
        except UnclosedComment as exc:
            raise parse_error(sql) from exc
        if not texts:
            raise QueryError(1065, "Query was empty", "42000")
        if len(texts) > 1 and not session.multi_statements:
            raise syntax_error(texts[1], "several statements need CLIENT_MULTI_STATEMENTS")
        return [_statement(text) for text in texts]

    def view(self, session: Session) -> SessionView:
        """What a statement of ``session`` reads of it and of the server (``sql_engine``)."""
        cfg = self.server.config
        budget = cfg.max_execution_time
        own = session.variables.get("max_execution_time")
        if isinstance(own, int) and own > 0:
            budget = min(budget, own / 1000)
        return SessionView(conn_id=session.conn_id, user=session.user, host=session.host, db=session.db,
                           user_vars=session.user_vars, variable=lambda name, scope: self.variable(session, name, scope),
                           version=cfg.version, server_variables=lambda scope: self.variable_rows(session, scope),
                           status_rows=self.status_rows,
                           processlist_rows=lambda: [tuple(r) for r in processlist_rows(self, session)],
                           time_budget=budget, max_rows=cfg.max_result_rows,
                           running=lambda interrupt: _running(session, interrupt))

    def variable(self, session: Session, name: str, scope: str) -> object:
        """A system variable's value for ``session`` (its own SET first); KeyError if none is named so."""
        if scope == "session":
            if name == "autocommit":
                return int(session.autocommit)
            if name in ("warning_count", "error_count"):
                return len(session.diagnostics)
            if name in session.variables:
                return session.variables[name]
        return system_variables(self.server, self.server.stream_of(session))[name]

    def variable_rows(self, session: Session, scope: str) -> list[tuple[str, object]]:
        values = system_variables(self.server, self.server.stream_of(session))
        if scope == "session":
            values.update(session.variables)
            values["autocommit"] = "ON" if session.autocommit else "OFF"
        return sorted(values.items())

    def status_rows(self) -> list[tuple[str, object]]:
        return self.server.counters.rows(self.server.sessions())

    # -- helpers for the statement modules ------------------------------------------------------------
    def catalog(self) -> Catalog:
        """The logical schema at the head of the served files; for a session holding a read lock, at
        the moment it took it (``snapshot``)."""
        pinned = _PINNED_CATALOG.get()
        return pinned if pinned is not None else self._catalog.get(self.server.bdir.files())

    def master_status_rows(self, session: Session, stream: str | None = None) -> list[list[object]]:
        """SHOW MASTER STATUS [WITH 'stream']: the last file, its size and the GTIDs executed; under a
        read lock, as they were when it was taken."""
        if session.pin is not None and stream is None:
            return session.pin.master_status
        served = self.server.stream_of(session, stream)
        files = served.bdir.files()
        if not files:
            return []
        return [[files[-1], served.bdir.size(files[-1]), "", "", served.gtid_files.text(files, "executed")]]

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

    def _dispatch(self, session: Session, statement: Statement) -> list[bytes]:
        tree, sql = statement.tree, statement.text
        if isinstance(tree, (exp.Select, exp.Union, exp.Subquery)):
            answer = self.engine.select(tree, sql, self.view(session))
            return ResultSet(answer.columns(), answer.rows, session.status)
        if isinstance(tree, exp.Set):
            self._set(session, tree)
            return [p.ok_packet(status=session.status)]
        # PURGE … BEFORE and SHOW … WHERE take any expression after the keyword (the engine evaluates
        # it): the tokens stop at the keyword
        before = _PURGE_BEFORE.match(sql)
        toks = tokenize(before.group(0) if before else _up_to_where(sql) if _SHOW.match(sql) else sql)
        words = [v.lower() if k == "ident" else v for k, v in toks]
        head = words[0]
        if head == "show":
            return self._show(session, toks[1:], words[1:], sql)
        if head == "kill":
            return kill(self, session, words, sql)
        if head in ("desc", "describe", "explain") and len(toks) > 1 and words[1] != "select":
            return self._describe(session, toks[1:], sql)
        if head == "purge":
            return self._purge(session, toks[1:], words[1:], sql)
        if head == "use":
            if len(toks) != 2:
                raise parse_error(sql)
            self.use(session, _strip_ident(toks[1][1]))
            return [p.ok_packet(status=session.status)]
        if head in ("commit", "rollback", "begin") or words[:2] == ["start", "transaction"]:
            return [p.ok_packet(status=session.status)]
        if head in ("flush", "lock", "unlock"):
            answer = snapshot_statement(self, session, words)
            if answer is not None:
                return answer
        if head in READ_ONLY_REFUSED or head == "start":
            raise read_only_error(words)
        raise parse_error(sql)

    def _describe(self, session: Session, toks: list, sql: str) -> list[bytes]:
        db, name, rest = self.show_schema._table_ref(toks, sql)
        if rest and not (len(rest) == 1 and rest[0][0] in ("ident", "str")):
            raise parse_error(sql)
        like = [("ident", "like"), ("str", "'" + _strip_ident(rest[0][1]).replace("'", "''") + "'")] if rest else []
        return self.show_schema.describe(session, db, name, False, like, sql)

    # -- SET ------------------------------------------------------------------------------------------
    def _set(self, session: Session, tree: exp.Set) -> None:
        """SET of user and session variables, all or nothing as one statement; SET NAMES / CHARACTER
        SET / TRANSACTION are accepted (results are UTF-8 whatever they say; nothing is written)."""
        assignments: list[tuple[str, str, object]] = []
        view = self.view(session)
        for item in tree.expressions:
            kind = str(item.args.get("kind") or "").upper()
            if kind in ("NAMES", "CHARACTER SET", "CHARSET", "TRANSACTION"):
                continue
            target = item.this
            if not isinstance(target, exp.EQ):
                raise syntax_error(item.sql("mysql"))
            ref, value = target.this, target.expression
            if isinstance(ref, exp.Parameter):
                assignments.append(("user", ref.name.lower(), self._set_value(value, view)))
                continue
            scope = kind.lower() or "session"
            if isinstance(ref, exp.SessionParameter):
                scope = "global" if str(ref.args.get("kind") or "").lower() == "global" else "session"
            elif not isinstance(ref, exp.Column):
                raise syntax_error(item.sql("mysql"))
            name = ref.name.lower()
            if name not in system_variables(self.server) and name not in ("autocommit",):
                raise QueryError(p.ER_UNKNOWN_SYSTEM_VARIABLE, f"Unknown system variable '{name}'")
            if scope == "global":
                raise QueryError(1238, f"Variable '{name}' is a read only variable: gbinlog's settings come from "
                                       "its configuration")
            default = isinstance(value, exp.Var) and value.name.upper() == "DEFAULT"
            assignments.append(("session", name, None if default else self._set_value(value, view)))
        for kind, name, value in assignments:
            if kind == "user":
                session.user_vars[name] = value
            elif name == "autocommit":
                session.autocommit = str(value).lower() in ("1", "on", "true")
            elif value is None:
                session.variables.pop(name, None)
            else:
                session.variables[name] = value

    def _set_value(self, value: exp.Expression, view: SessionView) -> object:
        """A SET's right side: a bare word (ON, utf8mb4) is its text, anything else is evaluated."""
        if isinstance(value, (exp.Var, exp.Column)) and not isinstance(value, exp.Star):
            return value.name
        answer = self.engine.select(exp.select(value), "", view)
        return answer.rows[0][0] if answer.rows else None

    # -- SHOW -----------------------------------------------------------------------------------------
    def _show(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        server = self.server
        w = [x for x in words]
        scope = "session"
        if w and w[0] in ("global", "session", "local"):
            scope = "global" if w[0] == "global" else "session"
            w = w[1:]
            toks = toks[1:]
        if w[:1] == ["variables"]:
            return self._show_variables(session, scope, toks[1:], w[1:], sql)
        stream, toks, w = _with_stream(toks, w)
        if w == ["binary", "streams"]:
            rows = server.group.rows() if server.group else []
            return ResultSet([p.Column("GROUP"), p.Column("STREAM"), p.Column("FILE"),
                              p.Column("POSITION", p.TYPE_LONGLONG)], rows, session.status)
        if w in (["master", "status"], ["binary", "log", "status"]):
            rows = self.master_status_rows(session, stream)
            cols = [p.Column("File"), p.Column("Position", p.TYPE_LONGLONG), p.Column("Binlog_Do_DB"),
                    p.Column("Binlog_Ignore_DB"), p.Column("Executed_Gtid_Set")]
            return ResultSet(cols, rows, session.status)
        if w in (["binary", "logs"], ["master", "logs"]):
            rows = []
            bdir = server.stream_of(session, stream).bdir
            for name in bdir.files():
                try:
                    rows.append([name, bdir.size(name)])
                except FileNotFoundError:
                    continue
            return ResultSet([p.Column("Log_name"), p.Column("File_size", p.TYPE_LONGLONG)], rows,
                                session.status)
        if w[:2] == ["binlog", "events"]:
            return self._show_binlog_events(session, toks[2:], sql, stream)
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
        if w[:1] in (["warnings"], ["errors"]) or w[:5] in (["count", "(", "*", ")", "warnings"],
                                                          ["count", "(", "*", ")", "errors"]):
            return diagnostics(self, session, ["show", *w])
        if w in (["processlist"], ["full", "processlist"]):
            return show_processlist(self, session, full=w[0] == "full")
        if w in (["slave", "status"], ["replica", "status"]):
            return replica_status(self, session, replica_names=w[0] == "replica")
        answer = self.show_schema.answer(session, w, toks, sql)
        if answer is not None:
            return answer
        raise parse_error(sql)

    def _show_variables(self, session: Session, scope: str, toks, words: list[str], sql: str) -> list[bytes]:
        rows = [[name, "" if value is None else str(value)] for name, value in self.variable_rows(session, scope)]
        return self.filtered(session, [p.Column("Variable_name"), p.Column("Value")], rows, toks, sql)

    def filtered(self, session: Session, cols: list[p.Column], rows: list[list], toks: list, sql: str,
                 like_column: int = 0) -> list[bytes]:
        """A SHOW's rows after its ``LIKE 'x'`` (on the first column) or ``WHERE …`` (any condition
        over the result's columns, evaluated by the engine), as a result set."""
        if toks:
            word = toks[0][1].lower()
            if word == "like" and len(toks) == 2 and toks[1][0] == "str":
                rx = like_regex(_unquote(toks[1][1]))
                rows = [r for r in rows if rx.match(str(r[like_column]))]
            elif word == "where":
                rows = self.engine.filter_rows([c.name for c in cols], rows, _after_where(sql), self.view(session))
            else:
                raise parse_error(sql)
        return ResultSet(cols, rows, session.status)

    def _show_binlog_events(self, session: Session, toks, sql: str, stream: str | None = None) -> list[bytes]:
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
        group = self.server.group
        served = group.by_file(name) if group and name and stream is None else None
        bdir = (served or self.server.stream_of(session, stream)).bdir
        files = bdir.files()
        if name is None:
            if not files:
                return ResultSet(_EVENT_COLUMNS, [], session.status)
            name = files[0]
        if name not in files:
            raise QueryError(1220, "Error when executing command SHOW BINLOG EVENTS: "
                                   "Could not find target log")
        try:
            rows = show_binlog_events(bdir.file_path(name), name, start, offset, count)
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

    def _purge_before(self, session: Session, expression: str) -> float:
        """PURGE … BEFORE's datetime expression (a literal, or ``NOW() - INTERVAL 1 DAY``) as a time."""
        answer = self.engine.select(parse_statement(f"SELECT {expression}"), "", self.view(session))
        value = answer.rows[0][0] if answer.rows else None
        try:
            return datetime.fromisoformat(str(value)).timestamp()
        except ValueError:
            raise QueryError(1292, f"Incorrect datetime value: '{value}'", "22007") from None

    def _purge_files(self, session: Session, toks, words: list[str], sql: str) -> list[bytes]:
        if words[2:3] == ["before"] and len(words) == 3 and _after_keyword(sql, "before"):
            pass
        elif len(words) != 4 or words[0] not in ("binary", "master") or words[1] != "logs" or words[2] != "to" \
                or toks[3][0] != "str":
            raise parse_error(sql)
        if not session.admin:
            raise QueryError(p.ER_SPECIFIC_ACCESS_DENIED, "Access denied; you need (at least one of) the "
                                                          "SUPER, BINLOG ADMIN privilege(s) for this operation",
                             "42000")
        refusal = getattr(self.server, "purge_refusal", None)    # HA: only the leader purges (gbinlog.ha)
        if refusal is not None and (why := refusal()):
            raise QueryError(1290, why, "HY000")
        if words[2] == "to":
            arg = _unquote(toks[3][1])
            group = self.server.group
            served = (group.by_file(arg) if group else None) or self.server.stream_of(session)
            return self._purge_stream(session, served.bdir, arg, None)
        before = self._purge_before(session, _after_keyword(sql, "before"))
        group = self.server.group
        bound = group.of_user(session.user) if group else None
        # a group: every stream (a user bound to a stream: its stream)
        targets = [bound] if bound else group.streams if group else [self.server.stream_of(session)]
        for served in targets:
            self._purge_stream(session, served.bdir, None, before)
        return [p.ok_packet(status=session.status)]

    def _purge_stream(self, session: Session, bdir, arg: str | None, before: float | None) -> list[bytes]:
        """PURGE BINARY LOGS TO ``arg`` / BEFORE ``before`` in one directory of files."""
        files = bdir.files()
        if arg is not None:
            if arg not in files:
                raise QueryError(p.ER_UNKNOWN_TARGET_BINLOG, "Target log not found in binlog index")
            keep_from = arg
        else:
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


def _with_stream(toks: list, words: list[str]) -> tuple[str | None, list, list[str]]:
    """A SHOW's ``WITH 'stream'`` clause (stream groups, right after the statement's words:
    ``SHOW BINLOG EVENTS WITH 'group1_stream_2' IN …``): (the name, the tokens and words without it)."""
    for head in (["master", "status"], ["binary", "logs"], ["master", "logs"], ["binlog", "events"],
                 ["binary", "log", "status"]):
        i = len(head)
        if words[:i] == head and len(words) > i + 1 and words[i] == "with" and toks[i + 1][0] == "str":
            return _unquote(toks[i + 1][1]), toks[:i] + toks[i + 2:], words[:i] + words[i + 2:]
    return None, toks, words
_EVENT_COLUMNS = [p.Column("Log_name"), p.Column("Pos", p.TYPE_LONGLONG), p.Column("Event_type"),
                  p.Column("Server_id", p.TYPE_LONGLONG), p.Column("End_log_pos", p.TYPE_LONGLONG),
                  p.Column("Info")]


def _after_where(sql: str) -> str:
    return _after_keyword(sql, "where")


def _strip_ident(text: str) -> str:
    if text[:1] in "`'\"":
        return _unquote(text) if text[0] != "`" else text[1:-1]
    return text
