"""Helpers for the shaper tests (no tests here): fixture streams, decoding shaped blocks, rewriting a
mark's DDL record row, and a replica-like replayer that applies shaped LogicalTxns to a real MariaDB
as SQL (by primary key, columns by position as a replica maps them).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from pymysql.constants import CLIENT

from binlog import Event
from binlog.constants import DELETE_TYPES, UPDATE_TYPES, WRITE_TYPES, EventType
from binlog.events import decode_body
from binlog.row_image import ABSENT
from binlog.rows_events import decode_rows_event, decode_table_map, encode_rows_event, encode_table_map
from binlog.writer import build_event
from extractor import extract, storage_sequences
from merger import GlobalTxn, merge
from schema_shaper import LogicalKind, LogicalTxn
from schema_shaper.types import INT_BITS
from simulator.schema import quote_ident
from simulator.values import decode_value

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


@cache
def truth(name: str) -> dict:
    return json.loads((FIXTURES / name / "truth.json").read_text())


@cache
def fixture_txns(name: str) -> tuple[GlobalTxn, ...]:
    t = truth(name)
    dns = [d["id"] for d in t["dns"]]
    seqs = storage_sequences(dns)
    return tuple(merge([extract(FIXTURES / name / dn, storage_seq=seqs[dn]) for dn in dns]))


def truth_rows(change: dict) -> list:
    if change["op"] == "update":
        return [(list(map(decode_value, b)), list(map(decode_value, a))) for b, a in change["rows"]]
    return [list(map(decode_value, r)) for r in change["rows"]]


def decode_block(block: Any) -> tuple[Any, list[tuple[int, list]]]:
    """(table map body, [(op, rows)]) of a shaped LogicalBlock: table map and rows payloads decoded
    the way a reader of the global binlog would (v2, 6-byte table ids)."""
    tm = decode_table_map(block.table_map)
    out = []
    for type_code, payload in block.rows:
        body = decode_rows_event(type_code, payload)
        assert body.table_id == tm.table_id
        out.append((type_code, body.rows(tm)))
    return tm, out


def op_name(type_code: int) -> str:
    if type_code in WRITE_TYPES:
        return "insert"
    if type_code in UPDATE_TYPES:
        return "update"
    assert type_code in DELETE_TYPES
    return "delete"


def block_rows(block: Any) -> tuple[Any, str, list]:
    """(table map body, op, all rows) of a shaped block (a statement may span rows events)."""
    tm, parts = decode_block(block)
    ops = {op_name(t) for t, _ in parts}
    assert len(ops) == 1, ops
    return tm, ops.pop(), [r for _, rows in parts for r in rows]


# -- rewriting input -------------------------------------------------------------------------------------
def with_payload(ev: Event, type_code: int, payload: bytes) -> Event:
    """A copy of ``ev`` with another body (header fields kept, size and CRC recomputed)."""
    ts, _, server_id, _, log_pos, flags = ev.h
    raw = build_event(type_code, payload, timestamp=ts, server_id=server_id, log_pos=log_pos, flags=flags,
                      checksum=ev.ctx.checksum)
    return Event(ev.pos, (ts, type_code, server_id, len(raw), log_pos, flags), raw, ev.ctx)


def without_column_names(blocks: list) -> list:
    """The blocks with every TABLE_MAP re-encoded without optional metadata (no column names), as
    a DN with ``binlog_row_metadata=MINIMAL`` writes them."""
    out = []
    for blk in blocks:
        tm = blk.events[0]
        body = decode_table_map(tm.payload, tm.ctx)
        cols = [dataclasses.replace(c, name=None) for c in body.columns]
        payload = encode_table_map(table_id=body.table_id, flags=body.flags, db=body.db, table=body.table,
                                   columns=cols, optional_metadata=False)
        out.append(dataclasses.replace(blk, events=[with_payload(tm, tm.type_code, payload), *blk.events[1:]]))
    return out


def rewrite_mark(g: GlobalTxn, change: Callable[[dict], dict]) -> GlobalTxn:
    """A mark txn whose ``__cdc_ddl_record__`` row went through ``change`` (a dict by column name)."""
    blocks = []
    for blk in g.blocks:
        tm = blk.events[0]
        body = decode_table_map(tm.payload, tm.ctx)
        names = [c.name for c in body.columns]
        events = [tm]
        for ev in blk.events[1:]:
            rows = decode_rows_event(ev.type_code, ev.payload, ev.ctx).rows(body)
            new_rows = []
            for row in rows:
                d = change(dict(zip(names, row, strict=True)))
                new_rows.append([d[n] for n in names])
            payload = encode_rows_event(ev.type_code, table_id=body.table_id, columns=list(body.columns),
                                        rows=new_rows)
            events.append(with_payload(ev, ev.type_code, payload))
        blocks.append(dataclasses.replace(blk, events=events))
    return GlobalTxn(g.vtso, g.kind, blocks, g.branches)


def rewrite_meta(g: GlobalTxn, change: Callable[[dict, dict], None]) -> GlobalTxn:
    """``rewrite_mark`` for the usual case: ``change(row, meta_info)`` edits both in place
    (row values as str; META_INFO as parsed JSON)."""
    def edit(row: dict) -> dict:
        text = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in row.items()}
        meta = json.loads(text["META_INFO"]) if text.get("META_INFO") else {}
        change(text, meta)
        text["META_INFO"] = json.dumps(meta, ensure_ascii=False) if meta else None
        return {k: (v.encode() if isinstance(v, str) else v) for k, v in text.items()}
    return rewrite_mark(g, edit)


# -- a replica-like replayer -------------------------------------------------------------------------------
def query_text(txn: LogicalTxn) -> tuple[str, str]:
    """(db, statement text) of a shaped DDL, read back from its QUERY payload."""
    body = decode_body(EventType.QUERY, txn.query)
    return body.db, body.query.decode("utf-8")


class Replayer:
    """Applies shaped transactions to a MariaDB: DDL text exactly as emitted (with its ``# POLARX_*``
    lines), rows by primary key with the row image's columns mapped by position onto the server's
    table, as a replica does. Every statement must touch exactly one row."""

    def __init__(self, server: Any) -> None:
        self.conn = server.connect(client_flag=CLIENT.FOUND_ROWS)
        self.cur = self.conn.cursor()
        self.cur.execute("SET time_zone = '+00:00'")
        self._columns: dict[tuple[str, str], tuple[list[str], list[bool], list[str], list[bool]]] = {}
        self.stats = {"ddl": 0, "dml": 0, "rows": 0}

    def close(self) -> None:
        self.conn.close()

    def columns(self, db: str, table: str) -> tuple[list[str], list[bool], list[str], list[bool]]:
        """(names, is text, primary key, is unsigned) of a server table, in ordinal order."""
        key = (db, table)
        if key not in self._columns:
            self.cur.execute("SELECT column_name, character_set_name, column_key, column_type "
                             "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                             "ORDER BY ordinal_position", (db, table))
            rows = self.cur.fetchall()
            assert rows, f"{db}.{table} does not exist on the replica"
            self._columns[key] = ([r[0] for r in rows], [r[1] not in (None, "binary") for r in rows],
                                  [r[0] for r in rows if r[2] == "PRI"], ["unsigned" in r[3] for r in rows])
        return self._columns[key]

    def apply(self, txn: LogicalTxn) -> None:
        if txn.kind is LogicalKind.DDL:
            db, text = query_text(txn)
            if db:
                self.cur.execute(f"USE {quote_ident(db)}")
            self.cur.execute(text)
            self._columns.clear()
            self.stats["ddl"] += 1
        elif txn.kind is LogicalKind.DML:
            self.cur.execute("BEGIN")
            for block in txn.blocks:
                self._block(block)
            self.cur.execute("COMMIT")
            self.stats["dml"] += 1

    def apply_all(self, txns: Iterable[LogicalTxn]) -> None:
        for txn in txns:
            self.apply(txn)

    @staticmethod
    def _value(value: Any, text: bool, unsigned: bool, col: Any) -> Any:
        # The row image carries no signedness: as a replica, read integers with the table's own.
        if unsigned and isinstance(value, int) and value < 0 and col.type in INT_BITS:
            return value + (1 << INT_BITS[col.type])
        if isinstance(value, bytes) and text:
            return value.decode("utf-8")
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.replace(tzinfo=None)
        return value

    def _block(self, block: Any) -> None:
        tm, parts = decode_block(block)
        names, texts, pk, unsigned = self.columns(block.db, block.table)
        assert len(tm.columns) == len(names), (block.db, block.table, len(tm.columns), names)
        table = f"{quote_ident(block.db)}.{quote_ident(block.table)}"
        pk_at = [names.index(n) for n in pk]
        where = " AND ".join(f"{quote_ident(n)} = %s" for n in pk)

        def values(row: list) -> list:
            return [self._value(v, t, u, c) for v, t, u, c in zip(row, texts, unsigned, tm.columns, strict=True)]
        for type_code, rows in parts:
            op = op_name(type_code)
            for row in rows:
                if op == "update":
                    before, after = row
                    cols = [i for i, v in enumerate(after) if v is not ABSENT]
                    sets = ", ".join(f"{quote_ident(names[i])} = %s" for i in cols)
                    b, a = values(before), values(after)
                    n = self.cur.execute(f"UPDATE {table} SET {sets} WHERE {where}",
                                         [a[i] for i in cols] + [b[i] for i in pk_at])
                elif op == "insert":
                    n = self.cur.execute(f"INSERT INTO {table} ({', '.join(map(quote_ident, names))}) VALUES "
                                         f"({', '.join(['%s'] * len(names))})", values(row))
                else:
                    r = values(row)
                    n = self.cur.execute(f"DELETE FROM {table} WHERE {where}", [r[i] for i in pk_at])
                assert n == 1, (op, table, row)
                self.stats["rows"] += 1
