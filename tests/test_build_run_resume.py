"""Build and run resume each other's output directory.

Every engine writes one ``state.json`` (per-DN restart points under the real DN ids, members, joined
and left DNs, storage sequences). So:

* ``gbinlog run`` on a live 4-DN bank cluster (DNs over the replication protocol), SIGTERM mid-run;
  then, once the cluster is done, ``gbinlog build`` over the DN directories into the same output
  directory finishes it: the bytes equal one uninterrupted ``gbinlog build``, ``verify --truth``
  passes;
* the reverse: a ``gbinlog build`` of the same DN directories killed mid-way (SIGKILL in the middle of
  its 500th transaction), then ``gbinlog run`` (the DNs as followed directories) continues it with the same
  bytes (all but the last transactions, which a live merge holds until every DN has a newer one),
  and a last ``gbinlog build`` ends it: one build's bytes and counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dumper.verify import verify
from gbinlog.replica import free_port
from tests.test_live_support import ROOT, Cluster, Service, wait_for, write_config

pytestmark = pytest.mark.slow
DNS = ["dn0", "dn1", "dn2", "dn3"]


def files_of(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("binlog.0*"))}


def gbinlog(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


def build_args(cluster_dir: Path, out: Path) -> list[str]:
    return ["build", *[f"--dn={cluster_dir / dn}" for dn in DNS], f"--out={out}", "--max-file-size=256KB",
            "--no-progress"]


def status(out: Path) -> dict:
    try:
        return json.loads((out / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def state_dns(out: Path) -> list[str]:
    state = json.loads((out / "state.json").read_text())
    assert sorted(state["cluster"]["dns"]) == DNS
    return sorted(state["dns"])


def test_run_then_build_and_build_then_run_give_one_builds_bytes(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=8, tps=150, seed=21)
    out = tmp_path / "run-then-build"
    cfg = write_config(tmp_path / "run.toml", out, cluster, DNS, server_port=free_port())
    svc = Service(cfg, tmp_path / "run.log")
    try:
        svc.start()
        wait_for(lambda: status(out).get("written", 0) > 100, 30, "the run to write transactions")
        assert svc.terminate() == 0, svc.log_text()[-3000:]
        assert state_dns(out) == DNS                        # the real DN ids, no pseudo input
        assert not (out / "live.json").exists()
        truth = cluster.wait_done(60)
    finally:
        svc.ensure_stopped()
        cluster.close()
    assert truth["txns"]
    ref = tmp_path / "ref"
    r = gbinlog(*build_args(cluster.dir, ref))
    assert r.returncode == 0, r.stderr
    reference = files_of(ref)
    # run → build
    r = gbinlog(*build_args(cluster.dir, out))
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stdout + r.stderr
    assert files_of(out) == reference
    report = verify(out, cluster.dir / "truth.json")
    assert report.ok and report.truth_checked, report.errors
    # build (killed writing its 500th transaction) → run
    out2 = tmp_path / "build-then-run"
    conf = tmp_path / "build.toml"
    conf.write_text("[build]\ncheckpoint_seconds = 0.01\n")
    r = gbinlog(*build_args(cluster.dir, out2), f"--config={conf}",
                env={**os.environ, "GBINLOG_CRASH_AT": "torn:500"})
    assert r.returncode == -9, r.stderr
    partial = files_of(out2)
    assert partial and partial != reference and state_dns(out2) == DNS
    ref_state = json.loads((ref / "state.json").read_text())
    run2 = tmp_path / "run2.toml"
    run2.write_text(f'[output]\ndir = "{out2}"\nrotate_size = "256KB"\n'
                    + "[server]\nport = 0\n"
                    + "".join(f'[[dn]]\nid = "{dn}"\ndir = "{cluster.dir / dn}"\n' for dn in DNS))
    svc = Service(run2, tmp_path / "run2.log")
    try:
        svc.start()
        # A live run never ends its inputs: it writes everything but the last transactions (a
        # transaction leaves the merge once every DN has a newer one) — wait until it stands still.
        seen = []
        wait_for(lambda: seen.append(status(out2).get("last_vtso")) or (len(seen) > 40 and seen[-1] == seen[-40]
                                                                         and seen[-1] is not None),
                 90, "the run to catch up", interval=0.1)
        assert svc.terminate() == 0, svc.log_text()[-3000:]
    finally:
        svc.ensure_stopped()
    got = files_of(out2)
    assert len(got) >= len(partial) and sum(map(len, got.values())) > sum(map(len, partial.values()))
    names = list(got)
    for name in names[:-1]:
        assert got[name] == reference[name], name
    assert reference[names[-1]].startswith(got[names[-1]])     # whole transactions, the same bytes
    assert state_dns(out2) == DNS
    assert json.loads((out2 / "state.json").read_text())["last_vtso"] <= ref_state["last_vtso"]
    # … and a build finishes what the run left: one build's bytes again
    r = gbinlog(*build_args(cluster.dir, out2))
    assert r.returncode == 0, r.stderr
    assert files_of(out2) == reference
    assert json.loads((out2 / "state.json").read_text())["counts"] == ref_state["counts"]
