"""``gbinlog run --engine spark`` on the live simulator with a MariaDB replica.

A live 3-DN bank cluster writes its DN binlog directories in real time and serves them over the
replication protocol; the Spark streaming service (a separate process: ``gbinlog run --engine
spark``) reads them in micro-batches — the ``cluster.toml`` names dn0 by host:port (the
local engine's config, protocol DNs included) and the others by directory — and serves the
global binlog on its endpoint, where a real MariaDB replica is attached. The service is killed with SIGKILL in the middle of a ``foreachBatch``
(after half of the batch's transactions were handed on) and restarted: Spark replays that batch
with the same offsets, the sink drops what was written. At the end the replica's checksums equal
the truth's, the bank total held on the replica throughout, the service stops cleanly on SIGTERM,
and the files are byte-identical to ``gbinlog build`` over the finished DN binlogs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from gbinlog.replica import free_port
from simulator.live import LiveSimulation, ServeOptions
from tests.mariadb import MariaDB
from tests.spark_support import fast_java_options
from tests.test_live_support import (
    DN_PASSWORD,
    DN_USER,
    REPL_PASSWORD,
    REPL_USER,
    ROOT,
    BankChecker,
    attach,
    first_file_listed,
    replica_checksums,
    slave_status,
    truth_checksums,
    wait_for,
)

pytestmark = pytest.mark.slow

DNS = 3
DURATION = 40   # the replica is sampled while the cluster runs: long enough on a loaded machine


class SparkService:
    """The streaming service as a child process (own process group), log in ``log``."""

    def __init__(self, config, log) -> None:
        self.config, self.log = config, log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, env: dict | None = None) -> None:
        self.starts += 1
        jopts = fast_java_options()
        cmd = [sys.executable, "-m", "gbinlog.cli", "run", "--engine", "spark", "--config", str(self.config),
               "--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", f"spark.driver.extraJavaOptions={jopts}", "--conf", "spark.driver.memory=1g"]
        with open(self.log, "ab") as fh:
            fh.write(f"--- start {self.starts}\n".encode())
            self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=fh, start_new_session=True,
                                         env=dict(os.environ, **(env or {})))

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def terminate(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def ensure_stopped(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)   # the driver's JVM and Python workers
            except ProcessLookupError:
                pass

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def files_of(d) -> dict[str, bytes]:
    names = [line.strip().rsplit("/", 1)[-1] for line in (d / "binlog.index").read_text().splitlines() if line.strip()]
    return {n: (d / n).read_bytes() for n in names}


def test_spark_streaming_live_bank_kill9_mid_batch_and_replica(tmp_path):
    cluster_dir = tmp_path / "cluster"
    sim = LiveSimulation("bank", DNS, cluster_dir, seed=11, tps=60, duration=DURATION, max_file_size=256 << 10,
                         serve=ServeOptions(port=0, user=DN_USER, password=DN_PASSWORD))
    sim_thread = threading.Thread(target=sim.run, name="test-sim", daemon=True)
    sim_thread.start()
    wait_for(lambda: all((cluster_dir / f"dn{i}").is_dir() for i in range(DNS)) and "dn0" in sim.ports, 20,
             "the DN directories and dn0's endpoint")
    out = tmp_path / "global"
    port = free_port()
    config = tmp_path / "cluster.toml"
    config.write_text(f'[output]\ndir = "{out}"\nrotate_size = "128KB"\n'
                      f'[server]\nport = {port}\nusers = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n'
                      + f'[[dn]]\nid = "dn0"\nhost = "127.0.0.1"\nport = {sim.ports["dn0"]}\n'
                        f'user = "{DN_USER}"\npassword = "{DN_PASSWORD}"\n'
                      + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{cluster_dir / f"dn{i}"}"\n' for i in range(1, DNS)))
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    svc = SparkService(config, tmp_path / "run.log")
    checker = None
    try:
        # run 1 dies by SIGKILL inside foreachBatch of its first batch (the backlog: it always has
        # data, however slowly the JVM starts on a loaded machine), half of it handed on
        svc.start({"GBINLOG_SPARK_KILL_AT_BATCH": "0"})
        assert svc.wait(120) == -signal.SIGKILL, svc.log_text()[-3000:]
        assert "kill -9 in the middle of the batch" in svc.log_text()
        ckpt = out / "spark-checkpoint"
        assert (ckpt / "offsets" / "0").exists() and not (ckpt / "commits" / "0").exists()
        svc.ensure_stopped()
        # run 2 recovers: the binlog is cut to its last whole transaction, batch 0 is replayed
        svc.start()
        wait_for(lambda: first_file_listed(out), 60, "the first global binlog file")
        attach(replica, port)
        # every 20 ms: the service's two starts take most of the cluster's run, so the replica applies
        # mostly while the service catches up, which now takes 1-2 s (at 100 ms, 13 samples once)
        checker = BankChecker(replica, interval=0.02)
        sim_thread.join(DURATION + 60)
        assert not sim_thread.is_alive() and sim.error is None, sim.error
        truth = json.loads((cluster_dir / "truth.json").read_text())
        want = truth_checksums(replica, truth)
        wait_for(lambda: replica_checksums(replica, truth) == want, 120, "the replica to apply everything", 0.5)
        checker.close()
        assert checker.bad == [], checker.bad[:5]
        assert checker.samples > 20, checker.samples
        bank = truth["bank"]
        total = replica.query("SELECT SUM(balance), COUNT(*) FROM bank.accounts")[0]
        assert (int(total[0]), int(total[1])) == (bank["expected_total"], bank["accounts"])
        ss = slave_status(replica)
        assert ss["Slave_SQL_Running"] == "Yes" and ss["Last_SQL_Errno"] == 0, ss
        assert svc.terminate() == 0, svc.log_text()[-3000:]
        assert "stopped cleanly" in svc.log_text()
        commits = sorted(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
        assert 0 in commits and commits[-1] >= 1            # the killed batch was redone, others followed
    finally:
        if checker is not None:
            checker.close()
        svc.ensure_stopped()
        replica.stop()
        sim.stop()
        sim_thread.join(30)
        sim.stop_servers()
    # the DN binlogs are complete: a batch build over them gives the same bytes
    batch = tmp_path / "batch"
    built = subprocess.run([sys.executable, "-m", "gbinlog.cli", "build",
                            *[a for i in range(DNS) for a in ("--dn", str(cluster_dir / f"dn{i}"))],
                            "--out", str(batch), "--max-file-size", "128KB", "--no-progress"],
                           cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    live_files, batch_files = files_of(out), files_of(batch)
    assert list(live_files) == list(batch_files) and len(live_files) >= 2
    for name in live_files:
        assert live_files[name] == batch_files[name], name
    verified = subprocess.run([sys.executable, "-m", "gbinlog.cli", "verify", str(out), "--truth",
                               str(cluster_dir / "truth.json")], cwd=ROOT, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
