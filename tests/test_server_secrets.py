"""Secrets of the endpoint and its stores: passwords come from a file or the environment and never show
in ``ps``; URLs are masked in every error; an empty password is refused unless allowed; failed logins
are slowed per user and host (MySQL's connection_control) and counted, while other logins go through."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from dumper.server import ConfigError, ServerConfig, start_in_thread
from gbinlog.config import ConfigError as GbinlogConfigError
from schema_shaper.meta_store import mask_url
from tests.test_server_support import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    RawClient,
    ServerError,
    write_sample_binlog,
)

ROOT = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "gbinlog")
SECRET = "Top-Secret-77"
FIXTURE_DNS = sorted(p for p in (ROOT / "fixtures" / "drift-2dn").iterdir() if p.is_dir())


def listening_port(proc: subprocess.Popen) -> int:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    while line and "listening on" not in line:
        line = proc.stderr.readline()
    assert "listening on" in line, line
    return int(line.rsplit(":", 1)[1])


def visible_in_ps(pid: int) -> str:
    """What every local user sees of the process: ``ps`` and /proc/<pid>/cmdline."""
    ps = subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True).stdout
    return ps + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def run_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=dict(os.environ, **(env or {})))


# -- passwords from a file or the environment, never in ps ------------------------------------------

@pytest.mark.parametrize("how", ["users-file", "environment", "old-form"])
def test_serve_takes_passwords_without_showing_them_in_ps(tmp_path, how):
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    args = [EXE, "serve", "--dir", str(sample.dir), "--port", "0", "--admin", USER]
    env = dict(os.environ)
    if how == "users-file":
        users = tmp_path / "users"
        users.write_text(f"# name:password\n{USER}:{SECRET}\n\n{ADMIN}:{ADMIN_PASSWORD}\n")
        args += ["--users-file", str(users)]
    elif how == "environment":
        env["GBINLOG_PASSWORD_REPL"] = SECRET
        args += ["--user", USER]
    else:                                      # the old NAME:PASSWORD form: the title is rewritten
        args += ["--user", f"{USER}:{SECRET}"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = listening_port(proc)
        shown = visible_in_ps(proc.pid)
        assert "serve" in shown and SECRET not in shown, shown
        RawClient(port, USER, SECRET).close()
        with pytest.raises(ServerError):
            RawClient(port, USER, "not-it")
        if how == "users-file":
            RawClient(port, ADMIN, ADMIN_PASSWORD).close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert SECRET not in err


def test_the_process_title_keeps_no_password_given_as_an_option():
    from gbinlog.serve_cmd import masked_argv
    argv = ["python", "gbinlog", "serve", "--user", f"a:{SECRET}", f"--user=b:{SECRET}", "--user", "c",
            "--admin", "a"]
    assert masked_argv(argv) == ["python", "gbinlog", "serve", "--user", "a:***", "--user=b:***", "--user", "c",
                                 "--admin", "a"]
    assert masked_argv(["gbinlog", "hash-password", "--password", SECRET]) == \
        ["gbinlog", "hash-password", "--password", "***"]
    assert masked_argv(["gbinlog", "hash-password", f"--password={SECRET}"]) == \
        ["gbinlog", "hash-password", "--password=***"]


def test_run_config_takes_password_file_and_password_env(tmp_path, monkeypatch):
    from gbinlog.config import load
    from gbinlog.endpoint_config import endpoint_config
    (tmp_path / "repl.pw").write_text(f"{SECRET}\n")
    (tmp_path / "cluster.toml").write_text("""
[output]
dir = "out"
[server]
port = 0
users = [{ name = "repl", password_file = "repl.pw" },
         { name = "ops", password_env = "OPS_PW", admin = true },
         { name = "old", password = "plain" }]
[[dn]]
id = "dn0"
dir = "dn0"
""")
    with monkeypatch.context() as env:
        env.setenv("OPS_PW", "ops-secret")
        cfg = load(tmp_path / "cluster.toml")
        endpoint = endpoint_config(cfg.server, cfg.output)
    assert endpoint.users == {"repl": SECRET, "ops": "ops-secret", "old": "plain"}
    assert endpoint.admins == {"ops"}
    with pytest.raises(GbinlogConfigError,
                       match=r"server.users\[1\].password_env: the environment variable OPS_PW is not set"):
        load(tmp_path / "cluster.toml")


# -- masked URLs and no password in the output of a failing start -------------------------------------

def test_mask_url_hides_the_password_only():
    assert mask_url(f"mysql://gb:{SECRET}@meta.example:3306/gbinlog_meta") == "mysql://gb:***@meta.example:3306/gbinlog_meta"
    assert mask_url("mysql://gb:p@ss/w@rd@h:1/db") == "mysql://gb:***@h:1/db"
    assert mask_url("mysql://gb@h/db") == "mysql://gb@h/db"
    assert mask_url("sqlite:///var/lib/gbinlog/meta.db") == "sqlite:///var/lib/gbinlog/meta.db"


def cluster_toml(extra: str) -> str:
    dns = "".join(f'\n[[dn]]\nid = "{d.name}"\ndir = "{d}"\n' for d in FIXTURE_DNS)
    return f'{extra}\n[output]\ndir = "out"\n[server]\nport = 0\n{dns}'


STORE = f"mysql://gb:{SECRET}@127.0.0.1:1/meta"
FAILING_STARTS = [
    ("ha-store-unreachable", ["run", "--config", "cluster.toml"],
     cluster_toml('metadb = "sqlite:///tmp/unused-meta.db"').replace(
         "[output]", f'[ha]\nmember = "m1"\naddress = "127.0.0.1:3399"\nstore = "{STORE}"\n[output]'),
     "lease store mysql://gb:***@127.0.0.1:1/meta"),
    ("step-down-unreachable", ["ha", "step-down", "--config", "cluster.toml"],
     cluster_toml("").replace("[output]", f'[ha]\nmember = "m1"\naddress = "127.0.0.1:3399"\nstore = "{STORE}"\n'
                                          "[output]"),
     "lease store mysql://gb:***@127.0.0.1:1/meta"),
    ("metadb-bad-scheme", ["run", "--config", "cluster.toml"],
     cluster_toml(f'metadb = "postgres://gb:{SECRET}@h/db"'), "got 'postgres://gb:***@h/db'"),
    ("ha-store-bad-scheme", ["run", "--config", "cluster.toml"],
     cluster_toml("").replace("[output]", f'[ha]\nmember = "m1"\nstore = "pg://gb:{SECRET}@h/db"\n[output]'),
     "got 'pg://gb:***@h/db'"),
    ("serve-user-without-name", ["serve", "--dir", ".", "--user", f":{SECRET}"], None, "--user '': expected NAME"),
    ("serve-bad-port", ["serve", "--dir", ".", "--port", "70000", f"--user=repl:{SECRET}"], None,
     "--port: must be 0..65535"),
]


@pytest.mark.parametrize(("args", "config", "shown"), [c[1:] for c in FAILING_STARTS],
                         ids=[c[0] for c in FAILING_STARTS])
def test_a_failing_start_prints_no_password(tmp_path, args, config, shown):
    if config is not None:
        (tmp_path / "cluster.toml").write_text(config)
    out = run_cli(args, tmp_path)
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr, out.stderr
    assert shown in out.stderr, out.stderr


# -- empty passwords --------------------------------------------------------------------------------

def test_an_empty_password_is_refused_at_start_unless_allowed(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    out = run_cli(["serve", "--dir", str(sample.dir), "--port", "0", "--user", "nopw:"], tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0] == ("gbinlog serve: error: server.users[0] (nopw): empty password: refused (set [server] "
                        "allow_empty_password = true to allow it)")
    out = run_cli(["serve", "--dir", str(sample.dir), "--port", "0", "--user", "nopw"], tmp_path,
                  env={"GBINLOG_PASSWORD_NOPW": ""})
    assert out.returncode == 2 and "server.users[0] (nopw): empty password: refused" in out.stderr
    (tmp_path / "cluster.toml").write_text(cluster_toml("").replace(
        "port = 0\n", 'port = 3999\nusers = [{ name = "r", password = "pw" }, { name = "anon" }]\n'))
    out = run_cli(["run", "--config", "cluster.toml"], tmp_path)
    assert out.returncode == 2 and "server.users[1] (anon): empty password: refused (set [server] " \
                                   "allow_empty_password = true" in out.stderr, out.stderr
    with pytest.raises(ConfigError, match="user 'anon' has an empty password: refused"):
        ServerConfig(dir=sample.dir, users={"anon": ""}).validate()
    allowed = sample.dir.parent / "serve.toml"
    allowed.write_text(f'[output]\ndir = "{sample.dir}"\n[server]\nport = 0\nallow_empty_password = true\n'
                       'users = [{ name = "anon" }]\n')
    proc = subprocess.Popen([EXE, "serve", "--config", str(allowed)], stderr=subprocess.PIPE, text=True)
    try:
        RawClient(listening_port(proc), "anon", "").close()
    finally:
        proc.terminate()
        proc.wait(10)


# -- failed logins are slowed per user and host ------------------------------------------------------

def timed_login(port: int, user: str, password: str) -> tuple[bool, float]:
    start = time.monotonic()
    try:
        RawClient(port, user, password).close()
        ok = True
    except ServerError as exc:
        assert exc.code == 1045
        ok = False
    return ok, time.monotonic() - start


def metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


@pytest.mark.slow     # ~12 s of deliberate delays
def test_thirty_wrong_passwords_are_slowed_while_a_good_user_logs_in_at_once(tmp_path):
    from prometheus_client import CollectorRegistry

    from gbinlog.metrics import serve_http
    from gbinlog.replica_metrics import register
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    step, most = 0.05, 0.5
    with start_in_thread(ServerConfig(dir=sample.dir, users={USER: PASSWORD, ADMIN: ADMIN_PASSWORD},
                                      failed_login_min_delay=step, failed_login_max_delay=most)) as h:
        registry = CollectorRegistry()
        register(registry, h.server)
        http = serve_http("127.0.0.1", 0, registry, lambda: (True, "ok"))
        mport = http.server_address[1]
        good: list[float] = []
        stop = threading.Event()

        def good_user() -> None:
            while not stop.is_set():
                ok, took = timed_login(h.port, ADMIN, ADMIN_PASSWORD)
                assert ok
                good.append(took)
                time.sleep(0.1)

        watcher = threading.Thread(target=good_user)
        watcher.start()
        try:
            wrong = [timed_login(h.port, USER, f"guess-{n}") for n in range(30)]
        finally:
            stop.set()
            watcher.join()
        assert [ok for ok, _ in wrong] == [False] * 30
        expected = [min(max(n - 2, 0) * step, most) for n in range(30)]     # 0, 0, 0, 0.05, 0.10, …, 0.5
        for (_, took), delay in zip(wrong, expected, strict=True):
            assert delay <= took < delay + 1.0, (took, delay)
        total = sum(took for _, took in wrong)
        assert total >= sum(expected) >= 10.0, total
        assert good and max(good) < 1.0, good                   # the other user was never slowed
        assert metric(mport, "gbinlog_failed_logins_total") == 30
        assert metric(mport, "gbinlog_delayed_logins_total") == 27
        # The right password still gets in (after its delay) and ends the pair's delays.
        ok, took = timed_login(h.port, USER, PASSWORD)
        assert ok and most <= took < most + 1.0
        ok, took = timed_login(h.port, USER, PASSWORD)
        assert ok and took < 1.0
        http.shutdown()
    print(f"30 wrong passwords: {total:.2f} s in all, the last {wrong[-1][1]:.2f} s; "
          f"the good user's slowest login {max(good) * 1000:.0f} ms")


def test_parallel_wrong_passwords_take_turns_and_each_pays_its_delay(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=1, files=1)
    step = 0.2
    with start_in_thread(ServerConfig(dir=sample.dir, users={USER: PASSWORD}, failed_login_min_delay=step,
                                      failed_login_max_delay=10.0)) as h:
        assert [timed_login(h.port, USER, "x")[0] for _ in range(3)] == [False] * 3
        start = time.monotonic()
        results: list[tuple[bool, float]] = []
        threads = [threading.Thread(target=lambda: results.append(timed_login(h.port, USER, "y")))
                   for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        assert [ok for ok, _ in results] == [False] * 5
        assert elapsed >= step * (1 + 2 + 3 + 4 + 5), elapsed          # one at a time, growing delays
        assert h.server.login_throttle.failures(USER, "127.0.0.1") == 8
