"""Retention: the endpoint purges old binlog files by age and total size, from its own background task
(so ``gbinlog serve`` and ``gbinlog run`` both have it, and the pipeline is not involved).

Rules (MySQL's ``binlog_expire_logs_seconds`` + a size cap, as Canal/PolarDB-X CDC keep a byte budget):

* oldest first, and only a prefix of the index: a file goes when its last write is older than
  ``expire_logs_seconds`` or while the total is above ``max_total_size``;
* never the newest file (the one being written);
* never a file a connected replica is reading, nor any after it: the purge stops before the oldest
  file any connected dump is in. Such a replica then completes; the files go at a later round.

Each purge is logged (``gbinlog.session``, info) with the files, bytes and the reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING

from dumper.server.binlogdir import BinlogDirError

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer

log = logging.getLogger("gbinlog.session")


def disk_usage(server: BinlogServer) -> tuple[int, int]:
    """(files, bytes) of the binlog files in the index."""
    files = server.bdir.files()
    total = 0
    for name in files:
        try:
            total += os.stat(server.bdir.file_path(name)).st_size
        except FileNotFoundError:
            pass
    return len(files), total


def purge_plan(server: BinlogServer, now: float) -> tuple[str | None, str, list[str]]:
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
    in_use = server.files_in_use()
    held = []
    for i, name in enumerate(doomed):
        if name in in_use:
            held, doomed = doomed[i:], doomed[:i]
            break
    if not doomed:
        return None, "", held
    return files[len(doomed)], "+".join(sorted(reasons)), held


def purge_once(server: BinlogServer, now: float | None = None) -> list[str]:
    """One retention round on the server's loop; returns the files removed."""
    gate = getattr(server, "purge_gate", None)     # HA: only the leader purges (gbinlog.ha)
    if gate is not None and not gate():
        return []
    keep_from, reason, held = purge_plan(server, time.time() if now is None else now)
    if held:
        readers = sorted({f"{d.session.user}@{d.session.host}" for d in server.dumps() if d.file in held})
        log.info("retention: %s kept, still read by connected replica(s) %s", held[0], ", ".join(readers))
    if keep_from is None:
        return []
    before = disk_usage(server)[1]
    try:
        gone = server.bdir.purge(keep_from)
    except (OSError, BinlogDirError) as exc:
        log.warning("retention: PURGE BINARY LOGS TO '%s' failed: %s", keep_from, exc)
        return []
    files, after = disk_usage(server)
    log.info("PURGE BINARY LOGS TO '%s' by retention (%s): removed %s..%s (%d files, %d bytes); %d files, "
             "%d bytes left", keep_from, reason, gone[0], gone[-1], len(gone), before - after, files, after)
    return gone


async def retention_task(server: BinlogServer) -> None:
    """Runs while the server does: a round every ``retention_interval`` seconds."""
    cfg = server.config
    while True:
        try:
            purge_once(server)
        except Exception:  # never let retention take the endpoint down
            log.exception("retention round failed")
        await asyncio.sleep(cfg.retention_interval)


def enabled(server: BinlogServer) -> bool:
    return server.config.expire_logs_seconds > 0 or server.config.max_total_size > 0
