"""The extractor's output: ``DnTxn`` (one DN's committed transaction) and its ``Block``s."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from binlog import Event
from extractor.vtso import vtso_actual_tso, vtso_is_tso


class Pos(NamedTuple):
    """A position in a DN's binlog: file name and byte offset."""

    file: str
    offset: int

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"


class RestartPoint(NamedTuple):
    """Where a DN can be re-read from so every later vtso comes out the same (docs/architecture.md).

    A *quiet point*: the position right after a commit (or rollback) at which the DN has no open
    transaction, so every transaction begun before it is committed and the Sorter has released it.
    ``tso``/``txn_id``/``seq`` are the DN's ``VtsoState`` there. A transaction carries the point of
    its release batch (or the newest earlier one not yet attached), and it is the highest vtso
    released up to that point: once it is durably written, re-reading the DN from ``file:offset``
    with that state yields exactly the DN's transactions after it.
    """

    file: str
    offset: int
    tso: int
    txn_id: int
    seq: int

    @property
    def pos(self) -> Pos:
        return Pos(self.file, self.offset)

    def vtso_state(self):
        """A fresh ``VtsoState`` to resume the extractor with (``extract(start=pos, state=…)``)."""
        from extractor.vtso import VtsoState

        return VtsoState(self.tso, self.txn_id, self.seq)

    def __str__(self) -> str:
        return f"{self.file}:{self.offset} (tso {self.tso}, txnId {self.txn_id}, seq {self.seq})"


class TxnKind(StrEnum):
    DML = "dml"
    HEARTBEAT = "heartbeat"            # rows on __cdc_heartbeat__ in a __cdc__* schema
    DDL_MARK = "ddl_mark"              # WRITE_ROWS into __cdc_ddl_record__
    INSTRUCTION = "instruction"        # WRITE_ROWS into __cdc_instruction__
    PHYSICAL_DDL = "physical_ddl"      # a QUERY outside any transaction
    ROLLBACK = "rollback"              # XA ROLLBACK: takes a vtso and moves W, never emitted


@dataclass(slots=True)
class Block:
    """One TABLE_MAP and the rows events after it, moved as a unit by the trace merge.

    ``hint`` is the ``/*DRDS … */`` text of the ROWS_QUERY that preceded the table map (``None``
    when there was none or it was compressed as a duplicate); ``rows_query`` is that event as read.
    ``events`` holds the TABLE_MAP first, then its rows events, all as read (original bytes).
    """

    trace_id: str
    db: str
    table: str
    events: list[Event]
    hint: str | None = None
    rows_query: Event | None = None

    @property
    def table_map(self) -> Event:
        return self.events[0]

    @property
    def rows_events(self) -> list[Event]:
        return self.events[1:]

    def row_count(self) -> int:
        """Rows (row pairs for updates) in the block's rows events; decodes the table map (slow path)."""
        from binlog.rows_events import decode_rows_event
        from binlog.table_map import decode_table_map

        tm = self.events[0]
        table_map = decode_table_map(tm.payload, tm.ctx)
        return sum(len(decode_rows_event(e.type_code, e.payload, e.ctx).raw_rows(table_map))
                   for e in self.events[1:])


@dataclass(slots=True, eq=False)
class DnTxn:
    """A committed transaction (or XA branch) of one DN, in the DN's vtso order.

    ``xid`` is the XA xid text (``X'…',X'…',fmt``) or ``None`` for a local transaction; ``branch``
    is the partition key ``<javaHash(dn)>_<bqual>``; ``tso`` the commit TSO of a TSO
    transaction, else ``None``. ``start`` is the position of the XA START / BEGIN / DDL query,
    ``end`` the end of the event that committed it. ``query`` is the QUERY event of a physical
    DDL, ``db``/``sql`` its default database and text.
    """

    kind: TxnKind
    dn: str
    txn_id: int
    branch: str
    start: Pos
    xid: str | None = None
    vtso: str = ""
    end: Pos | None = None
    tso: int | None = None
    blocks: list[Block] = field(default_factory=list)
    server_id: int | None = None
    archive: bool = False
    query: Event | None = None
    db: str | None = None
    sql: str | None = None
    # Monotonic clock when the transaction was opened (for "prepare held for N s" warnings).
    opened_at: float = 0.0
    # A quiet point at or after this transaction's release (see ``RestartPoint``), or None.
    restart: RestartPoint | None = None

    @property
    def is_tso(self) -> bool:
        """A TSO transaction: its vtso's sequence part is zero."""
        return vtso_is_tso(self.vtso)

    @property
    def actual_tso(self) -> str:
        """The first 38 vtso chars (tso + txnId): the MergeBarrier join key."""
        return vtso_actual_tso(self.vtso)
