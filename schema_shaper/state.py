"""The schema state a shaper keeps: topology, logical tables (with their output table ids) and
physical tables, and the rules that apply one history entry to it — a DDL mark (logical DDL, with
META_INFO's topology and createSql) or a physical DDL (physical model only).

The state is a function of the entries applied, in vtso order; nothing else goes in.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schema_shaper.ddl import (
    AlterTable,
    CreateDatabase,
    CreateTable,
    DropDatabase,
    DropTable,
    Name,
    RenameTable,
    TruncateTable,
    parse_ddl,
)
from schema_shaper.errors import BadDdl
from schema_shaper.meta_store import Entry, MarkEntry, PhysEntry
from schema_shaper.schema import TableSchema
from schema_shaper.topology import Topology

log = logging.getLogger(__name__)

# the statements ``_apply_phys_statement`` acts on (a TRUNCATE keeps the physical schema)
_PHYSICAL_MODEL_KINDS = (CreateTable, AlterTable, RenameTable, DropTable, DropDatabase)

SYSTEM_PREFIXES = ("__cdc__", "__drds_")
_SYSTEM_DBS = {"mysql", "sys", "information_schema", "performance_schema"}


@dataclass(slots=True)
class LogicalTable:
    db: str
    name: str
    schema: TableSchema
    table_id: int


class SchemaState:
    """Topology, logical tables by (db, table) lower-case, physical tables by (physical db, physical
    table) lower-case, the next table id, and the vtso of the last entry applied.

    ``phys_dn``: the DN whose physical CREATE TABLE made a physical table, until a mark states its
    shards again. A group that moves (scale-out/in) keeps its names on the target DN; the source's
    later DROP/ALTER of its old copy is then about a table that lives elsewhere, and is ignored
    (``_elsewhere``)."""

    def __init__(self) -> None:
        self.topology = Topology()
        self.tables: dict[tuple[str, str], LogicalTable] = {}
        self.physical: dict[tuple[str, str], TableSchema] = {}
        self.phys_dn: dict[tuple[str, str], str] = {}
        self.next_table_id = 1
        self.vtso = ""

    def apply_entry(self, entry: Entry) -> bool:
        """Apply one history entry, all of it or nothing (BadDdl when it cannot be parsed or applied:
        the state is then as before, so a run that skips it and a replay that never saw it agree).
        False when the entry cannot have changed the model (a physical DDL of a system database or
        of no table); the state's vtso moves on either way."""
        if isinstance(entry, MarkEntry):
            self._atomically(lambda: self._apply_mark(entry), topology=True)
            changed = True
        else:
            changed = self._apply_phys(entry)
        self.vtso = max(self.vtso, entry.vtso)
        return changed

    def _atomically(self, change: Callable[[], None], *, topology: bool) -> None:
        """Run ``change``; on any exception the state is put back as it was. ``topology``: the change
        may touch the topology, which is then backed up too (a physical DDL only renames in it: every
        DN's physical CREATE/DROP leaves it alone, and at 32 DNs copying it for each was the most of
        their cost)."""
        saved = (self.topology.copy() if topology else self.topology, dict(self.tables), dict(self.physical),
                 dict(self.phys_dn), self.next_table_id)
        try:
            change()
        except BaseException:
            self.topology, self.tables, self.physical, self.phys_dn, self.next_table_id = saved
            raise

    def _bad_mark(self, entry: MarkEntry, message: str) -> BadDdl:
        dn, _, rest = entry.source.partition(":")
        file, _, offset = rest.rpartition(":")
        return BadDdl(message, dn=dn or None, file=file or None, offset=int(offset) if offset.isdigit() else None,
                      table=f"{entry.db}.{entry.table}" if entry.table else entry.db, vtso=entry.vtso)

    def _apply_mark(self, entry: MarkEntry) -> None:
        record = json_field(entry.topology, entry, "META_INFO") or {}
        db_meta = record.get("logicDbMeta")
        table_meta = record.get("logicTableMeta")
        db_info = self.topology.db(entry.db)
        try:
            stmt = parse_ddl(entry.ddl, charset=db_info.charset if db_info else "utf8mb4")
        except ValueError as exc:
            raise self._bad_mark(entry, f"unparseable DDL: {exc}") from None
        try:
            self._apply_statement(entry, stmt, db_meta, table_meta)
        except (ValueError, KeyError) as exc:
            raise self._bad_mark(entry, f"cannot apply the DDL: {exc}") from None

    def _apply_statement(self, entry: MarkEntry, stmt: Any, db_meta: dict | None, table_meta: dict | None) -> None:
        topo = self.topology
        if isinstance(stmt, CreateDatabase):
            db = topo.set_db(db_meta) if db_meta else topo.ensure_db(stmt.name, stmt.charset)
            db.name = stmt.name  # the DDL's spelling: downstream creates it so
            if stmt.charset:
                db.charset = stmt.charset
            return
        if isinstance(stmt, DropDatabase):
            for key in [k for k in self.tables if k[0] == stmt.name.lower()]:
                self._drop_logical(*key)
            topo.drop_db(stmt.name)
            return
        if isinstance(stmt, CreateTable):
            db, name = self._qualify(stmt.table, entry.db)
            if stmt.schema is not None:
                schema = stmt.schema
            else:
                source = self._logical(self._qualify(stmt.like, entry.db))  # type: ignore[arg-type]
                schema = source.schema.renamed(name)
            self._define(db, name, self._authoritative(schema, table_meta, db, entry), table_meta)
            return
        if isinstance(stmt, AlterTable):
            db, name = self._qualify(stmt.table, entry.db)
            current = self._logical((db, name))
            schema = stmt.apply(current.schema)
            if stmt.rename_to is not None:
                new_db, new_name = self._qualify(stmt.rename_to, db)
                self._drop_logical(db, name)
                db, name, schema = new_db, new_name, schema.renamed(new_name)
            self._define(db, name, self._authoritative(schema, table_meta, db, entry), table_meta)
            return
        if isinstance(stmt, RenameTable):
            for old, new in stmt.pairs:
                odb, oname = self._qualify(old, entry.db)
                ndb, nname = self._qualify(new, odb)
                current = self._logical((odb, oname))
                topo.rename_table(odb, oname, ndb, nname)
                self._drop_logical(odb, oname, keep_topology=True)
                meta = table_meta if table_meta and table_meta.get("tableName", "").lower() == nname.lower() else None
                self._define(ndb, nname, current.schema.renamed(nname), meta)
            return
        if isinstance(stmt, TruncateTable):
            db, name = self._qualify(stmt.table, entry.db)
            current = self._logical((db, name))
            # Same columns: the same table version and id; the topology is refreshed.
            self._define(db, name, current.schema, table_meta, table_id=current.table_id)
            return
        if isinstance(stmt, DropTable):
            for t in stmt.tables:
                db, name = self._qualify(t, entry.db)
                self._drop_logical(db, name)
            return
        # Other: nothing in the model changes.

    @staticmethod
    def _qualify(name: Name, default_db: str) -> tuple[str, str]:
        return (name[0] or default_db, name[1])

    def _logical(self, name: tuple[str, str]) -> LogicalTable:
        table = self.tables.get((name[0].lower(), name[1].lower()))
        if table is None:
            raise KeyError(f"unknown logical table {name[0]}.{name[1]}")
        return table

    def _authoritative(self, schema: TableSchema, table_meta: dict | None, db: str, entry: MarkEntry) -> TableSchema:
        """META_INFO's createSql is the table as the CN has it after the DDL: it wins over
        the model's own result, which must agree on columns (a difference is logged)."""
        create = (table_meta or {}).get("createSql")
        if not create or table_meta.get("tableName", "").lower() != schema.name.lower():  # type: ignore[union-attr]
            return schema
        db_info = self.topology.db(db)
        stmt = parse_ddl(create, charset=db_info.charset if db_info else "utf8mb4")
        if not isinstance(stmt, CreateTable) or stmt.schema is None:
            raise ValueError("META_INFO createSql is not a CREATE TABLE with columns")
        meta_schema = stmt.schema.renamed(schema.name)
        if not meta_schema.shape_equal(schema):
            log.warning("vtso %s: %s.%s after %r differs from META_INFO createSql; createSql wins "
                        "(model: %s; createSql: %s)", entry.vtso, db, schema.name, entry.ddl[:200],
                        schema.names, meta_schema.names)
        return meta_schema

    def _define(self, db: str, name: str, schema: TableSchema, table_meta: dict | None, *,
                table_id: int | None = None) -> None:
        """A new version of logical table ``db.name`` (the next table id unless ``table_id`` keeps
        one), its topology and physical seeds."""
        key = (db.lower(), name.lower())
        if table_id is None:
            table_id = self.next_table_id
            self.next_table_id += 1
        self.tables[key] = LogicalTable(db, name, schema, table_id)
        if table_meta is not None and table_meta.get("tableName", "").lower() == name.lower():
            phys_keys = self.topology.set_table(db, table_meta)
            self._seed_physical(phys_keys, schema, table_meta)
        else:
            self._seed_physical(self.topology.physical_keys(db, name), schema, None)

    def _seed_physical(self, keys: list[tuple[str, str]], schema: TableSchema, table_meta: dict | None) -> None:
        """At a mark every shard has converged: its physical schema is createSql4Phy (or the
        logical one)."""
        phys = schema
        create4phy = (table_meta or {}).get("createSql4Phy")
        if create4phy:
            try:
                stmt = parse_ddl(create4phy, charset=schema.charset)
                if isinstance(stmt, CreateTable) and stmt.schema is not None:
                    phys = stmt.schema
            except ValueError as exc:
                log.warning("META_INFO createSql4Phy of %s unreadable (%s): the logical schema stands in",
                            schema.name, exc)
        for key in keys:
            self.physical[key] = phys.renamed(key[1])
            self.phys_dn.pop(key, None)

    def _drop_logical(self, db: str, name: str, *, keep_topology: bool = False) -> None:
        self.tables.pop((db.lower(), name.lower()), None)
        if not keep_topology:
            for key in self.topology.physical_keys(db, name):
                self.physical.pop(key, None)
            self.topology.drop_table(db, name)

    def _apply_phys(self, entry: PhysEntry) -> bool:
        db_l = entry.db.lower()
        if db_l.startswith(SYSTEM_PREFIXES) or db_l in _SYSTEM_DBS:
            return False
        try:
            stmt = parse_ddl(entry.ddl)
        except ValueError as exc:
            raise BadDdl(f"unparseable physical DDL {entry.ddl[:200]!r}: {exc}", dn=entry.dn, file=entry.file,
                         offset=entry.offset, table=entry.db, vtso=entry.vtso) from None
        if not isinstance(stmt, _PHYSICAL_MODEL_KINDS):
            return False  # CREATE DATABASE, CREATE VIEW, GRANT …: nothing of the physical model changes
        renames = isinstance(stmt, RenameTable) or (isinstance(stmt, AlterTable) and stmt.rename_to is not None)
        try:
            self._atomically(lambda: self._apply_phys_statement(entry, stmt), topology=renames)
        except (ValueError, KeyError) as exc:
            raise BadDdl(f"cannot apply physical DDL {entry.ddl[:200]!r}: {exc}", dn=entry.dn, file=entry.file,
                         offset=entry.offset, table=entry.db, vtso=entry.vtso) from None
        return True

    def _elsewhere(self, key: tuple[str, str], dn: str) -> bool:
        """The physical table was created on another DN than ``dn`` (it moved there)."""
        owner = self.phys_dn.get(key)
        return owner is not None and owner != dn

    def _rekey(self, old: tuple[str, str], new: tuple[str, str]) -> None:
        if old in self.phys_dn:
            self.phys_dn[new] = self.phys_dn.pop(old)

    def _apply_phys_statement(self, entry: PhysEntry, stmt: Any) -> None:
        phys = self.physical
        if isinstance(stmt, CreateTable):
            db, name = self._qualify(stmt.table, entry.db)
            key = (db.lower(), name.lower())
            if stmt.schema is not None:
                phys[key] = stmt.schema
            else:
                sdb, sname = self._qualify(stmt.like, entry.db)  # type: ignore[arg-type]
                source = phys.get((sdb.lower(), sname.lower()))
                if source is not None:
                    phys[key] = source.renamed(name)
            self.phys_dn[key] = entry.dn
        elif isinstance(stmt, AlterTable):
            db, name = self._qualify(stmt.table, entry.db)
            key = (db.lower(), name.lower())
            current = phys.get(key)
            if current is None or self._elsewhere(key, entry.dn):
                return  # a table the model does not know (or that moved): nothing of ours depends on it
            schema = stmt.apply(current)
            if stmt.rename_to is not None:
                ndb, nname = self._qualify(stmt.rename_to, db)
                del phys[key]
                phys[(ndb.lower(), nname.lower())] = schema.renamed(nname)
                self._rekey(key, (ndb.lower(), nname.lower()))
                self.topology.rename_physical(db, name, ndb, nname)
            else:
                phys[key] = schema
        elif isinstance(stmt, RenameTable):
            for old, new in stmt.pairs:
                odb, oname = self._qualify(old, entry.db)
                ndb, nname = self._qualify(new, odb)
                if self._elsewhere((odb.lower(), oname.lower()), entry.dn):
                    continue
                current = phys.pop((odb.lower(), oname.lower()), None)
                if current is not None:
                    phys[(ndb.lower(), nname.lower())] = current.renamed(nname)
                self._rekey((odb.lower(), oname.lower()), (ndb.lower(), nname.lower()))
                self.topology.rename_physical(odb, oname, ndb, nname)
        elif isinstance(stmt, DropTable):
            for t in stmt.tables:
                db, name = self._qualify(t, entry.db)
                key = (db.lower(), name.lower())
                if not self._elsewhere(key, entry.dn):
                    phys.pop(key, None)
                    self.phys_dn.pop(key, None)
        elif isinstance(stmt, DropDatabase):
            for key in [k for k in phys if k[0] == stmt.name.lower() and not self._elsewhere(k, entry.dn)]:
                del phys[key]
                self.phys_dn.pop(key, None)


def json_field(text: str | None, entry: MarkEntry, what: str) -> dict | None:
    """A mark's JSON column (META_INFO, EXT) as a dict; None when empty; BadDdl when not JSON."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        dn, _, rest = entry.source.partition(":")
        file, _, offset = rest.rpartition(":")
        raise BadDdl(f"{what} is not JSON: {exc}", dn=dn or None, file=file or None,
                     offset=int(offset) if offset.isdigit() else None, table=entry.db, vtso=entry.vtso) from None
    return value if isinstance(value, dict) else None
