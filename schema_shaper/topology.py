"""Topology: physical db/table ↔ logical db/table, from the initial snapshot and every mark's
META_INFO (a ``TopologyRecord``, docs/formats.md).

Physical names are looked up case-insensitively. A physical database name belongs to one group and
so to one DN (PolarDB-X names them ``<db>_p0000N`` / ``<db>_<NNNNNN>``), so (physical db, physical
table) identifies a shard without the DN; the DN is kept for messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class LogicalDb:
    name: str
    charset: str = "utf8mb4"
    # (storageInstId, group, physical db)
    shards: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Shard:
    dn: str
    db: str       # logical
    table: str    # logical


class Topology:
    """Where every logical table's shards live, and the reverse lookup used for each TABLE_MAP."""

    def __init__(self) -> None:
        self.dbs: dict[str, LogicalDb] = {}
        self.shards: dict[tuple[str, str], Shard] = {}
        # logical (db, table) lower-case → its physical (db, table) keys
        self.physical: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def copy(self) -> Topology:
        """An independent copy, as ``copy.deepcopy`` makes it at a tenth of the cost (a history entry is
        applied on a copy's back-up): the mutable parts — the ``LogicalDb`` records and the key lists —
        are copied; the frozen ``Shard``s and the tuples of names are shared."""
        new = Topology.__new__(Topology)
        new.dbs = {k: LogicalDb(d.name, d.charset, list(d.shards)) for k, d in self.dbs.items()}
        new.shards = dict(self.shards)
        new.physical = {k: list(v) for k, v in self.physical.items()}
        return new

    def lookup(self, phys_db: str, phys_table: str) -> Shard | None:
        return self.shards.get((phys_db.lower(), phys_table.lower()))

    def db(self, name: str) -> LogicalDb | None:
        return self.dbs.get(name.lower())

    # -- changes ------------------------------------------------------------------------------------
    def set_db(self, meta: dict[str, Any]) -> LogicalDb:
        """``logicDbMeta`` of a TopologyRecord."""
        db = LogicalDb(meta["schema"], (meta.get("charset") or "utf8mb4").lower(),
                       [(s["storageInstId"], s.get("group", ""), s["schema"]) for s in meta.get("phySchemas") or []])
        self.dbs[db.name.lower()] = db
        return db

    def ensure_db(self, name: str, charset: str | None = None) -> LogicalDb:
        db = self.dbs.get(name.lower())
        if db is None:
            db = self.dbs[name.lower()] = LogicalDb(name, (charset or "utf8mb4").lower())
        return db

    def drop_db(self, name: str) -> None:
        key = name.lower()
        self.dbs.pop(key, None)
        for logical in [k for k in self.physical if k[0] == key]:
            self.drop_table(*logical)

    def set_table(self, db: str, meta: dict[str, Any]) -> list[tuple[str, str]]:
        """``logicTableMeta`` of a TopologyRecord: the table's shards replace what it had. Returns
        the physical (db, table) keys."""
        name = meta["tableName"]
        self.drop_table(db, name)
        keys = []
        for s in meta.get("phySchemas") or []:
            for phys in s.get("phyTables") or []:
                key = (s["schema"].lower(), phys.lower())
                self.shards[key] = Shard(s["storageInstId"], db, name)
                keys.append(key)
        self.physical[(db.lower(), name.lower())] = keys
        return keys

    def drop_table(self, db: str, table: str) -> None:
        for key in self.physical.pop((db.lower(), table.lower()), []):
            self.shards.pop(key, None)

    def rename_table(self, db: str, old: str, new_db: str, new: str) -> None:
        keys = self.physical.pop((db.lower(), old.lower()), [])
        for key in keys:
            shard = self.shards[key]
            self.shards[key] = Shard(shard.dn, new_db, new)
        self.physical[(new_db.lower(), new.lower())] = keys

    def rename_physical(self, db: str, old: str, new_db: str, new: str) -> None:
        """A physical RENAME before its mark: rows of the new physical name still belong to the same
        logical table until the mark brings the new topology."""
        shard = self.shards.get((db.lower(), old.lower()))
        if shard is None:
            return
        key = (new_db.lower(), new.lower())
        self.shards[key] = shard
        self.physical.setdefault((shard.db.lower(), shard.table.lower()), []).append(key)

    def physical_keys(self, db: str, table: str) -> list[tuple[str, str]]:
        return list(self.physical.get((db.lower(), table.lower()), []))
