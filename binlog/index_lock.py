"""One rewriter of a binlog directory's ``<base>.index`` at a time."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".gbinlog-index.lock"


@contextmanager
def index_lock(directory: Path) -> Iterator[None]:
    """Hold the directory's index lock (``flock`` on ``.gbinlog-index.lock`` in it): whoever rewrites
    ``<base>.index`` (the writer starting a file, a purge, recovery) reads and replaces it under this
    lock, across threads and processes — else a purge that read the index before a rotation would
    replace it without the new file. A file opened for writing, not the directory: on NFS ``flock``
    becomes a POSIX lock, which an exclusive lock takes only on a writable descriptor."""
    fd = os.open(Path(directory) / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)          # closing the descriptor releases the lock
