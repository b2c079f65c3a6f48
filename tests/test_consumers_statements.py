"""The consumer statement table (``tests/consumer_statements.py``: every driver's and connector's connect
queries, pg_chameleon's schema queries verbatim, operators' statements, expressions) against a throwaway
MariaDB holding the same logical schema: the ``bank-4dn`` fixture served by the endpoint, and on MariaDB the
endpoint's own SHOW CREATE DATABASE / TABLE of every logical database and table.

Each consumer's statements run in order on one connection per side (some depend on the ones before, USE
…). Both answer: the column names and the rows must be equal — rows of a SELECT without ORDER BY as a
multiset, as SQL leaves their order to the server; values are compared as the text protocol carries them
(column types are not). Both refuse: fine. One refuses: a mismatch unless ours must (``EXPECTED_ERRORS``)
or the statement is listed below with its reason. What differs by nature (variables, ids, versions, binlog
names and positions, grants, the server's own catalogs of variables and engines, MariaDB's columns where
MySQL 8 has others) is compared by shape only (``SHAPE``), each class with its reason.

The fast test needs no MariaDB: every statement is answered by the endpoint without a dropped connection,
and only the statements that must fail fail, with a deliberate refusal.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pymysql
import pymysql.converters
import pytest
import sqlglot
from pymysql.constants import CLIENT
from sqlglot import exp

from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.consumer_statements import EXPECTED_ERRORS, STATEMENTS
from tests.mariadb import MariaDB
from tests.test_server_support import PASSWORD, USER, USERS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bank-4dn"
# Values as the text protocol carries them: no decoding to int/Decimal/datetime (encoders kept for SETs).
TEXT = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
DROPPED = (2006, 2013, 2014)     # server gone / lost connection / commands out of sync


def sql_of(consumer: str, purpose: str) -> list[str]:
    """The statements of ``consumer`` for ``purpose`` (a trailing … : purposes starting so), long texts by name."""
    found = [s[2] for s in STATEMENTS if s[0] == consumer and
             (s[1].startswith(purpose[:-1]) if purpose.endswith("…") else s[1] == purpose)]
    assert found, (consumer, purpose)
    return found


# -- exceptions: one side refuses ---------------------------------------------------------------------
_NO_TX_VARS = "MariaDB 10.11 has no @@transaction_isolation / @@transaction_read_only (MySQL 5.7.20+ names; its own is tx_isolation)"
_NO_0900 = "utf8mb4_0900_ai_ci is MySQL 8's collation; MariaDB 10.11 has none of the 0900 collations"
_NO_BINARY_LOG_STATUS = "SHOW BINARY LOG STATUS is MySQL 8.2+ syntax (MariaDB: SHOW MASTER STATUS only)"
_NO_MYSQL_GTID = "MySQL's GTID variables and functions (uuid:1-n sets); MariaDB's GTIDs are domain-server-seq"
# MariaDB refuses, ours answers: features of MySQL 5.7/8 (and Percona) MariaDB does not have.
MARIADB_LACKS: dict[str, str] = {
    **{sql: _NO_TX_VARS for sql in sql_of("connector-j", "connect: server variables…")},
    "SELECT @@session.transaction_isolation": _NO_TX_VARS,
    "SELECT @@session.transaction_read_only": _NO_TX_VARS,
    "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci": _NO_0900,
    "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_0900_ai_ci'": _NO_0900,
    "SHOW BINARY LOG STATUS": _NO_BINARY_LOG_STATUS,
    "show binary log status": _NO_BINARY_LOG_STATUS,
    "SELECT @@GLOBAL.GTID_EXECUTED": _NO_MYSQL_GTID,
    "SELECT @@global.gtid_purged": _NO_MYSQL_GTID,
    "SELECT @@global.gtid_executed, @@global.gtid_purged": _NO_MYSQL_GTID,
    "SELECT @@gtid_mode, @@enforce_gtid_consistency": _NO_MYSQL_GTID,
    "SELECT @@server_id, @@server_uuid": _NO_MYSQL_GTID + " (@@server_uuid is MySQL's)",
    **{sql: _NO_MYSQL_GTID for sql in sql_of("debezium", "GTID: server set minus offset set")},
    **{sql: _NO_MYSQL_GTID for sql in sql_of("operators", "GTID arithmetic")},
    "LOCK TABLES FOR BACKUP": "Percona Server's backup lock (Debezium's minimal_percona mode); MariaDB's is BACKUP STAGE",
    "SHOW REPLICAS": "MySQL 8.0.22+ name of SHOW SLAVE HOSTS",
    "SELECT @@super_read_only, @@read_only": "@@super_read_only is MySQL's (5.7.8+)",
    "SELECT @@binlog_row_value_options": "MySQL 8's partial-JSON binlog setting",
    **{sql: "performance_schema.global_variables is MySQL 5.7+'s (MariaDB: information_schema.GLOBAL_VARIABLES)"
       for sql in sql_of("operators", "variables via performance_schema")},
    **{sql: "REGEXP_LIKE() is MySQL 8's" for sql in sql_of("expressions", "REGEXP")},
}
# Ours refuses, MariaDB answers (besides EXPECTED_ERRORS): decisions.
OURS_REFUSE: dict[str, str] = {
    # The endpoint announces 5.7.44 by default, and 5.7 has no binlog_expire_logs_seconds (8.0's and MariaDB
    # 10.6+'s; 5.7 has expire_logs_days, which answers): a client branches on the version it reads and on
    # ERR 1193, so the variables follow the announced version (a 10.x version answers it:
    # test_expire_logs_seconds_follows_the_version).
    "SELECT @@binlog_expire_logs_seconds": "5.7 (our announced version) has no binlog_expire_logs_seconds",
    "SELECT @@binlog_transaction_compression": "8.0.20+'s; 5.7 has none (nor has MariaDB: both refuse it)",
}


# -- shape only -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """How a statement whose values are ours by nature is compared: ``columns`` "same" (names equal),
    "common" (the columns both servers have; MySQL 8 and MariaDB differ in some SHOW outputs) or "grants"
    (``Grants for user@host``); ``rows`` "count" (as many), "any" (how many is the server's own too) or
    "values" (equal on the compared columns but ``ignore``)."""

    reason: str
    columns: str = "same"
    rows: str = "count"
    ignore: tuple[str, ...] = ()
    own_session: bool = False      # only the asking session's row (Info = the statement): others come and go


VALUES = Shape("the server's own values: its version, ids, user, host, clock, binlog names and settings")
STATUS = Shape("which status counters a server keeps, and their values, are its own", rows="any")
UPTIME = Shape("Uptime (seconds since each started) and Threads_connected are the server's own")
VARIABLES = Shape("which system variables and status counters a server has, and their values, are its own "
                  "(MySQL 5.7/8 vs MariaDB 10.11 catalogs, configuration: sql_mode, binlog_row_metadata …)",
                  rows="any")
BINLOG = Shape("binlog files, positions and events are each server's own (MySQL also shows Executed_Gtid_Set)",
               columns="common")
BINLOGS = Shape("how many binlog files and events a server has is its own", rows="any")
DIAGNOSTICS = Shape("the diagnostics area describes the session's previous statements, and before these a "
                    "statement MariaDB refuses (SHOW REPLICAS, an 0900 collation, @@transaction_read_only) "
                    "was answered by ours", rows="any")
GRANTS = Shape("grants are the account's own (ours: the endpoint's read-only user, MariaDB's: root)",
               columns="grants", rows="any")
STORAGE = Shape("MariaDB adds Max_index_length/Temporary (Ignored for MySQL 8's Visible/Expression); Data_length "
                "and Create_time describe MariaDB's InnoDB files, which a binlog endpoint has none of",
                columns="common", rows="values", ignore=("Data_length", "DATA_LENGTH", "Create_time", "CREATE_TIME"))
PRIVILEGES = Shape("Privileges are the account's own (ours reads, MariaDB's root does everything)",
                   rows="values", ignore=("Privileges",))
SESSIONS = Shape("MariaDB adds Progress, TIME_MS …; ids, users, hosts, times and states are each server's own",
                 columns="common", rows="values", ignore=("Id", "ID", "User", "USER", "Host", "HOST", "Time", "TIME",
                                                          "State", "STATE"), own_session=True)
REPLICA = Shape("not a replica, both empty; MySQL 8.0.22+ names SHOW REPLICA STATUS's columns Replica_*/Source_*, "
                "MariaDB keeps Slave_*/Master_* (and has its own extra ones)", columns="common", rows="values")
ENGINES = Shape("each server's storage engines (MySQL 8's list vs MariaDB's Aria, MRG_MyISAM …)", rows="any")
SHAPE: dict[str, Shape] = {
    **{sql: VALUES for sql in (
        "SELECT CONNECTION_ID()", "SELECT version()", "SELECT VERSION()", "select @@version_comment",
        "SELECT @@global.gtid_binlog_pos",      # MariaDB's GTID position in its own binlog
        "SELECT @@log_bin, @@log_bin_basename, @@binlog_format, @@binlog_row_image, @@binlog_checksum",
        "SELECT @@version, @@version_comment, @@hostname, @@port", "SELECT CURRENT_USER(), USER(), CONNECTION_ID()",
        "SELECT USER, COUNT(*) AS n FROM information_schema.PROCESSLIST GROUP BY USER ORDER BY n DESC",
        "SELECT * FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'",
        *sql_of("expressions", "current time"), *sql_of("expressions", "information functions"))},
    **{sql: VARIABLES for sql in (
        "SHOW VARIABLES", "SHOW VARIABLES LIKE 'BINLOG_ROW_METADATA';", "show global variables like 'gtid_purged'",
        "SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'", "SHOW VARIABLES WHERE Variable_name = 'sql_mode'",
        "SHOW GLOBAL VARIABLES LIKE 'binlog_row_value_options'", "SHOW VARIABLES LIKE 'gtid_mode'",
        "SHOW VARIABLES LIKE 'log_slave_updates'", "SHOW VARIABLES LIKE 'enforce_gtid_consistency'",
        "SHOW GLOBAL VARIABLES LIKE 'gtid_mode';", "SHOW GLOBAL VARIABLES LIKE 'server_uuid';",
        "SHOW VARIABLES LIKE 'binlog%'", "SHOW GLOBAL VARIABLES LIKE '%gtid%'",
        *sql_of("go-mysql", "syncer: semi-sync probe"),       # MariaDB builds semi-sync in; ours has no plugin
        "SHOW VARIABLES WHERE Variable_name IN ('max_binlog_size', 'binlog_expire_logs_seconds')",
        *sql_of("debezium", "legacy snapshot…"))},
    **{sql: BINLOG for sql in (
        "SHOW MASTER STATUS", "show master status", "SHOW MASTER STATUS;", "SHOW BINLOG EVENTS LIMIT 5",
        "show binlog events limit 1", "SHOW BINLOG EVENTS IN 'binlog.000001' FROM 4 LIMIT 10",
        "SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 2, 3")},
    **{sql: BINLOGS for sql in ("SHOW BINARY LOGS", "SHOW MASTER LOGS", "SHOW BINLOG EVENTS",
                                "SHOW BINLOG EVENTS IN 'binlog.000001'")},
    **{sql: DIAGNOSTICS for sql in ("SHOW WARNINGS", "SHOW ERRORS", "SHOW WARNINGS LIMIT 10", "SHOW COUNT(*) WARNINGS",
                                    "SELECT @@warning_count", "SELECT @@error_count")},
    "SHOW GLOBAL STATUS": STATUS, "SHOW GLOBAL STATUS LIKE 'Uptime'": UPTIME,
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Uptime', 'Threads_connected')": UPTIME,
    "SHOW STATUS LIKE 'Threads_connected'": UPTIME,       # a closed session may still count a moment
    "SHOW GRANTS": GRANTS, "SHOW GRANTS FOR CURRENT_USER": GRANTS,
    **{sql: STORAGE for sql in ("SHOW TABLE STATUS LIKE 'accounts';", "SHOW TABLE STATUS FROM `bank`",
                                "SHOW KEYS FROM `accounts` FROM `bank`", "show index from `bank`.`accounts`",
                                "SHOW INDEX FROM `accounts` FROM `bank`", *sql_of("go-mysql", "schema: IsTableExist"))},
    "SHOW FULL COLUMNS FROM `accounts` FROM `bank`": PRIVILEGES, "show full columns from `bank`.`accounts`": PRIVILEGES,
    **{sql: SESSIONS for sql in ("SHOW PROCESSLIST", "SHOW FULL PROCESSLIST",
                                 "SELECT * FROM information_schema.PROCESSLIST")},
    **{sql: REPLICA for sql in ("SHOW REPLICA STATUS", "SHOW SLAVE STATUS", "SHOW SLAVE STATUS;")},
    "SHOW SLAVE HOSTS": Shape("MySQL also shows Slave_UUID", columns="common", rows="values"),
    "SHOW COLLATION WHERE Charset = 'utf8mb4' AND `Default` = 'Yes'": Shape(
        "MySQL 8 adds Pad_attribute", columns="common", rows="values"),
    "SHOW ENGINES": ENGINES,
}

# -- gaps -------------------------------------------------------------------------------------------
# Ours is wrong here and MariaDB right, not yet fixed (the SET and status handling in queries.py /
# operators.py) or a deliberate scope limit: names are compared, rows are not.
KNOWN_GAPS: dict[str, str] = {
    "SELECT @@session.sql_mode": "SET sql_mode = 'TRADITIONAL' is stored as written; MySQL expands a combination "
                                 "mode (STRICT_TRANS_TABLES,…,TRADITIONAL,…): queries.py _set",
    "SHOW SESSION STATUS LIKE 'Ssl_version'": "no Ssl_* status variables (MySQL shows Ssl_version = '' without TLS)",
    "SHOW STATUS LIKE 'Ssl_version'": "no Ssl_* status variables",
    "SHOW STATUS LIKE 'Ssl_cipher'": "no Ssl_* status variables",
    "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.COLUMNS ORDER BY TABLE_SCHEMA":
        "information_schema.TABLES/COLUMNS list the logical schema's tables, not information_schema's own",
}
# MariaDB's own schemas, which a binlog endpoint does not have: left out of its rows where schemas are listed.
SYSTEM_SCHEMAS = {"mysql", "performance_schema", "sys"}
SCHEMA_LISTS = {"SHOW DATABASES", "show databases", "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.COLUMNS "
                "ORDER BY TABLE_SCHEMA", *sql_of("debezium", "database collations"),
                *sql_of("maxwell", "schema capture: databases…")}
# SHOW DATABASES: 5.7 (our announced version) lists information_schema first, MariaDB (and 8.0) sort it in.
UNORDERED_SHOWS = {"SHOW DATABASES", "show databases"}
# MariaDB writes integer display widths (bigint(20)); MySQL 8.0.19+ does not, and ours follows 8.0.
_WIDTH = re.compile(r"\b(tinyint|smallint|mediumint|int|bigint|year)\(\d+\)")


# -- running --------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    error: tuple | None = None                  # (code, message)
    results: list[tuple[list[str] | None, list[tuple]]] | None = None    # per result: (names, rows)


def run_group(connect, statements: list[str]) -> list[Outcome]:
    """The statements in order on one connection (a new one after a dropped connection)."""
    out = []
    conn = connect()
    try:
        for sql in statements:
            try:
                with conn.cursor() as cur:
                    cur.execute(sql)
                    results = []
                    while True:
                        names = [d[0] for d in cur.description] if cur.description else None
                        rows = [tuple(_text(v) for v in r) for r in cur.fetchall()] if names else []
                        results.append((names, rows))
                        if not cur.nextset():
                            break
                out.append(Outcome(results=results))
            except pymysql.err.MySQLError as exc:
                out.append(Outcome(error=tuple(exc.args)))
                if exc.args and exc.args[0] in DROPPED:
                    conn.close()
                    conn = connect()
    finally:
        conn.close()
    return out


def _text(value: object) -> object:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def run_all(connect) -> dict[int, Outcome]:
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(STATEMENTS):
        groups.setdefault(s[0], []).append(i)
    outcomes: dict[int, Outcome] = {}
    for indexes in groups.values():
        outcomes.update(zip(indexes, run_group(connect, [STATEMENTS[i][2] for i in indexes]), strict=True))
    return outcomes


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    out = tmp_path_factory.mktemp("bank") / "global"
    build(sorted(p for p in FIXTURE.iterdir() if p.is_dir()), out, settings=Settings())
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        yield h


def ours_connect(port: int):
    return lambda: pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, conv=TEXT,
                                   autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)


@pytest.fixture(scope="module")
def ours(served) -> dict[int, Outcome]:
    return run_all(ours_connect(served.port))


# -- fast: ours alone -------------------------------------------------------------------------------
# Deliberate refusals: table data (1142), read-only (1290), KILL of an unknown session (1094), an
# unknown function (1305: Aurora's, asked to tell Aurora apart).
REFUSALS = {1142, 1290, 1094, 1305}


def test_the_table_names_the_fixtures_logical_schema():
    truth = json.loads((FIXTURE / "truth.json").read_text())
    tables = {v["table"]: [c["name"] for c in v["columns"]] for v in truth["tables"].values() if v["db"] == "bank"}
    assert tables["accounts"] == ["id", "name", "balance"] and "amount" in tables["audit_log"]
    for sql in [s[2] for s in STATEMENTS]:
        for table in re.findall(r"`bank`\.`(\w+)`", sql):
            assert table in tables, sql
    listed = set(MARIADB_LACKS) | set(OURS_REFUSE) | set(SHAPE) | set(KNOWN_GAPS) | SCHEMA_LISTS
    assert listed <= {s[2] for s in STATEMENTS}, listed - {s[2] for s in STATEMENTS}


def test_every_statement_is_answered_and_only_the_expected_ones_refused(ours):
    allowed = EXPECTED_ERRORS | set(OURS_REFUSE)
    dropped = {STATEMENTS[i][2]: o.error for i, o in ours.items() if o.error and o.error[0] in DROPPED}
    unexpected = {STATEMENTS[i][2]: o.error for i, o in ours.items() if o.error and STATEMENTS[i][2] not in allowed}
    assert not dropped and not unexpected, (dropped, unexpected)
    for i, o in ours.items():
        sql = STATEMENTS[i][2]
        if sql in EXPECTED_ERRORS:
            assert o.error is not None and o.error[0] in REFUSALS, (sql, o)
        if sql in OURS_REFUSE:
            assert o.error is not None and o.error[0] == 1193, (sql, o)


def test_expire_logs_seconds_follows_the_version(served):
    """binlog_expire_logs_seconds is 8.0's and MariaDB 10.6+'s: a server announcing a 10.x version answers
    it; one announcing 5.7 (the default) refuses it as 5.7 does (and binlog_transaction_compression, 8.0's)
    and answers expire_logs_days."""
    cfg = served.server.config
    with start_in_thread(ServerConfig(dir=cfg.dir, users=USERS, version="10.11.6-MariaDB-log")) as h10:
        conn = ours_connect(h10.port)()
        with conn, conn.cursor() as cur:
            cur.execute("SELECT @@binlog_expire_logs_seconds, @@version")
            assert list(cur.fetchall()) == [(str(int(cfg.expire_logs_seconds)), "10.11.6-MariaDB-log")]
    conn = ours_connect(served.port)()
    with conn, conn.cursor() as cur:
        cur.execute("SELECT @@expire_logs_days")
        for sql in ("SELECT @@binlog_expire_logs_seconds", "SELECT @@binlog_transaction_compression"):
            with pytest.raises(pymysql.err.OperationalError) as info:
                cur.execute(sql)
            assert info.value.args[0] == 1193


# -- slow: against MariaDB --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mariadb(served, tmp_path_factory):
    """A MariaDB holding the endpoint's logical schema, made from the endpoint's own SHOW CREATE DATABASE /
    TABLE; its binlog on (named binlog.*, as the table's statements name ours) and performance_schema on."""
    server = MariaDB.start(tmp_path_factory.mktemp("mariadb"), extra_args=(
        "--log-bin=binlog", "--binlog-format=ROW", "--binlog-row-image=FULL", "--performance-schema=ON"))
    try:
        ddl = []
        with ours_connect(served.port)() as conn, conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            for (db,) in [r for r in cur.fetchall() if r[0] != "information_schema"]:
                cur.execute(f"SHOW CREATE DATABASE `{db}`")
                ddl += [cur.fetchone()[1], f"USE `{db}`"]
                cur.execute(f"SHOW TABLES FROM `{db}`")
                for (table,) in cur.fetchall():
                    cur.execute(f"SHOW CREATE TABLE `{db}`.`{table}`")
                    ddl.append(cur.fetchone()[1])
        assert any(s.startswith("CREATE TABLE `accounts`") for s in ddl)
        with server.connect() as conn, conn.cursor() as cur:
            for statement in ddl:
                cur.execute(statement)
        yield server
    finally:
        server.stop()


def _unordered(sql: str) -> bool:
    """A SELECT without ORDER BY: SQL leaves the order of its rows to the server."""
    if not re.match(r"\s*(/\*.*?\*/)?\s*(select|with|\()", sql, re.I | re.S):
        return False
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except sqlglot.errors.SqlglotError:
        return False
    return isinstance(tree, (exp.Select, exp.Union)) and not tree.args.get("order")


def _theirs(sql: str, results: list) -> list:
    """MariaDB's answer in MySQL 8's forms: no integer display widths, without its own system schemas."""
    out = []
    for names, rows in results:
        rows = [tuple(_WIDTH.sub(r"\1", v) if isinstance(v, str) else v for v in r) for r in rows]
        if sql in SCHEMA_LISTS:
            rows = [r for r in rows if not SYSTEM_SCHEMAS & set(r)]
        out.append((names, rows))
    return out


def compare(sql: str, mine: list, theirs: list) -> str | None:
    """None when the answers agree as this statement's comparison says, else what differs."""
    theirs = _theirs(sql, theirs)
    if len(mine) != len(theirs):
        return f"{len(mine)} result sets, MariaDB {len(theirs)}"
    shape = SHAPE.get(sql)
    for (names, rows), (their_names, their_rows) in zip(mine, theirs, strict=True):
        if shape is None or shape.columns == "same":
            if names != their_names:
                return f"columns {names} != {their_names}"
            cols = names or []
        elif shape.columns == "grants":
            if not (len(names) == len(their_names) == 1 and re.fullmatch(r"Grants for \S+@\S+", names[0])):
                return f"columns {names}, MariaDB {their_names}"
            cols = names
        else:
            cols = [n for n in names if n in their_names]
            if len(cols) < min(len(names), len(their_names)) // 3:
                return f"columns {names} share little with {their_names}"
        if shape is not None and shape.rows != "values":
            if any(len(r) != len(names) for r in rows) or (shape.rows == "count" and len(rows) != len(their_rows)):
                return f"shape: {len(rows)} rows, MariaDB {len(their_rows)}"
            continue
        if sql in KNOWN_GAPS:
            continue
        if shape is not None and shape.own_session:
            rows = [r for r in rows if sql in r]
            their_rows = [r for r in their_rows if sql in r]
            if len(rows) != 1 or len(their_rows) != 1:
                return f"the asking session: {rows} and MariaDB {their_rows}"
        keep = [c for c in cols if shape is None or c not in shape.ignore]
        mine_rows = [tuple(r[names.index(c)] for c in keep) for r in rows]
        their_proj = [tuple(r[their_names.index(c)] for c in keep) for r in their_rows]
        if _unordered(sql) or sql in UNORDERED_SHOWS:
            mine_rows, their_proj = (sorted(x, key=lambda r: [(v is None, str(v)) for v in r])
                                     for x in (mine_rows, their_proj))
        if mine_rows != their_proj:
            return f"rows {mine_rows[:5]} != MariaDB {their_proj[:5]}"
    return None


@pytest.mark.slow
def test_every_statement_answers_as_mariadb_does(ours, mariadb):
    theirs = run_all(lambda: mariadb.connect(conv=TEXT, client_flag=CLIENT.MULTI_STATEMENTS))
    tally: Counter[str] = Counter()
    mismatches = []
    for i, (consumer, purpose, sql, *_) in enumerate(STATEMENTS):
        mine, their = ours[i], theirs[i]
        where = f"#{i} {consumer}: {purpose}: {' '.join(sql.split())[:120]}"
        if mine.error and their.error:
            tally["both refuse"] += 1
        elif mine.error:
            if sql in EXPECTED_ERRORS or sql in OURS_REFUSE:
                tally["ours refuses (expected)" if sql in EXPECTED_ERRORS else "exception"] += 1
            else:
                mismatches.append(f"{where}: ours refuses {mine.error}, MariaDB answers")
        elif their.error:
            if sql in MARIADB_LACKS:
                tally["exception"] += 1
            else:
                mismatches.append(f"{where}: MariaDB refuses {their.error}, ours answers")
        elif sql in EXPECTED_ERRORS:
            mismatches.append(f"{where}: ours must refuse it")
        elif (diff := compare(sql, mine.results, their.results)) is not None:
            mismatches.append(f"{where}: {diff}")
        else:
            tally["equal" if sql not in SHAPE and sql not in KNOWN_GAPS else
                  "gap (names only)" if sql in KNOWN_GAPS else f"shape ({SHAPE[sql].rows})"] += 1
    for sql in MARIADB_LACKS:        # each claim holds: MariaDB refuses it
        assert all(theirs[i].error for i, s in enumerate(STATEMENTS) if s[2] == sql), sql
    print("\nconsumer statements vs MariaDB:", dict(sorted(tally.items())))
    assert not mismatches, "\n".join(mismatches)
