"""The HA leader lease: the rules (acquire only a free or expired lease, epoch +1
per acquisition, renew only with the current epoch before expiry, release only by the holder) in
SQLite and in a real MariaDB; the fence (a member's local deadline passes before the store lets
anyone else acquire) checked over random schedules of ticks, pauses, clock advances, step-downs
and member clock-rate differences; and real member threads on MariaDB, sampled: never two leaders.
"""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dumper.ha import FencedOut, HaSettings, LeaseStore, Member
from tests.mariadb import MariaDB

LEASE = 1000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory):
    srv = MariaDB.start(tmp_path_factory.mktemp("ha-meta"))
    yield srv
    srv.stop()


_db_counter = iter(range(1_000_000))


@pytest.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.slow)])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'meta.db'}"
    srv = request.getfixturevalue("mariadb")
    return f"mysql://root@/ha_{next(_db_counter)}?unix_socket={srv.socket}"


def test_lease_rules(store_url):
    clock = Clock()
    a, b = LeaseStore.open(store_url, clock=clock), LeaseStore.open(store_url, clock=clock)
    try:
        assert a.read().holder == "" and a.read().epoch == 0
        assert a.acquire("a", "h:1", LEASE, clock()) == 1
        assert b.acquire("b", "h:2", LEASE, clock()) is None            # held and unexpired
        assert a.acquire("a", "h:1", LEASE, clock()) is None            # not even by its own holder
        clock.ms += 600
        assert a.renew("a", 1, LEASE, clock())                          # pushes expiry to +1000 from now
        clock.ms += 900
        assert b.acquire("b", "h:2", LEASE, clock()) is None            # would have expired without the renewal
        assert not b.renew("b", 1, LEASE, clock())                      # not the holder
        assert not a.renew("a", 0, LEASE, clock())                      # a stale epoch
        clock.ms += 100                                                 # exactly at expiry: expired
        assert not a.renew("a", 1, LEASE, clock())                      # too late, even with no one else
        assert b.acquire("b", "h:2", LEASE, clock()) == 2               # takeover: epoch + 1
        row = a.read()
        assert (row.holder, row.address, row.epoch, row.expires_ms) == ("b", "h:2", 2, clock() + LEASE)
        assert not a.renew("a", 1, LEASE, clock())                      # the old leader is fenced
        assert not a.release("a", 1)                                    # and cannot end b's lease
        assert b.read().holder == "b"
        assert b.release("b", 2)                                        # step-down: free at once
        assert b.read().holder == "" and b.read().epoch == 2
        assert a.acquire("a", "h:1", LEASE, clock()) == 3
    finally:
        a.close()
        b.close()


def test_fence_deadline_passes_before_anyone_may_acquire(store_url):
    clock = Clock()
    mono = lambda: clock.ms / 1000  # noqa: E731
    s = HaSettings("a", "h:1", lease_ms=LEASE)
    m = Member(s, LeaseStore.open(store_url, clock=clock), monotonic=mono)
    other = LeaseStore.open(store_url, clock=clock)
    try:
        assert m.tick() == "leader" and m.fence.check() == 1
        clock.ms += 949                                 # 95 % of the lease: still ours
        assert m.fence.check() == 1
        clock.ms += 1
        with pytest.raises(FencedOut):
            m.fence.check()
        assert m.role == "follower"
        assert other.acquire("b", "h:2", LEASE, clock()) is None   # the store still says a: a stopped first
        clock.ms += 50
        assert other.acquire("b", "h:2", LEASE, clock()) == 2
        assert m.tick() == "follower" and m.fence.deadline == 0    # its renewal is refused
    finally:
        m.close()
        other.close()


def test_step_down_hands_over(store_url):
    clock = Clock()
    mono = lambda: clock.ms / 1000  # noqa: E731
    ms = [Member(HaSettings(n, f"h:{i}", lease_ms=LEASE), LeaseStore.open(store_url, clock=clock), monotonic=mono)
          for i, n in enumerate("abc")]
    try:
        assert [m.tick() for m in ms] == ["leader", "follower", "follower"]
        assert ms[0].step_down()
        assert ms[0].tick() == "follower"               # sits out one lease length
        assert ms[1].tick() == "leader" and ms[1].epoch == 2
        assert {r.member: (r.role, r.epoch) for r in ms[2].store.members()} == {
            "a": ("follower", 1), "b": ("leader", 2), "c": ("follower", 0)}
        assert ms[2].leader()["member"] == "a"             # its view is as of its last tick
        assert ms[2].tick() == "follower" and ms[2].leader()["member"] == "b"
        assert {r.member for r in ms[2].members()} == {"a", "b", "c"}
    finally:
        for m in ms:
            m.close()


# -- random schedules: never two valid fences, epochs only go up ------------------------------------
_step = st.one_of(
    st.tuples(st.just("tick"), st.integers(0, 2)),
    st.tuples(st.just("advance"), st.sampled_from([1, 20, 50, 333, 960, 999, 1000, 1001, 1020]) | st.integers(1, 1100)),
    st.tuples(st.just("step_down"), st.integers(0, 2)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=5, max_size=80),
       rates=st.tuples(*[st.sampled_from([0.97, 1.0, 1.03]) | st.floats(0.97, 1.03)] * 3))
@pytest.mark.slow
def test_random_schedules_never_two_leaders(tmp_path, steps, rates):
    """Members tick in any order or not at all (a paused process), with monotonic clocks up to 3 %
    fast or slow: at every step at most one member's fence is valid, that member is the store's
    unexpired holder under the same epoch, and each new leader's epoch is above every earlier one."""
    clock = Clock()
    url = tmp_path / f"meta-{next(_db_counter)}.db"
    ms = [Member(HaSettings(n, n, lease_ms=LEASE), LeaseStore.open(url, clock=clock),
                 monotonic=lambda r=r: clock.ms * r / 1000) for n, r in zip("abc", rates, strict=True)]
    granted: list[int] = []
    try:
        for op, arg in steps:
            if op == "advance":
                clock.ms += arg
            elif op == "tick":
                before = ms[arg].fence.deadline
                if ms[arg].tick() == "leader" and before == 0:
                    granted.append(ms[arg].epoch)
            else:
                ms[arg].step_down()
            valid = [m for m in ms if m.fence.valid()]
            assert len(valid) <= 1, [m.settings.member for m in valid]
            if valid:
                row = ms[0].store.read()
                assert (row.holder, row.epoch) == (valid[0].settings.member, valid[0].epoch)
                assert row.expires_ms > clock.ms
        assert granted == sorted(set(granted))
    finally:
        for m in ms:
            m.store.close()


@pytest.mark.slow
def test_member_threads_on_mariadb(mariadb):
    """Three member threads, lease 600 ms, on a real MariaDB store: sampled every 10 ms, never two
    leaders; the leader's thread stopped without releasing (a kill): another takes over within
    the lease plus one tick, with a higher epoch."""
    url = f"mysql://root@/ha_threads?unix_socket={mariadb.socket}"
    ms = [Member(HaSettings(n, n, lease_ms=600), LeaseStore.open(url)).start() for n in "abc"]
    try:
        samples: list[list[str]] = []

        def sample(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                samples.append([m.settings.member for m in ms if m.role == "leader"])
                time.sleep(0.01)

        sample(1.5)
        assert all(len(s) <= 1 for s in samples)
        leaders = [s[0] for s in samples if s]
        assert len(set(leaders)) == 1 and samples[-1] == leaders[:1]
        old = next(m for m in ms if m.settings.member == leaders[0])
        old_epoch = old.epoch
        old._stop.set()                          # the thread ends, the lease is not released
        old._wake.set()
        old._thread.join(5)
        killed = time.monotonic()
        samples.clear()
        while not any(m.role == "leader" for m in ms if m is not old):
            assert time.monotonic() - killed < 0.6 + 0.2 + 1.0, "no new leader"
            samples.append([m.settings.member for m in ms if m.role == "leader"])
            time.sleep(0.01)
        new = next(m for m in ms if m is not old and m.role == "leader")
        assert new.epoch == old_epoch + 1
        sample(1.0)
        assert all(len(s) <= 1 for s in samples)
        assert {r.member: r.role for r in new.store.members()}[new.settings.member] == "leader"
    finally:
        for m in ms:
            m._stop.set()
        for m in ms:
            m.close()


def test_threads_stop_cleanly(tmp_path):
    m = Member(HaSettings("a", "a", lease_ms=300), LeaseStore.open(tmp_path / "m.db")).start()
    deadline = time.monotonic() + 3
    while m.role != "leader":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    m.close()
    assert LeaseStore.open(tmp_path / "m.db").read().holder == ""       # released on close
    assert not any(t.name == "gbinlog-ha-a" for t in threading.enumerate())


def test_step_down_request_is_seen_at_the_next_renewal(store_url):
    clock = Clock()
    mono = lambda: clock.ms / 1000  # noqa: E731
    a, b = (Member(HaSettings(n, n, lease_ms=LEASE), LeaseStore.open(store_url, clock=clock), monotonic=mono)
            for n in "ab")
    try:
        assert a.tick() == "leader" and b.tick() == "follower"
        assert not b.store.request_step_down(7)          # not the current epoch: nothing asked
        assert a.tick() == "leader"
        assert b.store.request_step_down(1)
        assert a.tick() == "follower" and a.store.read().holder == ""
        assert b.tick() == "leader" and b.epoch == 2
        assert not b.store.step_down_requested(2)        # the request was for epoch 1 only
        clock.ms += 300
        assert b.tick() == "leader"
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_mysql_store_reconnects_after_losing_its_connection(mariadb):
    """A failed call is one LeaseStoreError; the next call connects anew (to the same database)."""
    from dumper.ha import LeaseStoreError
    store = LeaseStore.open(f"mysql://root@/ha_reconnect?unix_socket={mariadb.socket}")
    try:
        assert store.acquire("a", "h:1", 60_000, store.now_ms()) == 1
        conn_id = store.conn.thread_id()
        mariadb.query(f"KILL CONNECTION {conn_id}")
        with pytest.raises(LeaseStoreError):
            store.read()
        row = store.read()
        assert (row.holder, row.epoch) == ("a", 1) and store.conn.thread_id() != conn_id
        assert store.renew("a", 1, 60_000, store.now_ms())
    finally:
        store.close()
