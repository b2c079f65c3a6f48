"""The cluster's state: logical databases and tables (the CN's metadata), their shards, and each
physical table's rows and schema on its DN.

Rows are dicts keyed by column name and never mutated in place (an update makes a new dict), so the
truth can keep references to before/after images cheaply.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from typing import Any

from binlog.lenenc import pack_int
from binlog.row_image import ImageCodec, table_codec
from binlog.table_map import encode_table_map
from simulator.schema import ColumnDef, TableSchema

Row = dict[str, Any]


def shard_of(value: Any, n_shards: int) -> int:
    """``dbpartition by hash(key)``: CRC32 of the key's decimal/text form, modulo the shard count."""
    data = value if isinstance(value, bytes) else str(value).encode()
    return zlib.crc32(data) % n_shards


@dataclass(slots=True)
class Shard:
    """One shard of a logical table: group ``group`` (physical db ``db``) on DN ``dn``."""

    index: int
    dn: int
    db: str
    group: str
    table: str


class PhysTable:
    """A physical table on one DN: schema, rows, table id, and what MDL would track."""

    __slots__ = ("db", "name", "schema", "rows", "table_id", "open_branches", "ddl_pending", "names",
                 "defaults", "codec", "table_map", "_rows_prefix", "_encoders", "_no_nulls", "_images")

    def __init__(self, db: str, name: str, schema: TableSchema, table_id: int) -> None:
        self.db = db
        self.name = name
        self.rows: dict[Any, Row] = {}
        self.open_branches = 0      # prepared-or-running txn branches using it (they hold its MDL)
        self.ddl_pending = False    # a physical DDL waits for its MDL: new statements queue behind it
        self.set_schema(schema, table_id)

    def set_schema(self, schema: TableSchema, table_id: int) -> None:
        """A DDL reopens the table: new columns, new table id, new cached TABLE_MAP."""
        self.schema = schema
        self.table_id = table_id
        self.names = schema.names
        self.defaults = {c.name: c.default for c in schema.columns}
        columns = schema.binlog_columns()
        self.codec: ImageCodec = table_codec(columns).image(None)
        self._encoders = self.codec.encoders
        # The null bitmap of a row without NULLs, as the library's encoder writes it.
        unused = getattr(self.codec, "unused_null_bits", 0)
        self._no_nulls = unused.to_bytes(self.codec.null_bytes, "little")
        self.table_map = encode_table_map(table_id=table_id, db=self.db, table=self.name,
                                          columns=list(columns), optional_metadata=True)
        self._rows_prefix: dict[tuple[int, int], bytes] = {}
        self._images: dict[int, tuple[Row, bytes]] = {}

    def rows_prefix(self, type_code: int, flags: int) -> bytes:
        """Post-header + width + present bitmap(s) of a v2 rows event on this table (cached)."""
        key = (type_code, flags)
        prefix = self._rows_prefix.get(key)
        if prefix is None:
            width = len(self.names)
            # MySQL's bitmap_set_all memsets 0xFF: the unused high bits are set too.
            bitmap = b"\xff" * ((width + 7) // 8)
            prefix = (self.table_id.to_bytes(6, "little") + flags.to_bytes(2, "little") + b"\x02\x00"
                      + pack_int(width) + bitmap + (bitmap if type_code == 31 else b""))
            self._rows_prefix[key] = prefix
        return prefix

    def image(self, row: Row) -> bytes:
        """The row image (full row, every column present). A row written as an after image is
        usually the next txn's before image: the last few thousand images are kept by row identity
        (rows are never mutated, and the cache holds the row so its id stays unique)."""
        hit = self._images.get(id(row))
        if hit is not None and hit[0] is row:
            return hit[1]
        values = [row[n] for n in self.names]
        if None in values:
            image = self.codec.encode(values)
        else:
            # No NULLs (the common case): no-null bitmap + values, without the general path's checks.
            image = self._no_nulls + b"".join([enc(v) for enc, v in zip(self._encoders, values, strict=True)])
        if len(self._images) >= 4096:
            self._images.clear()
        self._images[id(row)] = (row, image)
        return image

    def conform(self, values: Row) -> Row:
        """A full physical row from ``values``: columns this table lacks are dropped, columns it has
        but ``values`` lacks take their default (what MySQL does for an INSERT naming fewer columns)."""
        defaults = self.defaults
        return {n: values[n] if n in values else defaults[n] for n in self.names}


class KeyPool:
    """The primary keys of a table, for uniform random picks and O(1) removal."""

    __slots__ = ("keys", "pos")

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.pos: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: Any) -> None:
        self.pos[key] = len(self.keys)
        self.keys.append(key)

    def remove(self, key: Any) -> None:
        i = self.pos.pop(key)
        last = self.keys.pop()
        if i < len(self.keys):
            self.keys[i] = last
            self.pos[last] = i

    def pick(self, rng: random.Random) -> Any:
        return self.keys[int(rng.random() * len(self.keys))]


@dataclass(slots=True)
class LogicalDb:
    name: str
    shards: list[tuple[int, str, str]]     # (dn index, group, physical db), shard order


@dataclass(eq=False, slots=True)
class LogicalTable:
    """A logical table as the CN sees it.

    ``schema`` is the logical schema CDC must output (switches at the DDL mark); ``dml_schema`` is
    what the application's statements use (a dropped column disappears from it when the job starts,
    an added one appears when the job ends)."""

    uid: int
    db: LogicalDb
    name: str
    schema: TableSchema
    dml_schema: TableSchema
    shard_key: str
    shards: list[Shard]
    location: dict[Any, int] = field(default_factory=dict)   # pk -> shard index
    keys: KeyPool = field(default_factory=KeyPool)
    available: bool = False      # DML allowed (created and not being dropped/renamed/truncated)
    next_pk: int = 1
    meta: dict[str, Any] = field(default_factory=dict)      # workload bookkeeping

    @property
    def full_name(self) -> str:
        return f"{self.db.name}.{self.name}"

    def shard_for(self, row: Row) -> int:
        return shard_of(row[self.shard_key], len(self.shards))

    def column(self, name: str) -> ColumnDef:
        return self.dml_schema.column(name)
