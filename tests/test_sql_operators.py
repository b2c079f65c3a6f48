"""Operators' statements as a MySQL 8 answers them (``dumper.server.operators``), through PyMySQL and a
raw dump client: SHOW [FULL] PROCESSLIST and information_schema.PROCESSLIST list a running dump, a
query session and an idle one; KILL ends the dump; a user who is not an admin sees and kills only
its own sessions (ERR 1095); SHOW REPLICA/SLAVE STATUS are empty; SHOW WARNINGS and @@warning_count
after an error; SHOW GLOBAL STATUS counts; PURGE … BEFORE an expression; and the session log
records every statement with its answer, without a client being able to forge a line."""

from __future__ import annotations

import logging
import os
import socket
import time

import pymysql
import pytest

from dumper.server import ServerConfig, start_in_thread
from tests.test_server_support import RawClient, write_sample_binlog

USERS = {"ops": "ops-pw", "repl": "repl-pw", "other": "other-pw", "bad\nuser": "bad-pw"}


@pytest.fixture
def served(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=20, files=3)
    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, admins=frozenset({"ops"}))) as h:
        yield h, sample


def connect(port: int, user: str) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=USERS[user], autocommit=True)


def rows(conn, sql: str) -> tuple[list[str], list[tuple]]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return [d[0] for d in cur.description or ()], list(cur.fetchall())


def error_of(conn, sql: str) -> tuple[int, str]:
    with pytest.raises(pymysql.err.MySQLError) as exc:
        rows(conn, sql)
    return exc.value.args[0], exc.value.args[1]


def start_dump(port: int, user: str, file: str) -> RawClient:
    client = RawClient(port, user, USERS[user])
    client.query("SET @master_binlog_checksum = 'CRC32'")
    events = client.dump(file, 4, flags=0)          # blocking: the dump waits at the end
    next(events)
    client.events = events
    return client


def test_processlist_and_kill(served):
    h, sample = served
    dump = start_dump(h.port, "repl", sample.files[0])
    with connect(h.port, "ops") as ops, connect(h.port, "repl") as repl, connect(h.port, "other"):
        deadline = time.monotonic() + 5
        while True:
            names, listed = rows(ops, "SHOW FULL PROCESSLIST")
            by_id = {r[0]: r for r in listed}
            dumps = [r for r in listed if r[4] == "Binlog Dump"]
            if dumps or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert names == ["Id", "User", "Host", "db", "Command", "Time", "State", "Info"]
        assert len(listed) == 4 and {r[1] for r in listed} == {"ops", "repl", "other"}
        [dump_row] = dumps
        assert dump_row[1] == "repl" and dump_row[6].startswith("Master has sent all binlog")
        me = [r for r in listed if r[4] == "Query"]
        assert len(me) == 1 and me[0][1] == "ops" and me[0][7] == "SHOW FULL PROCESSLIST"
        assert [r[4] for r in listed if r[1] == "other"] == ["Sleep"]
        assert all(r[2].startswith("127.0.0.1:") and isinstance(r[5], int) for r in listed)
        # information_schema.PROCESSLIST: the same sessions
        _, same = rows(ops, "SELECT ID, USER, COMMAND FROM information_schema.PROCESSLIST ORDER BY ID")
        assert [(r[0], r[1], r[2]) for r in same] == [(r[0], r[1], r[4] if r[4] != "Query" else "Query")
                                                       for r in sorted(listed)]
        # a user without admin sees its own sessions only, and cannot KILL another's (ERR 1095)
        _, own = rows(repl, "SHOW PROCESSLIST")
        assert {r[1] for r in own} == {"repl"} and len(own) == 2
        assert error_of(repl, f"KILL {[r[0] for r in listed if r[1] == 'other'][0]}")[0] == 1095
        assert error_of(ops, "KILL 99999") == (1094, "Unknown thread id: 99999")
        # KILL of the dump ends it: its connection closes
        rows(ops, f"KILL {dump_row[0]}")
        dump.sock.settimeout(5)
        with pytest.raises((ConnectionError, socket.timeout, OSError)):
            for _ in dump.events:
                pass
        deadline = time.monotonic() + 5
        while dump_row[0] in {r[0] for r in rows(ops, "SHOW PROCESSLIST")[1]}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # a user may KILL its own session
        victim = connect(h.port, "repl")
        victim_id = rows(victim, "SELECT CONNECTION_ID()")[1][0][0]
        rows(repl, f"KILL CONNECTION {victim_id}")
        with pytest.raises(pymysql.err.MySQLError):
            for _ in range(50):
                rows(victim, "SELECT 1")
                time.sleep(0.05)
        assert by_id  # the listing above was by id


def test_replica_status_warnings_and_global_status(served):
    h, _ = served
    with connect(h.port, "ops") as ops:
        names, listed = rows(ops, "SHOW SLAVE STATUS")
        assert listed == [] and names[:2] == ["Slave_IO_State", "Master_Host"] and "Seconds_Behind_Master" in names
        names, listed = rows(ops, "SHOW REPLICA STATUS")
        assert listed == [] and names[:2] == ["Replica_IO_State", "Source_Host"] and "Seconds_Behind_Source" in names
        assert len(names) == len(rows(ops, "SHOW SLAVE STATUS")[0])
        assert error_of(ops, "SELECT @@no_such_variable")[0] == 1193
        assert rows(ops, "SHOW WARNINGS")[1] == [("Error", 1193, "Unknown system variable 'no_such_variable'")]
        assert rows(ops, "SHOW COUNT(*) ERRORS") == (["@@session.error_count"], [(1,)])
        assert rows(ops, "SELECT @@warning_count")[1] == [(1,)]
        rows(ops, "SELECT 1")
        assert rows(ops, "SHOW WARNINGS")[1] == []          # a good statement clears them
        status = dict(rows(ops, "SHOW GLOBAL STATUS")[1])
        assert int(status["Threads_connected"]) == 1 and int(status["Connections"]) >= 1
        before = int(status["Com_select"]), int(status["Questions"])
        for _ in range(3):
            rows(ops, "SELECT 1")
        after = dict(rows(ops, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Questions')")[1])
        assert (int(after["Com_select"]), int(after["Questions"])) == (before[0] + 3, before[1] + 4)
        assert int(dict(rows(ops, "SHOW GLOBAL STATUS LIKE 'Bytes_%'")[1])["Bytes_sent"]) > 0


def test_purge_before_an_expression(served):
    h, sample = served
    old = time.time() - 3 * 86400
    for name in sample.files[:-1]:
        os.utime(sample.dir / name, (old, old))
    with connect(h.port, "ops") as ops:
        rows(ops, "PURGE BINARY LOGS BEFORE NOW() - INTERVAL 1 DAY")
        assert [r[0] for r in rows(ops, "SHOW BINARY LOGS")[1]] == sample.files[-1:]


def test_the_session_log_shows_each_statement_with_its_answer(served, caplog):
    h, _ = served
    caplog.set_level(logging.INFO, logger="gbinlog.session")
    with connect(h.port, "bad\nuser") as conn:
        rows(conn, "SELECT 1 AS one,\n2 AS two")
        error_of(conn, "SELECT @@nope")
        rows(conn, "SET @x = 'a\nforged: line'")
    text = caplog.text
    lines = [r.getMessage() for r in caplog.records if r.name == "gbinlog.session" and "query conn=" in r.getMessage()]
    assert any("user=bad\\nuser: SELECT 1 AS one, 2 AS two -> 1 rows in" in m for m in lines), lines
    assert any("SELECT @@nope -> ERROR 1193" in m for m in lines), lines
    assert any("SET @x = 'a forged: line' -> OK" in m for m in lines), lines
    assert all("\n" not in m for m in lines)
    assert not any(line.startswith(("user", "forged")) for line in text.splitlines())


def test_kill_query_interrupts_a_running_statement_and_the_session_goes_on(served):
    h, _ = served
    heavy = ("SELECT MAX(CONCAT(" + ", ".join(f"{t}.COLLATION_NAME" for t in "abcdefghij") + ")) FROM "
             + ", ".join(f"information_schema.COLLATIONS {t}" for t in "abcdefghij"))
    with connect(h.port, "repl") as runner, connect(h.port, "repl") as killer:
        runner_id = rows(runner, "SELECT CONNECTION_ID()")[1][0][0]
        outcome: dict = {}

        def run() -> None:
            t0 = time.monotonic()
            try:
                rows(runner, heavy)
            except pymysql.err.MySQLError as exc:
                outcome["error"] = exc.args
            outcome["took"] = time.monotonic() - t0

        import threading
        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 5
        while not [r for r in rows(killer, "SHOW PROCESSLIST")[1] if r[0] == runner_id and r[4] == "Query"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)                                   # inside the engine by now
        rows(killer, f"KILL QUERY {runner_id}")
        thread.join(10)
        assert outcome["error"] == (1317, "Query execution was interrupted"), outcome
        assert 0.5 < outcome["took"] < 3, outcome         # the budget (10 s) did not end it
        assert rows(runner, "SELECT 1")[1] == [(1,)]      # the connection goes on
