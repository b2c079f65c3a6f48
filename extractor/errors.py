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


class OpenAtEnd(OrderingError):
    """The input of a DN said to be complete (its cluster stopped) ends with a branch prepared and
    not committed, or a transaction begun and not ended: it is not complete."""


class TsoWentBack(OrderingError):
    """A commit TSO below one the DN committed before the transaction's prepare: impossible for a
    TSO fetched after the prepare, so one of the two went back or jumped ahead."""


def tso_went_back(txn, vtso: str, below: str) -> TsoWentBack:
    """The Sorter's check (``extractor.sorter.PySorter.commit``): ``txn`` commits at ``vtso``,
    below ``below``, the highest vtso the DN had committed before ``txn``'s prepare."""
    tso, top = int(vtso[:19]), int(below[:19])
    gap = ((top >> 22) - (tso >> 22)) / 1000
    start = getattr(txn, "start", None)
    return TsoWentBack(f"commit TSO {tso} of the transaction begun here goes back below TSO {top}, which "
                       f"this DN committed before that transaction's prepare ({gap:,.3f} s higher): a "
                       "commit TSO went back here or jumped ahead before; the input is damaged or not one "
                       "DN's binlog", dn=getattr(txn, "dn", None), file=start.file if start else None,
                       offset=start.offset if start else None)


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
