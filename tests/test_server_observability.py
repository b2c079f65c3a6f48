"""Per-replica observability of the endpoint: Prometheus gauges
of ``gbinlog serve --metrics-port`` show an attached replica's position advancing as the directory grows,
its rate, and its seconds behind the head; the session log (``-v`` / ``--log-file``) records logins, a
denied login, the dump's start and stop with positions; ``gbinlog status`` prints the figures."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dumper.server import ServerConfig, start_in_thread
from gbinlog.run_cmd import format_status
from tests.test_server_retention import small_window_client
from tests.test_server_support import (
    PASSWORD,
    USER,
    USERS,
    RawClient,
    ServerError,
    header,
    write_sample_binlog,
)

EXE = os.path.join(os.path.dirname(sys.executable), "gbinlog")


def free_port() -> int:
    from gbinlog.replica import free_port as free
    return free()


def publisher(src: Path, files: list[str], out: Path):
    def publish(n: int) -> None:
        shutil.copyfile(src / files[n], out / files[n])
        (out / "binlog.index.tmp").write_text("".join(f"./{f}\n" for f in files[:n + 1]))
        os.replace(out / "binlog.index.tmp", out / "binlog.index")
    return publish


def replica_gauges(port: int) -> dict[str, dict[tuple, float]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith("gbinlog_replica_"):
            for s in fam.samples:
                out.setdefault(s.name, {})[(s.labels["server_id"], s.labels["user"], s.labels["host"])] = s.value
    return out


def read_until(events, file: str, pos: int) -> None:
    cur = None
    for ev in events:
        h = header(ev)
        if h[1] == 4 and h[5] & 0x20:
            cur = ev[27:-4].decode()
        elif (cur, h[4]) == (file, pos):
            return


@pytest.mark.slow
def test_serve_metrics_show_a_replicas_position_advancing_and_the_session_log(tmp_path):
    src = write_sample_binlog(tmp_path / "src", txns=60, files=6)
    out = tmp_path / "served"
    out.mkdir()
    publish = publisher(src.dir, src.files, out)
    publish(0)
    mport, log_file = free_port(), tmp_path / "session.log"
    proc = subprocess.Popen([EXE, "serve", "--dir", str(out), "--port", "0", "--user", f"{USER}:{PASSWORD}",
                             "--metrics-port", str(mport), "--log-file", str(log_file), "-v"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while "listening on" not in line:
            line = proc.stderr.readline()
        port = int(line.rsplit(":", 1)[1])
        with pytest.raises(ServerError):
            RawClient(port, USER, "wrong")
        c = RawClient(port)
        c.query("SET @master_binlog_checksum = 'CRC32'")
        events = c.dump(src.files[0], 4, flags=0, server_id=77)
        key = ("77", USER, "127.0.0.1")
        seen = []
        for n in range(len(src.files)):
            if n:
                publish(n)
            size = (src.dir / src.files[n]).stat().st_size
            read_until(events, src.files[n], size)
            time.sleep(1.3)                                   # one stats sample (1 s) at least
            g = replica_gauges(mport)
            seen.append((g["gbinlog_replica_file_number"][key], g["gbinlog_replica_position_bytes"][key]))
            assert g["gbinlog_replica_connected"][key] == 1
            assert g["gbinlog_replica_seconds_behind_head"][key] == 0      # it is at the head
            if n == 1:
                assert g["gbinlog_replica_sent_bytes"][key] >= sum(
                    (src.dir / f).stat().st_size for f in src.files[:2]) - 8
            if n == 2:
                break
        assert seen == [(i + 1, (src.dir / src.files[i]).stat().st_size) for i in range(3)]
        c.close()
        time.sleep(1.5)
        assert replica_gauges(mport).get("gbinlog_replica_connected", {}) == {}   # gone with the replica
    finally:
        proc.terminate()
        proc.wait(10)
    text = log_file.read_text()
    assert f"login denied user={USER} from=127.0.0.1" in text
    assert f"login ok user={USER} from=127.0.0.1" in text
    assert f"dump start conn=2 user={USER} from=127.0.0.1" in text and f"server_id=77 at {src.files[0]}:4" in text
    size3 = (src.dir / src.files[2]).stat().st_size
    assert f"dump stop conn=2 user={USER} server_id=77 at {src.files[2]}:{size3} " in text


@pytest.mark.slow   # ~8 MB through a 4 KiB-window client
def test_seconds_behind_head_grows_for_a_stalled_replica_and_returns_to_zero(tmp_path):
    src = write_sample_binlog(tmp_path / "src", txns=120, files=8, pad=40000)
    out = tmp_path / "served"
    out.mkdir()
    publish = publisher(src.dir, src.files, out)
    publish(0)
    with start_in_thread(ServerConfig(dir=out, users=USERS, stats_interval=0.05, write_buffer=4096)) as h:
        c = small_window_client(h.port)   # so what it does not read stays on the server's side
        c.query("SET @master_binlog_checksum = 'CRC32'")
        events = c.dump(src.files[0], 4, flags=0, server_id=5)
        read_until(events, src.files[0], (src.dir / src.files[0]).stat().st_size)
        time.sleep(0.2)
        (r,) = h.server.replica_stats()
        assert (r["server_id"], r["user"], r["file"], r["seconds_behind_head"], r["tls"]) == \
            (5, USER, src.files[0], 0.0, False)
        t0 = time.monotonic()
        for n in range(1, len(src.files)):       # 7 files (~8 MB) the replica does not read yet
            publish(n)
        time.sleep(1.0)
        (r,) = h.server.replica_stats()
        behind = r["seconds_behind_head"]
        assert 0.7 <= behind <= time.monotonic() - t0 + 0.1, r
        last = src.files[-1]
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        read_until(events, last, (src.dir / last).stat().st_size)
        time.sleep(0.3)
        (r,) = h.server.replica_stats()
        assert (r["file"], r["pos"], r["seconds_behind_head"]) == (last, (src.dir / last).stat().st_size, 0.0)
        assert r["bytes_sent"] > 8 << 20 and r["events_sent"] > 100
        c.close()


def test_status_prints_each_replicas_figures():
    doc = {"running": True, "state": "running", "dns": [], "replicas": [
        {"server_id": 2, "user": "repl", "host": "10.0.0.9", "port": 40000, "file": "binlog.000003", "pos": 1234,
         "bytes_per_s": 2048.0, "seconds_behind_head": 1.5, "tls": True, "bytes_sent": 10}]}
    text = format_status(doc)
    assert "server_id 2 repl@10.0.0.9 at binlog.000003:1234  2 KiB/s  1.5 s behind head  tls" in text
