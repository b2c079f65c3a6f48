"""What the tests of the writer commands share: a ``cluster.toml`` over the bank fixture's DN
directories, a ``gbinlog`` subprocess whose stderr lines can be waited for, and a small tmpfs."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GBINLOG = [sys.executable, "-m", "gbinlog.cli"]
BANK = ROOT / "fixtures" / "bank-4dn"
BANK_DNS = [BANK / f"dn{i}" for i in range(4)]


def run_config(tmp_path: Path, out: Path, *, top: str = "", output: str = "", server: str = "port = 0") -> Path:
    """A ``cluster.toml`` reading the four bank DNs as directories into ``out``."""
    dns = "".join(f'[[dn]]\nid = "{d.name}"\ndir = "{d}"\n' for d in BANK_DNS)
    path = tmp_path / "cluster.toml"
    path.write_text(f'{top}\n[output]\ndir = "{out}"\n{output}\n[server]\n{server}\n{dns}')
    return path


def gbinlog(*args: str | os.PathLike, umask: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``gbinlog ARGS`` to its end (with ``umask`` as the inherited umask)."""
    preexec = None if umask is None else (lambda: os.umask(umask))
    return subprocess.run([*GBINLOG, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec)


def one_error_line(proc: subprocess.CompletedProcess, code: int) -> str:
    """The single line a failed command prints on stderr (no traceback), after checking its exit code."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == code and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


class Service:
    """A long-running ``gbinlog`` command (``run``, ``serve``); ``wait_for`` a line of its stderr."""

    def __init__(self, *args: str | os.PathLike, umask: int | None = None) -> None:
        preexec = None if umask is None else (lambda: os.umask(umask))
        self.proc = subprocess.Popen([*GBINLOG, *map(str, args)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, needle: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {needle!r} on stderr within {timeout} s: {self.lines}") from None
            if line is None:
                raise AssertionError(f"ended ({self.proc.wait()}) before {needle!r}: {self.lines}")
            self.lines.append(line)
            if needle in line:
                return line

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, its exit code; ``lines`` then holds all it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(line)
        return code


@contextmanager
def service(*args: str | os.PathLike, umask: int | None = None) -> Iterator[Service]:
    svc = Service(*args, umask=umask)
    try:
        yield svc
    finally:
        if svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait(30)


def eventually(check: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


@contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real small file system at ``where`` (root only: the tests run as root, as tests/test_build.py)."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(fs: Path) -> None:
    """Fill the file system of ``fs`` to its last block."""
    with open(fs / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    st = os.statvfs(fs)
    assert st.f_bavail == 0, st


def listing(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` and its bytes (to show nothing changed)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def modes(d: Path, names: Sequence[str] = ()) -> dict[str, str]:
    """The octal mode of ``d`` and of everything under it (or of ``names`` in it)."""
    paths = [d / n for n in names] if names else [d, *sorted(d.rglob("*"))]
    return {str(p.relative_to(d.parent)): oct(p.stat().st_mode & 0o777) for p in paths}
