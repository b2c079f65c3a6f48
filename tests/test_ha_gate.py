"""The follower lag gate (unit level): the endpoint refuses a new dump (by
position or by GTID) with ERR 1236 carrying the gate's text while the gate says so, and serves
again when it does not; the gate's rule (a follower more than ``lag_gate_bytes`` or
``lag_gate_ms`` behind the leader's last reported position refuses, naming the leader's address;
the leader, and a member whose view of the store is older than a lease, serve)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from dumper.ha import HaSettings, LeaseStore, Member
from dumper.server import ServerConfig, start_in_thread
from gbinlog.ha import HaAgent
from gbinlog.local_engine import Settings, build
from tests.test_server_support import PASSWORD, USER, USERS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFUSAL = "gbinlog HA: this member (m2) is 123 bytes behind the leader m1; replicate from the leader at 10.0.0.9:3307"


def read_gtids(port: int, **where) -> list[str]:
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": USER,
                                                     "password": PASSWORD},
                                server_id=417, blocking=False, only_events=[GtidEvent], **where)
    try:
        return [ev.gtid for ev in stream]
    finally:
        stream.close()


def test_endpoint_refuses_dumps_while_the_gate_says_so(tmp_path):
    out = tmp_path / "out"
    build(sorted(p for p in (FIXTURES / "drift-2dn").iterdir() if p.is_dir()), out, settings=Settings())
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        everything = read_gtids(h.port, log_file="binlog.000001", log_pos=4)
        assert len(everything) > 10
        h.server.dump_gate = lambda: REFUSAL
        for where in ({"log_file": "binlog.000001", "log_pos": 4}, {"auto_position": everything[4].replace(":", ":1-")}):
            with pytest.raises(pymysql.err.OperationalError) as e:
                read_gtids(h.port, **where)
            assert e.value.args == (1236, REFUSAL)
        with pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD) as c, c.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")                      # only dumps are gated
            assert cur.fetchall()
        h.server.dump_gate = lambda: None
        assert read_gtids(h.port, auto_position=everything[4].replace(":", ":1-")) == everything[5:]


class Clock:
    def __init__(self) -> None:
        self.ms = 5_000_000

    def __call__(self) -> int:
        return self.ms


def vtso(ms: int) -> str:
    return f"{ms << 22:019d}" + "0" * 35


def agent_for(member: Member, out: Path, last_vtso: str | None) -> HaAgent:
    agent = object.__new__(HaAgent)
    agent.member = member
    agent.settings = member.settings
    agent.streams = None                                    # one global binlog, not a stream group
    agent.runner = SimpleNamespace(out=out, cfg=SimpleNamespace(output=SimpleNamespace(rotate_size=1000)),
                                   progress=SimpleNamespace(last_vtso=last_vtso))
    return agent


def test_gate_rule(tmp_path):
    clock = Clock()
    mono = lambda: clock.ms / 1000  # noqa: E731
    url = tmp_path / "ha.db"
    out = tmp_path / "out"
    out.mkdir()
    (out / "binlog.000001").write_bytes(b"x" * 400)
    (out / "binlog.index").write_text("./binlog.000001\n")
    lead_pos = {"pos": ("binlog.000001", 400, vtso(1_000_000))}
    gate = dict(lag_gate_ms=2000, lag_gate_bytes=1000)
    m1 = Member(HaSettings("m1", "10.0.0.9:3307", lease_ms=1500, **gate), LeaseStore.open(url, clock=clock),
                position=lambda: lead_pos["pos"], monotonic=mono)
    m2 = Member(HaSettings("m2", "10.0.0.8:3307", lease_ms=1500, **gate), LeaseStore.open(url, clock=clock),
                monotonic=mono)
    try:
        a2 = agent_for(m2, out, vtso(1_000_000))
        assert a2.dump_refusal() is None                      # no view of the store yet: serve
        assert m1.tick() == "leader" and m2.tick() == "follower"
        assert agent_for(m1, out, None).dump_refusal() is None      # the leader always serves
        assert a2.dump_refusal() is None                      # level with the leader
        lead_pos["pos"] = ("binlog.000001", 1401, vtso(1_000_500))  # 1001 bytes ahead
        m1.tick()
        m2.tick()
        text = a2.dump_refusal()
        assert text is not None and "1001 bytes / 500 ms behind the leader m1" in text and "10.0.0.9:3307" in text
        lead_pos["pos"] = ("binlog.000001", 900, vtso(1_002_001))  # 500 bytes but 2001 ms ahead
        m1.tick()
        m2.tick()
        assert "500 bytes / 2001 ms behind" in a2.dump_refusal()
        lead_pos["pos"] = ("binlog.000001", 900, vtso(1_001_000))
        m1.tick()
        m2.tick()
        assert a2.dump_refusal() is None                      # within both limits again
        lead_pos["pos"] = ("binlog.000003", 10, vtso(1_009_000))
        m1.tick()
        m2.tick()
        assert a2.dump_refusal() is not None
        clock.ms += 1501                                      # m2's view is older than a lease
        assert a2.dump_refusal() is None
    finally:
        m1.close()
        m2.close()
