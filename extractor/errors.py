"""Typed errors for input the ordering stages cannot order: each names the DN, file and offset.

The rule of the ordering core is "never a silently reordered or dropped transaction": anything that
would force a guess (a commit with no prepare, a commit TSO that no commit consumes, a trace id going
backwards, a merge that goes down) stops with one of these instead.
"""

from __future__ import annotations


class OrderingError(Exception):
    """Input that cannot be ordered, at DN ``dn``, ``file`` and byte ``offset``."""

    def __init__(self, message: str, *, dn: str | None = None, file: str | None = None,
                 offset: int | None = None) -> None:
        self.message = message
        self.dn = dn
        self.file = file
        self.offset = offset
        where = f"DN {dn}" if dn is not None else "DN ?"
        if file is not None:
            where += f": {file}"
        if offset is not None:
            where += f": offset {offset}"
        super().__init__(f"{where}: {message}")


class CommitWithoutPrepare(OrderingError):
    """An ``XA COMMIT`` (or XID / COMMIT) with no open or prepared transaction to commit."""


class OrphanCommitTso(OrderingError):
    """A GCN (flags & 0x04) / SEQUENCE commit TSO that no XA COMMIT consumed."""


class TraceIdRegression(OrderingError):
    """A table map's trace id is smaller than the previous one of the same branch."""


class UnfinishedTransaction(OrderingError):
    """A new ``XA START`` / ``BEGIN`` while the previous transaction is still being written."""


class DuplicateTransaction(OrderingError):
    """Two open transactions with the same key (txnId, branch) on one DN."""


class BadXid(OrderingError):
    """An XA xid of a valid format id whose gtrid/bqual cannot be decoded."""


class UnexpectedEvent(OrderingError):
    """An event that has no place where it stands (rows outside a transaction, a compressed
    transaction payload, a statement inside a row-format transaction, …)."""
