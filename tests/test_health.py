"""Observability (per replica: test_server_observability.py): ``/metrics`` only on its path,
``/healthz`` 200 while the pipeline advances and the endpoint listens, 503 with the reason when a
DN stalls past ``stall_ms`` and 200 again once it writes again; ``gbinlog_build_info``, process
metrics, the output's disk usage; ``gbinlog status`` exit codes (0 healthy, 1 not running, 3
unhealthy). The DNs are a live simulated cluster in a child process, stalled with SIGSTOP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gbinlog import __version__
from gbinlog.metrics import Metrics, health_of
from gbinlog.replica import free_port
from tests.test_live_support import REPL_PASSWORD, REPL_USER, ROOT, Service, wait_for


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def status_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert m, f"{name} not in metrics"
    return float(m[1])


def test_paths_and_health_rules_of_the_metrics_server(tmp_path):
    m = Metrics()
    doc = {"state": "running", "time": time.time(), "heartbeat": {"stall_ms": 1000},
           "dns": [{"dn": "dn0", "state": "following", "stalled": False, "last_tso_age_ms": 200}],
           "endpoint": "127.0.0.1:1", "endpoint_expected": True, "endpoint_listening": True}
    m.health_source = lambda: doc
    (tmp_path / "binlog.000001").write_bytes(b"x" * 1000)
    (tmp_path / "binlog.000002").write_bytes(b"x" * 234)
    (tmp_path / "binlog.index").write_text("./binlog.000001\n./binlog.000002\n")
    m.update_output(tmp_path)
    port = m.serve("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{port}"
        code, text = get(base + "/metrics")
        assert code == 200
        assert 'gbinlog_build_info{python="' in text and f'version="{__version__}"' in text
        assert metric(text, "process_resident_memory_bytes") > 1e6 and metric(text, "process_cpu_seconds_total") >= 0
        assert metric(text, "gbinlog_output_bytes") == 1234 and metric(text, "gbinlog_output_files") == 2
        assert metric(text, "gbinlog_output_disk_free_bytes") > 0
        for path in ("/", "/metricsx", "/health", "/metrics/x"):
            assert get(base + path)[0] == 404, path
        assert get(base + "/healthz") == (200, "ok\n")
        doc["dns"][0].update(stalled=True, last_tso_age_ms=4200)
        assert get(base + "/healthz") == (503, "DN dn0 stalled: no transaction for 4.2 s (stall_ms 1000)\n")
        assert metric(get(base + "/metrics")[1], "gbinlog_healthy") == 0
        doc["dns"][0].update(stalled=False)
        doc["endpoint_listening"] = False
        assert get(base + "/healthz") == (503, "the replication endpoint is not listening\n")
    finally:
        m.close()
    assert health_of(None) == (False, "no status yet")
    assert health_of({**doc, "time": time.time() - 60})[1].startswith("status is 60 s old")
    assert health_of({**doc, "state": "failed", "error": "boom"}) == (False, "state failed: boom")


@pytest.mark.slow
def test_healthz_503_while_a_dn_stalls_and_200_after(tmp_path):
    cluster = tmp_path / "cluster"
    sim = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "simulate", "--live", "--workload", "bank",
                            "--dns", "2", "--tps", "50", "--duration", "120", "--seed", "5", "--out", str(cluster)],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    svc = None
    try:
        wait_for(lambda: (cluster / "dn1" / "mysql-bin.index").exists(), 20, "the DN directories")
        out = tmp_path / "global"
        cfg = tmp_path / "cluster.toml"
        mport = free_port()
        cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {free_port()}\n'
                       f'users = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n'
                       f"[metrics]\nport = {mport}\n[heartbeat]\nstall_ms = 1500\n"
                       + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{cluster / f"dn{i}"}"\npoll_ms = 10\n'
                                 for i in range(2)))
        assert status_cli("--dir", str(tmp_path)).returncode == 1          # nothing runs there
        svc = Service(cfg, tmp_path / "run.log")
        svc.start()
        healthz = f"http://127.0.0.1:{mport}/healthz"

        def code() -> int | None:
            try:
                return get(healthz)[0]
            except OSError:
                return None
        wait_for(lambda: code() == 200, 30, "/healthz 200")
        r = status_cli("--config", str(cfg))
        assert r.returncode == 0, (r.stdout, r.stderr)
        # the DNs stop writing (the whole simulated cluster is stopped): past stall_ms → 503
        os.kill(sim.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        wait_for(lambda: code() == 503, 15, "/healthz 503")
        took = time.monotonic() - t0
        assert 1.0 < took < 10, took                  # not before stall_ms (1.5 s, minus the last txn's age)
        status, reason = get(healthz)
        assert status == 503 and re.fullmatch(r"DN dn[01] stalled: no transaction for [\d.]+ s \(stall_ms 1500\)\n",
                                              reason), reason
        r = status_cli("--config", str(cfg))
        assert r.returncode == 3 and "unhealthy: DN dn" in r.stderr, (r.stdout, r.stderr)
        metrics = get(f"http://127.0.0.1:{mport}/metrics")[1]
        assert metric(metrics, "gbinlog_healthy") == 0 and metric(metrics, "gbinlog_output_bytes") > 1000
        os.kill(sim.pid, signal.SIGCONT)
        wait_for(lambda: code() == 200, 15, "/healthz 200 again")
        assert svc.terminate() == 0, svc.log_text()
        r = status_cli("--config", str(cfg))
        assert r.returncode == 1 and "not running" in r.stderr, (r.stdout, r.stderr)
    finally:
        if svc is not None:
            svc.ensure_stopped()
        os.kill(sim.pid, signal.SIGCONT)
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(30)
        except subprocess.TimeoutExpired:
            sim.kill()
            sim.wait()
    assert Path(out / "state.json").exists()


def test_serve_healthz_follows_the_index_and_a_blocked_event_loop(tmp_path):
    """``gbinlog serve --metrics-port``: /healthz 200 ``ok`` while serving, 503 naming the index
    while it is gone, 200 again once it is back; /metrics has the replica gauges' registry with
    gbinlog_healthy; an endpoint whose event loop is blocked is reported unhealthy."""
    from dumper.server import ServerConfig, start_in_thread
    from tests.test_server_support import PASSWORD, USER, USERS, write_sample_binlog

    src = write_sample_binlog(tmp_path / "src", txns=4, files=1)
    mport = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "serve", "--dir", str(src.dir), "--port", "0",
                             "--user", f"{USER}:{PASSWORD}", "--metrics-port", str(mport)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        while "listening on" not in line:
            assert line, "serve exited before listening"
            line = proc.stderr.readline()
        base = f"http://127.0.0.1:{mport}"
        wait_for(lambda: get(base + "/healthz") == (200, "ok\n"), 10, "serve /healthz ok")
        assert metric(get(base + "/metrics")[1], "gbinlog_healthy") == 1
        index = src.dir / "binlog.index"
        os.replace(index, tmp_path / "index.away")
        code, text = get(base + "/healthz")
        assert code == 503 and str(index) in text
        assert metric(get(base + "/metrics")[1], "gbinlog_healthy") == 0
        os.replace(tmp_path / "index.away", index)
        assert get(base + "/healthz") == (200, "ok\n")
        assert get(base + "/nothing")[0] == 404
    finally:
        proc.terminate()
        proc.wait(10)

    with start_in_thread(ServerConfig(dir=src.dir, users=USERS)) as handle:
        assert handle.server.health() == (True, "ok")
        handle.loop.call_soon_threadsafe(time.sleep, 1.5)      # a callback that holds the loop
        ok, reason = handle.server.health(timeout=0.3)
        assert not ok and "event loop did not answer within 0.3 s" in reason
        time.sleep(1.5)
        assert handle.server.health() == (True, "ok")
    assert handle.server.health() == (False, "the replication endpoint is not listening")
