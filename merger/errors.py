"""Errors of the global merge; like the extractor's, each names the DN, file and offset."""

from __future__ import annotations

from extractor.errors import OrderingError


class NonMonotonicMerge(OrderingError):
    """The merged vtso went down (or two different transactions share one vtso): a bug upstream."""


class BranchTsoMismatch(OrderingError):
    """Two branches of one distributed transaction (one txnId) with different commit TSOs."""


class TsoJumpedAhead(OrderingError):
    """A DN's next transaction commits above a broadcast transaction (heartbeat, DDL mark) that
    every other DN has and it lacks below: its commit TSO jumped ahead."""


class BranchConflict(OrderingError):
    """Branches that share a vtso but cannot be one transaction (same branch twice, or a
    heartbeat branch joined with a non-heartbeat one)."""
