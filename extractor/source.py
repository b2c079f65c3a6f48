"""DN binlog sources: the events of one DN, file by file, with the file name of each.

A DN's binlog directory holds ``mysql-bin.NNNNNN`` files and ``mysql-bin.index``; the DN id is the
directory name. Files are read in index order (or by name when there is no index).
In follow mode the last file is followed as it grows and the next file is picked up when the DN
rotates; reading stops when ``should_stop()`` says so.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from binlog import Event, read_events
from binlog.reader import BinlogFile

_BINLOG_NAME = re.compile(r"^(?P<base>.+)\.(?P<seq>\d{6,})$")
FileEvents = tuple[str, Iterator[Event]]


class DnSource:
    """A DN id and its files: ``files()`` yields ``(file name, events)`` in order."""

    dn_id: str

    def files(self) -> Iterator[FileEvents]:
        raise NotImplementedError


class BytesSource(DnSource):
    """Finite in-memory binlog files (tests, captures): ``{file name: bytes}`` in order."""

    def __init__(self, dn_id: str, files: dict[str, bytes] | list[tuple[str, bytes]]) -> None:
        self.dn_id = dn_id
        self._files = list(files.items()) if isinstance(files, dict) else list(files)

    def files(self) -> Iterator[FileEvents]:
        for name, data in self._files:
            yield name, read_events(data, name=name)


def list_binlog_files(directory: Path, index_name: str | None = None) -> list[str]:
    """File names of a DN directory: from ``*.index`` when present, else every ``<base>.NNNNNN``
    sorted by number. Index lines are paths (``./mysql-bin.000001``); only the name is kept."""
    indexes = [Path(directory, index_name)] if index_name else sorted(Path(directory).glob("*.index"))
    for index in indexes:
        if index.is_file():
            names = []
            for line in index.read_text(encoding="utf-8", errors="replace").splitlines():
                line = line.strip()
                if line:
                    names.append(os.path.basename(line))
            return names
    found = [p.name for p in Path(directory).iterdir() if _BINLOG_NAME.match(p.name)]
    return sorted(found, key=lambda n: (_BINLOG_NAME.match(n)["base"], int(_BINLOG_NAME.match(n)["seq"])))


class NotADnDirectory(OSError):
    """A path given as a DN binlog directory that is not one (the message names the path)."""


def dn_binlog_files(directory: str | os.PathLike, dn_id: str | None = None) -> list[str]:
    """``list_binlog_files`` of a directory that must be a DN's binlog directory: it exists, holds
    binlog files, and every file its index lists is there (a file deleted from the middle while
    still in ``mysql-bin.index`` would silently drop its transactions)."""
    d = Path(directory)
    who = f"DN {dn_id}: " if dn_id else ""
    if not d.is_dir():
        raise NotADnDirectory(f"{who}DN binlog directory {d} does not exist" if not d.exists() else
                              f"{who}{d} is not a directory (a DN binlog directory is expected)")
    if (d / "binlog.index").is_file() and ((d / "state.json").exists() or (d / "meta.db").exists()) \
            and not any(d.glob("mysql-bin.index")):
        raise NotADnDirectory(f"{who}{d} is a global binlog directory (gbinlog's output: binlog.index, state.json), "
                              "not a DN's binlog directory")
    names = list_binlog_files(d)
    if not names:
        raise NotADnDirectory(f"{who}{d} holds no binlog file (no mysql-bin.index, no mysql-bin.NNNNNN): not a "
                              "DN binlog directory")
    missing = [n for n in names if not (d / n).is_file()]
    if missing:
        index = next((p.name for p in sorted(d.glob("*.index")) if p.is_file()), "the index")
        raise NotADnDirectory(f"{who}{d / missing[0]} is listed in {index} but does not exist (deleted from the "
                              "middle of the DN's binlog?)")
    return names


class DirSource(DnSource):
    """The binlog directory of one DN. ``start_file``/``start_pos`` begin mid-way (restart).

    ``follow=True``: every file but the newest is read to its end; the newest is followed with
    ``read_events(follow=True)`` until it rotates (ROTATE/STOP), a newer file appears in the index
    and this one stopped growing (a DN that restarted without ROTATE), or ``should_stop()``.
    ``on_idle`` is called on every poll while waiting (the extractor's "held prepare" warnings).
    """

    def __init__(self, directory: str | os.PathLike, *, dn_id: str | None = None,
                 follow: bool = False, start_file: str | None = None, start_pos: int = 4,
                 poll_interval: float = 0.1, should_stop: Callable[[], bool] | None = None) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise FileNotFoundError(f"DN binlog directory {self.directory} does not exist")
        self.dn_id = dn_id or self.directory.resolve().name
        self.follow = follow
        self.start_file = start_file
        self.start_pos = start_pos
        self.poll_interval = poll_interval
        self.should_stop = should_stop or (lambda: False)
        self.on_idle: Callable[[], None] | None = None
        self.events_read = 0  # events of the finished (not followed) files read so far

    def _stopped(self) -> bool:
        if self.on_idle is not None:
            self.on_idle()
        return self.should_stop()

    def files(self) -> Iterator[FileEvents]:
        done: list[str] = []
        started = self.start_file is None
        while True:
            names = list_binlog_files(self.directory)
            if names[:len(done)] != done:
                raise RuntimeError(f"{self.directory}: binlog index changed under us (purged or rewritten)")
            todo = names[len(done):]
            if not todo:
                if not self.follow or self._stopped():
                    return
                time.sleep(self.poll_interval)
                continue
            name = todo[0]
            start = 4
            if not started:
                if name != self.start_file:
                    done.append(name)
                    continue
                started, start = True, self.start_pos
            path = self.directory / name
            is_last = len(todo) == 1
            if self.follow and is_last:
                yield name, read_events(path, start=start, follow=True, poll_interval=self.poll_interval,
                                        should_stop=self._file_done_check(path, name))
            elif start > 4 and start == path.stat().st_size:
                yield name, iter(())  # a restart point at the very end of a finished file
            else:
                file = BinlogFile(path, start=start)
                yield name, file
                self.events_read += file.events
            done.append(name)
            if self.follow and self._stopped():
                return

    def _file_done_check(self, path: Path, name: str) -> Callable[[], bool]:
        """While following ``path``: stop when asked, or when a newer file is listed and this one
        has not grown over two polls (a DN that crashed and restarted writes no ROTATE)."""
        last = {"size": -1, "still": 0}

        def check() -> bool:
            if self._stopped():
                return True
            names = list_binlog_files(self.directory)
            if names and names[-1] != name:
                size = path.stat().st_size
                last["still"] = last["still"] + 1 if size == last["size"] else 0
                last["size"] = size
                return last["still"] >= 2
            return False
        return check


def open_source(dn: str | os.PathLike | DnSource, **kwargs) -> DnSource:
    """A ``DnSource`` for a directory path (or the source itself)."""
    if isinstance(dn, DnSource):
        return dn
    return DirSource(dn, **kwargs)
