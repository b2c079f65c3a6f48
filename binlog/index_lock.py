"""One rewriter of a binlog directory's ``<base>.index`` at a time."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def index_lock(directory: Path) -> Iterator[None]:
    """Hold the directory's index lock (``flock`` on the directory): whoever rewrites ``<base>.index``
    (the writer starting a file, a purge, recovery) reads and replaces it under this lock, across
    threads and processes — else a purge that read the index before a rotation would replace it
    without the new file."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)          # closing the descriptor releases the lock
