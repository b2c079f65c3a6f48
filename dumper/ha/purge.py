"""PURGE in an HA group: the leader purges, the others follow, through the meta store.

One round (each member runs one every ``retention_interval``, in its own thread: ``gbinlog.ha``):

1. every member first follows the recorded horizon (``gbinlog_ha_purge``: the leader purged every
   file before ``keep_from``): it purges the same prefix of its own files, by its own retention rules
   — never its newest file, never a file one of its connected replicas is reading nor any after it
   (``retention.follow_once``). A member's own ``expire_logs_seconds`` / ``max_total_size`` decide
   nothing while it follows.
2. the leader alone plans by its retention rules (``retention.purge_plan``: age, total size, its own
   readers); a horizon past the recorded one is first recorded under its epoch — a conditional write
   the store accepts only from the holder of the unexpired lease with that epoch (a fenced ex-leader
   cannot move it) — and only then are its files removed, after one more fence check. A file the
   leader already removed by hand (``PURGE BINARY LOGS`` on the leader) is recorded the same way.

Recording before removing means a leader that dies in between left a horizon its files had not yet
reached: the next leader, and it on restart as a follower, purge up to it — nothing is kept forever,
and no member purges a file the leader still had, except by the leader's recorded decision.

``run(fn, *args)`` calls ``fn(target, *args)`` where the directory's readers are known (the endpoint's
event loop; directly for a directory with no endpoint); the store is only used from the caller's
thread, never from the endpoint's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dumper.ha.lease import FencedOut, LeaseStoreError
from dumper.ha.member import LEADER, Member
from dumper.server import retention

log = logging.getLogger("gbinlog.ha")

Run = Callable[..., Any]


def purge_round(member: Member, run: Run, *, retention_on: bool, now: float) -> list[str]:
    """Follow the recorded horizon; as the leader, purge by retention and record it first. Returns
    the files removed."""
    recorded_now = _read_horizon(member)
    if recorded_now is None:
        return []
    horizon, by, epoch = recorded_now
    gone: list[str] = []
    if horizon:
        gone += run(retention.follow_once, horizon, f"{by}, epoch {epoch}")
    if member.role != LEADER:
        return gone
    keep_from, reason, _ = run(retention.purge_plan, now) if retention_on else (None, "", [])
    first = run(_first_file)
    want = max((f for f in (keep_from, first) if f), key=retention.seq_of, default=None)
    if want is None or retention.seq_of(want) <= retention.seq_of(horizon or "x.0"):
        return gone
    mine = _record_horizon(member, want)
    if mine is None:
        return gone
    if keep_from is not None:
        gone += run(_purge_while_leading, member, keep_from, f"retention ({reason}) on the leader, epoch {mine}")
    return gone


# -- a stream group (docs/streams.md): one horizon per stream, recorded together --------------------
GROUP_HORIZON = "streams:"


def group_horizon(text: str, count: int) -> list[int]:
    """The recorded horizon of a stream group, per stream the number of the first file kept (0:
    none): ``streams:4,3,5``; anything else (no horizon yet) is all 0."""
    if not text.startswith(GROUP_HORIZON):
        return [0] * count
    seqs = [int(x) for x in text[len(GROUP_HORIZON):].split(",") if x]
    return (seqs + [0] * count)[:count]


def purge_round_group(member: Member, runs: list[Run], *, retention_on: bool, now: float) -> list[str]:
    """``purge_round`` for a stream group: ``runs`` per stream. Each stream follows its part of the
    recorded horizon; the leader plans each stream by its retention rules and records every
    stream's horizon in one fenced write (``streams:<seq>,<seq>,…``) before removing a file."""
    recorded_now = _read_horizon(member)
    if recorded_now is None:
        return []
    horizon, by, epoch = recorded_now
    recorded = group_horizon(horizon, len(runs))
    gone: list[str] = []
    for run, seq in zip(runs, recorded, strict=True):
        if seq:
            gone += run(retention.follow_once, f"x.{seq:06d}", f"{by}, epoch {epoch}")
    if member.role != LEADER:
        return gone
    plans = []
    wanted = list(recorded)
    for k, run in enumerate(runs):
        keep_from, reason, _ = run(retention.purge_plan, now) if retention_on else (None, "", [])
        first = run(_first_file)
        want = max((retention.seq_of(f) for f in (keep_from, first) if f), default=0)
        wanted[k] = max(wanted[k], want)
        plans.append((keep_from, reason))
    if wanted == recorded:
        return gone
    mine = _record_horizon(member, GROUP_HORIZON + ",".join(map(str, wanted)))
    if mine is None:
        return gone
    for run, (keep_from, reason) in zip(runs, plans, strict=True):
        if keep_from is not None:
            gone += run(_purge_while_leading, member, keep_from, f"retention ({reason}) on the leader, epoch {mine}")
    return gone


def _read_horizon(member: Member) -> tuple[str, str, int] | None:
    """The recorded horizon (``LeaseStore.purge_horizon``), None while the store cannot be read."""
    try:
        return member.store.purge_horizon()
    except LeaseStoreError as exc:
        log.debug("HA purge round: %s", exc)
        return None


def _record_horizon(member: Member, horizon: str) -> int | None:
    """Record ``horizon`` under this leader's epoch (a fenced, conditional write); the epoch, or
    None when it was not recorded (fenced out, not the lease holder, the store unreachable)."""
    store = member.store
    try:
        mine = member.fence.check()
        if not store.record_purge(member.settings.member, mine, horizon, store.now_ms()):
            return None
    except (FencedOut, LeaseStoreError) as exc:
        log.info("HA purge round: not purging to '%s': %s", horizon, exc)
        return None
    log.info("HA: leader %s (epoch %d) recorded the purge horizon '%s'", member.settings.member, mine, horizon)
    return mine


def _first_file(target: retention.RetentionTarget) -> str | None:
    files = target.bdir.files()
    return files[0] if files else None


def _purge_while_leading(target: retention.RetentionTarget, member: Member, keep_from: str, why: str) -> list[str]:
    """The leader's own purge, after its fence is checked once more (a leader whose fence ran out
    since it recorded the horizon leaves it to the next round, as a follower)."""
    if not member.fence.valid():
        return []
    return retention.purge_to(target, keep_from, why)
