"""``gbinlog demo``: the README's main command. Run for 20 s under a pty
as a user would, then Ctrl-C (SIGINT to its process group): it must have shown live lines with a
constant replica total, exit 0, and leave no process and no file behind."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RUN_FOR = 20


def descendants(pid: int) -> set[int]:
    """Every live process whose parent chain leads to ``pid`` (from /proc)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for child, ppid in parent.items():
            if ppid == p and child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_demo_under_a_pty_then_ctrl_c(tmp_path):
    args = [sys.executable, "-m", "gbinlog.cli", "demo"]
    if not port_free(3307):          # the default endpoint port is taken on this machine
        args += ["--port", "0"]
    master, slave = pty.openpty()
    # an 80-column terminal: the live line must fit it (else it wraps and in-place updating breaks)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm"
    proc = subprocess.Popen(args, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    buf = bytearray()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf.extend(chunk)

    children: set[int] = set()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < RUN_FOR:
            pump(0.5)
            children |= descendants(proc.pid)
            assert proc.poll() is None, buf.decode(errors="replace")
        os.killpg(proc.pid, signal.SIGINT)            # Ctrl-C in the terminal
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            pump(0.2)
        pump(0.3)
        code = proc.poll()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        os.close(master)
    text = buf.decode(errors="replace")
    assert code == 0, text[-3000:]
    lines = [seg.replace("\x1b[K", "") for seg in re.split(r"[\r\n]+", text) if seg.strip()]
    live = [ln for ln in lines if "txn/s" in ln and "binlog lag" in ln and "Live line" not in ln]
    assert len(live) >= RUN_FOR - 8, text[-3000:]        # about one a second once running
    assert max(len(ln) for ln in live) < 80, max(live, key=len)   # fits the 80-column terminal
    assert any("replica balance 160,000 ✓" in ln for ln in live), text[-3000:]
    assert not any("✗" in ln for ln in lines), text[-3000:]
    tps = [float(m[1]) for ln in live[-5:] if (m := re.search(r"(\d+)/200 txn/s", ln))]
    assert tps and max(tps) > 50, live[-5:]
    lags = [float(m[1]) for ln in live[-5:] if (m := re.search(r"binlog lag ([\d.]+)s", ln))]
    assert lags and max(lags) < 2.0, live[-5:]
    summary = next(ln for ln in lines if "transactions written" in ln)   # the summary on exit
    m = re.search(r"demo: (\d+) s, ([\d,]+) transactions written .*replica total balance 160,000 in (\d+)/(\d+) checks",
                  summary)
    assert m and int(m[2].replace(",", "")) > 500 and m[3] == m[4] and int(m[4]) >= 5, summary
    assert "MariaDB replica (pid" in text and "attached with CHANGE MASTER TO" in text
    assert "gbinlog demo: stopped; nothing left running" in text
    work = Path(re.search(r"global binlog in (\S+)/global", text)[1])
    # no process left behind: the replica (and anything else it started) is gone, its files too
    assert children, "the demo started no child process (no replica?)"
    assert [p for p in children if alive(p)] == []
    assert not work.exists()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            assert str(work) not in cmd, cmd
