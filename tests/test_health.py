"""Observability (issue 16, Must show 7 minus per-replica): ``/metrics`` only on its path,
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
