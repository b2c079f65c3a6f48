"""Retention: old binlog files are purged by age and total size — by the endpoint's background task
(``gbinlog serve``, ``gbinlog run``), or by whoever drives it for a directory with no endpoint
(``Directory``; an HA member drives it for its leader/follower rules, ``gbinlog.ha``).

Rules (MySQL's ``binlog_expire_logs_seconds`` + a size cap, as Canal/PolarDB-X CDC keep a byte budget):

* oldest first, and only a prefix of the index: a file goes when its last write is older than
  ``expire_logs_seconds`` or while the total is above ``max_total_size``;
* never the newest file (the one being written);
* never a file a connected replica is reading, nor any after it: the purge stops before the oldest
  file any connected dump is in. Such a replica then completes; the files go at a later round.
* an HA follower purges only what the leader purged (``follow_once``, up to the leader's horizon),
  by the same two rules above.

Each purge is logged (``gbinlog.session``, info) with the files, bytes and the reason.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any, Protocol

from dumper.server.binlogdir import BinlogDir, BinlogDirError
from dumper.server.logtext import session_log

log = session_log


class RetentionTarget(Protocol):
    """What retention needs of a server (``RetentionTarget`` is one; ``Directory`` is one with no endpoint)."""

    bdir: BinlogDir
    config: Any            # .expire_logs_seconds, .max_total_size

    def files_in_use(self) -> set[str]: ...

    def dumps(self) -> list[Any]: ...


@dataclass
class Directory:
    """A served-by-nobody output directory (``gbinlog run`` with no endpoint): no replica reads it."""

    bdir: BinlogDir
    config: Any

    def files_in_use(self) -> set[str]:
        return set()

    def dumps(self) -> list[Any]:
        return []


def targets_of(server: RetentionTarget) -> list[RetentionTarget]:
    """What retention rounds go over: the server's directory, or each stream of a stream group
    (``dumper.server.stream_dirs``)."""
    group = getattr(server, "group", None)
    if group is None:
        return [server]
    from dumper.server.stream_dirs import RetentionOfStream

    return [RetentionOfStream(s.bdir, server.config, server) for s in group.streams]


def disk_usage(server: RetentionTarget) -> tuple[int, int]:
    """(files, bytes) of the binlog files in the index (of every stream of a stream group)."""
    targets = targets_of(server)
    if len(targets) > 1 or targets[0] is not server:
        usage = [disk_usage(t) for t in targets]
        return sum(u[0] for u in usage), sum(u[1] for u in usage)
    files = server.bdir.files()
    total = 0
    for name in files:
        try:
            total += os.stat(server.bdir.file_path(name)).st_size
        except FileNotFoundError:
            pass
    return len(files), total


def seq_of(name: str) -> int:
    """The number of a binlog file name (``binlog.000042`` → 42): files compare by it."""
    try:
        return int(name.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return -1


def _keep_held(server: RetentionTarget, files: list[str], doomed: list[str]) -> tuple[str | None, list[str]]:
    """(keep_from, held) for purging the prefix ``doomed`` of ``files``: the purge stops before the
    oldest file a connected dump is in (``held``: the files it then keeps)."""
    in_use = server.files_in_use()
    held: list[str] = []
    for i, name in enumerate(doomed):
        if name in in_use:
            held, doomed = doomed[i:], doomed[:i]
            break
    return (files[len(doomed)] if doomed else None), held


def purge_plan(server: RetentionTarget, now: float) -> tuple[str | None, str, list[str]]:
    """(keep_from, reason, held): purge every file before ``keep_from`` (None: nothing to purge);
    ``held`` names files retention wanted but a connected replica still reads."""
    cfg = server.config
    bdir = server.bdir
    files = bdir.files()
    if len(files) < 2:
        return None, "", []
    sizes = {}
    for name in files:
        try:
            sizes[name] = os.stat(bdir.file_path(name)).st_size
        except FileNotFoundError:
            sizes[name] = 0
    total = sum(sizes.values())
    doomed: list[str] = []
    reasons: set[str] = set()
    for name in files[:-1]:
        expired = cfg.expire_logs_seconds > 0 and now - bdir.mtime(name) > cfg.expire_logs_seconds
        over = cfg.max_total_size > 0 and total > cfg.max_total_size
        if not (expired or over):
            break
        reasons.add("expire_logs_seconds" if expired else "max_total_size")
        doomed.append(name)
        total -= sizes[name]
    keep_from, held = _keep_held(server, files, doomed)
    return keep_from, ("+".join(sorted(reasons)) if keep_from else ""), held


def _log_held(server: RetentionTarget, held: list[str]) -> None:
    if held:
        readers = sorted({f"{d.session.user}@{d.session.host}" for d in server.dumps() if d.file in held})
        log.info("retention: %s kept, still read by connected replica(s) %s", held[0], ", ".join(readers))


def purge_to(server: RetentionTarget, keep_from: str, why: str) -> list[str]:
    """Purge the files before ``keep_from`` (logged with ``why``) by the rules: never the newest file,
    never a file a connected dump is in nor any after it. Returns the files removed."""
    files = server.bdir.files()
    doomed = [f for f in files[:-1] if seq_of(f) < seq_of(keep_from)]
    keep_from_now, held = _keep_held(server, files, doomed)
    _log_held(server, held)
    if keep_from_now is None:
        return []
    before = disk_usage(server)[1]
    try:
        gone = server.bdir.purge(keep_from_now)
    except (OSError, BinlogDirError, ValueError) as exc:
        log.warning("retention: PURGE BINARY LOGS TO '%s' failed: %s", keep_from_now, exc)
        return []
    if gone:
        files_left, after = disk_usage(server)
        log.info("PURGE BINARY LOGS TO '%s' by %s: removed %s..%s (%d files, %d bytes); %d files, %d bytes left",
                 keep_from_now, why, gone[0], gone[-1], len(gone), before - after, files_left, after)
    return gone


def purge_once(server: RetentionTarget, now: float | None = None) -> list[str]:
    """One retention round; returns the files removed. A server whose retention someone else drives
    (``retention_elsewhere``: an HA member, ``gbinlog.ha``) does nothing here."""
    if getattr(server, "retention_elsewhere", False):
        return []
    keep_from, reason, held = purge_plan(server, time.time() if now is None else now)
    _log_held(server, held)
    if keep_from is None:
        return []
    return purge_to(server, keep_from, f"retention ({reason})")


def follow_once(server: RetentionTarget, horizon: str, leader: str) -> list[str]:
    """One round following another member's purge horizon (HA followers)."""
    return purge_to(server, horizon, f"the leader's purge ({leader}: every file before '{horizon}')")


class Rounds:
    """Retention rounds for a directory no endpoint serves (``gbinlog run`` with ``server.port = 0``):
    the caller's periodic loop calls ``due()``; a round runs every ``interval`` seconds."""

    def __init__(self, target: RetentionTarget | list[RetentionTarget], interval: float = 2.0) -> None:
        self.targets = target if isinstance(target, list) else [target]
        self.interval = interval
        self._next = 0.0

    @classmethod
    def for_directory(cls, directory: Any, output: Any, streams: dict | None = None) -> Rounds | None:
        """Rounds over ``directory`` by ``output``'s rules (None when retention is off); over each
        stream of a stream group (``streams``: its ``[streams]``)."""
        if not (output.expire_logs_seconds > 0 or output.max_total_size > 0):
            return None
        from dumper.streams import StreamSpec

        spec = StreamSpec.from_settings(streams)
        if spec.split:
            return cls([Directory(BinlogDir(spec.directory(directory, k), spec.base(k)), output)
                        for k in range(spec.count)])
        return cls(Directory(BinlogDir(directory, "binlog"), output))

    def due(self) -> list[str]:
        now = time.monotonic()
        if now < self._next:
            return []
        self._next = now + self.interval
        try:
            return [name for target in self.targets for name in purge_once(target)]
        except Exception:  # noqa: BLE001 - never let retention stop the caller
            log.exception("retention round failed")
            return []


async def retention_task(server: RetentionTarget) -> None:
    """Runs while the server does: a round every ``retention_interval`` seconds."""
    cfg = server.config
    while True:
        try:
            for target in targets_of(server):
                purge_once(target)
        except Exception:  # never let retention take the endpoint down
            log.exception("retention round failed")
        await asyncio.sleep(cfg.retention_interval)


def enabled(server: RetentionTarget) -> bool:
    return server.config.expire_logs_seconds > 0 or server.config.max_total_size > 0
