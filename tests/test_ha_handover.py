"""Hand-over and a lease-store outage: three ``gbinlog run`` members on
a live 4-DN bank cluster, a MariaDB lease store, a real MariaDB replica attached to the leader.

- ``gbinlog ha step-down`` on the leader: exit 0, the next epoch's leader is another member, and the
  replica (still on the old leader's endpoint) sees no error at any 100 ms sample and keeps applying.
- The store SIGSTOPped for 10 s: never two leaders; once the leader's fence runs out (its lease
  could not be renewed) there is no leader at all — the rule is *step down*, since nobody can tell
  whether the lease was taken — while every member keeps writing its own copy and serving (the
  replica advances). After SIGCONT a leader again with the next epoch.
At the end the replica's tables equal the truth and every member's files equal ``gbinlog build``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_ha_run import (
    assert_same_files,
    batch_build_files,
    files_of,
    position,
    role_of,
    wait_for_roles,
)
from tests.test_live_support import (
    ROOT,
    Cluster,
    Service,
    attach,
    first_file_listed,
    replica_checksums,
    slave_status,
    truth_checksums,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow

DURATION = 30
MEMBERS = ("m1", "m2", "m3")
DNS = ("dn0", "dn1", "dn2", "dn3")
LEASE_MS = 1500


class ReplicaWatch:
    """SHOW SLAVE STATUS every 100 ms: every IO/SQL error seen, and the executed positions."""

    def __init__(self, replica: MariaDB) -> None:
        self.replica = replica
        self.errors: list[tuple] = []
        self.positions: list[tuple[float, str, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            ss = slave_status(self.replica)
            if ss.get("Last_IO_Errno") or ss.get("Last_SQL_Errno") or ss.get("Slave_IO_Running") != "Yes":
                self.errors.append((ss.get("Slave_IO_Running"), ss.get("Last_IO_Errno"), ss.get("Last_IO_Error"),
                                    ss.get("Last_SQL_Errno")))
            self.positions.append((time.monotonic(), ss.get("Relay_Master_Log_File"),
                                   int(ss.get("Exec_Master_Log_Pos") or 0)))

    def advanced_between(self, t0: float, t1: float) -> bool:
        inside = [(f, p) for t, f, p in self.positions if t0 <= t <= t1]
        return len(inside) > 2 and inside[-1] > inside[0]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def test_step_down_and_store_outage(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=DURATION, tps=100)
    meta = MariaDB.start(tmp_path / "meta")
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    store = f"mysql://root@/gbinlog_ha?unix_socket={meta.socket}"
    members: dict[str, dict] = {}
    watch = None
    meta_stopped = False
    try:
        for name in MEMBERS:
            m = {"port": free_port(), "metrics": free_port(), "out": tmp_path / name}
            m["cfg"] = write_config(tmp_path / f"{name}.toml", m["out"], cluster, list(DNS), server_port=m["port"],
                                    metrics_port=m["metrics"], extra=f'[ha]\nmember = "{name}"\n'
                                                                      f'lease_ms = {LEASE_MS}\nstore = "{store}"\n')
            m["svc"] = Service(m["cfg"], tmp_path / f"{name}.log")
            m["svc"].start()
            members[name] = m

        def leaders() -> list[str]:
            return [n for n in MEMBERS if role_of(members[n]["metrics"]) == 1]

        def epoch() -> int:
            return int(meta.query("SELECT epoch FROM gbinlog_ha.gbinlog_ha_lease")[0][0])

        wait_for_roles([(m["svc"], m["metrics"]) for m in members.values()])
        first = wait_for(lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(leaders()), 10, "a leader")
        wait_for(lambda: first_file_listed(members[first]["out"]), 20, "the first file")
        attach(replica, members[first]["port"])
        wait_for(lambda: slave_status(replica).get("Slave_IO_Running") == "Yes", 20, "the replica attached")
        watch = ReplicaWatch(replica)
        time.sleep(3)

        # -- step-down, the replica on the old leader sees nothing
        e0 = epoch()
        t_step = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "gbinlog.cli", "ha", "step-down", "--config",
                            str(members[first]["cfg"])], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        second = wait_for(lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(leaders()), 10, "the next leader")
        assert second != first and epoch() == e0 + 1
        assert p.stdout.startswith(f"gbinlog ha: {first} (epoch {e0}) handed over to ") and f"(epoch {e0 + 1})" in p.stdout
        time.sleep(2)
        assert watch.errors == [], watch.errors[:5]
        assert watch.advanced_between(t_step, time.monotonic())
        print(f"step-down: {first} → {second}; {p.stdout.strip()}")

        # -- the lease store down 10 s
        e1 = epoch()
        before = {n: position(members[n]["out"]) for n in MEMBERS}
        os.kill(meta.pid, signal.SIGSTOP)
        meta_stopped = True
        t_down = time.monotonic()
        samples: list[tuple[float, list[str]]] = []
        while time.monotonic() - t_down < 10:
            samples.append((time.monotonic() - t_down, leaders()))
            time.sleep(0.05)
        os.kill(meta.pid, signal.SIGCONT)
        meta_stopped = False
        t_up = time.monotonic()
        assert all(len(ls) <= 1 for _, ls in samples)
        assert all(ls in ([], [second]) for _, ls in samples)           # no other member took over
        late = [ls for t, ls in samples if t > LEASE_MS / 1000 + 0.2]
        assert late and all(ls == [] for ls in late), samples            # the leader stepped down
        after = {n: position(members[n]["out"]) for n in MEMBERS}
        assert all(after[n] > before[n] for n in MEMBERS), (before, after)   # every member kept writing
        assert watch.advanced_between(t_down, t_up)                      # and serving
        back = wait_for(lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(leaders()), 15, "a leader after the outage")
        assert epoch() == e1 + 1
        print(f"store outage: {second} stepped down, {back} leads (epoch {e1 + 1}) "
              f"{time.monotonic() - t_up:.2f} s after the store came back")

        truth = cluster.wait_done(DURATION + 60)
        want = truth_checksums(replica, truth)
        wait_for(lambda: replica_checksums(replica, truth) == want, 120, "the replica to apply everything", 0.5)
        watch.close()
        assert watch.errors == [], watch.errors[:5]
        wait_for(lambda: len({position(m["out"]) for m in members.values()}) == 1, 60, "every member at the end", 0.5)
        for m in members.values():
            assert m["svc"].terminate() == 0, m["svc"].log_text()[-3000:]
        assert "follower" in members[second]["svc"].log_text()
    finally:
        if watch is not None:
            watch.close()
        if meta_stopped:
            os.kill(meta.pid, signal.SIGCONT)
        for m in members.values():
            m["svc"].ensure_stopped()
        cluster.close()
        meta.stop()
        replica.stop()
    batch = tmp_path / "batch"
    want_files = batch_build_files([cluster.dir / d for d in DNS], batch)
    for n in MEMBERS:
        assert_same_files(files_of(members[n]["out"]), want_files, n)
