"""The lock of an output directory: one writer at a time (``gbinlog run``, ``gbinlog build``, any engine).

``<out>/gbinlog.lock`` is ``flock``ed by the writer for as long as it writes, and holds its pid and
command (``4242 run``). The kernel releases the lock when the process ends, however it ends, so a
leftover file never blocks a writer; the file itself stays (removing a lock file others may have
opened would let two writers in). ``gbinlog status`` reads it to tell whether the service runs.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = "gbinlog.lock"
# what a global binlog directory holds once something was written to it: binlog.NNNNNN, state.json
_WRITTEN = ("binlog.0", "state.json")


class OutputLockError(Exception):
    """The output directory cannot be locked; ``str()`` starts with the directory, for the caller to
    prefix with the key or option that names it (``output.dir``, ``--out``)."""


class OutputInUse(OutputLockError):
    """Another process holds the lock."""


class OutputUnwritable(OutputLockError):
    """The directory or its lock file cannot be made or written (permissions, a full disk, …)."""


@dataclass(frozen=True, slots=True)
class LockHolder:
    pid: int | None          # None: not written yet (the holder is between its lock and its write)
    command: str             # "run", "build", … ("" for a lock file of an older version: just a pid)

    def describe(self) -> str:
        who = f"gbinlog {self.command}" if self.command else "gbinlog process"
        return f"another {who} (pid {self.pid if self.pid is not None else '?'})"


def _holder_of(text: str) -> LockHolder:
    parts = text.split()
    pid = int(parts[0]) if parts and parts[0].isdigit() else None
    return LockHolder(pid, parts[1] if len(parts) > 1 else "")


def os_error_advice(exc: OSError) -> str:
    """What the operator can do about an ``OSError`` met writing the output."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "its file system is full: free space there"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "no permission: run gbinlog as the user that owns the directory"
    if exc.errno == errno.EROFS:
        return "a read-only file system: choose a writable directory"
    return "check the directory and its file system"


class OutputLock:
    """The held lock of ``out`` (``release()`` or the end of the process frees it)."""

    def __init__(self, out: Path, fd: int) -> None:
        self.out = out
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)        # closing the descriptor releases the lock


def lock_output(out: str | os.PathLike, command: str) -> OutputLock:
    """Create ``out`` if missing and take its lock for ``command`` (``run``, ``build``): the one rule
    every writer of an output directory follows. ``OutputInUse`` names the holder;
    ``OutputUnwritable`` the path, the error and what to do (and what it made is removed again)."""
    out = Path(out)
    path = out / LOCK_FILE
    made = _missing_directories(out) + ([] if path.exists() else [path])
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        _remove(made)
        raise OutputUnwritable(f"{out}: cannot create {exc.filename or path}: {exc.strerror or exc}; "
                               f"{os_error_advice(exc)}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = _holder_of(_read_all(fd))
        os.close(fd)
        raise OutputInUse(f"{out} is in use by {holder.describe()}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {command}\n".encode("ascii"), 0)
    except OSError as exc:
        _remove(made)
        os.close(fd)
        raise OutputUnwritable(f"{out}: cannot write {path}: {exc.strerror or exc}; "
                               f"{os_error_advice(exc)}") from None
    return OutputLock(out, fd)


def _missing_directories(out: Path) -> list[Path]:
    """The directories up to ``out`` that do not exist yet, outermost first."""
    return [p for p in reversed([out, *out.parents]) if not p.exists()]


def _read_all(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode("ascii", "replace")


def _remove(paths: list[Path]) -> None:
    """Remove what a writer made (files first, then the directory), as far as it can."""
    for p in reversed(paths):
        try:
            p.rmdir() if p.is_dir() else p.unlink(missing_ok=True)
        except OSError:
            pass


def lock_holder(out: str | os.PathLike) -> LockHolder | None:
    """Who holds ``out``'s lock now, or None when nobody does."""
    path = Path(out) / LOCK_FILE
    try:
        fh = open(path, encoding="ascii", errors="replace")
    except OSError:
        return None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _holder_of(fh.read())
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


def holds_a_global_binlog(out: Path) -> bool:
    """Something was written to ``out``: a binlog file or ``state.json``."""
    return out.is_dir() and any(p.name.startswith(_WRITTEN) for p in out.iterdir())


@contextmanager
def locked_output(out: str | os.PathLike, command: str) -> Iterator[OutputLock]:
    """Hold ``out``'s lock while a writer (a build) writes it. A writer that fails before it wrote
    a global binlog into a directory that held none leaves nothing behind: the files that appeared
    meanwhile (the meta store, the index, the lock file) are removed, and the directory if it made
    it. Holding the lock, everything that appeared there is its own."""
    out = Path(out)
    made = _missing_directories(out)
    before = {p.name for p in out.iterdir()} if out.is_dir() else set()
    fresh = not holds_a_global_binlog(out)
    lock = lock_output(out, command)
    try:
        yield lock
    except BaseException:
        if fresh and not holds_a_global_binlog(out):
            _remove_new_files(out, before, made)
        raise
    finally:
        lock.release()


def _remove_new_files(out: Path, before: set[str], made: list[Path]) -> None:
    """Best effort: what stays is harmless, and a new start takes it over."""
    try:
        _remove(made + [p for p in out.iterdir() if p.name not in before and not p.is_dir()])
    except OSError:
        pass
