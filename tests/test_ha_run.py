"""``gbinlog run`` with ``[ha]``: three members (separate processes, each its
own output directory and endpoint) on a live 4-DN bank cluster, sharing a lease in a real MariaDB
meta store. Sampled every 50 ms through each member's /metrics (``gbinlog_ha_role``) and the lease
row: exactly one leader at every sample once the first is elected; ``gbinlog status`` names the
role, epoch and leader; at the end every member's files are byte-identical to a ``gbinlog build``
of the DN binlog directories.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_live_support import ROOT, Cluster, Service, wait_for, write_config

pytestmark = pytest.mark.slow

DURATION = 15
MEMBERS = ("m1", "m2", "m3")
DNS = ("dn0", "dn1", "dn2", "dn3")


def files_of(d) -> dict[str, bytes]:
    names = [line.strip().rsplit("/", 1)[-1] for line in (d / "binlog.index").read_text().splitlines() if line.strip()]
    return {n: (d / n).read_bytes() for n in names}


def batch_build_files(dn_dirs: list, out, max_file_size: str = "256KB") -> dict[str, bytes]:
    """The files of a `gbinlog build` of the DN directories: what every member must hold."""
    dn_args = [a for d in dn_dirs for a in ("--dn", str(d))]
    built = subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *dn_args, "--out", str(out),
                            "--max-file-size", max_file_size, "--no-progress"], cwd=ROOT, capture_output=True,
                           text=True)
    assert built.returncode == 0, built.stderr
    return files_of(out)


def assert_same_files(got: dict[str, bytes], want: dict[str, bytes], member: str) -> None:
    assert list(got) == list(want), member
    for f in want:
        assert got[f] == want[f], (member, f)


def role_of(metrics_port: int) -> int | None:
    """gbinlog_ha_role from the member's /metrics (None if it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r"^gbinlog_ha_role ([0-9.]+)$", text, re.M)
    return int(float(m[1])) if m else None


def wait_for_roles(members: list[tuple[Service, int]], timeout: float = 90) -> None:
    """Every member answers /metrics with its HA role. A member that exited fails at once, and a
    timeout names the members still silent, each with its log's tail: the log says why."""
    deadline = time.monotonic() + timeout
    while True:
        dead = [svc for svc, _ in members if not svc.alive()]
        assert not dead, "\n".join(f"{svc.log}: exited {svc.proc.returncode}\n{svc.log_text()[-2000:]}"
                                    for svc in dead)
        silent = [(svc, port) for svc, port in members if role_of(port) is None]
        if not silent:
            return
        assert time.monotonic() < deadline, "\n".join(
            f"{svc.log}: no role on /metrics port {port} after {timeout} s\n{svc.log_text()[-2000:]}"
            for svc, port in silent)
        time.sleep(0.05)


def status_of(cfg) -> tuple[int, str, dict]:
    p = subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", "--config", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True)
    js = subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", "--config", str(cfg), "--json"], cwd=ROOT,
                        capture_output=True, text=True)
    return p.returncode, p.stdout, json.loads(js.stdout)


def position(out) -> tuple[str, int]:
    try:
        names = (out / "binlog.index").read_text().split()
        return names[-1], (out / names[-1].rsplit("/", 1)[-1]).stat().st_size
    except (OSError, IndexError):
        return "", 0


def test_three_members_one_leader_identical_files(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=DURATION, tps=120)
    meta = MariaDB.start(tmp_path / "meta")
    store = f"mysql://root@/gbinlog_ha?unix_socket={meta.socket}"
    members: dict[str, tuple[Service, int, object, object]] = {}
    try:
        for name in MEMBERS:
            out = tmp_path / name
            mport = free_port()
            cfg = write_config(tmp_path / f"{name}.toml", out, cluster, list(DNS), server_port=free_port(),
                               metrics_port=mport, extra=f'[ha]\nmember = "{name}"\nlease_ms = 1500\n'
                                                         f'store = "{store}"\n')
            svc = Service(cfg, tmp_path / f"{name}.log")
            svc.start()
            members[name] = (svc, mport, cfg, out)
        t0 = time.monotonic()
        wait_for_roles([(m[0], m[1]) for m in members.values()])
        wait_for(lambda: any(role_of(m[1]) == 1 for m in members.values()), 10, "a leader")
        samples: list[list[str]] = []
        rows: list[tuple] = []
        while cluster.thread.is_alive():
            for svc, *_ in members.values():
                assert svc.alive(), svc.log_text()[-3000:]
            samples.append([n for n, m in members.items() if role_of(m[1]) == 1])
            rows.append(meta.query("SELECT holder, epoch FROM gbinlog_ha.gbinlog_ha_lease")[0])
            time.sleep(0.05)
        print(f"{len(samples)} samples over {time.monotonic() - t0:.1f} s")
        assert len(samples) > 30                          # ~0.1–0.3 s a sample: 3 /metrics and the store
        assert all(len(s) == 1 for s in samples), [s for s in samples if len(s) != 1][:5]
        leaders = {s[0] for s in samples}
        assert len(leaders) == 1                          # nobody killed: the lease stays where it is
        leader = leaders.pop()
        assert set(rows) == {(leader, rows[0][1])}        # the store agrees, one epoch throughout
        cluster.wait_done(DURATION + 30)
        # every member reaches the same end (the workload is over: nothing new comes)
        wait_for(lambda: len({position(m[3]) for m in members.values()}) == 1
                 and position(members[leader][3])[1] > 0, 60, "all members at the same position", 0.5)
        code, text, doc = status_of(members[MEMBERS[0]][2])
        assert code == 0, text
        ha = doc["ha"]
        assert ha["member"] == MEMBERS[0] and ha["leader"] == leader
        assert ha["role"] == ("leader" if leader == MEMBERS[0] else "follower")
        assert ha["leader_epoch"] == rows[0][1] and {r["member"] for r in ha["members"]} == set(MEMBERS)
        assert f"HA member {MEMBERS[0]}" in text and f"leader {leader} at" in text
        for svc, *_ in members.values():
            assert svc.terminate() == 0, svc.log_text()[-3000:]
    finally:
        for svc, *_ in members.values():
            svc.ensure_stopped()
        cluster.close()
        meta.stop()
    want = batch_build_files([cluster.dir / d for d in DNS], tmp_path / "batch")
    assert len(want) > 1
    for name in MEMBERS:
        assert_same_files(files_of(tmp_path / name), want, name)
