"""``gbinlog simulate --live [--serve]``: the simulator's workload written in real
time — TSOs carry the wall clock, a heartbeat every 200 ms, the truth matches the DN binlogs, a
SIGINT ends it cleanly (no open prepare left), and ``--serve`` serves every DN directory over the
replication protocol (also a DN that joins mid-run)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from extractor import extract, storage_sequences
from extractor.live_source import ReplicationSource
from merger import merge
from tests.test_live_support import wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "simulate", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def merged(root: Path) -> list:
    dirs = sorted((p for p in root.iterdir() if p.name.startswith("dn")), key=lambda p: int(p.name[2:]))
    seqs = storage_sequences(d.name for d in dirs)
    return list(merge([extract(d, storage_seq=seqs[d.name]) for d in dirs]))


def check_against_truth(root: Path, started: float, ended: float) -> dict:
    truth = json.loads((root / "truth.json").read_text())
    out = merged(root)
    want = [t["vtso"] for t in truth["txns"]]
    assert [g.vtso for g in out if g.kind.value != "physical_ddl"] == want
    heartbeats = [g for g in out if g.kind.value == "heartbeat"]
    tso_ms = [int(g.vtso[:19]) >> 22 for g in heartbeats]
    # TSOs follow the wall clock, heartbeats every 200 ms of it
    assert started * 1000 - 50 <= tso_ms[0] and tso_ms[-1] <= ended * 1000 + 50
    gaps = [b - a for a, b in zip(tso_ms, tso_ms[1:], strict=False)]
    assert len(heartbeats) >= (ended - started - 1) * 4
    assert sorted(gaps)[len(gaps) // 2] in range(195, 215), sorted(gaps)[len(gaps) // 2]
    return truth


def test_live_for_a_duration(tmp_path):
    out = tmp_path / "live"
    t0 = time.time()
    proc = cli("--live", "--workload", "bank", "--dns", "3", "--duration", "4", "--tps", "200", "--out", str(out))
    seen_growing = []
    while proc.poll() is None:
        size = sum(p.stat().st_size for p in out.glob("dn*/mysql-bin.0*")) if out.exists() else 0
        seen_growing.append(size)
        time.sleep(0.25)
    t1 = time.time()
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr
    assert re.search(r"live bank on 3 DNs, 200 txns/s for 4 s", stdout)
    assert "truth.json written" in stdout
    grew = [s for s in seen_growing if s]
    assert len(set(grew)) >= 8 and grew == sorted(grew)     # the files grew while it ran
    assert 4.0 <= t1 - t0 < 15
    truth = check_against_truth(out, t0, t1)
    assert truth["params"]["tps"] == 200 and truth["command"].endswith("--live")
    assert 500 <= len([t for t in truth["txns"] if t.get("kind") == "dml"]) <= 900


def test_sigint_stops_cleanly_with_whole_binlogs(tmp_path):
    out = tmp_path / "live"
    t0 = time.time()
    proc = cli("--live", "--workload", "bank", "--dns", "2", "--tps", "300", "--out", str(out))
    wait_for(lambda: (out / "dn1" / "mysql-bin.index").exists(), 10, "the DN directories")
    time.sleep(2.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    t1 = time.time()
    assert proc.returncode == 0, stderr
    assert "until interrupted" in stdout and "truth.json written" in stdout
    check_against_truth(out, t0, t1)
    # no prepare left open and no commit TSO dangling: every DN's binlog ends whole
    for dn in ("dn0", "dn1"):
        from extractor.assembler import Assembler
        from extractor.source import DirSource
        asm = Assembler(dn)
        for name, events in DirSource(out / dn).files():
            list(asm.feed(name, events))
        asm.finish()
        assert not asm.sorter.wait and asm.cur is None and not asm.sorter.heap


def test_serve_with_a_dn_joining(tmp_path):
    """``--serve --port P``: DN i on P+i, listed in cluster.json; the ``scale`` DN that joins is
    served from when it appears. Each served DN reads, over the protocol, as its directory does."""
    from gbinlog.replica import free_port
    base = free_port()
    while any(_busy(base + i) for i in range(3)):
        base = free_port()
    out = tmp_path / "live"
    proc = cli("--live", "--serve", "--port", str(base), "--user", "u", "--password", "p", "--workload", "scale",
               "--dns", "2", "--duration", "6", "--tps", "100", "--out", str(out))
    try:
        # cluster.json is rewritten as each DN's server starts: wait until the first two are listed
        cluster = wait_for(lambda: (out / "cluster.json").exists()
                           and len(json.loads((out / "cluster.json").read_text())["dns"]) >= 2
                           and json.loads((out / "cluster.json").read_text()), 10, "cluster.json")
        assert [(d["id"], d["port"]) for d in cluster["dns"]] == [("dn0", base), ("dn1", base + 1)]
        assert cluster["user"] == "u" and cluster["pid"] == proc.pid
        cluster = wait_for(lambda: len(json.loads((out / "cluster.json").read_text())["dns"]) == 3
                           and json.loads((out / "cluster.json").read_text()), 15, "dn2 to join")
        assert cluster["dns"][2] == {"id": "dn2", "dir": str((out / "dn2").resolve()), "host": "127.0.0.1",
                                     "port": base + 2}
        wait_for(lambda: (out / "truth.json").exists(), 20, "the workload to end")
        time.sleep(0.3)
        assert proc.poll() is None            # still serving after the workload
        for i, dn in enumerate(("dn0", "dn1", "dn2")):
            want = [(t.vtso, t.end) for t in extract(out / dn)]
            src = ReplicationSource(dn, "127.0.0.1", base + i, "u", "p")
            got: list = []
            th = threading.Thread(target=lambda src=src, got=got: got.extend((t.vtso, t.end) for t in extract(src)),
                                  daemon=True)
            th.start()
            wait_for(lambda got=got, want=want: len(got) >= len(want), 20, f"{dn} over the protocol")
            src.stop()
            th.join(5)
            assert got == want
    finally:
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert f"dn0 serving {out}/dn0 on 127.0.0.1:{base}" in stdout
    assert "still serving the DNs until interrupted" in stdout


def _busy(port: int) -> bool:
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


def test_live_options_need_live(tmp_path):
    for args in (["--serve"], ["--duration", "3"]):
        proc = cli("--workload", "bank", *args, "--out", str(tmp_path / "x"))
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 2
        assert stderr.strip() == "gbinlog simulate: error: --serve and --duration need --live"
    assert not (tmp_path / "x").exists()
