"""Cluster completeness: the DN set of a cluster is read from the cluster
itself — the ``CdcStart`` instruction every DN binlog carries (its ``__cdc__`` topology lists the
storage instances; its INSTRUCTION_ID tells one cluster's start from another's). ``build``, ``run``
and ``verify`` given a DN short, an extra DN of another cluster, or DNs of two clusters whose time
ranges do not overlap refuse with one line naming the DN, exit 1, and write nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from binlog import read_events
from extractor.members import ClusterIncomplete, check_complete, check_dn_dirs, dn_instruction
from gbinlog.local_engine import Settings, build
from simulator.run import simulate

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "fixtures" / "bank-4dn"
GBINLOG = [sys.executable, "-m", "gbinlog.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*GBINLOG, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


def one_line(r: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def tsos(dn: Path) -> list[int]:
    """Commit TSOs of the GCN events of a DN binlog (type 105, flag 0x04)."""
    out = []
    for f in sorted(dn.glob("mysql-bin.0*")):
        for ev in read_events(f):
            if ev.h[1] == 105 and ev.raw[19] & 0x04:
                out.append(int.from_bytes(ev.raw[20:28], "little"))
    return out


@pytest.fixture(scope="module")
def others(tmp_path_factory) -> dict[str, Path]:
    """A 5-DN cluster (its dn4 is the 'extra DN of another cluster') and a live 4-DN cluster that
    ran on the wall clock (2026), long after the fixture's simulated time: no overlap."""
    root = tmp_path_factory.mktemp("others")
    simulate("bank", 5, 40, 77, root / "five", truth=False)
    live = root / "live"
    subprocess.run([*GBINLOG, "simulate", "--live", "--workload", "bank", "--dns", "4", "--duration", "2",
                    "--tps", "50", "--out", str(live)], check=True, capture_output=True, cwd=ROOT, timeout=120)
    return {"five": root / "five", "live": live}


def test_every_dn_names_the_cluster_and_its_start():
    found = {f"dn{i}": dn_instruction(BANK / f"dn{i}", f"dn{i}") for i in range(4)}
    assert {i.type for i in found.values()} == {"CdcStart"}
    assert len({i.instruction_id for i in found.values()}) == 1
    assert all(i.storage == ("dn0", "dn1", "dn2", "dn3") for i in found.values())
    check_complete(found)
    # the scale-out DN starts with the StorageInstChange that adds it: one cluster too
    scale = {f"dn{i}": dn_instruction(ROOT / "fixtures/scale-2dn" / f"dn{i}", f"dn{i}") for i in range(3)}
    assert [scale[d].type for d in sorted(scale)] == ["CdcStart", "CdcStart", "StorageInstChange"]
    check_complete(scale)
    with pytest.raises(ClusterIncomplete, match="DN dn1 is missing"):
        check_complete({k: v for k, v in scale.items() if k != "dn1"})
    # a DN that joined by scale-out: its StorageInstChange (later in the others' binlogs) names it
    with pytest.raises(ClusterIncomplete, match="DN dn2 is missing: a StorageInstChange instruction in DN dn0"):
        check_dn_dirs({f"dn{i}": ROOT / "fixtures/scale-2dn" / f"dn{i}" for i in range(2)})
    check_dn_dirs({f"dn{i}": ROOT / "fixtures/scale-2dn" / f"dn{i}" for i in range(3)})
    # a DN capture without any instruction (purged files, a real fragment) is not checked
    check_complete({"dn0": None, "dn1": None})


def test_build_missing_dn(tmp_path):
    out = tmp_path / "out"
    r = cli("build", f"--dn={BANK / 'dn0'}", f"--dn={BANK / 'dn1'}", f"--dn={BANK / 'dn3'}", f"--out={out}")
    one_line(r, 1, "DN dn2 is missing", "CdcStart", "dn0, dn1, dn2, dn3")
    assert not out.exists()


@pytest.mark.slow
def test_build_extra_dn_of_another_cluster(tmp_path, others):
    out = tmp_path / "out"
    r = cli("build", *[f"--dn={BANK / f'dn{i}'}" for i in range(4)], f"--dn={others['five'] / 'dn4'}",
            f"--out={out}")
    one_line(r, 1, "DN dn4 is of another cluster")
    assert not out.exists()


def test_build_two_clusters_without_overlap(tmp_path, others):
    live = others["live"]
    a, b = tsos(BANK / "dn0"), tsos(live / "dn2")
    assert max(a) < min(b)                       # the two time ranges do not overlap
    out = tmp_path / "out"
    r = cli("build", f"--dn={BANK / 'dn0'}", f"--dn={BANK / 'dn1'}", f"--dn={live / 'dn2'}",
            f"--dn={live / 'dn3'}", f"--out={out}")
    one_line(r, 1, "DN dn2 is of another cluster")
    assert not out.exists()


def test_build_missing_the_dn_that_joined_later(tmp_path):
    out = tmp_path / "out"
    scale = ROOT / "fixtures" / "scale-2dn"
    r = cli("build", f"--dn={scale / 'dn0'}", f"--dn={scale / 'dn1'}", f"--out={out}")
    one_line(r, 1, "DN dn2 is missing", "StorageInstChange")
    assert not out.exists()


def test_build_whole_cluster_passes(tmp_path):
    r = cli("build", *[f"--dn={BANK / f'dn{i}'}" for i in range(4)], f"--out={tmp_path / 'out'}")
    assert r.returncode == 0, r.stderr


def _run_config(tmp_path: Path, dns: list[Path]) -> Path:
    p = tmp_path / "cluster.toml"
    p.write_text(f'[output]\ndir = "{tmp_path / "out"}"\n[server]\nport = 0\n[metrics]\nport = 0\n'
                 + "".join(f'[[dn]]\nid = "{d.name}"\ndir = "{d}"\n' for d in dns))
    return p


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing", "extra", "two_clusters"])
def test_run_refuses(tmp_path, others, case):
    dns = {"missing": [BANK / "dn0", BANK / "dn1", BANK / "dn2"],
           "extra": [*(BANK / f"dn{i}" for i in range(4)), others["five"] / "dn4"],
           "two_clusters": [BANK / "dn0", BANK / "dn1", others["live"] / "dn2", others["live"] / "dn3"]}[case]
    want = {"missing": "DN dn3 is missing", "extra": "DN dn4 is of another cluster",
            "two_clusters": "DN dn2 is of another cluster"}[case]
    r = cli("run", "--config", str(_run_config(tmp_path, dns)), timeout=60)
    line = one_line(r, 1, want)
    assert line.startswith("gbinlog run: error: ")
    assert not (tmp_path / "out").exists()        # no lock, no status, no live.json: nothing


def test_verify_refuses_an_output_of_part_of_the_cluster(tmp_path):
    """An output made on purpose from a DN subset (the check switched off, as an older gbinlog
    would have done) is refused by ``verify --truth``: the truth knows the cluster's DNs."""
    out = tmp_path / "out"
    build([BANK / "dn0", BANK / "dn1"], out, settings=Settings(check_cluster=False))
    assert list(out.glob("binlog.0*"))
    one_line(cli("verify", str(out), "--truth", str(BANK / "truth.json")), 1, "DN dn2 is missing")


def test_verify_refuses_an_output_with_a_dn_the_cluster_has_not(tmp_path):
    """The whole bank cluster's output checked against a 3-DN cluster's truth: dn3 is not of it."""
    out = tmp_path / "out"
    build([BANK / f"dn{i}" for i in range(4)], out)
    one_line(cli("verify", str(out), "--truth", str(ROOT / "fixtures/ddl-3dn/truth.json")), 1,
             "DN dn3 is of another cluster")
