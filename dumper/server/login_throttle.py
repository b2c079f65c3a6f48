"""Failed logins slow down further attempts, per account and client host, as MySQL's
``connection_control`` plugin does.

After ``threshold`` consecutive failed logins of one (user, host), each further attempt of that pair
waits before its password is checked: ``min_delay`` for the first, one ``min_delay`` more for each
further failure, at most ``max_delay``. A successful login resets the pair. The wait is an
``asyncio.sleep``: other sessions, logins and dumps go on meanwhile. The attempts of one pair take
turns (one password check at a time, a few microseconds when not delayed), so opening many
connections at once does not multiply the guesses; each waits for its turn within the connection's
handshake timeout, which its own delay extends.

The result of an attempt is only told after the delay, so dropping the connection early teaches a
client nothing; such an abandoned attempt neither counts as a failure nor resets the pair.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from dumper.server.logtext import session_log

# Pairs remembered at most; the pair failed longest ago is forgotten first (a flood of made-up user
# names must not grow memory without bound).
MAX_REMEMBERED_PAIRS = 10_000

Pair = tuple[str, str]


@dataclass(slots=True)
class LoginAttempt:
    """What the login path reports back: ``ok`` True/False once the password was checked."""

    ok: bool | None = None


class LoginThrottle:
    """Consecutive failed logins per (user, host), the delay they impose, and the counts for /metrics."""

    def __init__(self, threshold: int = 3, min_delay: float = 1.0, max_delay: float = 30.0) -> None:
        self.threshold = threshold          # 0: never delay
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.failed_logins = 0              # every refused password, since start
        self.delayed_logins = 0             # attempts that waited, since start
        self._failures: OrderedDict[Pair, int] = OrderedDict()
        self._turns: dict[Pair, asyncio.Lock] = {}
        self._queued: dict[Pair, int] = {}

    def failures(self, user: str, host: str) -> int:
        return self._failures.get((user, host), 0)

    def delay(self, user: str, host: str) -> float:
        """Seconds the next attempt of (user, host) waits before its password is checked."""
        over = self.failures(user, host) - self.threshold + 1
        if self.threshold <= 0 or over <= 0:
            return 0.0
        return min(over * self.min_delay, self.max_delay)

    def _record(self, pair: Pair, ok: bool | None) -> None:
        if ok is None:
            return
        if ok:
            self._failures.pop(pair, None)
            return
        self.failed_logins += 1
        self._failures[pair] = self._failures.get(pair, 0) + 1
        self._failures.move_to_end(pair)
        while len(self._failures) > MAX_REMEMBERED_PAIRS:
            self._failures.popitem(last=False)

    @asynccontextmanager
    async def attempt(self, user: str, host: str,
                      handshake: asyncio.Timeout | None = None) -> AsyncIterator[LoginAttempt]:
        """One login attempt of ``user`` from ``host``: waits its turn, and its delay when the pair is
        over the threshold (extending ``handshake`` by the delay); then the caller checks the password
        and sets ``ok``, recorded on exit."""
        pair = (user, host)
        attempt = LoginAttempt()
        turn = self._turns.setdefault(pair, asyncio.Lock())
        self._queued[pair] = self._queued.get(pair, 0) + 1
        try:
            async with turn:
                delay = self.delay(user, host)      # the failures of those before it count too
                if delay > 0:
                    self.delayed_logins += 1
                    session_log.info("login user=%s from=%s delayed %.2f s after %d consecutive failed logins",
                                     user, host, delay, self.failures(user, host))
                    if handshake is not None and handshake.when() is not None:
                        handshake.reschedule(handshake.when() + delay)
                    await asyncio.sleep(delay)
                yield attempt
                self._record(pair, attempt.ok)
        finally:
            self._queued[pair] -= 1
            if not self._queued[pair]:
                del self._queued[pair]
                del self._turns[pair]
