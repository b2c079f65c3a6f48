"""A throwaway MariaDB replica on loopback (``gbinlog demo``, ``bench/live.py``, the live tests).

Adapted from ``tests/mariadb.py`` (tests are not part of the installed package): a private
datadir made with ``mariadb-install-db``, ``mariadbd`` on a free port in its own session, stopped
by pid (SIGTERM, then SIGKILL), never a system service. ``attach()`` points it at a gbinlog
endpoint with ``CHANGE MASTER TO`` and starts replication.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pymysql


def find_binary(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin")


def mariadb_available() -> bool:
    return bool(find_binary("mariadbd") and find_binary("mariadb-install-db"))


# Ports below Linux's default ephemeral range (32768-60999): an outgoing connection can take an
# ephemeral port between the moment it is found free and the moment its server binds it.
_LISTEN_PORTS = range(20000, 32768)
_handed_out: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, outside the ephemeral range, never handed out before by this
    process (several servers configured at once each get their own)."""
    for _ in range(500):
        port = random.choice(_LISTEN_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:   # a crowded range: whatever the kernel gives
        s.bind((host, 0))
        return s.getsockname()[1]


class Replica:
    """A running ``mariadbd`` in ``root`` (``start``), attached with ``attach``, ended with ``stop``."""

    def __init__(self, root: Path, port: int, proc: subprocess.Popen) -> None:
        self.root = root
        self.port = port
        self.proc = proc
        self.pid = proc.pid
        self.socket = str(root / "mysqld.sock")

    @classmethod
    def start(cls, root: str | os.PathLike, *, server_id: int = 2, timeout: float = 60) -> Replica:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        mariadbd, install = find_binary("mariadbd"), find_binary("mariadb-install-db")
        if not mariadbd or not install:
            raise RuntimeError("mariadbd / mariadb-install-db not found (apt-get install mariadb-server)")
        if not (root / "data" / "mysql").is_dir():
            out = subprocess.run([install, "--no-defaults", "--user=root", f"--datadir={root}/data",
                                  "--auth-root-authentication-method=normal", "--skip-test-db",
                                  "--skip-name-resolve"], capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {out.stderr.strip()[-500:]}")
        port = free_port()
        args = [mariadbd, "--no-defaults", "--user=root", f"--datadir={root}/data",
                f"--socket={root}/mysqld.sock", f"--port={port}", "--bind-address=127.0.0.1",
                f"--pid-file={root}/mysqld.pid", f"--log-error={root}/error.log",
                f"--server-id={server_id}", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=8M", "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci", "--relay-log=relay-bin", "--skip-log-bin",
                "--innodb-flush-log-at-trx-commit=2", "--sync-relay-log=0", "--sync-master-info=0",
                "--sync-relay-log-info=0"]
        with open(root / "stdout.log", "wb") as out_fh:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out_fh, stderr=out_fh,
                                    start_new_session=True)
        replica = cls(root, port, proc)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                log = (root / "error.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"mariadbd exited with {proc.returncode}: {log.strip()}")
            try:
                replica.connect().close()
                return replica
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    replica.stop()
                    raise RuntimeError(f"mariadbd did not accept connections within {timeout:.0f} s") from None
                time.sleep(0.05)

    def connect(self, db: str | None = None, **kwargs) -> pymysql.connections.Connection:
        kwargs.setdefault("connect_timeout", 5)
        return pymysql.connect(unix_socket=self.socket, user="root", database=db, autocommit=True,
                               charset="utf8mb4", **kwargs)

    def query(self, sql: str, args=None, db: str | None = None) -> list[tuple]:
        with self.connect(db) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def attach(self, host: str, port: int, user: str, password: str, *, file: str = "binlog.000001",
               pos: int = 4, heartbeat: float = 1.0, retry: int = 1) -> None:
        """``CHANGE MASTER TO`` the endpoint (file/position, no GTID) and ``START SLAVE``."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("STOP SLAVE")
            cur.execute("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%s, MASTER_USER=%s, MASTER_PASSWORD=%s, "
                        "MASTER_LOG_FILE=%s, MASTER_LOG_POS=%s, MASTER_USE_GTID=no, "
                        f"MASTER_HEARTBEAT_PERIOD={heartbeat:g}, MASTER_CONNECT_RETRY={retry}",
                        (host, port, user, password, file, pos))
            cur.execute("START SLAVE")

    def slave_status(self) -> dict:
        with self.connect(cursorclass=pymysql.cursors.DictCursor) as conn, conn.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
        return dict(row) if row else {}

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM, wait, SIGKILL: the server is gone when this returns."""
        if self.proc.poll() is not None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(10)
