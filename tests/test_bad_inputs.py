"""Every bad input tried, per command (the serve/run config cases are in test_serve_config.py):
each is ONE line on stderr, no traceback, the documented exit code (2 usage / bad
option value / bad config, 1 bad input or operator error; ``status``: 1 not running), the path
or DN named, nothing written. Plus: nothing left behind by a failed start (``run``: no lock, no
status, the last good status kept; ``demo``: no temporary directory)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gbinlog.local_engine import build

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "fixtures" / "bank-4dn"
GBINLOG = [sys.executable, "-m", "gbinlog.cli"]
ALL = [f"--dn={BANK / f'dn{i}'}" for i in range(4)]


@pytest.fixture(scope="module")
def w(tmp_path_factory) -> Path:
    """The bad inputs: an empty directory, a directory of other files, a DN set with a file deleted
    from the middle of mysql-bin.index, broken config files, a truncated binlog, a built output."""
    w = tmp_path_factory.mktemp("bad")
    (w / "empty").mkdir()
    (w / "notdn").mkdir()
    (w / "notdn" / "file.txt").write_text("x")
    shutil.copytree(BANK, w / "holed")
    (w / "holed" / "dn1" / "mysql-bin.000001").unlink()
    (w / "bad.toml").write_text("not toml [")
    (w / "unknown.toml").write_text("[build]\nfoo = 1\n")
    (w / "type.toml").write_text('[build]\nserver_id = "x"\n')
    (w / "sid0.toml").write_text("[build]\nserver_id = 0\n")
    (w / "status_bad.toml").write_text("[output\n")
    (w / "notruth.json").write_text('{"a": 1}')
    (w / "trunc.bin").write_bytes((BANK / "dn0" / "mysql-bin.000001").read_bytes()[:1000])
    build([BANK / f"dn{i}" for i in range(4)], w / "built")
    (w / "nonempty").mkdir()
    (w / "nonempty" / "x").write_text("x")
    return w


def busy_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


# (id, argv (``{w}`` = the work directory), exit code, text the one line must contain)
CASES = [
    # build
    ("build-empty-dn-dir", ["build", "--dn={w}/empty", "--out={w}/o"], 1, "{w}/empty holds no binlog file"),
    ("build-not-a-dn-dir", ["build", "--dn={w}/notdn", "--out={w}/o"], 1, "not a DN binlog directory"),
    ("build-missing-dn-dir", ["build", "--dn={w}/nope", "--out={w}/o"], 1, "{w}/nope does not exist"),
    ("build-global-binlog-as-dn", ["build", "--dn={w}/built", "--out={w}/o"], 1, "is a global binlog directory"),
    ("build-file-missing-mid-index", ["build", *[f"--dn={{w}}/holed/dn{i}" for i in range(4)], "--out={w}/o"], 1,
     "{w}/holed/dn1/mysql-bin.000001 is listed in mysql-bin.index but does not exist"),
    ("build-out-is-input-dn", ["build", *ALL, f"--out={BANK / 'dn0'}"], 1, "is DN dn0's binlog directory"),
    ("build-out-inside-input-dn", ["build", *ALL, f"--out={BANK / 'dn2' / 'sub'}"], 1, "is DN dn2's binlog directory"),
    ("build-out-is-a-file", ["build", *ALL, "--out={w}/notdn/file.txt"], 2, "{w}/notdn/file.txt' is a file"),
    ("build-out-unwritable", ["build", *ALL, "--out=/proc/gbinlog-out"], 1, "/proc/gbinlog-out"),
    ("build-server-id-negative", ["build", *ALL, "--out={w}/o", "--server-id", "-1"], 2, "--server-id"),
    ("build-server-id-too-big", ["build", *ALL, "--out={w}/o", "--server-id", "4294967296"], 2, "--server-id"),
    ("build-server-version-9", ["build", *ALL, "--out={w}/o", "--server-version", "9.1.0"], 2, "must start with '5.' or '8.'"),
    ("build-max-file-size-word", ["build", *ALL, "--out={w}/o", "--max-file-size", "abc"], 2, "abc"),
    ("build-no-out", ["build", *ALL], 2, "--out"),
    ("build-no-dn", ["build", "--out={w}/o"], 2, "--dn"),
    ("build-config-not-toml", ["build", *ALL, "--out={w}/o", "--config={w}/bad.toml"], 2, "{w}/bad.toml"),
    ("build-config-unknown-key", ["build", *ALL, "--out={w}/o", "--config={w}/unknown.toml"], 2, "build.foo"),
    ("build-config-wrong-type", ["build", *ALL, "--out={w}/o", "--config={w}/type.toml"], 2, "build.server_id"),
    ("build-config-server-id-0", ["build", *ALL, "--out={w}/o", "--config={w}/sid0.toml"], 2, "0 is not a server id"),
    ("build-config-missing", ["build", *ALL, "--out={w}/o", "--config={w}/nope.toml"], 2, "{w}/nope.toml"),
    ("build-dn-missing-from-cluster", ["build", *ALL[:3], "--out={w}/o"], 1, "DN dn3 is missing"),
    ("build-bad-filter", ["build", *ALL, "--out={w}/o", "--exclude", "a.b.c"], 2, "'a.b.c'"),
    ("build-resume-other-settings", ["build", *ALL, "--out={w}/built", "--server-id", "9"], 1,
     "would give different bytes"),
    # verify
    ("verify-empty-dir", ["verify", "{w}/empty"], 1, "{w}/empty: no global binlog here"),
    ("verify-dn-dir", ["verify", f"{BANK / 'dn0'}"], 1, "a DN's binlog directory?"),
    ("verify-missing-dir", ["verify", "{w}/nope"], 2, "{w}/nope"),
    ("verify-truth-etc-passwd", ["verify", "{w}/built", "--truth", "/etc/passwd"], 1,
     "--truth /etc/passwd: not a truth.json"),
    ("verify-truth-other-json", ["verify", "{w}/built", "--truth", "{w}/notruth.json"], 1, "not a truth.json"),
    ("verify-truth-missing", ["verify", "{w}/built", "--truth", "{w}/nope.json"], 1, "--truth {w}/nope.json"),
    ("verify-truth-other-cluster", ["verify", "{w}/built", "--truth", f"{ROOT / 'fixtures/ddl-3dn/truth.json'}"],
     1, "DN dn3 is of another cluster"),
    # txns
    ("txns-empty-dir", ["txns", "{w}/empty"], 1, "{w}/empty holds no binlog file"),
    ("txns-not-a-dn-dir", ["txns", "{w}/notdn"], 1, "not a DN binlog directory"),
    ("txns-global-binlog-dir", ["txns", "{w}/built"], 1, "{w}/built is a global binlog directory"),
    ("txns-file-missing-mid-index", ["txns", "{w}/holed/dn0", "{w}/holed/dn1"], 1,
     "{w}/holed/dn1/mysql-bin.000001 is listed in mysql-bin.index"),
    ("txns-missing-dir", ["txns", "{w}/nope"], 2, "{w}/nope"),
    # binlogs
    ("binlogs-empty-dir", ["binlogs", "{w}/empty"], 1, "{w}/empty: no global binlog here"),
    ("binlogs-dn-dir", ["binlogs", f"{BANK / 'dn0'}"], 1, "no global binlog here"),
    # events
    ("events-truncated-file", ["events", "{w}/trunc.bin"], 1, "{w}/trunc.bin: offset"),
    ("events-not-a-binlog", ["events", "/etc/passwd"], 1, "bad magic"),
    ("events-from-not-a-boundary", ["events", f"{BANK / 'dn0' / 'mysql-bin.000001'}", "--from", "5"], 1,
     "not an event boundary"),
    ("events-from-negative", ["events", f"{BANK / 'dn0' / 'mysql-bin.000001'}", "--from", "-1"], 2, "--from"),
    ("events-limit-negative", ["events", f"{BANK / 'dn0' / 'mysql-bin.000001'}", "--limit", "-3"], 2, "--limit"),
    ("events-a-directory", ["events", "{w}/empty"], 2, "is a directory"),
    # status
    ("status-missing-dir", ["status", "--dir", "{w}/nope"], 2, "{w}/nope does not exist"),
    ("status-never-ran-here", ["status", "--dir", "{w}/empty"], 1, "not running"),
    ("status-config-not-toml", ["status", "--config", "{w}/status_bad.toml"], 2, "{w}/status_bad.toml"),
    ("status-config-missing", ["status", "--config", "{w}/nope.toml"], 2, "no such config file"),
    # simulate
    ("simulate-unknown-workload", ["simulate", "--workload", "nope", "--out", "{w}/s"], 2, "'nope'"),
    ("simulate-zero-dns", ["simulate", "--workload", "bank", "--dns", "0", "--out", "{w}/s"], 2, "--dns"),
    ("simulate-negative-txns", ["simulate", "--workload", "bank", "--txns", "-5", "--out", "{w}/s"], 2, "--txns"),
    ("simulate-out-not-empty", ["simulate", "--workload", "bank", "--txns", "5", "--out", "{w}/nonempty"], 2,
     "{w}/nonempty exists and is not empty"),
    ("simulate-out-is-a-file", ["simulate", "--workload", "bank", "--out", "{w}/notdn/file.txt"], 2, "is a file"),
    ("simulate-out-unwritable", ["simulate", "--workload", "bank", "--txns", "5", "--out", "/proc/gbinlog-sim"], 2,
     "/proc/gbinlog-sim"),
    ("simulate-hole-rate", ["simulate", "--workload", "bank", "--hole-rate", "2", "--out", "{w}/s"], 2,
     "--hole-rate"),
    ("simulate-live-port", ["simulate", "--workload", "bank", "--live", "--serve", "--port", "70000",
                            "--duration", "1", "--out", "{w}/s"], 2, "--port"),
    ("simulate-seed-word", ["simulate", "--workload", "bank", "--seed", "x", "--out", "{w}/s"], 2, "--seed"),
    # demo (its temporary directory: see test_demo_failed_start_leaves_no_temp_dir)
    ("demo-zero-dns", ["demo", "--dns", "0"], 2, "--dns"),
    ("demo-negative-tps", ["demo", "--tps", "-1"], 2, "--tps"),
    ("demo-dir-not-empty", ["demo", "--dir", "{w}/nonempty", "--no-replica"], 2, "{w}/nonempty is not an empty"),
    ("demo-dir-is-a-file", ["demo", "--dir", "{w}/notdn/file.txt"], 2, "is a file"),
    ("demo-port-word", ["demo", "--port", "x"], 2, "--port"),
]


def one_line(r: subprocess.CompletedProcess, code: int, needle: str) -> str:
    err = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr, r.stderr
    assert len(err) == 1, r.stderr
    assert r.returncode == code, (r.returncode, r.stderr)
    assert needle in err[0], (needle, err[0])
    return err[0]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(w, case):
    name, argv, code, needle = case
    args = [a.replace("{w}", str(w)) for a in argv]
    before = sorted(p.name for p in BANK.rglob("*"))
    r = subprocess.run([*GBINLOG, *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    one_line(r, code, needle.replace("{w}", str(w)))
    if name not in ("events-truncated-file", "status-never-ran-here"):
        assert r.stdout == "", r.stdout[:500]
    assert not (w / "o").exists() and not (w / "s").exists()          # nothing written
    assert sorted(p.name for p in BANK.rglob("*")) == before           # the inputs untouched


def test_the_table_is_big_enough():
    assert len(CASES) >= 30
    assert {c[1][0] for c in CASES} == {"build", "verify", "txns", "binlogs", "events", "status", "simulate", "demo"}


def test_demo_failed_start_leaves_no_temp_dir(tmp_path):
    """The demo's endpoint port in use: one line, exit 2, and no gbinlog-demo-* directory left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with busy_port() as s:
        port = s.getsockname()[1]
        r = subprocess.run([*GBINLOG, "demo", "--port", str(port), "--no-replica"], capture_output=True, text=True,
                           cwd=ROOT, timeout=60, env={**os.environ, "TMPDIR": str(tmp)})
    one_line(r, 2, f"127.0.0.1:{port} cannot be used")
    assert list(tmp.iterdir()) == []


def _config(tmp_path: Path, out: Path, server_port: int) -> Path:
    cfg = tmp_path / f"cluster-{server_port}.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {server_port}\n'
                   'users = [{ name = "repl", password = "pw" }]\n[metrics]\nport = 0\n'
                   + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{BANK / f"dn{i}"}"\n' for i in range(4)))
    return cfg


@pytest.mark.slow
def test_run_failed_start_leaves_nothing_and_keeps_the_last_good_status(tmp_path):
    # a fresh output directory: the failed start (endpoint port in use) creates nothing at all
    out = tmp_path / "out"
    with busy_port() as s:
        r = subprocess.run([*GBINLOG, "run", "--config", str(_config(tmp_path, out, s.getsockname()[1]))],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
    one_line(r, 2, "server.port")
    assert not out.exists()
    # after a good run: a failed start keeps its status.json and adds nothing
    from gbinlog.replica import free_port
    port = free_port()
    proc = subprocess.Popen([*GBINLOG, "run", "--config", str(_config(tmp_path, out, port))], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.monotonic() + 30
        while not (out / "status.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    good = (out / "status.json").read_bytes()
    files = sorted(p.name for p in out.iterdir())
    assert json.loads(good)["state"] in ("running", "stopping")
    with busy_port() as s:
        r = subprocess.run([*GBINLOG, "run", "--config", str(_config(tmp_path, out, s.getsockname()[1]))],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
    one_line(r, 2, "server.port")
    assert (out / "status.json").read_bytes() == good
    assert sorted(p.name for p in out.iterdir()) == files
