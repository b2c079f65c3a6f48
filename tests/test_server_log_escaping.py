"""Client input in the session log is escaped: a user name, a statement or a dump's file name holding a
newline cannot forge a line of ``--log-file``, and an escape sequence never reaches it raw."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from dumper.server.logtext import printable
from tests.test_server_support import (
    ADMIN,
    ADMIN_PASSWORD,
    RawClient,
    ServerError,
    start_serve_process,
    write_sample_binlog,
)

FORGED = "2030-01-01 00:00:00,000 INFO gbinlog.session: login ok user=root from=10.9.9.9:1 conn=1"
CLEAR_SCREEN = "\x1b[2J\x1b[H"
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")


def start_serve(directory: Path, log_file: Path) -> tuple[subprocess.Popen, int]:
    return start_serve_process(directory, ADMIN, ADMIN_PASSWORD, "--admin", ADMIN, "--log-file", str(log_file))


def test_printable_escapes_controls_separators_and_backslashes_only():
    assert printable("repl") == "repl"
    assert printable("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert printable(CLEAR_SCREEN) == "\\x1b[2J\\x1b[H"
    assert printable("x\x9b31m\x7f") == "x\\x9b31m\\x7f"                 # C1 CSI, DEL
    assert printable("a\u2028b\u202ec") == "a\\u2028b\\u202ec"         # line separator, RTL override
    assert printable("\\n") == "\\\\n"                                  # never mistaken for an escaped newline
    assert printable("héllo wörld ✓") == "héllo wörld ✓"


@pytest.mark.slow   # a serve subprocess
def test_a_user_name_statement_or_file_name_with_a_newline_forges_no_log_line(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=2, files=1)
    log_file = tmp_path / "session.log"
    proc, port = start_serve(sample.dir, log_file)
    try:
        with pytest.raises(ServerError) as denied:
            RawClient(port, f"evil\n{FORGED}{CLEAR_SCREEN}", "x")
        assert denied.value.code == 1045
        admin = RawClient(port, ADMIN, ADMIN_PASSWORD)
        with pytest.raises(ServerError):
            admin.query(f"PURGE BINARY LOGS TO 'nope{CLEAR_SCREEN}'")
        with pytest.raises(ServerError):
            list(admin.dump(f"binlog.0001\n{FORGED}", 4))
        admin.close()
        deadline = time.monotonic() + 10
        while "dump stop" not in log_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(10)
    raw = log_file.read_bytes()
    assert b"\x1b" not in raw
    lines = raw.decode().splitlines()
    assert lines and all(LOG_LINE.match(line) for line in lines), lines
    assert not any(line.startswith(FORGED[:30]) for line in lines), lines
    denied_lines = [line for line in lines if "login denied" in line]
    assert len(denied_lines) == 1
    assert f"user=evil\\n{FORGED}\\x1b[2J\\x1b[H from=127.0.0.1:" in denied_lines[0]
    assert any("PURGE BINARY LOGS TO 'nope\\x1b[2J\\x1b[H' by user=boss" in line for line in lines), lines
    assert any("dump start conn=2 user=boss from=127.0.0.1:" in line and f"at binlog.0001\\n{FORGED}:4" in line
               for line in lines), lines
