"""``gbinlog simulate``: bad arguments fail with one line and exit 2 leaving nothing behind;
output appears only complete (temp dir + rename); same seed → byte-identical files;
the committed fixtures regenerate byte for byte from the commands in fixtures/README.md."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import simulator.run
from simulator.run import simulate

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "simulate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "bank", "--dns", "0"], "--dns must be between 1 and 64, got 0"),
    (["--workload", "banks", "--dns", "2"], "Invalid value for '--workload': 'banks' is not one of"),
    (["--workload", "bank", "--dns", "two"], "Invalid value for '--dns': 'two' is not a valid integer"),
    (["--workload", "bank", "--hole-rate", "1.5"], "--hole-rate must be between 0 and 1, got 1.5"),
    (["--workload", "bank", "--txns", "0"], "--txns must be at least 1, got 0"),
    (["--dns", "2"], "Missing option '--workload'"),
])
def test_bad_arguments_one_line_exit_2_nothing_written(tmp_path, args, message):
    out = tmp_path / "out"
    proc = run_cli(*args, "--out", str(out))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gbinlog simulate: error: ") and message in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_unwritable_out_one_line_exit_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for out in (blocker / "out", Path("/proc/gbinlog-sim/out"), blocker):
        proc = run_cli("--workload", "bank", "--dns", "2", "--txns", "10", "--out", str(out))
        assert proc.returncode == 2, out
        assert len(proc.stderr.splitlines()) == 1 and "--out" in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert blocker.read_text() == "not a directory"


def test_existing_out_needs_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    proc = run_cli("--workload", "bank", "--dns", "1", "--txns", "10", "--out", str(out))
    assert proc.returncode == 2 and "exists and is not empty" in proc.stderr
    assert tree(out) == {"keep": b"x"}
    proc = run_cli("--workload", "bank", "--dns", "1", "--txns", "10", "--force", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["dn0", "truth.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert "out of TSO order" in proc.stdout


def test_a_failing_run_leaves_nothing(tmp_path, monkeypatch):
    """An error after the DN files were written: no --out, no partial directory."""
    def explode(self, *args, **kwargs):
        assert any((tmp_path / p).is_dir() for p in os.listdir(tmp_path))   # files were being written
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(simulator.run.TruthBuilder, "build", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        simulate("bank", 2, 50, 1, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_a_killed_run_never_looks_complete(tmp_path):
    """SIGKILL mid-run: the half-written files sit in a hidden .partial directory; --out never
    appears, so nothing incomplete claims to be a finished simulation."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "simulate", "--workload", "bank",
                             "--dns", "4", "--txns", "10000000", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith(".out.partial-") and any(p.rglob("mysql-bin.0*"))
                      for p in tmp_path.iterdir()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not out.exists()
    assert all(p.name.startswith(".out.partial-") for p in tmp_path.iterdir())


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = simulate("all", 3, 150, 11, tmp_path / "a")
    b = simulate("all", 3, 150, 11, tmp_path / "b")
    c = simulate("all", 3, 150, 12, tmp_path / "c")
    ta, tb, tc = tree(tmp_path / "a"), tree(tmp_path / "b"), tree(tmp_path / "c")
    assert ta == tb and a["events"] == b["events"]
    assert set(ta) >= {"dn0/mysql-bin.000001", "dn0/mysql-bin.index", "dn3/mysql-bin.000001", "truth.json"}
    assert ta["dn0/mysql-bin.000001"] != tc["dn0/mysql-bin.000001"]
    assert ta["truth.json"] != tc["truth.json"] and c["events"] > 0


def test_hole_rate_sets_how_often_commits_leave_tso_order(tmp_path):
    shares = []
    for rate in (0.0, 0.3, 1.0):
        s = simulate("bank", 3, 400, 3, tmp_path / f"r{rate}", hole_rate=rate, truth=False)
        per_dn = s["stats"]["per_dn"].values()
        shares.append(sum(d["out_of_order"] for d in per_dn) / sum(d["tso_commits"] for d in per_dn))
    assert shares[0] == 0.0 < shares[1] < shares[2]


def readme_commands() -> list[list[str]]:
    text = (FIXTURES / "README.md").read_text()
    return [shlex.split(line) for line in re.findall(r"^gbinlog simulate .*$", text, re.M)]


def test_readme_lists_every_fixture():
    outs = sorted(cmd[cmd.index("--out") + 1] for cmd in readme_commands())
    # real-dn: bytes written by real DNs, not by `gbinlog simulate`
    simulated = [p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "real-dn"]
    assert outs == sorted(f"fixtures/{p.name}" for p in simulated)
    assert len(outs) >= 4


@pytest.mark.parametrize("cmd", readme_commands(), ids=lambda c: c[c.index("--out") + 1])
def test_fixture_regenerates_byte_identical(tmp_path, cmd):
    committed = ROOT / cmd[cmd.index("--out") + 1]
    args = cmd[2:]
    args[args.index("--out") + 1] = str(tmp_path / committed.name)
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    fresh = tree(tmp_path / committed.name)
    old = tree(committed)
    assert sorted(fresh) == sorted(old)
    for name in old:
        assert fresh[name] == old[name], f"{committed.name}/{name} differs when regenerated"
