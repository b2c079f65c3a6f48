"""Errors of the global merge; like the extractor's, each names the DN, file and offset."""

from __future__ import annotations

from extractor.errors import OrderingError


class NonMonotonicMerge(OrderingError):
    """The merged vtso went down (or two different transactions share one vtso): a bug upstream."""


class BranchConflict(OrderingError):
    """Branches that share a vtso but cannot be one transaction (same branch twice, or a
    heartbeat branch joined with a non-heartbeat one)."""
