"""A throwaway MariaDB server on loopback for tests.

Started from a data directory template made once per test session, stopped by pid. Never a
system service, never a fixed port.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql

_TEMPLATE: Path | None = None


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if not found:
        raise RuntimeError(f"{name} not found: run ./dev.sh (it installs mariadb-server/client)")
    return found


def _free_port() -> int:
    from gbinlog.replica import free_port
    return free_port()


def _template_datadir() -> Path:
    """mariadb-install-db once per session (2 s); each server copies the result."""
    global _TEMPLATE
    if _TEMPLATE is None:
        root = Path(tempfile.mkdtemp(prefix="gbinlog-mariadb-template-"))
        out = subprocess.run(
            [_binary("mariadb-install-db"), "--no-defaults", "--user=root", f"--datadir={root}/data",
             "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"],
            capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {out.stdout}\n{out.stderr}")
        _TEMPLATE = root / "data"
        atexit.register(remove_template)      # ~114 MB: removed when the test run (the process) ends
    return _TEMPLATE


def remove_template() -> None:
    """Remove the session's template datadir (at exit; servers made from it have their own copy)."""
    global _TEMPLATE
    if _TEMPLATE is not None:
        shutil.rmtree(_TEMPLATE.parent, ignore_errors=True)
        _TEMPLATE = None


class MariaDB:
    """A running throwaway ``mariadbd``; ``stop()`` ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, root: Path, port: int, pid: int) -> None:
        self.root = root
        self.port = port
        self.pid = pid
        self.socket = str(root / "mysqld.sock")
        self.datadir = root / "data"

    @classmethod
    def start(cls, root: str | os.PathLike, *, log_bin: bool = False, server_id: int = 1,
              extra_args: tuple[str, ...] = ()) -> MariaDB:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(_template_datadir(), root / "data")
        port = _free_port()
        args = [_binary("mariadbd"), "--no-defaults", "--user=root", f"--datadir={root}/data",
                f"--socket={root}/mysqld.sock", f"--port={port}", "--bind-address=127.0.0.1",
                f"--pid-file={root}/mysqld.pid", f"--log-error={root}/error.log",
                f"--server-id={server_id}", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                "--innodb-log-file-size=8M", "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_general_ci", *extra_args]
        if log_bin:
            args += ["--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL"]
        with open(root / "stdout.log", "wb") as out:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        server = cls(root, port, proc.pid)
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                log = (root / "error.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"mariadbd exited with {proc.returncode}:\n{log}")
            try:
                server.connect().close()
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    server.stop()
                    raise RuntimeError("mariadbd did not accept connections within 30 s") from None
                time.sleep(0.05)
        server._proc = proc
        return server

    def connect(self, db: str | None = None, **kwargs) -> pymysql.connections.Connection:
        return pymysql.connect(unix_socket=self.socket, user="root", database=db, autocommit=True,
                               charset="utf8mb4", **kwargs)

    def query(self, sql: str, db: str | None = None, args=None) -> list[tuple]:
        with self.connect(db) as conn, conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def run_sql(self, text: str | bytes, db: str | None = None, *, stdin_path: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess:
        """Pipe a script to the ``mariadb`` client (e.g. the output of ``mariadb-binlog``)."""
        args = [_binary("mariadb"), "--no-defaults", f"--socket={self.socket}", "-uroot",
                "--default-character-set=utf8mb4"]
        if db:
            args.append(db)
        data = text.encode() if isinstance(text, str) else text
        out = subprocess.run(args, input=data, capture_output=True)
        if check and out.returncode != 0:
            raise RuntimeError(f"mariadb client failed: {out.stderr.decode(errors='replace')}")
        return out

    def binlog_files(self) -> list[Path]:
        index = self.datadir / "mysql-bin.index"
        return [self.datadir / Path(line.strip()).name
                for line in index.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            proc = getattr(self, "_proc", None)
            if proc is not None and proc.poll() is not None:
                return
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)


def mariadb_binlog(*args: str, check: bool = True) -> str:
    """Run the real ``mariadb-binlog`` and return its stdout."""
    out = subprocess.run([_binary("mariadb-binlog"), "--no-defaults", *args], capture_output=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"mariadb-binlog {' '.join(args)} failed: "
                           f"{out.stderr.decode(errors='replace')}")
    return out.stdout.decode("utf-8", errors="surrogateescape")
