"""Reading history entries out of transactions: the ``__cdc_ddl_record__`` row of a DDL mark
and the QUERY of a physical DDL; the initial snapshot as entries; and
``collect_history`` for engines that gather the (few) marks and physical DDLs first (Spark).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from binlog.rows_events import decode_rows_event, decode_table_map
from extractor.model import Block, DnTxn, TxnKind
from merger.model import GlobalTxn
from schema_shaper.errors import BadMark
from schema_shaper.meta_store import SNAPSHOT, Entry, MarkEntry, PhysEntry

DDL_RECORD_TABLE = "__cdc_ddl_record__"
# Column order of __cdc_ddl_record__, for table maps without column names.
DDL_RECORD_COLUMNS = ("ID", "JOB_ID", "SQL_KIND", "SCHEMA_NAME", "TABLE_NAME", "GMT_CREATED", "DDL_SQL",
                      "META_INFO", "VISIBILITY", "EXT")
SNAPSHOT_VTSO = "0" * 54


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def where(block: Block, txn: GlobalTxn | DnTxn) -> dict[str, Any]:
    """DN, file and offset of a block's TABLE_MAP (for messages)."""
    tm = block.events[0]
    dn = None
    branches = txn.branches if isinstance(txn, GlobalTxn) else [txn]
    for b in branches:
        if any(blk.events[0] is tm for blk in b.blocks):
            dn = b.dn
            break
    if dn is None and branches:
        dn = branches[0].dn
    return {"dn": dn, "file": os.path.basename(str(tm.ctx.source)), "offset": tm.pos}


def mark_entries(txn: GlobalTxn | DnTxn) -> list[MarkEntry]:
    """The DDL record rows of a mark transaction (normally one) as history entries."""
    out = []
    for block in txn.blocks:
        if block.table.lower() != DDL_RECORD_TABLE:
            continue
        loc = where(block, txn)
        source = f"{loc['dn']}:{loc['file']}:{loc['offset']}"
        try:
            tm = block.events[0]
            body = decode_table_map(tm.payload, tm.ctx)
            names = [c.name for c in body.columns]
            if None in names:
                if len(names) != len(DDL_RECORD_COLUMNS):
                    raise ValueError(f"{len(names)} columns without names; expected {len(DDL_RECORD_COLUMNS)}")
                names = list(DDL_RECORD_COLUMNS)
            upper = [n.upper() for n in names]  # type: ignore[union-attr]
            for ev in block.events[1:]:
                for row in decode_rows_event(ev.type_code, ev.payload, ev.ctx).rows(body):
                    out.append(_entry(txn.vtso, dict(zip(upper, row, strict=True)), source))
        except (ValueError, KeyError, IndexError) as exc:
            raise BadMark(f"cannot read the DDL record row: {exc}", vtso=txn.vtso,
                          table=f"{block.db}.{block.table}", **loc) from None
    return out


def _entry(vtso: str, row: dict[str, Any], source: str) -> MarkEntry:
    for name in ("SQL_KIND", "SCHEMA_NAME", "DDL_SQL"):
        if row.get(name) is None:
            raise ValueError(f"{name} is missing")
    visibility = row.get("VISIBILITY")
    return MarkEntry(vtso=vtso, db=_text(row["SCHEMA_NAME"]) or "", table=_text(row.get("TABLE_NAME")) or "",
                     sql_kind=_text(row["SQL_KIND"]) or "", ddl=_text(row["DDL_SQL"]) or "",
                     topology=_text(row.get("META_INFO")), ext=_text(row.get("EXT")),
                     visibility=1 if visibility is None else int(visibility),
                     record_id=row.get("ID"), job_id=row.get("JOB_ID"), source=source)


def phys_entry(txn: GlobalTxn | DnTxn) -> PhysEntry:
    """The physical DDL of a PHYSICAL_DDL pseudo-transaction."""
    branch = txn.branches[0] if isinstance(txn, GlobalTxn) else txn
    return PhysEntry(txn.vtso, branch.dn, branch.start.file, branch.start.offset, branch.db or "",
                     branch.sql or "")


def snapshot_entries(records: Iterable[dict[str, Any]], vtso: str = SNAPSHOT_VTSO) -> list[MarkEntry]:
    """Initial-snapshot rows from TopologyRecords (``logicDbMeta`` and/or ``logicTableMeta`` with
    ``createSql``), databases first, then tables in sorted (db, table) order, so table ids are a
    function of the snapshot alone."""
    dbs: dict[str, MarkEntry] = {}
    tables: dict[tuple[str, str], MarkEntry] = {}
    for rec in records:
        db_meta = rec.get("logicDbMeta")
        table_meta = rec.get("logicTableMeta")
        if db_meta is not None:
            name = db_meta["schema"]
            dbs[name] = MarkEntry(vtso, name, "", "SNAPSHOT", f"CREATE DATABASE `{name.replace('`', '``')}`",
                                  json.dumps({"lowerCased": rec.get("lowerCased", True), "logicDbMeta": db_meta},
                                             ensure_ascii=False), kind=SNAPSHOT)
        if table_meta is not None:
            db = rec.get("schema") or (db_meta or {}).get("schema")
            if db is None:
                raise ValueError(f"snapshot table {table_meta.get('tableName')} names no database")
            tables[(db, table_meta["tableName"])] = MarkEntry(
                vtso, db, table_meta["tableName"], "SNAPSHOT", table_meta["createSql"],
                json.dumps({"lowerCased": rec.get("lowerCased", True), "logicTableMeta": table_meta},
                           ensure_ascii=False), kind=SNAPSHOT)
    return [dbs[k] for k in sorted(dbs)] + [tables[k] for k in sorted(tables)]


def collect_history(txns: Iterable[GlobalTxn | DnTxn]) -> list[Entry]:
    """The history entries (marks, physical DDLs) of a stream, in vtso order, each once: for engines
    that gather the schema history before shaping in parallel (every DN carries the same mark row,
    so duplicates of one vtso are dropped). Other transactions are ignored."""
    marks: dict[tuple[str, str, str], MarkEntry] = {}
    phys: dict[tuple[str, str, int], PhysEntry] = {}
    for txn in txns:
        if txn.kind is TxnKind.DDL_MARK:
            for e in mark_entries(txn):
                marks.setdefault((e.vtso, e.db, e.table), e)
        elif txn.kind is TxnKind.PHYSICAL_DDL:
            p = phys_entry(txn)
            phys.setdefault((p.dn, p.file, p.offset), p)
    entries: list[Entry] = [*marks.values(), *phys.values()]
    entries.sort(key=lambda e: (e.vtso, isinstance(e, PhysEntry)))
    return entries
