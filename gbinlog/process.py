"""Process-wide settings of the commands that write (``run``, ``build``, ``serve``): the mode of the
files and directories they create, and reopening the log file on SIGHUP.

**File mode.** The binlog holds every row the cluster commits, so its files must not be readable by
any local user. ``[output] file_mode`` (``build --file-mode``; default ``0640``, as MySQL keeps its
binlogs) is the mode of every file the process creates; directories get the same bits plus search
(``x``) wherever reading is allowed (``0640`` → ``0750``). The process sets its umask from it at
start, so the inherited umask (022, 0, 077, …) does not matter and every file created by any part
of the process — binlog files, index, ``state.json``, ``status.json``, the meta store and its
``-wal``/``-shm``, the lock, the log, a generated TLS certificate — gets it, as do the files of the
child processes (worker processes, Spark's JVM and its Python workers on this host). Files made
with a stricter mode on purpose keep it (a generated TLS key is 0600). Existing files and
directories keep their modes.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from logging.handlers import WatchedFileHandler

log = logging.getLogger("gbinlog")

DEFAULT_FILE_MODE = "0640"
_OCTAL_MODE = re.compile(r"^0?[0-7]{3}$")


def parse_file_mode(text: object, where: str) -> int:
    """The mode an octal string like ``"0640"`` gives: the owner reads and writes (gbinlog writes
    its own files), group and others may at most read (SQLite creates its files 0644 at most, and
    nobody else may change a binlog), no execute bits. Raises ``gbinlog.config.ConfigError``."""
    from gbinlog.config import ConfigError

    if not isinstance(text, str) or not _OCTAL_MODE.match(text):
        raise ConfigError(f'{where}: expected an octal file mode like "0640", got {text!r}')
    mode = int(text, 8)
    if mode & 0o600 != 0o600 or mode & ~0o644:
        raise ConfigError(f"{where}: {text}: the owner reads and writes, group and others may only read "
                          "(0600, 0640 or 0644)")
    return mode


def directory_mode(file_mode: int) -> int:
    """The mode of directories holding files of ``file_mode``: search wherever read (0640 → 0750)."""
    return file_mode | (file_mode & 0o444) >> 2


def set_file_mode(file_mode: int) -> None:
    """Every file this process (and its children) creates from now on gets ``file_mode``, every
    directory ``directory_mode(file_mode)``, whatever umask it inherited."""
    os.umask(0o777 & ~directory_mode(file_mode))


def reopen_log_files() -> None:
    """Reopen each log file that was moved away (logrotate): later lines go to a new file at its path."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, WatchedFileHandler):
            handler.reopenIfNeeded()
            log.info("SIGHUP: log file %s (re)opened", handler.baseFilename)


def reopen_logs_on_sighup() -> None:
    """SIGHUP reopens the log files instead of ending the process. In a thread of its own: the
    signal may arrive while the main thread is inside a log handler, whose lock it then holds."""
    def on_sighup(signum: int, frame: object) -> None:
        threading.Thread(target=reopen_log_files, name="gbinlog-sighup", daemon=True).start()

    signal.signal(signal.SIGHUP, on_sighup)
