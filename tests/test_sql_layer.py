"""The endpoint's SQL layer (``dumper.server.sql_engine``, ``sqltext``, ``QueryHandler``) through a
real driver (PyMySQL): statements led by comments as Connector/J sends them, MySQL's expression
semantics (comparisons, arithmetic, CASE, IF, string and date functions, ordered GROUP_CONCAT,
subqueries), session variables that a SET changes for its session only, several statements per
query, and the per-statement time budget (ERR 3024) that keeps every other session answering."""

from __future__ import annotations

import gc
import statistics
import threading
import time
from decimal import Decimal

import pymysql
import pytest

from dumper.server import ServerConfig, start_in_thread
from tests.test_consumers_sql import outputs  # noqa: F401 - the module fixture the server reads
from tests.test_server_support import PASSWORD, USER, USERS, RawClient, header, start_serve_process

# Connector/J 9.1.0's first statement on every connection (NativeSession.loadServerVariables),
# with its leading comment: the 9.x driver sends it so by default.
CONNECTOR_J_9 = (
    "/* mysql-connector-j-9.1.0 (Revision: 3f3c9a9d) */SELECT  @@session.auto_increment_increment AS "
    "auto_increment_increment, @@character_set_client AS character_set_client, @@character_set_connection AS "
    "character_set_connection, @@character_set_results AS character_set_results, @@character_set_server AS "
    "character_set_server, @@collation_connection AS collation_connection, @@collation_server AS "
    "collation_server, @@init_connect AS init_connect, @@interactive_timeout AS interactive_timeout, @@license AS "
    "license, @@lower_case_table_names AS lower_case_table_names, @@max_allowed_packet AS max_allowed_packet, "
    "@@net_write_timeout AS net_write_timeout, @@performance_schema AS performance_schema, @@query_cache_size AS "
    "query_cache_size, @@query_cache_type AS query_cache_type, @@sql_mode AS sql_mode, @@system_time_zone AS "
    "system_time_zone, @@time_zone AS time_zone, @@transaction_isolation AS transaction_isolation, "
    "@@wait_timeout AS wait_timeout")

# Ten copies of information_schema.COLLATIONS joined with nothing to cut them down: billions of rows.
HEAVY = ("SELECT MAX(CONCAT(" + ", ".join(f"{t}.COLLATION_NAME" for t in "abcdefghij") + ")) FROM "
         + ", ".join(f"information_schema.COLLATIONS {t}" for t in "abcdefghij"))


@pytest.fixture(scope="module")
def server(outputs):  # noqa: F811 - the fixture imported above
    with start_in_thread(ServerConfig(dir=outputs["ddl-3dn"], users=USERS, query_workers=2,
                                      max_allowed_packet=32 << 20)) as h:
        yield h


def connect(port: int, **kwargs) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, **kwargs)


def one(conn, sql: str) -> tuple[list[str], list[tuple]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [d[0] for d in cur.description or ()], list(cur.fetchall())


def test_connector_j_connect_query_with_its_comment(server):
    with connect(server.port) as conn:
        names, rows = one(conn, CONNECTOR_J_9)
    assert names == ["auto_increment_increment", "character_set_client", "character_set_connection",
                     "character_set_results", "character_set_server", "collation_connection", "collation_server",
                     "init_connect", "interactive_timeout", "license", "lower_case_table_names",
                     "max_allowed_packet", "net_write_timeout", "performance_schema", "query_cache_size",
                     "query_cache_type", "sql_mode", "system_time_zone", "time_zone", "transaction_isolation",
                     "wait_timeout"]
    values = dict(zip(names, rows[0], strict=True))
    assert values["auto_increment_increment"] == 1 and values["license"] == "GPL"
    assert values["character_set_server"] == "utf8mb4" and values["init_connect"] == ""
    assert values["max_allowed_packet"] == 32 << 20 and values["transaction_isolation"] == "REPEATABLE-READ"


def test_mysql_expressions(server):
    with connect(server.port) as conn:
        names, rows = one(conn, "SELECT 1>0, 2 <= 1, 1+1, 7 DIV 2, 7 % 3, -5, 'abc', NULL, "
                                "CASE WHEN 2 > 1 THEN 'y' ELSE 'n' END, IF(1 > 2, 'a', 'b'), IFNULL(NULL, 3), "
                                "CONCAT('a', NULL), CONCAT_WS('-', 'a', 'b'), SUBSTRING_INDEX('a.b.c', '.', 2), "
                                "SUBSTRING_INDEX('a.b.c', '.', -1), UPPER('x'), 'A' = 'a', 'abc' LIKE 'A%'")
        assert names[:3] == ["1>0", "2 <= 1", "1+1"] and names[6:8] == ["abc", "NULL"]
        assert rows == [(1, 0, 2, 3, 1, -5, "abc", None, "y", "b", 3, None, "a-b", "a.b", "c", "X", 1, 1)]
        _, rows = one(conn, "SELECT DATE_FORMAT('2024-01-02 03:04:05', '%Y-%m'), "
                            "DATE_ADD('2024-01-31', INTERVAL 1 DAY), NOW() - INTERVAL 1 DAY < NOW()")
        assert rows[0][0] == "2024-01" and str(rows[0][1]).startswith("2024-02-01") and rows[0][2] == 1
        _, rows = one(conn, "SELECT 1.5 * 2, 1/4")
        assert rows[0][0] == Decimal("3.0") and float(rows[0][1]) == 0.25


def test_information_schema_aggregates_subqueries_and_joins(server):
    with connect(server.port) as conn:
        _, rows = one(conn, "SELECT TABLE_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION DESC "
                            "SEPARATOR '|') FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'ddl' "
                            "GROUP BY TABLE_NAME ORDER BY TABLE_NAME")
        assert rows and all("|" in r[1] for r in rows)
        one_table, cols = rows[0][0], rows[0][1].split("|")
        _, ordered = one(conn, f"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'ddl' "
                               f"AND TABLE_NAME = '{one_table}' ORDER BY ORDINAL_POSITION")
        assert cols == [r[0] for r in reversed(ordered)]
        _, rows = one(conn, "SELECT t.TABLE_NAME, (SELECT count(1) FROM information_schema.STATISTICS s "
                            "WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME) > 0 AS indexed "
                            "FROM information_schema.TABLES t WHERE t.table_schema = 'DDL' ORDER BY 1")
        assert rows and all(r[1] == 1 for r in rows)
        _, rows = one(conn, "SELECT ENGINE, SUPPORT FROM information_schema.ENGINES WHERE SUPPORT = 'DEFAULT'")
        assert rows == [("InnoDB", "DEFAULT")]


def test_session_variables_belong_to_their_session(server):
    with connect(server.port) as a, connect(server.port) as b:
        one(a, "SET SESSION sql_mode = 'ANSI_QUOTES', @@session.wait_timeout = 100, @x := 1 + 1")
        assert one(a, "SELECT @@sql_mode, @@session.wait_timeout, @@global.wait_timeout, @x")[1] == \
            [("ANSI_QUOTES", 100, 28800, 2)]
        assert one(b, "SELECT @@sql_mode = @@global.sql_mode, @@wait_timeout, @x")[1] == [(1, 28800, None)]
        assert one(a, "SELECT VARIABLE_VALUE FROM performance_schema.session_variables "
                      "WHERE VARIABLE_NAME = 'sql_mode'")[1] == [("ANSI_QUOTES",)]
        assert one(a, "SHOW SESSION VARIABLES LIKE 'wait_timeout'")[1] == [("wait_timeout", "100")]
        assert one(a, "SHOW GLOBAL VARIABLES LIKE 'wait_timeout'")[1] == [("wait_timeout", "28800")]
        one(a, "SET wait_timeout = DEFAULT")
        assert one(a, "SELECT @@wait_timeout")[1] == [(28800,)]
        rows = one(a, "SHOW VARIABLES WHERE Variable_name REGEXP '^(CHARACTER_SET|collation)_c.*'")[1]
        assert [r[0] for r in rows] == ["character_set_client", "character_set_connection", "collation_connection"]
        for sql, code in [("SET GLOBAL wait_timeout = 1", 1238), ("SET no_such_variable = 1", 1193),
                          ("SELECT @@no_such_variable", 1193), ("SELECT no_such_function(1)", 1305),
                          ("SELECT * FROM ddl.t1", 1142), ("SELECT * FROM nowhere.t", 1146)]:
            with pytest.raises(pymysql.err.MySQLError) as exc:
                one(a, sql)
            assert exc.value.args[0] == code, sql


def test_several_statements_in_one_query_only_when_the_client_asks(server):
    with connect(server.port, client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1 AS a; SET @y = 5; SELECT @y AS b")
        results = [list(cur.fetchall())]
        while cur.nextset():
            results.append(list(cur.fetchall()))
        assert results == [[(1,)], [], [(5,)]]
        with pytest.raises(pymysql.err.MySQLError) as exc:   # the error ends the query
            cur.execute("SELECT 1; SELECT @@nope; SELECT 3")
            while cur.nextset():
                pass
        assert exc.value.args[0] == 1193
    with connect(server.port) as conn:
        with pytest.raises(pymysql.err.MySQLError) as exc:
            one(conn, "SELECT 1; SELECT 2")
        assert exc.value.args[0] == 1064


@pytest.mark.slow
def test_a_heavy_query_ends_at_its_budget_while_others_answer_at_once(outputs):  # noqa: F811
    """While one session runs a query over billions of rows, another's SELECT 1 answers within
    100 ms every time and a dump's heartbeats (200 ms) keep coming at under twice their period; the
    heavy one ends with ERR 3024 at its budget (MySQL's max_execution_time)."""
    # the endpoint in a process of its own: what is measured is its loop, not this test process's
    # garbage collector or threads
    directory = outputs["ddl-3dn"]
    proc, port = start_serve_process(directory, USER, PASSWORD)
    gc.collect()
    gc.freeze()       # this process's collector scans only what the measurement allocates
    try:
        _measure_heavy_query(directory, port)
    finally:
        gc.unfreeze()
        proc.terminate()
        proc.wait(10)


def _measure_heavy_query(directory, port: int) -> None:
    outcome: dict = {}

    def heavy() -> None:
        with connect(port) as conn:
            one(conn, "SET max_execution_time = 2000")
            t0 = time.monotonic()
            try:
                one(conn, HEAVY)
            except pymysql.err.MySQLError as exc:
                outcome["error"] = exc.args
            outcome["took"] = time.monotonic() - t0

    # a dump at the end of the files, heartbeats every 200 ms
    files = [line.strip()[2:] for line in (directory / "binlog.index").read_text().splitlines()]
    dump = RawClient(port, USER, PASSWORD)
    dump.query("SET @master_heartbeat_period = 200000000")
    dump.query("SET @master_binlog_checksum = 'CRC32'")
    events = dump.dump(files[-1], (directory / files[-1]).stat().st_size, flags=0)
    beats: list[float] = []
    stop = threading.Event()

    def watch_heartbeats() -> None:
        for event in events:
            if header(event)[1] == 27:
                beats.append(time.monotonic())
            if stop.is_set():
                return

    watcher = threading.Thread(target=watch_heartbeats, daemon=True)
    watcher.start()
    thread = threading.Thread(target=heavy)
    with connect(port) as probe:
        time.sleep(0.5)
        thread.start()
        started = time.monotonic()
        time.sleep(0.2)
        gaps = []
        while thread.is_alive():
            t0 = time.monotonic()
            assert one(probe, "SELECT 1")[1] == [(1,)]
            gaps.append(time.monotonic() - t0)
            time.sleep(0.02)
        thread.join()
        ended = time.monotonic()
    stop.set()
    dump.close()
    assert outcome["error"][0] == 3024, outcome
    assert 1.9 <= outcome["took"] < 4, outcome
    assert len(gaps) > 20 and max(gaps) < 0.1, (max(gaps), statistics.median(gaps))
    during = [b for b in beats if started - 0.4 <= b <= ended + 0.4]
    beat_gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
    assert len(beat_gaps) >= 8 and max(beat_gaps) < 0.4, beat_gaps      # under 2x the period


def test_a_read_lock_pins_the_sessions_position_and_schema_while_the_files_grow(tmp_path):
    """FLUSH TABLES WITH READ LOCK (a connector's schema snapshot): until UNLOCK TABLES, the session's
    SHOW MASTER STATUS and schema are those of the moment it locked; other sessions see the head."""
    import shutil
    from pathlib import Path

    from gbinlog.local_engine import Settings, build
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "ddl-3dn"
    full = tmp_path / "full"
    build(sorted(p for p in fixtures.iterdir() if p.is_dir()), full, settings=Settings(max_file_size=16 << 10))
    files = [line.strip()[2:] for line in (full / "binlog.index").read_text().splitlines() if line.strip()]
    growing = tmp_path / "growing"
    growing.mkdir()
    shutil.copy(full / "meta.db", growing / "meta.db")

    def publish(names):
        for name in names:
            shutil.copy(full / name, growing / name)
        with open(growing / "binlog.index", "a") as index:
            index.writelines(f"./{name}\n" for name in names)

    publish(files[:1])
    with start_in_thread(ServerConfig(dir=growing, users=USERS)) as h, connect(h.port) as locked, \
            connect(h.port) as other:
        assert one(locked, "SHOW GRANTS")[1][0][0].startswith("GRANT SELECT, RELOAD, SHOW DATABASES, LOCK TABLES")
        one(locked, "FLUSH TABLES WITH READ LOCK")
        then = one(locked, "SHOW MASTER STATUS")[1]
        columns_then = one(locked, "SHOW COLUMNS FROM ddl.t1")[1]
        assert then[0][:2] == (files[0], (full / files[0]).stat().st_size)
        publish(files[1:])
        assert one(locked, "SHOW MASTER STATUS")[1] == then
        assert one(locked, "SHOW COLUMNS FROM ddl.t1")[1] == columns_then
        assert one(locked, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'ddl' AND "
                           "TABLE_NAME = 't1' ORDER BY ORDINAL_POSITION")[1] == [r[:1] for r in columns_then]
        now = one(other, "SHOW MASTER STATUS")[1]
        assert now[0][:2] == (files[-1], (full / files[-1]).stat().st_size)
        columns_now = [r[0] for r in one(other, "SHOW COLUMNS FROM ddl.t1")[1]]
        assert [r[0] for r in columns_then] == ["id", "name", "amount", "note"]   # before ADD/DROP COLUMN
        assert columns_now == ["id", "name", "c", "amount"]
        one(locked, "UNLOCK TABLES")
        assert one(locked, "SHOW MASTER STATUS")[1] == now
        for sql, code in [("LOCK TABLES ddl.t1 WRITE", 1290), ("FLUSH BINARY LOGS", 1290)]:
            with pytest.raises(pymysql.err.MySQLError) as exc:
                one(locked, sql)
            assert exc.value.args[0] == code and "refused" in exc.value.args[1], sql
        one(locked, "LOCK TABLES ddl.t1 READ, ddl.t2 READ LOCAL")
        one(locked, "UNLOCK TABLES")
