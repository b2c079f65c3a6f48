"""``gbinlog status`` and the Prometheus metrics of ``gbinlog run``, on a live
service that follows growing DN binlog directories (the file-follow source) with a
python-mysql-replication client attached to its endpoint; then a clean SIGTERM."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from extractor import extract
from extractor.live_source import ReplicationSource
from gbinlog.replica import free_port
from simulator.live import LiveSimulation
from tests.test_live_support import REPL_PASSWORD, REPL_USER, ROOT, Service, wait_for

pytestmark = pytest.mark.slow

DURATION = 8


def status_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=30)


def metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in metrics"
    return float(m[1])


def test_status_and_metrics_of_a_running_service(tmp_path):
    sim = LiveSimulation("bank", 2, tmp_path / "cluster", tps=150, duration=DURATION, seed=3)
    sim_thread = threading.Thread(target=sim.run, daemon=True)
    sim_thread.start()
    wait_for(lambda: (tmp_path / "cluster" / "dn1" / "mysql-bin.index").exists(), 10, "the DN directories")
    out = tmp_path / "global"
    server_port, metrics_port = free_port(), free_port()
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {server_port}\n'
                   f'users = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n'
                   f"[metrics]\nport = {metrics_port}\n"
                   + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{tmp_path / "cluster" / f"dn{i}"}"\npoll_ms = 10\n'
                             for i in range(2)))
    svc = Service(cfg, tmp_path / "run.log")
    client = None
    try:
        svc.start()
        # the index, not the file: the writer creates the file, then lists it (the endpoint reads the index)
        index = out / "binlog.index"
        wait_for(lambda: index.exists() and "binlog.000001" in index.read_text(), 20, "the first global binlog file")
        client = ReplicationSource("replica77", "127.0.0.1", server_port, REPL_USER, REPL_PASSWORD, server_id=77)
        got: list = []
        reader = threading.Thread(target=lambda: [got.extend(evs) for _, evs in client.files()], daemon=True)
        reader.start()
        time.sleep(3.0)
        # -- while running ---------------------------------------------------------------------------
        doc = json.loads(status_cli("--config", str(cfg), "--json").stdout)
        assert doc["running"] and doc["pid"] == svc.proc.pid and doc["state"] == "running"
        assert [d["dn"] for d in doc["dns"]] == ["dn0", "dn1"]
        for d in doc["dns"]:
            # (the DN may have rotated already: bank transfers also write bank.audit_log rows)
            assert d["state"] == "following" and d["file"].startswith("mysql-bin.0000") and d["pos"] > 4
            assert d["last_tso"] and 0 <= d["last_tso_age_ms"] < 3000, d
            assert d["txns"] > 10 and d["events"] > 100 and d["stalled"] is False
        assert doc["lag_ms"] is not None and 0 <= doc["lag_ms"] < 3000
        assert doc["last_vtso"] and doc["merge"]["watermark"] >= doc["last_vtso"][:19]
        assert doc["merge"]["dns"] == ["dn0", "dn1"]
        reps = doc["replicas"]
        assert len(reps) == 1 and reps[0]["server_id"] == 77 and reps[0]["user"] == REPL_USER
        assert reps[0]["file"] == "binlog.000001" and reps[0]["pos"] > 4
        text = status_cli("--config", str(cfg)).stdout
        assert f"gbinlog: running (pid {svc.proc.pid}" in text
        assert re.search(r"DN dn0 +following .* at mysql-bin\.\d{6}:\d+ .* last TSO \d+ \(\d+ ms ago\)", text), text
        assert "replicas attached: 1" in text and "server_id 77 repl@127.0.0.1 at binlog.000001:" in text
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        for dn in ("dn0", "dn1"):
            assert metric(metrics, "gbinlog_dn_events_total", f'{{dn="{dn}"}}') > 100
            assert metric(metrics, "gbinlog_dn_connected", f'{{dn="{dn}"}}') == 1
            assert 0 <= metric(metrics, "gbinlog_dn_lag_ms", f'{{dn="{dn}"}}') < 3000
            metric(metrics, "gbinlog_dn_open_prepares", f'{{dn="{dn}"}}')
        assert metric(metrics, "gbinlog_txns_out_total") > 20
        assert metric(metrics, "gbinlog_events_out_total") > 100
        assert metric(metrics, "gbinlog_replicas") == 1
        rep = f'{{host="127.0.0.1",server_id="77",user="{REPL_USER}"}}'   # per-replica gauges
        assert metric(metrics, "gbinlog_replica_connected", rep) == 1
        assert metric(metrics, "gbinlog_replica_position_bytes", rep) > 4
        assert 0 <= metric(metrics, "gbinlog_lag_ms") < 3000
        # -- SIGTERM: clean stop, then status from state.json ----------------------------------------------
        sim_thread.join(DURATION + 20)
        assert svc.terminate() == 0, svc.log_text()
        assert "stopped cleanly" in svc.log_text()
        stopped = status_cli("--config", str(cfg))
        assert stopped.returncode == 1 and "not running" in stopped.stderr   # useful as a health check
        assert "gbinlog: not running" in stopped.stdout
        assert re.search(r"state\.json: last vtso \d{54}, binlog binlog\.000001:\d+", stopped.stdout), stopped.stdout
        assert re.search(r"DN dn1: restart at mysql-bin\.\d{6}:\d+", stopped.stdout)
        assert "DN live" not in stopped.stdout
    finally:
        if client is not None:
            client.stop()
        svc.ensure_stopped()
        sim.stop()
        sim_thread.join(20)
    # what the replication client received is the global binlog as written
    from binlog import read_events
    want = [bytes(e.raw) for e in read_events(out / "binlog.000001")]
    assert [bytes(e.raw) for e in got] == want[:len(got)] and len(got) > 100
    # the DN directories were read whole: every DN txn is in the state's restart points' past
    assert sum(1 for _ in extract(tmp_path / "cluster" / "dn0")) > 50
