"""SIGHUP after logrotate moved ``--log-file``: ``gbinlog run`` and ``gbinlog serve`` keep running and
write their next lines to a new file at the path; the moved file gets nothing more."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from gbinlog.local_engine import build
from tests.writer_support import BANK_DNS, eventually, run_config, service


def rotate_and_hup(svc, log: Path) -> Path:
    """What logrotate does with ``postrotate kill -HUP``: move the file, signal the process."""
    rotated = log.with_name(log.name + ".1")
    os.rename(log, rotated)
    svc.proc.send_signal(signal.SIGHUP)

    def new_file_has_the_line() -> bool:
        assert svc.proc.poll() is None, f"SIGHUP ended the process (exit {svc.proc.returncode})"
        return log.exists() and "SIGHUP" in log.read_text()

    eventually(new_file_has_the_line, what=f"a new {log} with the SIGHUP line")
    return rotated


def test_sighup_reopens_the_log_file_of_run_and_it_keeps_running(tmp_path):
    log = tmp_path / "gbinlog.log"
    cfg = run_config(tmp_path, tmp_path / "out")
    with service("run", "--config", cfg, "--log-file", log) as svc:
        svc.wait_for("SIGTERM stops")
        rotated = rotate_and_hup(svc, log)
        assert svc.proc.poll() is None, "SIGHUP ended gbinlog run"
        assert "SIGHUP" not in rotated.read_text()
        assert f"SIGHUP: log file {log} (re)opened" in log.read_text()
        assert svc.stop() == 0, svc.lines
    assert any("stopped cleanly" in line for line in svc.lines), svc.lines


def test_sighup_reopens_the_log_file_of_serve_and_it_keeps_serving(tmp_path):
    out = tmp_path / "out"
    build(BANK_DNS, out)
    cfg = tmp_path / "serve.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = 0\nusers = [{{ name = "repl", password = "pw" }}]\n')
    log = tmp_path / "serve.log"
    with service("serve", "--config", cfg, "--log-file", log) as svc:
        svc.wait_for("listening on")
        rotated = rotate_and_hup(svc, log)
        assert svc.proc.poll() is None, "SIGHUP ended gbinlog serve"
        assert "SIGHUP" not in rotated.read_text()
        svc.proc.send_signal(signal.SIGHUP)           # a second one, without a move: still running
        eventually(lambda: log.read_text().count("SIGHUP") == 2, what="the second SIGHUP line")
        assert svc.proc.poll() is None
