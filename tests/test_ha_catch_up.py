"""A follower within the lag gate but behind what a client asks for waits instead of refusing (issue
18): the endpoint serves a directory holding the first files of a ``gbinlog build`` (a follower that
is behind); python-mysql-replication asks for transactions or a file it has not written yet. Its
connection stays open (a file:pos client gets heartbeats naming the place it asked for), and when
the rest of the files arrive it is served from exactly the next transaction / the asked position.
Past ``catch_up_wait`` the client gets ERR 1236 saying the member waited; without it (a leader, a
plain endpoint) the answer is MySQL's ERR 1236 at once, as before.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent, HeartbeatLogEvent, RotateEvent

from dumper.server import ServerConfig, start_in_thread
from dumper.server.gtid_dump import MORE_TEXT
from tests.test_consumers_gtid import CONN, build_fixture, gno_by_vtso, index
from tests.test_server_support import USERS


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    return build_fixture("bank-4dn", tmp_path_factory.mktemp("full") / "out", max_file_size=16 << 10)


def behind(full: Path, d: Path, files: int) -> Path:
    """A member that has written the first ``files`` files of ``full``."""
    d.mkdir()
    names = index(full)[:files]
    for n in names:
        shutil.copy(full / n, d / n)
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    return d


def catch_up(full: Path, d: Path, handle) -> None:
    names = index(full)
    for n in names:
        if not (d / n).exists():
            shutil.copy(full / n, d / n)
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    handle.notify()


def last_gno_of(full: Path, name: str) -> int:
    from binlog import EventType, read_all
    return max(ev.body.gno for ev in read_all(full / name) if ev.header.type_code == EventType.GTID)


def serve(d: Path, wait: float | None):
    handle = start_in_thread(ServerConfig(dir=d, users=USERS, port=0, poll_interval=0.02))
    if wait is not None:
        handle.server.catch_up_wait = lambda: wait
    return handle


def read(port: int, result: dict, **where) -> None:
    stream = BinLogStreamReader(connection_settings={**CONN, "port": port}, server_id=418, blocking=False,
                                only_events=[GtidEvent, HeartbeatLogEvent, RotateEvent], **where)
    t0 = time.monotonic()
    try:
        for ev in stream:
            if isinstance(ev, HeartbeatLogEvent):
                result.setdefault("heartbeats", []).append(ev.ident)
            elif isinstance(ev, RotateEvent):
                result.setdefault("rotates", []).append(ev.next_binlog)
            else:
                result.setdefault("first_at", time.monotonic() - t0)
                result.setdefault("gnos", []).append(ev.gno)
    except pymysql.err.OperationalError as exc:
        result["error"] = exc.args
        result["error_at"] = time.monotonic() - t0
    finally:
        stream.close()


def test_gtid_client_ahead_waits_then_is_served_from_the_next_transaction(full, tmp_path):
    names = index(full)
    assert len(names) >= 5
    d = behind(full, tmp_path / "f", 2)
    uuid = next(iter(gno_by_vtso(full).values())).split(":")[0]
    have = last_gno_of(full, names[2]) - 1                  # the client has one txn more than file 3 ends before
    end = last_gno_of(full, names[-1])
    handle = serve(d, 5.0)
    result: dict = {}
    try:
        reader = threading.Thread(target=read, args=(handle.port, result), kwargs={"auto_position": f"{uuid}:1-{have}"})
        reader.start()
        time.sleep(1.0)
        assert reader.is_alive() and not result.get("gnos")   # connected, waiting: nothing sent, no error
        catch_up(full, d, handle)
        reader.join(20)
    finally:
        handle.stop()
    assert "error" not in result, result
    assert result["first_at"] >= 1.0
    assert result["gnos"] == list(range(have + 1, end + 1))     # exactly what it lacked, nothing repeated


def test_file_pos_client_ahead_waits_with_heartbeats(full, tmp_path):
    names = index(full)
    d = behind(full, tmp_path / "f", 2)
    handle = serve(d, 5.0)
    result: dict = {}
    try:
        reader = threading.Thread(target=read, args=(handle.port, result),
                                  kwargs={"log_file": names[3], "log_pos": 4, "resume_stream": True,
                                          "slave_heartbeat": 0.2})
        reader.start()
        time.sleep(1.2)
        assert reader.is_alive() and not result.get("gnos")
        catch_up(full, d, handle)
        reader.join(20)
    finally:
        handle.stop()
    assert "error" not in result, result
    assert len(result.get("heartbeats", [])) >= 3 and set(result["heartbeats"]) == {names[3]}, result
    assert result["rotates"][0] == names[3]
    first = last_gno_of(full, names[2]) + 1
    assert result["gnos"][0] == first and result["gnos"] == list(range(first, last_gno_of(full, names[-1]) + 1))


@pytest.mark.parametrize("wait", [0.6, None])
def test_past_the_bound_or_without_ha_err_1236(full, tmp_path, wait):
    d = behind(full, tmp_path / "f", 2)
    uuid = next(iter(gno_by_vtso(full).values())).split(":")[0]
    beyond = last_gno_of(full, index(full)[-1]) + 3
    handle = serve(d, wait)
    result: dict = {}
    try:
        read(handle.port, result, auto_position=f"{uuid}:1-{beyond}")
    finally:
        handle.stop()
    code, text = result["error"]
    assert code == 1236 and text.startswith(MORE_TEXT), text
    if wait is None:
        assert "waited" not in text and result["error_at"] < 0.5
    else:
        assert "this member is catching up with the HA leader and waited 0.6 s" in text
        assert 0.6 <= result["error_at"] < 3


@pytest.mark.slow
def test_follower_briefly_behind_keeps_a_gtid_client_waiting_real_members(tmp_path):
    """Two ``gbinlog run`` members (SQLite lease store) on a live 2-DN cluster. Three times: the
    follower is SIGSTOPped for 1.5 s once pmr has logged in to it; at SIGCONT pmr asks it
    (auto-position) for everything the leader has written meanwhile — more than the follower has. The follower (within its lag gate) keeps it
    waiting, catches up, and serves from exactly the next transaction: no ERR 1236."""
    from gbinlog.replica import free_port
    from tests.test_ha_purge import VerboseService
    from tests.test_ha_run import role_of
    from tests.test_live_support import REPL_PASSWORD, REPL_USER, Cluster, wait_for, write_config

    cluster = Cluster(tmp_path, "bank", 2, duration=25, tps=100)
    store = f"sqlite:///{tmp_path / 'ha.db'}"
    members: dict[str, dict] = {}
    conn = {"host": "127.0.0.1", "user": REPL_USER, "password": REPL_PASSWORD}

    def executed(port: int) -> tuple[str, int]:
        with pymysql.connect(**conn, port=port) as c, c.cursor() as cur:
            cur.execute("SELECT @@gtid_executed")
            text = cur.fetchone()[0]
            if not text:
                return "", 0
            uuid, span = text.split(":")
            return uuid, int(span.rsplit("-", 1)[1])

    rounds = []
    try:
        for name in ("m1", "m2"):
            m = {"port": free_port(), "metrics": free_port(), "out": tmp_path / name}
            cfg = write_config(tmp_path / f"{name}.toml", m["out"], cluster, ["dn0", "dn1"], server_port=m["port"],
                               metrics_port=m["metrics"], extra=f'[ha]\nmember = "{name}"\nlease_ms = 1500\n'
                                                                f'store = "{store}"\nlag_gate_ms = 3000\n')
            m["svc"] = VerboseService(cfg, tmp_path / f"{name}.log")
            m["svc"].start()
            members[name] = m
            if name == "m1":
                wait_for(lambda: role_of(members["m1"]["metrics"]) == 1, 60, "m1 leading")
        m1, m2 = members["m1"], members["m2"]
        wait_for(lambda: role_of(m2["metrics"]) == 0, 60, "m2 following")
        wait_for(lambda: executed(m2["port"])[1] > 50, 60, "the follower writing")
        for _ in range(3):
            time.sleep(1.5)
            result = read_after_falling_behind(conn, m1["port"], m2["port"], m2["svc"].proc.pid, executed)
            rounds.append(result)
            have = result["have"]
            assert "error" not in result, result
            assert result["gnos"] == list(range(have + 1, have + 6)), result
        log = m2["svc"].log_text()
        waits = [ln for ln in log.splitlines() if "waits (this member" in ln or "caught up after" in ln]
        print(rounds, waits)
        assert "waits up to 5 s (this member is catching up): it asks for GTIDs past the last written here" in log
        assert "caught up after" in log
        for m in members.values():
            assert m["svc"].terminate() == 0, m["svc"].log_text()[-3000:]
    finally:
        for m in members.values():
            if m["svc"].alive():
                os.kill(m["svc"].proc.pid, signal.SIGCONT)
            m["svc"].ensure_stopped()
        cluster.close()


def read_after_falling_behind(conn: dict, leader_port: int, port: int, pid: int, executed) -> dict:
    """pmr on the follower at ``port``: once its stream connection is logged in, the follower (``pid``)
    is stopped 1.5 s and the client's auto-position becomes everything the leader has meanwhile
    (more than the follower has); then the first 5 GTIDs it reads."""
    result: dict = {"connections": 0}
    stream: BinLogStreamReader | None = None

    def connect_then_fall_behind(**settings) -> pymysql.connections.Connection:
        c = pymysql.connect(**settings)
        result["connections"] += 1
        if result["connections"] == 1:             # the stream connection (pmr opens its ctl one after)
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(1.5)
                uuid, have = executed(leader_port)
                result["have"] = have
                stream.auto_position = f"{uuid}:1-{have}"
            finally:
                os.kill(pid, signal.SIGCONT)
        return c

    uuid, before = executed(leader_port)
    stream = BinLogStreamReader(connection_settings={**conn, "port": port}, server_id=420, blocking=True,
                                only_events=[GtidEvent], auto_position=f"{uuid}:1-{before}",
                                pymysql_wrapper=connect_then_fall_behind)
    try:
        for ev in stream:
            result.setdefault("gnos", []).append(ev.gno)
            if len(result["gnos"]) == 5:
                break
    except pymysql.err.OperationalError as exc:
        result["error"] = exc.args
    finally:
        stream.close()
    return result
