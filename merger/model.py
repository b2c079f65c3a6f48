"""The merger's output: ``GlobalTxn``, one whole transaction in global commit order."""

from __future__ import annotations

from dataclasses import dataclass, field

from extractor.model import Block, DnTxn, TxnKind
from extractor.vtso import vtso_is_tso


@dataclass(slots=True, eq=False)
class GlobalTxn:
    """A transaction of the whole cluster: all its DN branches joined.

    ``blocks`` are the branches' table-map blocks merged by trace id for DML; for DDL marks
    and instructions the first branch's blocks (every DN wrote the same row); empty for heartbeats.
    ``branches`` are the ``DnTxn``s it came from, in merge order.
    """

    vtso: str
    kind: TxnKind
    blocks: list[Block]
    branches: list[DnTxn] = field(default_factory=list)

    @property
    def tso(self) -> int | None:
        return self.branches[0].tso if self.branches else None

    @property
    def is_tso(self) -> bool:
        return vtso_is_tso(self.vtso)

    @property
    def server_id(self) -> int | None:
        for b in self.branches:
            if b.server_id is not None:
                return b.server_id
        return None

    @property
    def archive(self) -> bool:
        return any(b.archive for b in self.branches)

    @property
    def dns(self) -> list[str]:
        return [b.dn for b in self.branches]

    def describe(self, rows: bool = True) -> str:
        """One line for people: vtso, kind, commit TSO, branches (DN:branch), tables with row counts
        (rows events when ``rows`` is false)."""
        tso = str(self.tso) if self.tso is not None else "-"
        branches = ",".join(f"{b.dn}:{b.branch.split('_', 1)[1] if b.xid else 'local'}" for b in self.branches)
        counts: dict[str, int] = {}
        for blk in self.blocks:
            key = f"{blk.db}.{blk.table}"
            counts[key] = counts.get(key, 0) + (blk.row_count() if rows else len(blk.events) - 1)
        unit = "rows" if rows else "rows events"
        tables = " ".join(f"{k}={v}" for k, v in counts.items())
        line = f"{self.vtso} {self.kind.value:<12} tso={tso} branches={branches}"
        if tables:
            line += f" {unit}: {tables}"
        if self.kind is TxnKind.PHYSICAL_DDL and self.branches[0].sql:
            line += f" sql: {self.branches[0].sql[:80]!r}"
        return line

