"""Per-DN extraction (docs/architecture.md).

DN sources (binlog directories, follow mode), transaction assembly, XID/branch keys, trace ids,
vtso generation and the Sorter (first-level sort that repairs 2PC holes).
Public interface: ``extract(dn) -> Iterator[DnTxn]`` in ascending vtso.
"""

from extractor.errors import (
    BadXid,
    CommitWithoutPrepare,
    DuplicateTransaction,
    OpenAtEnd,
    OrderingError,
    OrphanCommitTso,
    TraceIdRegression,
    UnexpectedEvent,
    UnfinishedTransaction,
)
from extractor.extract import extract
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind
from extractor.sorter import Sorter
from extractor.source import BytesSource, DirSource, DnSource, list_binlog_files
from extractor.vtso import VtsoState, storage_sequence, storage_sequences, vtso_for_commit

__all__ = [
    "BadXid", "Block", "BytesSource", "CommitWithoutPrepare", "DirSource", "DnSource", "DnTxn",
    "DuplicateTransaction", "OpenAtEnd", "OrderingError", "OrphanCommitTso", "Pos", "RestartPoint", "Sorter",
    "TraceIdRegression", "TxnKind", "UnexpectedEvent", "UnfinishedTransaction", "VtsoState", "extract",
    "list_binlog_files", "storage_sequence", "storage_sequences", "vtso_for_commit",
]
