"""The wheel installs and works outside the checkout.

``pip wheel .`` → a fresh venv in a temporary directory (not the checkout, not the dev venv's
editable install) → ``gbinlog simulate`` + ``build`` + ``verify`` + ``serve``, and a
python-mysql-replication client reads the served rows. The fresh venv sees the dev venv's
third-party packages through a ``.pth`` line (so no network and no 300 MB pyspark copy), which
does not run the dev venv's own ``.pth`` files: the editable gbinlog stays invisible, only the
wheel's copy can be imported — the test checks where ``gbinlog`` was imported from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["binlog", "extractor", "merger", "schema_shaper", "dumper", "dumper/server", "gbinlog",
            "gbinlog/spark_engine", "simulator"]

pytestmark = pytest.mark.slow


def run(*args, cwd: Path, env: dict | None = None, timeout: float = 300) -> str:
    r = subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}: {r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    # built from a copy: setuptools leaves build/ next to the sources it builds
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py"):
        shutil.copy(ROOT / name, src / name)
    for top in {p.split("/")[0] for p in PACKAGES}:
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
    # -O0: this wheel is only installed and run here; its kernels' speed is not under test
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(work / "dist"), str(src), cwd=work,
        env={**os.environ, "GBINLOG_KERNEL_CFLAGS": "-O0 -g0"})
    wheel = next((work / "dist").glob("gbinlog-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for package in PACKAGES:
        assert f"{package}/__init__.py" in names, package
    assert not any(n.startswith("tests/") for n in names)
    # the compiled kernel, not its sources (binlog.kernel_py is the fallback without a compiler)
    assert any(re.fullmatch(r"binlog/_kernel\..*\.so", n) for n in names), names
    assert not any(n.endswith((".pyx", "_kernel.c")) for n in names)
    env_dir = work / "venv"
    run(sys.executable, "-m", "venv", str(env_dir), cwd=work)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    (site / "dev-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    py = env_dir / "bin" / "python"
    # dependencies are satisfied through the .pth: pip resolves them without an index
    run(str(py), "-m", "pip", "install", "--no-index", "-q", str(wheel), cwd=work)
    where = run(str(py), "-c", "import gbinlog, dumper.server, gbinlog.spark_engine, binlog.kernel as k; "
                "print(gbinlog.__file__, k.COMPILED)", cwd=work)
    assert where.strip().startswith(str(env_dir)) and where.split()[-1] == "True", where
    return env_dir


def test_wheel_in_a_fresh_venv_simulates_builds_verifies_and_serves(venv, tmp_path):
    gb = str(venv / "bin" / "gbinlog")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:/usr/sbin:/usr/bin:/bin"
    run(gb, "simulate", "--workload=bank", "--dns=2", "--txns=300", "--seed=5", f"--out={tmp_path / 'in'}",
        cwd=tmp_path, env=env)
    dns = [f"--dn={d}" for d in sorted((tmp_path / "in").glob("dn*"))]
    run(gb, "build", *dns, f"--out={tmp_path / 'out'}", "--no-progress", cwd=tmp_path, env=env)
    out = run(gb, "verify", str(tmp_path / "out"), f"--truth={tmp_path / 'in' / 'truth.json'}", cwd=tmp_path,
              env=env)
    assert "OK" in out, out
    proc = subprocess.Popen([gb, "serve", f"--dir={tmp_path / 'out'}", "--port=0", "--user=repl:pw"],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        port = int(re.search(r":(\d+)$", line.strip()).group(1))
        stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": "repl",
                                                         "password": "pw"},
                                    server_id=401, blocking=False,
                                    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
        deadline = time.monotonic() + 60
        balances: dict[int, int] = {}  # the bank's accounts replayed from the served row events
        for event in stream:
            assert time.monotonic() < deadline
            if (event.schema, event.table) != ("bank", "accounts"):
                continue
            for row in event.rows:
                if isinstance(event, DeleteRowsEvent):
                    balances.pop(list(row["values"].values())[0])
                    continue
                account, _name, balance = (row["after_values"] if isinstance(event, UpdateRowsEvent)
                                           else row["values"]).values()
                balances[account] = balance
        stream.close()
        bank = json.loads((tmp_path / "in" / "truth.json").read_text())["bank"]
        assert len(balances) == bank["accounts"]
        assert sum(balances.values()) == bank["expected_total"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
