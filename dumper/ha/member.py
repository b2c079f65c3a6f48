"""One HA member: a thread that holds or waits for the leader lease.

A follower tries ``acquire`` every ``lease/3``; the leader ``renew``s at the same pace. Each grant
moves the fence's local deadline (see ``dumper.ha.lease``); a refused renewal, or a store that
cannot be reached until the deadline passes, makes the member a follower again: its fence is no
longer valid, so leader-only writes stop before anyone else may acquire. ``step_down()`` releases
the lease and sits out one lease length so another member takes it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dumper.ha.lease import Fence, LeaseRow, LeaseStore, LeaseStoreError, MemberRow

log = logging.getLogger("gbinlog.ha")

LEADER = "leader"
FOLLOWER = "follower"


@dataclass(frozen=True)
class HaSettings:
    member: str
    address: str            # host:port replicas and other members reach this member's endpoint at
    lease_ms: int = 3000
    store: str = ""         # lease store URL (the meta store: sqlite:///path or mysql://…)
    lag_gate_ms: int = 2000
    lag_gate_bytes: int = 20 << 20
    catch_up_ms: int = 5000  # a follower in the gate keeps a client asking for data it lacks waiting this long

    @property
    def tick_s(self) -> float:
        return self.lease_ms / 3000


class Member:
    """``start()`` the lease thread, ``role``/``epoch``/``leader()`` for status, ``fence.check()``
    before a leader-only write, ``step_down()``, ``close()``."""

    def __init__(self, settings: HaSettings, store: LeaseStore, *,
                 position: Callable[[], tuple[str, int, str]] = lambda: ("", 0, ""),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.store = store
        self.fence = Fence(monotonic)
        self.position = position
        self._mono = monotonic
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._sit_out_until = 0.0
        self._thread: threading.Thread | None = None
        self.store_error: str | None = None
        self.transitions: list[tuple[float, str, int]] = []    # (wall time, role, epoch)
        self._last_role = FOLLOWER
        self.view: tuple[LeaseRow, list[MemberRow], int] | None = None   # the store as of the last tick
        self.view_at = 0.0                                                # monotonic time of that tick

    # -- the state others read ----------------------------------------------------------------------
    @property
    def role(self) -> str:
        return LEADER if self.fence.valid() else FOLLOWER

    @property
    def epoch(self) -> int:
        return self.fence.epoch

    # -- one step of the lease loop (the thread calls it; tests call it with a fake clock) ------------
    def tick(self) -> str:
        s = self.settings
        sent_at = self._mono()
        try:
            now = self.store.now_ms()
            if self.fence.deadline > 0:            # we held it: renew (a stale epoch is refused)
                if self.store.renew(s.member, self.fence.epoch, s.lease_ms, now):
                    self.fence.grant(self.fence.epoch, sent_at, s.lease_ms)
                    if self.store.step_down_requested(self.fence.epoch):   # `gbinlog ha step-down`
                        self.step_down()
                else:
                    self.fence.revoke()
            if self.fence.deadline == 0 and sent_at >= self._sit_out_until:
                epoch = self.store.acquire(s.member, s.address, s.lease_ms, now)
                if epoch is not None:
                    self.fence.grant(epoch, sent_at, s.lease_ms)
            file, pos, vtso = self.position()
            self.store.report(MemberRow(s.member, s.address, self.role, self.fence.epoch, file, pos, vtso, now))
            self.view = (self.store.read(), self.store.members(), now)
            self.view_at = sent_at
            if self.store_error is not None:
                log.warning("HA member %s: lease store reachable again", s.member)
            self.store_error = None
        except LeaseStoreError as exc:     # the fence runs out by itself; nothing else to do
            if self.store_error is None:
                log.warning("HA member %s: %s", s.member, exc)
            self.store_error = str(exc)
            if not self.fence.valid():
                self.fence.revoke()
        return self._note_role()

    def _note_role(self) -> str:
        """Log a change of role since the last tick (also a fence that ran out between ticks, e.g.
        while the process was stopped)."""
        role = self.role
        if role != self._last_role:
            self._last_role = role
            self.transitions.append((time.time(), role, self.fence.epoch))
            log.warning("HA member %s: %s (epoch %d)", self.settings.member, role, self.fence.epoch)
        return role

    def step_down(self) -> bool:
        """Hand the lease over: release it and do not take it back for one lease length."""
        epoch = self.fence.epoch
        held = self.fence.deadline > 0
        self.fence.revoke()
        self._sit_out_until = self._mono() + self.settings.lease_ms / 1000
        self._note_role()
        if held:
            try:
                return self.store.release(self.settings.member, epoch)
            except LeaseStoreError:
                return False
        return False

    def leader(self) -> dict:
        """The lease row as of the last tick (``{}`` before one reached the store); never blocks on
        the store (status must not hang while it is down)."""
        if self.view is None:
            return {}
        row, _, now = self.view
        return {"member": row.holder if row.live(now) else "", "address": row.address if row.live(now) else "",
                "epoch": row.epoch, "expires_in_ms": max(0, row.expires_ms - now)}

    def view_age(self) -> float:
        """Seconds since the store was last read (inf before the first read)."""
        return self._mono() - self.view_at if self.view is not None else float("inf")

    def members(self) -> list[MemberRow]:
        return self.view[1] if self.view is not None else []

    # -- the thread ---------------------------------------------------------------------------------
    def start(self) -> Member:
        self._thread = threading.Thread(target=self._loop, name=f"gbinlog-ha-{self.settings.member}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._wake.wait(self.settings.tick_s)
            self._wake.clear()

    def close(self) -> None:
        """Stop the thread; a leader releases its lease so the next one need not wait it out."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)
        if self.fence.deadline > 0:
            self.step_down()
        self.store.close()
