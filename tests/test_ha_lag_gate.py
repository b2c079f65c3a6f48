"""The lag gate end to end: three ``gbinlog run`` members on a live 4-DN
bank cluster (MariaDB lease store, ``lag_gate_bytes`` 64 KB / ``lag_gate_ms`` 1000). A follower is
SIGSTOPped for 30 s under load and SIGCONTed: while it catches up, a new dump (python-mysql-
replication, by position) gets ERR 1236 naming the leader's address; once caught up it serves
again, and what it serves is exactly the leader's stream.
"""

from __future__ import annotations

import os
import signal
import time

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_ha_run import role_of, wait_for_roles
from tests.test_live_support import REPL_PASSWORD, REPL_USER, Cluster, Service, wait_for, write_config

pytestmark = pytest.mark.slow

DURATION = 50
MEMBERS = ("m1", "m2", "m3")
DNS = ("dn0", "dn1", "dn2", "dn3")


def gtids(port: int) -> list[str]:
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": REPL_USER,
                                                     "password": REPL_PASSWORD},
                                server_id=418, blocking=False, only_events=[GtidEvent],
                                log_file="binlog.000001", log_pos=4)
    try:
        return [ev.gtid for ev in stream]
    finally:
        stream.close()


def test_follower_stopped_30s_refuses_then_serves_again(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=DURATION, tps=100)
    meta = MariaDB.start(tmp_path / "meta")
    store = f"mysql://root@/gbinlog_ha?unix_socket={meta.socket}"
    members: dict[str, dict] = {}
    stopped = None
    try:
        for name in MEMBERS:
            m = {"port": free_port(), "metrics": free_port(), "out": tmp_path / name}
            cfg = write_config(tmp_path / f"{name}.toml", m["out"], cluster, list(DNS), server_port=m["port"],
                               metrics_port=m["metrics"],
                               extra=f'[ha]\nmember = "{name}"\nlease_ms = 1500\nstore = "{store}"\n'
                                     'lag_gate_bytes = "64KB"\nlag_gate_ms = 1000\n')
            m["svc"] = Service(cfg, tmp_path / f"{name}.log")
            m["svc"].start()
            members[name] = m
        wait_for_roles([(m["svc"], m["metrics"]) for m in members.values()])
        leader = wait_for(lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(
            [n for n in MEMBERS if role_of(members[n]["metrics"]) == 1]), 10, "a leader")
        follower = next(n for n in MEMBERS if n != leader)
        f = members[follower]
        time.sleep(3)
        assert gtids(f["port"])                              # a follower in step serves
        os.kill(f["svc"].proc.pid, signal.SIGSTOP)
        stopped = f["svc"].proc.pid
        time.sleep(30)
        os.kill(stopped, signal.SIGCONT)
        stopped = None
        t_cont = time.monotonic()
        refusals: list[str] = []
        served_after = None
        while time.monotonic() - t_cont < 60:
            try:
                got = gtids(f["port"])
            except pymysql.err.OperationalError as exc:
                assert exc.args[0] == 1236, exc.args
                refusals.append(exc.args[1])
            else:
                if refusals:
                    served_after = time.monotonic() - t_cont
                    break
            time.sleep(0.1)
        assert refusals, "the follower never refused a dump while catching up"
        addr = f"127.0.0.1:{members[leader]['port']}"
        assert all(f"behind the leader {leader}" in r and addr in r for r in refusals), refusals[:3]
        assert served_after is not None, refusals[-3:]
        print(f"{len(refusals)} refusals, e.g. {refusals[0]!r}; serving again {served_after:.2f} s after SIGCONT")
        lead = gtids(members[leader]["port"])
        assert got and got == lead[:len(got)]               # served while in step: a prefix of the leader's
        cluster.wait_done(DURATION + 60)
        # Once the load ends, the follower serves exactly the leader's whole stream.
        final = wait_for(lambda: (lambda a, b: a if a and a == b else None)(
            gtids(f["port"]), gtids(members[leader]["port"])), 30, "the follower's stream equal to the leader's",
                         interval=0.5)
        assert len(final) >= len(lead)
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        for m in members.values():
            m["svc"].ensure_stopped()
        cluster.close()
        meta.stop()
