"""Binlog-X stream groups: the global binlog split into N streams (docs/streams.md).

After shaping, each transaction's changes are routed to the streams that own them
(``route_transaction``): by database, by table (``StreamMap``: a hash of the name, renames keep
their stream) or by record (the hash of the row's primary key; a table without one goes by table).
A stream's part of a transaction is one transaction there, with the same vtso; every DDL, heartbeat
and NONE transaction goes to every stream. Each stream is an ordinary global binlog directory
``OUT/stream<k>`` whose files are named ``<group>_stream_<k>_binlog.NNNNNN``.

``StreamGroup`` is the pipeline's output for a group: one ``GlobalBinlog`` per stream behind the
interface the pipeline writes to (append, flush, close, counters), and on resume each stream drops
the parts at or below what its own files already hold, so a group recovers stream by stream.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlog.constants import RowsFlag
from binlog.rows_events import decode_rows_event
from binlog.table_map import decode_table_map
from dumper.global_binlog import DumperError
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn

HASH_LEVELS = ("database", "table", "record")
DEFAULT_GROUP = "group1"
_DML = LogicalKind.DML
_STMT_END = int(RowsFlag.STMT_END)


class StreamsError(DumperError):
    """Stream settings that cannot be used (count, hash level, group name)."""


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """``[streams]``: ``count`` streams, hashed at ``hash`` level, files named after ``group``."""

    count: int = 1
    hash: str = "table"
    group: str = DEFAULT_GROUP

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= 1024:
            raise StreamsError(f"streams.count = {self.count!r}: expected 1 … 1024")
        if self.hash not in HASH_LEVELS:
            raise StreamsError(f"streams.hash = {self.hash!r}: expected one of {', '.join(HASH_LEVELS)}")
        if not self.group or not all(c.isalnum() or c in "_-" for c in self.group):
            raise StreamsError(f"streams.group = {self.group!r}: letters, digits, '_' and '-' only")

    @property
    def split(self) -> bool:
        """Whether the output is a stream group (``count = 1`` writes the single stream of old)."""
        return self.count > 1

    def settings(self) -> dict[str, Any]:
        """What ``state.json`` records (a resume with other stream settings is refused)."""
        return {"count": self.count, "hash": self.hash, "group": self.group}

    @classmethod
    def from_settings(cls, data: dict | None) -> StreamSpec:
        data = data or {}
        return cls(count=data.get("count", 1), hash=data.get("hash", "table"), group=data.get("group", DEFAULT_GROUP))

    def name(self, k: int) -> str:
        """The stream's name: ``group1_stream_2``."""
        return f"{self.group}_stream_{k}"

    def base(self, k: int) -> str:
        """The stream's file base: ``group1_stream_2_binlog`` (files ``….000001``, ``….index``)."""
        return f"{self.name(k)}_binlog"

    @staticmethod
    def directory(out: str | Path, k: int) -> Path:
        return Path(out) / f"stream{k}"


def stream_of_text(text: str, count: int) -> int:
    """The stream a name or key hashes to: CRC-32 of its UTF-8 bytes, modulo the count."""
    return zlib.crc32(text.encode("utf-8", "surrogateescape")) % count


def key_text(values: Iterable[Any]) -> str:
    """A primary key's values as the text record hashing reads: each value as text (bytes as
    latin-1, so every byte counts), joined by U+001F."""
    parts = []
    for v in values:
        if isinstance(v, bytes | bytearray):
            parts.append(bytes(v).decode("latin-1"))
        elif v is None:
            parts.append("\\N")
        else:
            parts.append(str(v))
    return "\x1f".join(parts)


@dataclass(slots=True)
class StreamMap:
    """The table→stream map: a table's stream is the hash of ``db.table``, except where a rename
    moved a table to a name of its own (``follow_rename``): the new name keeps the old name's
    stream, so the replica holding the table keeps receiving its rows. ``moves`` is the history
    ``[vtso, "db.table", stream]``, persisted with the group's state and cut back on resume."""

    count: int
    moves: list[list] = field(default_factory=list)
    current: dict[str, int] = field(default_factory=dict)
    # (db, table) → stream, for the hot path; cleared when a rename moves a table
    known: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def restored(cls, count: int, moves: list[list] | None, upto: str | None) -> StreamMap:
        m = cls(count)
        for vtso, name, k in moves or []:
            if upto is not None and vtso <= upto:
                m.moves.append([vtso, name, k])
                m.current[name] = k
        return m

    def stream_of_table(self, db: str, table: str) -> int:
        k = self.known.get((db, table))
        if k is None:
            name = f"{db}.{table}"
            k = self.current.get(name)
            if k is None:
                k = stream_of_text(name, self.count)
            if len(self.known) > 65536:
                self.known.clear()
            self.known[(db, table)] = k
        return k

    def stream_of_database(self, db: str) -> int:
        """Database hashing: the database's stream (kept in ``known`` under ``(db, "")``)."""
        k = self.known.get((db, ""))
        if k is None:
            k = self.known[(db, "")] = stream_of_text(db, self.count)
        return k

    def follow_rename(self, vtso: str, old: tuple[str, str], new: tuple[str, str]) -> None:
        k = self.stream_of_table(*old)
        name = f"{new[0]}.{new[1]}"
        if self.current.get(name, stream_of_text(name, self.count)) != k:
            self.current[name] = k
            self.moves.append([vtso, name, k])
            self.known.clear()

    def note_ddl(self, txn: LogicalTxn) -> None:
        """A DDL that renames tables moves their map entries (RENAME TABLE, ALTER TABLE … RENAME)."""
        from schema_shaper.ddl import AlterTable, RenameTable, parse_ddl

        if not txn.sql:
            return
        try:
            stmt = parse_ddl(txn.sql)
        except ValueError:
            return
        db = txn.db or ""
        if isinstance(stmt, RenameTable):
            pairs = stmt.pairs
        elif isinstance(stmt, AlterTable) and stmt.rename_to is not None:
            pairs = [(stmt.table, stmt.rename_to)]
        else:
            return
        for (old_db, old), (new_db, new) in pairs:
            self.follow_rename(txn.vtso, (old_db or db, old), (new_db or db, new))


class RecordRouter:
    """Record hashing of one block: each row goes to the stream of its primary key's hash (the
    before image of an UPDATE), read from the logical TABLE_MAP's primary-key metadata."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._tables: dict[bytes, tuple] = {}

    def _table(self, table_map: bytes) -> tuple:
        known = self._tables.get(table_map)
        if known is None:
            body = decode_table_map(table_map)
            key = tuple(i for i, c in enumerate(body.columns) if c.primary_key)
            known = self._tables[table_map] = (body.codec, key)
            if len(self._tables) > 4096:
                self._tables.clear()
        return known

    def has_key(self, table_map: bytes) -> bool:
        return bool(self._table(table_map)[1])

    def split(self, block) -> int | dict[int, list[tuple[int, bytes]]] | None:
        """The stream of every row of the block when they all go to one (the usual case: the block
        goes as it is), None when it has no row, else its rows events per stream, each holding that stream's rows (events
        left with no row are dropped; the last event of each stream's part ends the statement)."""
        codec, key = self._table(block.table_map)
        count = self.count
        single = len(key) == 1
        k0 = key[0]
        decoded = []
        streams: set[int] = set()
        for type_code, payload in block.rows:
            body = decode_rows_event(type_code, payload)
            data = body.rows_data
            if type(data) is not bytes:
                data = bytes(data)
            end = len(data)
            decode = codec.image(body.present).decode
            after = codec.image(body.present_after).length if body.present_after is not None else None
            rows = []
            off = 0
            while off < end:
                values, stop = decode(data, off)
                if after is not None:
                    stop += after(data, stop)
                v = values[k0] if single else None
                text = str(v) if single and type(v) is int else key_text(values[i] for i in key)
                k = zlib.crc32(text.encode("utf-8", "surrogateescape")) % count
                streams.add(k)
                rows.append((k, off, stop))
                off = stop
            if off != end:
                raise ValueError(f"rows event of {block.db}.{block.table} ends inside a row image")
            decoded.append((type_code, payload[:len(payload) - end], data, rows))
        if not streams:
            return None                         # no row: the caller routes the block by its table
        if len(streams) == 1:
            return next(iter(streams))
        parts: dict[int, list[tuple[int, bytes, bytes]]] = {}
        for type_code, head, data, rows in decoded:
            chosen: dict[int, list[bytes]] = {}
            for k, start, stop in rows:
                chosen.setdefault(k, []).append(data[start:stop])
            for k, images in chosen.items():
                parts.setdefault(k, []).append((type_code, head, b"".join(images)))
        out: dict[int, list[tuple[int, bytes]]] = {}
        for k, events in sorted(parts.items()):
            last = len(events) - 1
            rows_events = []
            for i, (type_code, head, data) in enumerate(events):
                flags = int.from_bytes(head[6:8], "little")
                flags = flags | _STMT_END if i == last else flags & ~_STMT_END
                rows_events.append((type_code, head[:6] + flags.to_bytes(2, "little") + head[8:] + data))
            out[k] = rows_events
        return out


def route_transaction(txn: LogicalTxn, spec: StreamSpec, tables: StreamMap,
                      records: RecordRouter | None) -> list[tuple[int, LogicalTxn]]:
    """The streams a shaped transaction goes to, each with its part (the rule of docs/streams.md):
    DDL, heartbeat and NONE transactions to every stream; a DML transaction's blocks to the stream
    of their database / table / rows, in their order, one transaction per stream (same vtso, kind,
    server id), streams in ascending order."""
    count = spec.count
    if txn.kind is not _DML:
        if txn.kind is LogicalKind.DDL:
            tables.note_ddl(txn)
        return [(k, txn) for k in range(count)]
    parts: dict[int, list] = {}
    level = spec.hash
    for block in txn.blocks:
        if level == "database":
            parts.setdefault(tables.stream_of_database(block.db), []).append(block)
            continue
        split = None if level == "table" or records is None or not records.has_key(block.table_map) \
            else records.split(block)
        if split is None:                       # by table (also a table without a key, a block without rows)
            parts.setdefault(tables.stream_of_table(block.db, block.table), []).append(block)
        elif type(split) is int:                # every row to one stream: the block as it is
            parts.setdefault(split, []).append(block)
        else:
            for k, rows in split.items():
                parts.setdefault(k, []).append(LogicalBlock(block.db, block.table, block.table_map, rows,
                                                            block.hint))
    if not parts:
        return [(k, txn) for k in range(count)]
    if len(parts) == 1:
        return [(next(iter(parts)), txn)]
    return [(k, LogicalTxn(txn.vtso, _DML, blocks, server_id=txn.server_id, archive=txn.archive,
                           source=txn.source)) for k, blocks in sorted(parts.items())]
