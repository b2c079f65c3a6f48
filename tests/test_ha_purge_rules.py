"""PURGE in an HA group, the rules (``dumper.ha.purge``), on real directories and a real
lease store (SQLite; MariaDB in the slow run), with a fake store clock and fake monotonic clocks:
the leader records its horizon under its epoch before it removes a file, a follower removes the
same prefix but never a file its own replica is reading nor its newest file, a fenced ex-leader
records and removes nothing, a PURGE done by hand on the leader is recorded and followed, and a
follower refuses PURGE BINARY LOGS naming the leader.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dumper.ha import HaSettings, LeaseStore, Member
from dumper.ha.purge import purge_round
from dumper.server.binlogdir import BinlogDir
from dumper.server.retention import Directory
from tests import test_ha_lease
from tests.test_ha_lease import Clock

LEASE = 1000
mariadb = test_ha_lease.mariadb          # the fixtures: SQLite, and MariaDB in the slow run
store_url = test_ha_lease.store_url


class Mono:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Retention:
    def __init__(self, max_total_size: int = 0) -> None:
        self.expire_logs_seconds = 0.0
        self.max_total_size = max_total_size


class Target(Directory):
    """A directory with a connected replica reading ``reading`` (None: no replica)."""

    reading: str | None = None

    def files_in_use(self) -> set[str]:
        return {self.reading} if self.reading else set()


def make_dir(d: Path, n: int, size: int = 1000, max_total: int = 0) -> Target:
    d.mkdir(parents=True)
    names = [f"binlog.{i:06d}" for i in range(1, n + 1)]
    for name in names:
        (d / name).write_bytes(b"x" * size)
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    return Target(BinlogDir(d, "binlog"), Retention(max_total))


def files(t: Target) -> list[str]:
    return list(t.bdir.files())


def run_on(target: Target):
    return lambda fn, *args: fn(target, *args)


def member(name: str, url: str, clock: Clock, mono: Mono) -> Member:
    return Member(HaSettings(name, f"h:{name}", lease_ms=LEASE, store=url), LeaseStore.open(url, clock=clock),
                  monotonic=mono)


def test_leader_records_then_purges_followers_follow(store_url, tmp_path):
    clock, mono = Clock(), Mono()
    a, b = member("a", store_url, clock, mono), member("b", store_url, clock, mono)
    da = make_dir(tmp_path / "a", 8, max_total=5500)       # the leader keeps 5 files of 1000 bytes
    db = make_dir(tmp_path / "b", 8, max_total=0)          # the follower's own retention: off (ignored anyway)
    try:
        assert a.tick() == "leader" and b.tick() == "follower"
        db.reading = "binlog.000002"                       # a replica reads the follower's second file
        assert purge_round(b, run_on(db), retention_on=True, now=0) == []        # nothing recorded yet
        gone = purge_round(a, run_on(da), retention_on=True, now=0)
        assert gone == [f"binlog.00000{i}" for i in (1, 2, 3)]
        assert a.store.purge_horizon() == ("binlog.000004", "a", 1)              # recorded under epoch 1
        assert purge_round(b, run_on(db), retention_on=True, now=0) == ["binlog.000001"]
        assert files(db)[0] == "binlog.000002"             # the file its replica reads stays, and all after it
        db.reading = "binlog.000006"                       # the replica moved on
        assert purge_round(b, run_on(db), retention_on=True, now=0) == ["binlog.000002", "binlog.000003"]
        assert files(db) == files(da) and files(db)[0] == "binlog.000004"     # never beyond the horizon
        db.reading = None
        assert purge_round(b, run_on(db), retention_on=True, now=0) == []
        # a PURGE done by hand on the leader: recorded at its next round, then followed
        da.bdir.purge("binlog.000006")
        assert purge_round(a, run_on(da), retention_on=False, now=0) == []
        assert a.store.purge_horizon()[0] == "binlog.000006"
        assert purge_round(b, run_on(db), retention_on=True, now=0) == ["binlog.000004", "binlog.000005"]
        assert files(db) == files(da)
    finally:
        a.close()
        b.close()


def test_follower_never_purges_its_newest_file(store_url, tmp_path):
    clock, mono = Clock(), Mono()
    a, b = member("a", store_url, clock, mono), member("b", store_url, clock, mono)
    da = make_dir(tmp_path / "a", 6, max_total=1500)
    db = make_dir(tmp_path / "b", 3)                       # far behind: it has written 3 files only
    try:
        a.tick()
        b.tick()
        assert purge_round(a, run_on(da), retention_on=True, now=0) == [f"binlog.00000{i}" for i in range(1, 6)]
        assert purge_round(b, run_on(db), retention_on=True, now=0) == ["binlog.000001", "binlog.000002"]
        assert files(db) == ["binlog.000003"]             # its newest (being written) stays
    finally:
        a.close()
        b.close()


def test_fenced_ex_leader_records_and_purges_nothing(store_url, tmp_path):
    clock, mono_a, mono_b = Clock(), Mono(), Mono()
    a, b = member("a", store_url, clock, mono_a), member("b", store_url, clock, mono_b)
    da = make_dir(tmp_path / "a", 8, max_total=3500)
    db = make_dir(tmp_path / "b", 8, max_total=3500)
    try:
        assert a.tick() == "leader"
        mono_a.t += LEASE / 1000                           # a is paused past its fence …
        clock.ms += LEASE + 1
        assert b.tick() == "leader" and b.epoch == 2       # … and b took over
        assert a.role == "follower"                        # a's fence ran out: it may not purge
        assert purge_round(a, run_on(da), retention_on=True, now=0) == []
        assert len(files(da)) == 8 and a.store.purge_horizon()[0] == ""
        # even a member that still believes it leads (a stale epoch) cannot record a horizon
        assert not a.store.record_purge("a", 1, "binlog.000007", clock())
        assert purge_round(b, run_on(db), retention_on=True, now=0) == [f"binlog.00000{i}" for i in range(1, 6)]
        assert b.store.purge_horizon() == ("binlog.000006", "b", 2)
        assert a.tick() == "follower"
        assert purge_round(a, run_on(da), retention_on=True, now=0) == [f"binlog.00000{i}" for i in range(1, 6)]
        assert files(da) == files(db)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_purge_binary_logs_on_a_follower_is_refused_and_a_follower_waits(role):
    from gbinlog.ha import HaAgent
    agent = HaAgent.__new__(HaAgent)
    agent.settings = HaSettings("m2", "h:2")
    agent.member = type("M", (), {"role": role, "leader": lambda self: {"member": "m1", "address": "h:1"}})()
    refusal = agent.purge_refusal()
    # and a dump asking for what this member lacks: the leader answers at once, a follower waits
    assert agent.catch_up_wait() == (0.0 if role == "leader" else 5.0)
    if role == "leader":
        assert refusal is None
    else:
        assert refusal == ("gbinlog HA: this member (m2) is a follower: it purges what the leader purged; run PURGE "
                           "BINARY LOGS on the leader m1 at h:1")


def test_rounds_purge_a_directory_no_endpoint_serves(tmp_path):
    """``gbinlog run`` with ``server.port = 0``: its status loop runs the retention rounds."""
    from dumper.server.retention import Rounds
    t = make_dir(tmp_path / "out", 6)
    assert Rounds.for_directory(t.bdir.path, Retention(0)) is None                  # retention off: no rounds
    rounds = Rounds.for_directory(t.bdir.path, Retention(2500))
    assert rounds.due() == [f"binlog.00000{i}" for i in range(1, 5)]             # keeps 2 files of 1000 bytes
    assert rounds.due() == [] and files(Target(BinlogDir(t.bdir.path, "binlog"), None)) == \
        ["binlog.000005", "binlog.000006"]


def test_purge_binary_logs_logged_and_refused_on_a_follower(tmp_path, caplog):
    """PURGE BINARY LOGS over the endpoint: each outcome in the session log (ok, denied, an HA
    follower's refusal naming the leader — ERR 1290 to the client)."""
    import logging

    import pymysql

    from dumper.server import ServerConfig, start_in_thread
    from tests.test_server_support import ADMIN, ADMIN_PASSWORD, PASSWORD, USER, USERS
    t = make_dir(tmp_path / "d", 5)
    handle = start_in_thread(ServerConfig(dir=t.bdir.path, users=USERS, admins={ADMIN}, port=0))
    caplog.set_level(logging.INFO, logger="gbinlog.session")

    def purge(user: str, password: str, to: str) -> tuple | None:
        with pymysql.connect(host="127.0.0.1", port=handle.port, user=user, password=password) as c, \
                c.cursor() as cur:
            try:
                cur.execute(f"PURGE BINARY LOGS TO '{to}'")
            except pymysql.err.OperationalError as exc:
                return exc.args
        return None

    try:
        assert purge(ADMIN, ADMIN_PASSWORD, "binlog.000002") is None
        assert purge(USER, PASSWORD, "binlog.000003")[0] == 1227
        handle.server.purge_refusal = lambda: "gbinlog HA: this member (m2) is a follower: …"
        assert purge(ADMIN, ADMIN_PASSWORD, "binlog.000004") == (1290, "gbinlog HA: this member (m2) is a follower: …")
    finally:
        handle.stop()
    assert files(t) == ["binlog.00000" + str(i) for i in range(2, 6)]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("PURGE BINARY LOGS TO")]
    assert len(lines) == 3, lines
    assert lines[0].startswith(f"PURGE BINARY LOGS TO 'binlog.000002' by user={ADMIN} from=127.0.0.1 conn=")
    assert lines[0].endswith(": ok")
    assert lines[1].endswith("ERROR 1227: Access denied; you need (at least one of) the SUPER, BINLOG ADMIN "
                             "privilege(s) for this operation")
    assert lines[2].endswith("ERROR 1290: gbinlog HA: this member (m2) is a follower: …")


def make_stream_dirs(root: Path, counts: list[int], max_total: int = 0) -> list[Target]:
    """A stream group's directories: stream ``k`` holds ``counts[k]`` files of 1000 bytes."""
    out = []
    for k, n in enumerate(counts):
        d = root / f"stream{k}"
        d.mkdir(parents=True)
        base = f"group1_stream_{k}_binlog"
        names = [f"{base}.{i:06d}" for i in range(1, n + 1)]
        for name in names:
            (d / name).write_bytes(b"x" * 1000)
        (d / f"{base}.index").write_text("".join(f"./{n}\n" for n in names))
        out.append(Target(BinlogDir(d, base), Retention(max_total)))
    return out


def test_stream_group_leader_records_every_streams_horizon_in_one_write(store_url, tmp_path):
    from dumper.ha.purge import group_horizon, purge_round_group

    clock, mono = Clock(), Mono()
    a, b = member("a", store_url, clock, mono), member("b", store_url, clock, mono)
    lead = make_stream_dirs(tmp_path / "a", [6, 4], max_total=2500)   # the leader keeps 2 files a stream
    follow = make_stream_dirs(tmp_path / "b", [6, 3])                # the follower: stream 1 behind
    try:
        assert a.tick() == "leader" and b.tick() == "follower"
        follow[0].reading = "group1_stream_0_binlog.000002"
        assert purge_round_group(b, [run_on(t) for t in follow], retention_on=True, now=0) == []
        gone = purge_round_group(a, [run_on(t) for t in lead], retention_on=True, now=0)
        assert gone == [f"group1_stream_0_binlog.00000{i}" for i in (1, 2, 3, 4)] + \
            [f"group1_stream_1_binlog.00000{i}" for i in (1, 2)]
        horizon = a.store.purge_horizon()
        assert horizon == ("streams:5,3", "a", 1) and group_horizon(horizon[0], 2) == [5, 3]
        # the follower: stream 0 stops at the file its replica reads, stream 1 never purges its newest
        gone = purge_round_group(b, [run_on(t) for t in follow], retention_on=True, now=0)
        assert gone == ["group1_stream_0_binlog.000001", "group1_stream_1_binlog.000001",
                        "group1_stream_1_binlog.000002"]
        assert files(follow[0])[0] == "group1_stream_0_binlog.000002"
        assert files(follow[1]) == ["group1_stream_1_binlog.000003"]
        follow[0].reading = None
        assert purge_round_group(b, [run_on(t) for t in follow], retention_on=True, now=0) == \
            [f"group1_stream_0_binlog.00000{i}" for i in (2, 3, 4)]
        assert files(follow[0]) == files(lead[0])
        # nothing new to purge: the leader records nothing more
        assert purge_round_group(a, [run_on(t) for t in lead], retention_on=True, now=0) == []
        assert a.store.purge_horizon()[0] == "streams:5,3"
    finally:
        a.close()
        b.close()


def test_stream_group_position_for_the_lag_gate(tmp_path):
    from gbinlog.ha import bytes_behind, group_position

    streams = {"count": 2, "hash": "table", "group": "group1"}
    make_stream_dirs(tmp_path / "m", [3, 1])
    # two full files before stream 0's newest at 1000 bytes each counted as rotate_size, plus the newest
    assert group_position(tmp_path / "m", streams, 4000) == ("group1.000001", 2 * 4000 + 1000 + 1000)
    mine = group_position(tmp_path / "m", streams, 4000)
    assert bytes_behind(tmp_path / "m", mine, ("group1.000001", mine[1] + 777), 4000) == 777
    assert bytes_behind(tmp_path / "m", mine, ("group1.000001", mine[1] - 5), 4000) == 0
