"""``gbinlog run`` end to end (one shared 60 s run):

a live 4-DN bank cluster (real time, 2PC with holes, heartbeats every 200 ms) served over the
replication protocol → ``gbinlog run --config`` (a separate process) → its endpoint → a real MariaDB
replica attached with ``CHANGE MASTER TO``. While it runs: a checker polls the replica's
``SUM(balance)`` every 100 ms (always ``COUNT(*) × 1000``); the service is killed with SIGKILL at
≥ 10 random moments and restarted each time; one DN's endpoint is down for 5 s; the replica's IO
thread is stopped and started again. At the end: the replica's table checksums equal the truth's,
``gbinlog verify --truth`` passes, the service stops cleanly on SIGTERM, and the global binlog is
byte-identical to ``gbinlog build`` over the same DN binlogs (no txn lost, duplicated or reordered
by any crash).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_live_support import (
    ROOT,
    BankChecker,
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

DURATION = 60
KILLS = 10


def files_of(d) -> dict[str, bytes]:
    names = [line.strip().rsplit("/", 1)[-1] for line in (d / "binlog.index").read_text().splitlines() if line.strip()]
    return {n: (d / n).read_bytes() for n in names}


def status(out) -> dict:
    try:
        return json.loads((out / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def test_bank_live_e2e_with_kill9_dn_outage_and_replica_reconnect(tmp_path):
    rng = random.Random(20261121)
    cluster = Cluster(tmp_path, "bank", 4, duration=DURATION, tps=150)
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    out = tmp_path / "global"
    server_port = free_port()
    cfg = write_config(tmp_path / "cluster.toml", out, cluster, ["dn0", "dn1", "dn2", "dn3"], server_port=server_port,
                       extra="[heartbeat]\nstall_ms = 2000\n")
    svc = Service(cfg, tmp_path / "run.log")
    checker = None
    try:
        svc.start()
        wait_for(lambda: first_file_listed(out), 20, "the first global binlog file")
        attach(replica, server_port)
        checker = BankChecker(replica)
        t0 = time.monotonic()
        # Kill moments spread over the run, away from the DN outage (a restart needs every DN up).
        outage_at, replica_bounce_at = 24.0, 40.0
        moments = sorted(rng.uniform(lo, lo + 3.0) for lo in (3, 8, 13, 18, 31, 36, 45, 49, 53, 57))
        assert len(moments) >= KILLS
        done = {"outage": False, "bounce": False}
        kills = 0
        for at in moments:
            while time.monotonic() - t0 < at:
                now = time.monotonic() - t0
                if not done["outage"] and now >= outage_at:
                    done["outage"] = True
                    cluster.sim.stop_server("dn1")
                    time.sleep(5.0)
                    st = status(out)
                    dn1 = next(d for d in st["dns"] if d["dn"] == "dn1")
                    assert dn1["state"] in ("backoff", "connecting"), dn1   # waiting for the DN
                    assert dn1["stalled"] and not next(d for d in st["dns"] if d["dn"] == "dn0")["stalled"]
                    assert st["lag_ms"] > 3000, st["lag_ms"]                  # the merge waits for it
                    cluster.sim.start_server("dn1")
                    wait_for(lambda: (status(out).get("lag_ms") or 1e9) < 2000, 30, "catching up after the outage")
                    dn1 = next(d for d in status(out)["dns"] if d["dn"] == "dn1")
                    assert dn1["state"] == "streaming" and dn1["reconnects"] >= 1, dn1
                if not done["bounce"] and now >= replica_bounce_at:
                    done["bounce"] = True
                    replica.query("STOP SLAVE IO_THREAD")
                    time.sleep(1.0)
                    replica.query("START SLAVE IO_THREAD")
                time.sleep(0.05)
            assert svc.alive(), svc.log_text()[-3000:]
            svc.kill9()
            kills += 1
            time.sleep(rng.uniform(0.0, 0.5))
            svc.start()
        assert kills >= KILLS and done["outage"] and done["bounce"]
        truth = cluster.wait_done(DURATION + 30)
        t_done = time.monotonic()
        want = truth_checksums(replica, truth)
        wait_for(lambda: replica_checksums(replica, truth) == want, 120, "the replica to apply everything", 0.5)
        print(f"workload done at {t_done - t0:.1f} s; replica equal {time.monotonic() - t_done:.1f} s later")
        checker.close()
        assert checker.samples > 300, checker.samples
        assert checker.bad == [], checker.bad[:5]
        bank = truth["bank"]
        assert checker.max_count == bank["accounts"]
        total = replica.query("SELECT SUM(balance), COUNT(*) FROM bank.accounts")[0]
        assert (int(total[0]), int(total[1])) == (bank["expected_total"], bank["accounts"])
        # the last kill may have been moments ago: the IO thread reconnects within a second
        ss = wait_for(lambda: (lambda s: s if s["Slave_IO_Running"] == "Yes" else None)(slave_status(replica)),
                      20, "the replica's IO thread to reconnect")
        assert ss["Slave_SQL_Running"] == "Yes" and ss["Last_SQL_Errno"] == 0, ss
        assert ss["Last_IO_Errno"] in (0, 2003, 2013), ss   # only "connection lost" while the service restarted
        assert svc.terminate() == 0, svc.log_text()[-3000:]
        assert "stopped cleanly" in svc.log_text()
        state = json.loads((out / "state.json").read_text())
        assert {dn for dn, p in state["dns"].items() if p} == {"dn0", "dn1", "dn2", "dn3"}
    finally:
        if checker is not None:
            checker.close()
        svc.ensure_stopped()
        replica.stop()
        cluster.close()
    # The DN binlogs are complete now: a batch build over them gives the same bytes.
    batch = tmp_path / "batch"
    dn_args = [a for d in ("dn0", "dn1", "dn2", "dn3") for a in ("--dn", str(cluster.dir / d))]
    built = subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *dn_args, "--out", str(batch),
                            "--max-file-size", "256KB", "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    live_files, batch_files = files_of(out), files_of(batch)
    assert list(live_files) == list(batch_files) and len(live_files) > 3
    for name in live_files:
        assert live_files[name] == batch_files[name], name
    verified = subprocess.run([sys.executable, "-m", "gbinlog.cli", "verify", str(out), "--truth",
                               str(cluster.dir / "truth.json")], cwd=ROOT, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert svc.starts == KILLS + 1
