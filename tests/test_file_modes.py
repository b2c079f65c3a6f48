"""The binlog holds every row the cluster commits: what ``gbinlog build`` and ``gbinlog run`` write is
0640 in 0750 directories (``[output] file_mode`` / ``build --file-mode``), whatever umask the command
inherited — the process sets its own from the configured mode (``gbinlog.process``)."""

from __future__ import annotations

import pytest

from gbinlog.process import directory_mode
from gbinlog.replica import free_port
from tests.writer_support import BANK_DNS, eventually, gbinlog, one_error_line, run_config, service

UMASKS = [0o022, 0o000, 0o077]


def check_tree(top, file_mode: int, *, except_: dict[str, int] | None = None) -> None:
    """``top`` and every directory under it: ``directory_mode(file_mode)``; every file: ``file_mode``
    (or the mode ``except_`` gives it)."""
    wrong = {}
    for p in [top, *sorted(top.rglob("*"))]:
        rel = str(p.relative_to(top))
        want = (except_ or {}).get(rel, directory_mode(file_mode) if p.is_dir() else file_mode)
        if p.stat().st_mode & 0o777 != want:
            wrong[rel] = (oct(p.stat().st_mode & 0o777), oct(want))
    assert not wrong, wrong


@pytest.mark.parametrize("umask", UMASKS, ids=[f"umask{u:03o}" for u in UMASKS])
def test_build_writes_0640_files_in_0750_directories(tmp_path, umask):
    top = tmp_path / "new"                               # made by the build, with its parent
    proc = gbinlog("build", *[f"--dn={d}" for d in BANK_DNS], f"--out={top / 'global' / 'out'}", umask=umask)
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in (top / "global" / "out").iterdir()}
    assert {"binlog.000001", "binlog.index", "state.json", "meta.db", "gbinlog.lock"} <= names
    check_tree(top, 0o640)


def test_build_file_mode_option(tmp_path):
    out = tmp_path / "out"
    proc = gbinlog("build", *[f"--dn={d}" for d in BANK_DNS], f"--out={out}", "--file-mode=0600", umask=0o022)
    assert proc.returncode == 0, proc.stderr
    check_tree(out, 0o600)


@pytest.mark.parametrize("mode", ["0755", "0660", "0400", "640x", "rw-r-----"])
def test_a_file_mode_that_is_not_owner_rw_and_at_most_read_for_others_is_refused(tmp_path, mode):
    proc = gbinlog("build", *[f"--dn={d}" for d in BANK_DNS], f"--out={tmp_path / 'out'}", f"--file-mode={mode}")
    line = one_error_line(proc, 2)
    assert "--file-mode" in line and mode in line, line
    assert not (tmp_path / "out").exists()
    cfg = run_config(tmp_path, tmp_path / "out", output=f'file_mode = "{mode}"')
    line = one_error_line(gbinlog("run", "--config", cfg), 2)
    assert "output.file_mode" in line and mode in line, line


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_run_writes_0640_files_in_0750_directories(tmp_path, umask):
    """Everything ``gbinlog run`` creates: binlog files, index, state.json, status.json, the meta
    store with its -wal/-shm (while it runs), the lock, the log, the TLS certificate and its
    directory (the generated key is 0600)."""
    top = tmp_path / "var"
    out, log, tls = top / "out", top / "log" / "gbinlog.log", top / "tls"
    (top / "log").mkdir(parents=True)
    (top / "log").chmod(0o750)
    top.chmod(0o750)
    server = (f'port = {free_port()}\nusers = [{{ name = "repl", password = "pw" }}]\ntls_generate = true\n'
              f'tls_cert = "{tls / "cert.pem"}"\ntls_key = "{tls / "key.pem"}"')
    cfg = run_config(tmp_path, out, server=server)
    with service("run", "--config", cfg, "--log-file", log, umask=umask) as svc:
        svc.wait_for("SIGTERM stops")
        eventually(lambda: (out / "status.json").exists() and (out / "meta.db-shm").exists(), what="status, -shm")
        assert {p.name for p in out.glob("meta.db-*")} == {"meta.db-wal", "meta.db-shm"}
        check_tree(top, 0o640, except_={"tls/key.pem": 0o600})
        assert svc.stop() == 0, svc.lines
    check_tree(top, 0o640, except_={"tls/key.pem": 0o600})
    assert {"binlog.000001", "binlog.index", "state.json", "status.json", "meta.db", "gbinlog.lock"} <= \
        {p.name for p in out.iterdir()}
