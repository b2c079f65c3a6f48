"""The TSO oracle: ``physical_ms << 22 | logical``, strictly increasing (docs/formats.md).

The simulator drives it with simulated time (microseconds), so a seed always yields the same TSOs.
"""

from __future__ import annotations

LOGICAL_BITS = 22
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def tso_of(ms: int, logical: int = 0) -> int:
    return (ms << LOGICAL_BITS) | logical


def tso_ms(tso: int) -> int:
    """Physical milliseconds of a TSO (``tso >> 22``)."""
    return tso >> LOGICAL_BITS


class TsoOracle:
    """Hands out strictly increasing TSOs; the physical part follows the simulated clock."""

    def __init__(self) -> None:
        self.last = 0

    def next(self, now_us: int) -> int:
        """A TSO for a request at simulated time ``now_us``; never equal to or below the last one."""
        candidate = tso_of(now_us // 1000)
        # Within one millisecond (or if the clock lags the last grant) the logical part counts up,
        # as the PolarDB-X GMS oracle does.
        self.last = candidate if candidate > self.last else self.last + 1
        return self.last
