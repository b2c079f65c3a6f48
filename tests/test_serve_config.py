"""One config dialect for ``serve`` and ``run``: every bad
option or config key of ``gbinlog serve`` / ``gbinlog run``'s ``[server]``/``[output]`` ends in one line
``gbinlog <cmd>: error: …`` naming the key, exit 2, no traceback — run as real CLI subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gbinlog.config import load
from gbinlog.endpoint_config import endpoint_config, load_serve_file
from tests.test_server_support import write_sample_binlog

EXE = os.path.join(os.path.dirname(sys.executable), "gbinlog")
HEX41 = "*" + "Z" * 40
RUN_BASE = """
[output]
dir = "out"

[server]
port = 0
users = [{ name = "repl", password = "pw" }]

[[dn]]
id = "dn0"
dir = "dn0"
"""

# (options, config text or None, fragment the one line must contain)
SERVE_CASES = [
    (["--port", "70000"], None, "--port: must be 0..65535, got 70000"),
    (["--port", "abc"], None, "'abc' is not a valid integer"),
    (["--server-id", "0"], None, "--server-id: must be 1..4294967295"),
    (["--user", "nocolon"], None, "--user nocolon: no password: set the environment variable GBINLOG_PASSWORD_NOCOLON"),
    (["--admin", "ghost"], None, "--admin 'ghost': not among the users"),
    ([], None, "no users configured"),
    (["--log-file", "/nonexistent-dir/x.log"], None, "--log-file /nonexistent-dir/x.log"),
    (["--config", "{tmp}"], None, "is a directory, not a config file"),
    (["--config", "{tmp}/nothing.toml"], None, "no such config file"),
    ([], "[server\nport = 1", "not valid TOML"),
    # the old dialect (top level / [serve] / [users])
    ([], 'port = "abc"\n[users]\nr = "pw"', "port: expected an integer, got 'abc'"),
    ([], '[users]\nx = 1', "users.x: expected a password string, got 1"),
    ([], 'dir = 5\n[users]\nr = "pw"', "dir: expected a path, got 5"),
    ([], 'users = 5', "users: expected a table of name"),
    ([], 'admin = 7\n[users]\nr = "pw"', "admin: expected a user name or a list of names, got 7"),
    ([], f'[users]\nr = "{HEX41}"', "password: a '*' password hash needs 40 hex digits"),
    ([], '[serve]\nprot = 1', "prot: unknown key"),
    # the [server] / [output] tables
    ([], '[server]\nport = "abc"', "server.port: expected an integer, got 'abc'"),
    ([], '[server]\nport = 70000\nusers = [{ name = "r", password = "p" }]', "server.port: port must be 0..65535"),
    ([], '[server]\nprot = 1', "server.prot: unknown key"),
    ([], '[server]\nusers = 5', "server.users: expected a list, got 5"),
    ([], '[server]\nusers = [{ name = "r", password = "$A$005$short" }]', "server.users[0].password: a '$A$'"),
    ([], '[server]\nusers = [{ name = "r", password = "p", auth_plugin = "sha256_password" }]',
     "server.users[0].auth_plugin: 'sha256_password' is not one of"),
    ([], '[server]\nusers = [{ name = "r", password = "p" }, { name = "r", password = "q" }]',
     "server.users[1].name: 'r' appears twice"),
    ([], '[server]\nmax_connections = 0\nusers = [{ name = "r", password = "p" }]',
     "server.max_connections: must be at least 1"),
    ([], '[server]\nwait_timeout = 0\nusers = [{ name = "r", password = "p" }]', "server.wait_timeout: must be > 0"),
    ([], '[server]\nmax_allowed_packet = "10"\nusers = [{ name = "r", password = "p" }]',
     "server.max_allowed_packet: must be at least 4096 bytes"),
    ([], '[server]\nrequire_secure_transport = true\nusers = [{ name = "r", password = "p" }]',
     "server.require_secure_transport: needs tls_cert"),
    ([], '[server]\ntls_cert = "c.pem"\nusers = [{ name = "r", password = "p" }]',
     "server.tls_cert / server.tls_key: give both or neither"),
    ([], '[server]\ntls_cert = "c.pem"\ntls_key = "k.pem"\nusers = [{ name = "r", password = "p" }]',
     "tls_cert {tmp}/c.pem: no such file"),
    ([], '[server]\nversion = "8.0.36"\nusers = [{ name = "r", password = "p" }]', "server.version: must start with 5."),
    ([], '[output]\nexpire_logs_seconds = -1\n[server]\nusers = [{ name = "r", password = "p" }]',
     "output.expire_logs_seconds: must be >= 0"),
    ([], '[output]\nmax_total_size = "lots"\n[server]\nusers = [{ name = "r", password = "p" }]',
     "output.max_total_size: expected a size"),
    ([], '[output]\ndir = 5\n[server]\nusers = [{ name = "r", password = "p" }]', "output.dir: expected a path"),
    ([], '[server]\nusers = [{ name = "r", password = "p" }]\n[extra]\nx = 1', "extra: unknown key"),
]

RUN_CASES = [
    ('[server]\nport = 0', '[server]\nport = 0\ntls_cert = "c.pem"', "server.tls_cert / server.tls_key"),
    ('password = "pw"', f'password = "{HEX41}"', "server.users[0].password: a '*' password hash"),
    ('port = 0', 'port = 0\nwait_timeout = -1', "server.wait_timeout: must be > 0"),
    ('dir = "out"', 'dir = "out"\nmax_total_size = "huge"', "output.max_total_size: expected a size"),
    ('port = 0', 'port = 0\nmax_connections = "many"', "server.max_connections: expected an integer"),
]


def one_line_error(cmd: str, args: list[str], cwd: Path) -> str:
    out = subprocess.run([EXE, cmd, *args], capture_output=True, text=True, cwd=cwd, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stderr)
    assert lines[0].startswith(f"gbinlog {cmd}: error: "), lines
    return lines[0]


@pytest.mark.slow   # ~35 CLI subprocesses
@pytest.mark.parametrize(("args", "text", "fragment"), SERVE_CASES,
                         ids=[f"serve-{i}" for i in range(len(SERVE_CASES))])
def test_serve_bad_input_is_one_line_exit_2(tmp_path, args, text, fragment):
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if text is not None:
        (tmp_path / "serve.toml").write_text(text)
        args += ["--config", str(tmp_path / "serve.toml")]
    if "--dir" not in args and (text is None or "dir =" not in text) and "--config" not in args[:-2]:
        args += ["--dir", str(sample.dir)]
    if not any(a.startswith("--user") for a in args) and text is None and "no users" not in fragment:
        args += ["--user", "r:p"] if "--admin" not in args else []
    assert fragment.replace("{tmp}", str(tmp_path)) in one_line_error("serve", args, tmp_path)


@pytest.mark.parametrize(("old", "new", "fragment"), RUN_CASES, ids=[f"run-{i}" for i in range(len(RUN_CASES))])
def test_run_bad_server_and_output_keys_are_one_line_exit_2(tmp_path, old, new, fragment):
    assert old in RUN_BASE
    (tmp_path / "cluster.toml").write_text(RUN_BASE.replace(old, new, 1))
    assert fragment in one_line_error("run", ["--config", str(tmp_path / "cluster.toml")], tmp_path)


@pytest.mark.parametrize("what", ["missing", "file"])
def test_serve_dir_that_is_not_a_directory_is_a_path_error_exit_1(tmp_path, what):
    target = tmp_path / "d"
    if what == "file":
        target.write_text("x")
    out = subprocess.run([EXE, "serve", "--dir", str(target), "--user", "r:p", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"gbinlog serve: error: {target}: ")
    assert "not a directory" in lines[0]


def test_port_in_use_is_one_line(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        line = one_line_error("serve", ["--dir", str(sample.dir), "--port", str(port), "--user", "r:p"], tmp_path)
    assert f"cannot listen on 127.0.0.1:{port}" in line


def test_serve_reads_the_server_table_of_a_run_config(tmp_path):
    """The same file drives both: serve takes run's [server] and [output] (retention included)."""
    sample = write_sample_binlog(tmp_path / "out", txns=1, files=1)
    text = RUN_BASE.replace('dir = "out"', f'dir = "{sample.dir}"\nexpire_logs_seconds = 3600\nmax_total_size = "1GB"')
    text = text.replace('users = [{ name = "repl", password = "pw" }]',
                        'max_connections = 7\nusers = [{ name = "repl", password = "pw", admin = true }, '
                        '{ name = "m", password = "pw2", auth_plugin = "caching_sha2_password" }]')
    (tmp_path / "cluster.toml").write_text(text)
    run_cfg = load(tmp_path / "cluster.toml")
    a = endpoint_config(run_cfg.server, run_cfg.output)
    b = endpoint_config(*load_serve_file(tmp_path / "cluster.toml")[:2])
    assert a == b
    assert (b.max_connections, b.admins, b.user_plugins, b.expire_logs_seconds, b.max_total_size) == \
        (7, frozenset({"repl"}), {"m": "caching_sha2_password"}, 3600.0, 1 << 30)
    # Only the two tables also work, with --dir standing in for output.dir.
    (tmp_path / "serve.toml").write_text('[server]\nport = 0\nusers = [{ name = "r", password = "p" }]\n')
    srv, out, _ = load_serve_file(tmp_path / "serve.toml", sample.dir)
    assert (out.dir, srv.users[0].name) == (sample.dir, "r")
