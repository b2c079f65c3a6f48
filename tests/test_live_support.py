"""Helpers for the live-service tests (no tests here): a live simulated cluster served over the
replication protocol, a ``cluster.toml`` for it, ``gbinlog run`` as a process, a MariaDB replica
and the truth's table checksums."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gbinlog.replica import free_port
from simulator.live import LiveSimulation, ServeOptions
from simulator.replay import literal
from tests.mariadb import MariaDB

ROOT = Path(__file__).resolve().parents[1]
DN_USER, DN_PASSWORD = "cdc", "cdc-pw"
REPL_USER, REPL_PASSWORD = "repl", "repl-pw"


class Cluster:
    """A ``LiveSimulation`` running in a thread (DN endpoints in this process)."""

    def __init__(self, root: Path, workload: str, dns: int, *, duration: float, tps: int, seed: int = 7,
                 port: int = 0, max_file_size: int = 1 << 20) -> None:
        self.dir = root / "cluster"
        # The DNs listen on port, port+1, …: one of those may be taken by another process on the
        # machine (free_port() vouches for the first only), so a free port is tried again.
        for attempt in range(5):
            self.port = port or free_port()
            self.sim = LiveSimulation(workload, dns, self.dir, seed=seed, tps=tps, duration=duration,
                                      max_file_size=max_file_size,
                                      serve=ServeOptions(port=self.port, user=DN_USER, password=DN_PASSWORD))
            self.thread = threading.Thread(target=self.sim.run, name="test-sim", daemon=True)
            self.thread.start()
            deadline = time.monotonic() + 20
            while len(self.sim.ports) < dns and self.sim.error is None:
                assert time.monotonic() < deadline, "simulated DNs did not start"
                time.sleep(0.02)
            if not (isinstance(self.sim.error, OSError) and self.sim.error.errno == errno.EADDRINUSE) \
                    or port or attempt == 4:
                break
            self.thread.join(10)
            self.sim.stop_servers()
            shutil.rmtree(self.dir, ignore_errors=True)
        assert self.sim.error is None, self.sim.error

    def dn_port(self, index: int) -> int:
        return self.port + index

    def wait_done(self, timeout: float) -> dict:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the simulated workload did not finish"
        assert self.sim.error is None, self.sim.error
        return json.loads((self.dir / "truth.json").read_text())

    def close(self) -> None:
        self.sim.stop()
        self.thread.join(30)
        self.sim.stop_servers()


def write_config(path: Path, out: Path, cluster: Cluster, dns: list[str], *, standby: tuple[str, ...] = (),
                 server_port: int, metrics_port: int = 0, extra: str = "") -> Path:
    lines = [f'[output]\ndir = "{out}"\nrotate_size = "256KB"\n',
             f'[server]\nport = {server_port}\nusers = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n',
             f"[metrics]\nport = {metrics_port}\n", "[source]\nbackoff_initial_ms = 50\nbackoff_max_ms = 500\n", extra]
    for dn in dns:
        lines.append(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {cluster.dn_port(int(dn[2:]))}\n'
                     f'user = "{DN_USER}"\npassword = "{DN_PASSWORD}"\n' + ("standby = true\n" if dn in standby else ""))
    path.write_text("\n".join(lines))
    return path


class Service:
    """``gbinlog run --config`` as a child process."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        with open(self.log, "ab") as fh:
            fh.write(f"--- start {self.starts}\n".encode())
            self.proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(self.config)],
                                         cwd=ROOT, stdout=fh, stderr=fh, start_new_session=True)

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure_stopped(self) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def wait_for(pred, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(interval)


def first_file_listed(out) -> bool:
    """The writer creates ``binlog.000001``, then lists it in ``binlog.index``; the endpoint serves
    what the index lists, so a replica attached in between is told the file does not exist."""
    index = Path(out) / "binlog.index"
    try:
        return "binlog.000001" in index.read_text()
    except FileNotFoundError:
        return False


def attach(replica: MariaDB, port: int) -> None:
    replica.query("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                  "MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no, "
                  "MASTER_HEARTBEAT_PERIOD=0.5, MASTER_CONNECT_RETRY=1", args=(port, REPL_USER, REPL_PASSWORD))
    replica.query("START SLAVE")


def slave_status(replica: MariaDB) -> dict:
    import pymysql
    with replica.connect(cursorclass=pymysql.cursors.DictCursor) as conn, conn.cursor() as cur:
        cur.execute("SHOW SLAVE STATUS")
        return dict(cur.fetchone() or {})


def checksum(server: MariaDB, db: str, table: str, columns: list[str]) -> tuple[int, int]:
    cols = ", ".join(f"`{c}`" for c in columns)
    rows = server.query(f"SELECT COUNT(*), COALESCE(BIT_XOR(CAST(CRC32(CONCAT_WS('|', {cols})) AS UNSIGNED)), 0) "
                        f"FROM `{db}`.`{table}`")
    return int(rows[0][0]), int(rows[0][1])


def truth_checksums(server: MariaDB, truth: dict) -> dict[str, tuple[int, int]]:
    """The truth's final tables loaded into scratch tables on ``server``: their checksums."""
    out = {}
    for key, t in truth["tables"].items():
        columns = [c["name"] for c in t["columns"]]
        scratch = f"truth_{abs(hash(key)) % 10**8}"
        server.query(f"CREATE DATABASE IF NOT EXISTS `{scratch}`")
        server.run_sql(f"USE `{scratch}`;\n{t['create_sql']};\n")
        if t["rows"]:
            values = ", ".join("(" + ", ".join(literal(v, c) for v, c in zip(r, t["columns"], strict=True)) + ")"
                               for r in t["rows"])
            server.run_sql(f"SET time_zone = '+00:00';\nINSERT INTO `{scratch}`.`{t['table']}` VALUES {values};\n")
        out[key] = checksum(server, scratch, t["table"], columns)
        server.query(f"DROP DATABASE `{scratch}`")
    return out


def replica_checksums(server: MariaDB, truth: dict) -> dict[str, tuple[int, int]]:
    out = {}
    for key, t in truth["tables"].items():
        try:
            out[key] = checksum(server, t["db"], t["table"], [c["name"] for c in t["columns"]])
        except Exception:  # noqa: BLE001 - not there yet
            out[key] = None
    return out


class BankChecker:
    """Polls the replica every 100 ms: ``SUM(balance) = COUNT(*) × 1000`` must always hold (accounts
    are created with 1000 and transfers keep the sum), and the count never goes down."""

    def __init__(self, replica: MariaDB, interval: float = 0.1) -> None:
        self.replica = replica
        self.interval = interval
        self.samples = 0
        self.bad: list[tuple] = []
        self.max_count = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        conn = None
        while not self.stop.wait(self.interval):
            try:
                if conn is None:
                    conn = self.replica.connect()
                with conn.cursor() as cur:
                    cur.execute("SELECT COUNT(*), SUM(balance) FROM bank.accounts")
                    count, total = cur.fetchone()
            except Exception:  # noqa: BLE001 - the table comes with the first DDL
                conn = None
                continue
            self.samples += 1
            if count and (int(total) != count * 1000 or count < self.max_count):
                self.bad.append((time.time(), count, int(total)))
            self.max_count = max(self.max_count, count)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
