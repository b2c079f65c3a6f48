"""The shaper's output: ``LogicalTxn``, one transaction of the logical database in global order.

This is the contract between ``schema_shaper`` (which fills it) and ``dumper`` (which writes it).
Payloads are event bodies without the 19-byte header and without the CRC: the dumper writes the
header (timestamp, server id, log_pos) and the checksum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from operator import itemgetter
from typing import Any, ClassVar

from binlog.kernel import passed_rows
from extractor.vtso import vtso_tso
from merger.model import GlobalTxn


class LogicalKind(StrEnum):
    DML = "dml"              # BEGIN, blocks, XID, CTS marker
    DDL = "ddl"              # one logical QUERY event, CTS marker
    HEARTBEAT = "heartbeat"  # written only when the dumper decides (TSO second % 30 == 0)
    NONE = "none"            # nothing to write (physical DDL, instruction, system tables only):
    #                          still yielded so runners can checkpoint past it


@dataclass(slots=True)
class LogicalBlock:
    """One TABLE_MAP and its rows events, already in logical form.

    ``table_map`` is the TABLE_MAP payload with the logical db/table and the output table id;
    ``rows`` are ``(event type, payload)`` with the same table id. ``hint`` is the ``/*DRDS … */``
    text that goes in a ROWS_QUERY before the table map (the dumper appends the ``# CTS::`` line to
    the first block's hint, or writes one with only that line when the first block has none).
    """

    db: str
    table: str
    table_map: bytes
    rows: list[tuple[int, bytes]]
    hint: str | None = None
    #: not a ``PassBlock``: the rows are in ``rows`` (``binlog.kernel.frame_dml`` reads this)
    events: ClassVar[None] = None


class PassBlock(tuple):
    """A ``LogicalBlock`` whose rows events pass through as read but for the table id (the hot
    path: no per-event copy until the dumper frames them, ``binlog.kernel.frame_dml``).

    ``events`` is the source block's events (TABLE_MAP first, then v2 rows events with no extra
    data whose first 6 body bytes are the table id), ``id_bytes`` the output table id (6 bytes,
    little-endian), ``crc`` 4 when the source events end with a CRC32, else 0. ``rows`` gives them as
    a ``LogicalBlock``'s ``(event type, payload)``.

    A tuple ``(db, table, table_map, hint, events, id_bytes, crc)`` (the layout ``frame_dml`` reads
    by index), made in C by ``PassBlock((…))``: one is made per block of every transaction.
    """

    __slots__ = ()

    db: str = property(itemgetter(0))               # type: ignore[assignment]
    table: str = property(itemgetter(1))            # type: ignore[assignment]
    table_map: bytes = property(itemgetter(2))      # type: ignore[assignment]
    hint: str | None = property(itemgetter(3))      # type: ignore[assignment]
    events: list[Any] = property(itemgetter(4))     # type: ignore[assignment]
    id_bytes: bytes = property(itemgetter(5))       # type: ignore[assignment]
    crc: int = property(itemgetter(6))              # type: ignore[assignment]

    @property
    def rows(self) -> list[tuple[int, bytes]]:
        return passed_rows(self[4], self[5], self[6])

    def __repr__(self) -> str:
        return (f"PassBlock(db={self[0]!r}, table={self[1]!r}, hint={self[3]!r}, "
                f"{len(self[4]) - 1} rows events, id_bytes={self[5].hex()})")


@dataclass(slots=True, eq=False)
class LogicalTxn:
    vtso: str
    kind: LogicalKind
    blocks: list[LogicalBlock | PassBlock] = field(default_factory=list)
    # DDL: the whole QUERY payload (status vars, logical db, ``# POLARX_*`` lines + MySQL DDL).
    query: bytes | None = None
    # DDL: the logical db and the MySQL-compatible statement, for people and for verify.
    db: str | None = None
    sql: str | None = None
    server_id: int | None = None
    archive: bool = False
    # The GlobalTxn it came from (branches carry DN positions for checkpoints).
    source: GlobalTxn | None = None
    # DDL: the (logical db, table or None) the DDL is about, for ``[filter]`` (schema_shaper.filters).
    target: tuple[str, str | None] | None = None

    @property
    def tso(self) -> int:
        """The TSO the event timestamps come from: the commit TSO, or for a non-TSO txn the DN's
        max TSO (the vtso's first 19 digits are exactly that in both cases)."""
        return vtso_tso(self.vtso)

    @property
    def timestamp(self) -> int:
        """Event header timestamp in seconds: ``tso >> 22`` is milliseconds."""
        return (self.tso >> 22) // 1000
