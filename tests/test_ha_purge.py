"""PURGE happens on the leader and is followed by the others, with real processes: two
``gbinlog run`` members (a SQLite lease store: members on one host) on a live 2-DN bank cluster,
both configured to keep 256 KB of 64 KB files. python-mysql-replication reads the follower from its
first file (an old one, still kept: a reader holds it) and pauses, holding a file: the leader purges past that file, the follower purges up to
it but keeps it and every file after it. The reader then reads on to the end: every GTID 1..N exactly
once, no error (no file it was reading went away). Once it disconnects the follower purges up to
the leader's recorded horizon: both end with the same files, byte-identical, and the horizon row
names the leader and its epoch.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from gbinlog.replica import free_port
from tests.test_ha_run import files_of, role_of
from tests.test_live_support import REPL_PASSWORD, REPL_USER, ROOT, Cluster, Service, wait_for, write_config

pytestmark = pytest.mark.slow

DURATION = 30
DNS = ("dn0", "dn1")


def index_of(out) -> list[str]:
    try:
        return [ln.strip().rsplit("/", 1)[-1] for ln in (out / "binlog.index").read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def seq(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def dump_file(out) -> str | None:
    """The file the follower's one connected dump is in (its status.json, written every 0.5 s)."""
    try:
        replicas = json.loads((out / "status.json").read_text()).get("replicas") or []
    except (OSError, ValueError):
        return None
    return replicas[0]["file"] if replicas else None


def small_window(**settings) -> pymysql.connections.Connection:
    """A pymysql connection with an 8 KB receive buffer: a reader that pauses stops the dump sooner
    (the kernel's autotuned loopback buffers would take megabytes first)."""
    conn = pymysql.connections.Connection(**settings, defer_connect=True)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1024)
    sock.connect((conn.host, conn.port))
    conn.host_info = f"socket {conn.host}:{conn.port}"
    conn.connect(sock)
    return conn


class SlowReader:
    """pmr from binlog.000001 by position, slower than the cluster writes (until ``go``): it falls
    behind the leader's retention window."""

    def __init__(self, port: int, leader_out) -> None:
        self.port = port
        self.leader_out = leader_out
        self.read: list[tuple[int, str, str | None]] = []      # gno, its file, the leader's first file then
        self.error: tuple | None = None
        self.go = threading.Event()
        self.stop_at: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": self.port, "user": REPL_USER,
                                                         "password": REPL_PASSWORD},
                                    server_id=419, blocking=True, only_events=[GtidEvent], pymysql_wrapper=small_window,
                                    log_file="binlog.000001", log_pos=4, resume_stream=True)
        try:
            for ev in stream:
                first = index_of(self.leader_out)[:1] if len(self.read) % 20 == 0 else [None]
                self.read.append((ev.gno, stream.log_file, first[0] if first else None))
                if not self.go.is_set():
                    time.sleep(0.012)
                if self.stop_at is not None and ev.gno >= self.stop_at:
                    break
        except pymysql.err.OperationalError as exc:
            self.error = exc.args
        finally:
            stream.close()


class VerboseService(Service):
    """``gbinlog run -v``: the session log (PURGE, retention holding a file for a replica) on stderr."""

    def start(self) -> None:
        self.starts += 1
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "-v", "--config",
                                          str(self.config)], cwd=ROOT, stdout=fh, stderr=fh, start_new_session=True)


def test_followers_follow_the_leaders_purge_but_keep_what_their_reader_reads(tmp_path):
    cluster = Cluster(tmp_path, "bank", 2, duration=DURATION, tps=150, max_file_size=256 << 10)
    store = f"sqlite:///{tmp_path / 'ha.db'}"
    members: dict[str, dict] = {}
    reader = None
    try:
        for name in ("m1", "m2"):
            m = {"port": free_port(), "metrics": free_port(), "out": tmp_path / name}
            cfg = write_config(tmp_path / f"{name}.toml", m["out"], cluster, list(DNS), server_port=m["port"],
                               metrics_port=m["metrics"], extra=f'[ha]\nmember = "{name}"\nlease_ms = 1500\n'
                                                                f'store = "{store}"\n')
            cfg.write_text(cfg.read_text().replace('rotate_size = "256KB"\n',
                                                   'rotate_size = "64KB"\nmax_total_size = "256KB"\n')
                           .replace("[server]\n", '[server]\nwrite_buffer = "16KB"\n'))
            m["svc"] = VerboseService(cfg, tmp_path / f"{name}.log")
            m["svc"].start()
            members[name] = m
            if name == "m1":       # m1 leads (the first to reach the store), m2 follows
                wait_for(lambda: role_of(members["m1"]["metrics"]) == 1, 60, "m1 leading")
        m1, m2 = members["m1"], members["m2"]
        wait_for(lambda: role_of(m2["metrics"]) == 0, 60, "m2 following")
        wait_for(lambda: index_of(m2["out"]) and index_of(m2["out"])[-1:] == index_of(m1["out"])[-1:], 60,
                 "the follower in step with the leader", 0.1)
        reader = SlowReader(m2["port"], m1["out"])
        samples = []            # (leader's first file, follower's first file, the follower's dump's file)
        while cluster.thread.is_alive():
            assert reader.error is None, reader.error
            samples.append((index_of(m1["out"])[:1], index_of(m2["out"])[:1], dump_file(m2["out"])))
            time.sleep(0.2)
        # the follower's dump was in a file the leader had purged: the follower kept it for its reader
        behind = [s for s in samples if s[0] and s[1] and s[2] and seq(s[2]) < seq(s[0][0])]
        assert behind, (samples[-3:], reader.read[-1:], len(reader.read))
        assert any(seq(f[0]) > 1 for _, f, _ in samples if f)          # … and still followed the purges
        cluster.wait_done(DURATION + 60)
        wait_for(lambda: index_of(m2["out"])[-1:] == index_of(m1["out"])[-1:]
                 and (m2["out"] / index_of(m2["out"])[-1]).stat().st_size
                 == (m1["out"] / index_of(m1["out"])[-1]).stat().st_size, 60, "m2 at m1's end", 0.2)
        with pymysql.connect(host="127.0.0.1", port=m1["port"], user=REPL_USER, password=REPL_PASSWORD) as c, \
                c.cursor() as cur:
            cur.execute("SELECT @@gtid_executed")
            last = int(cur.fetchone()[0].rsplit("-", 1)[-1].rsplit(":", 1)[-1])
        reader.stop_at = last
        reader.go.set()
        reader.thread.join(60)
        assert reader.error is None, reader.error
        assert [g for g, _, _ in reader.read] == list(range(1, last + 1))    # nothing lost or repeated
        # it read files the leader had purged by then (the leader's retention window was past it)
        assert [f for _, f, l0 in reader.read if l0 and seq(f) < seq(l0)], reader.read[-3:]
        # with no reader left, the follower catches up with the leader's horizon
        wait_for(lambda: index_of(m2["out"]) == index_of(m1["out"]), 30, "the same files on both", 0.2)
        with sqlite3.connect(tmp_path / "ha.db") as db:
            keep_from, by, epoch = db.execute("SELECT keep_from, member, epoch FROM gbinlog_ha_purge").fetchone()
        assert (keep_from, by, epoch) == (index_of(m1["out"])[0], "m1", 1)
        log = (tmp_path / "m2.log").read_text()
        assert "kept, still read by connected replica(s) repl@127.0.0.1" in log
        assert "by the leader's purge (m1, epoch 1: every file before" in log
        for m in members.values():
            assert m["svc"].terminate() == 0, m["svc"].log_text()[-3000:]
    finally:
        if reader is not None:
            reader.go.set()
        for m in members.values():
            m["svc"].ensure_stopped()
        cluster.close()
    a, b = files_of(members["m1"]["out"]), files_of(members["m2"]["out"])
    assert list(a) == list(b) and all(a[n] == b[n] for n in a)
