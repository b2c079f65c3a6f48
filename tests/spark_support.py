"""Shared helpers for the Spark engine tests: one session for the whole run, fixture lists and
an exact fingerprint of merged transactions.

The session fixture lives here (not in conftest.py); test modules import it with
``from tests.spark_support import spark  # noqa: F401``. pytest shares a session-scoped fixture
across modules when it is the same function object, so every Spark test module uses one JVM.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").iterdir() if (p / "truth.json").is_file())
# The JVM's class-data-sharing archive: written by the first run, halves session start after it.
CDS_ARCHIVE = Path(os.environ.get("GBINLOG_SPARK_CDS", f"/tmp/gbinlog-spark-{os.getuid()}/spark-cds.jsa"))


def dn_dirs(fixture: Path) -> list[Path]:
    return sorted((d for d in fixture.iterdir() if d.is_dir() and d.name.startswith("dn")),
                  key=lambda d: int(d.name[2:]))


def fast_java_options() -> str:
    """JVM options for test sessions: fast start (serial GC, C1 only) + the CDS archive."""
    opts = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable"
    if CDS_ARCHIVE.is_file():
        return f"{opts} -XX:SharedArchiveFile={CDS_ARCHIVE}"
    CDS_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    return f"{opts} -XX:ArchiveClassesAtExit={CDS_ARCHIVE}"


def session_conf() -> dict[str, str]:
    jopts = fast_java_options()
    return {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2", "spark.driver.extraJavaOptions": jopts,
            "spark.executor.extraJavaOptions": jopts}


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for every Spark test of the run."""
    from gbinlog.spark_engine.session import spark_session

    session = spark_session("local[2]", session_conf(), app_name="gbinlog-tests")
    yield session
    session.stop()


def meta_rows(directory: Path) -> dict[str, list]:
    """The meta store's history rows of an output directory."""
    import sqlite3

    con = sqlite3.connect(directory / "meta.db")
    try:
        return {t: con.execute(f"select * from {t} order by id").fetchall()
                for t in ("binlog_logic_meta_history", "binlog_phy_ddl_history")}
    finally:
        con.close()


def event_fp(ev) -> tuple:
    return (ev.pos, bytes(ev.raw), ev.ctx.checksum, ev.ctx.server_version, bytes(ev.ctx.post_header_len),
            ev.ctx.binlog_version)


def block_fp(b) -> tuple:
    return (b.trace_id, b.db, b.table, b.hint, event_fp(b.rows_query) if b.rows_query else None,
            tuple(event_fp(e) for e in b.events))


def dn_txn_fp(t) -> tuple:
    """Every field of a DnTxn except the process-local ``opened_at``."""
    return (t.vtso, t.kind, t.dn, t.txn_id, t.branch, tuple(t.start), t.xid, tuple(t.end) if t.end else None,
            t.tso, t.server_id, t.archive, t.restart, t.db, t.sql, event_fp(t.query) if t.query else None,
            tuple(block_fp(b) for b in t.blocks))


def global_fp(g) -> tuple:
    return (g.vtso, g.kind, tuple(block_fp(b) for b in g.blocks), tuple(dn_txn_fp(b) for b in g.branches))


def free_port() -> int:
    from gbinlog.replica import free_port as free
    return free()


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1, started with ``spark-class``
    from the pyspark install, each in its own process group; ``stop`` ends every process this
    started (and the executors the workers spawned, which live in the workers' groups) by pid."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        import subprocess

        from pyspark.find_spark_home import _find_spark_home

        from gbinlog.spark_engine.session import find_java_home, log4j2_file

        self.root = root
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.webui_port = free_port()
        spark_class = Path(_find_spark_home(), "bin", "spark-class")
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", JAVA_HOME=find_java_home(),
                   SPARK_DAEMON_JAVA_OPTS=f"{fast_java_options()} -Dlog4j2.configurationFile=file:{log4j2_file()}")
        self.procs: list[subprocess.Popen] = []
        self.work_dirs = [root / f"worker{i}" for i in range(workers)]
        root.mkdir(parents=True, exist_ok=True)

        def start(args: list[str], log: str) -> None:
            with open(root / log, "wb") as out:
                self.procs.append(subprocess.Popen([str(spark_class), *args], stdout=out, stderr=subprocess.STDOUT,
                                                   env=env, start_new_session=True))

        try:
            start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                   "--webui-port", str(self.webui_port)], "master.log")
            for i, wd in enumerate(self.work_dirs):
                wd.mkdir()
                start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
                       "--memory", memory, "--webui-port", str(free_port()), "--work-dir", str(wd), self.url],
                      f"worker{i}.log")
        except BaseException:
            self.stop()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def wait_workers(self, timeout: float = 90.0) -> None:
        """Until the master lists every worker ALIVE (its web UI's /json): an application submitted
        before a slow worker registers runs all its executors on the others."""
        import json
        import urllib.request

        deadline = time.monotonic() + timeout
        alive = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as r:
                    doc = json.load(r)
                alive = sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")
                if alive >= len(self.work_dirs):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{alive} of {len(self.work_dirs)} Spark workers registered within {timeout} s")

    def executor_logs(self) -> list[Path]:
        """``stderr`` of every executor the workers ran (``<work dir>/<app id>/<executor id>/``)."""
        return sorted(p for wd in self.work_dirs for p in wd.glob("app-*/*/stderr"))

    def stop(self, timeout: float = 15.0) -> None:
        import signal
        import time

        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except Exception:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)   # whatever is left of its group (executors, python workers)
            except ProcessLookupError:
                pass
            p.wait()

    def alive(self, wait: float = 10.0) -> list[int]:
        """pids of processes (not zombies) still in this cluster's process groups, after waiting up
        to ``wait`` s for them to go."""
        import time

        groups = {p.pid for p in self.procs}
        deadline = time.monotonic() + wait
        while True:
            left = []
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) in groups and fields[0] != "Z":   # state, ppid, pgrp
                    left.append(int(proc.name))
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.2)


class _Partitions:
    """The part of an RDD the batch build uses, run in this process: one partition per item."""

    def __init__(self, parts: list[list]) -> None:
        self.parts = parts

    def mapPartitions(self, fn):  # noqa: N802 - Spark's name
        return _Partitions([list(fn(iter(p))) for p in self.parts])

    def map(self, fn):
        return _Partitions([[fn(x) for x in p] for p in self.parts])

    def collect(self) -> list:
        return [x for p in self.parts for x in p]


class InProcessSpark:
    """A stand-in for a SparkSession that runs the batch build's tasks in this process, one after
    the other (no JVM): for tests of the build's logic; ``test_spark_build.py`` runs the same
    build on a real ``local[2]`` session and ``test_spark_cluster.py`` on a standalone master."""

    def __init__(self, cores: int = 2) -> None:
        self.sparkContext = self
        self.master = f"local[{cores}]"
        self.defaultParallelism = cores
        self.conf = self._conf = {"spark.master": self.master}

    def parallelize(self, items, n: int | None = None) -> _Partitions:
        return _Partitions([[x] for x in items])

    def getConf(self) -> dict:  # noqa: N802 - Spark's name
        return self._conf

    def stop(self) -> None:
        pass
