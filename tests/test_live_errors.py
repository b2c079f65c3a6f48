"""``gbinlog run`` refuses to start on operator errors: unknown key,
unreachable DN, wrong password, port in use (endpoint, metrics), output directory in use, missing
config or DN directory → one clear line on stderr naming the problem, exit 2, nothing written."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dumper.server import ServerConfig, start_in_thread
from gbinlog.replica import free_port

ROOT = Path(__file__).resolve().parents[1]
DN0 = ROOT / "fixtures" / "bank-4dn" / "dn0"


def run(config: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def one_line_exit_2(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gbinlog run: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert proc.stdout == ""
    return lines[0]


@pytest.fixture(scope="module")
def dn_server():
    """A DN over the replication protocol (user cdc / cdc-pw)."""
    with start_in_thread(ServerConfig(dir=DN0, users={"cdc": "cdc-pw"})) as h:
        yield h


def config(tmp_path: Path, dn: str, *, server_port: int = 0, metrics_port: int = 0, extra: str = "") -> Path:
    p = tmp_path / "cluster.toml"
    p.write_text(f'[output]\ndir = "{tmp_path / "out"}"\n[server]\nport = {server_port or free_port()}\n'
                 f'users = [{{ name = "repl", password = "pw" }}]\n[metrics]\nport = {metrics_port}\n{extra}\n'
                 f"[[dn]]\n{dn}\n")
    return p


def remote(port: int, password: str = "cdc-pw") -> str:
    return f'id = "dn0"\nhost = "127.0.0.1"\nport = {port}\nuser = "cdc"\npassword = "{password}"'


def nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert not out.exists() or not [p for p in out.iterdir() if p.name.startswith("binlog.")]


def test_unknown_key(tmp_path, dn_server):
    p = config(tmp_path, remote(dn_server.port) + '\nhots = "x"')
    one_line_exit_2(run(p), str(p), "dn[0].hots: unknown key")
    nothing_written(tmp_path)


def test_missing_config_file(tmp_path):
    one_line_exit_2(run(tmp_path / "nope.toml"), "nope.toml: no such config file")


def test_unreachable_dn(tmp_path):
    port = free_port()   # nothing listens there
    line = one_line_exit_2(run(config(tmp_path, remote(port))), f"DN dn0 (127.0.0.1:{port}) is unreachable")
    assert "Connection refused" in line or "Can't connect" in line
    nothing_written(tmp_path)


def test_wrong_password(tmp_path, dn_server):
    one_line_exit_2(run(config(tmp_path, remote(dn_server.port, "wrong"))),
                    f"DN dn0 (127.0.0.1:{dn_server.port}) refused user 'cdc': access denied")
    nothing_written(tmp_path)


def test_missing_dn_directory(tmp_path):
    one_line_exit_2(run(config(tmp_path, f'id = "dn0"\ndir = "{tmp_path / "gone"}"')),
                    f"DN dn0: binlog directory {tmp_path / 'gone'} does not exist")


@pytest.mark.parametrize("which", ["server", "metrics"])
def test_port_in_use(tmp_path, dn_server, which):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        kw = {"server_port": port} if which == "server" else {"metrics_port": port}
        one_line_exit_2(run(config(tmp_path, remote(dn_server.port), **kw)),
                        f"{which}.port 127.0.0.1:{port} cannot be used", "in use")
    nothing_written(tmp_path)


@pytest.mark.slow
def test_output_directory_in_use(tmp_path, dn_server):
    """A second ``gbinlog run`` on the same output directory is refused while the first runs."""
    work = tmp_path / "dn"
    for i in range(4):                    # the whole cluster: a DN short is refused (extractor.members)
        shutil.copytree(DN0.parent / f"dn{i}", work / f"dn{i}")
    first_cfg = config(tmp_path, "\n[[dn]]\n".join(f'id = "dn{i}"\ndir = "{work / f"dn{i}"}"' for i in range(4)))
    first = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(first_cfg)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "out" / "status.json").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        second = tmp_path / "second.toml"
        second.write_text(first_cfg.read_text().replace(f"port = {_port_of(first_cfg)}", f"port = {free_port()}"))
        one_line_exit_2(run(second), f"output.dir {tmp_path / 'out'} is in use by another gbinlog run (pid {first.pid})")
    finally:
        first.terminate()
        first.wait(30)
    assert first.returncode == 0


def _port_of(cfg: Path) -> int:
    for line in cfg.read_text().splitlines():
        if line.startswith("port = "):
            return int(line.split("=")[1])
    raise AssertionError("no port")
