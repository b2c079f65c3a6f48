"""The meta store and restarts: the logical and physical history land in SQLite (and in a real
MariaDB through a ``metadb`` URL); a shaper rebuilt "as of vtso X" from it — or from the marks and
physical DDLs collected up front, as the Spark engine does — shapes the rest of the stream into
exactly the bytes of an uninterrupted run; re-applying history already stored changes nothing;
table ids follow the logical table versions (the truth's ``logical_schemas`` order).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from functools import cache

import pytest

from binlog.rows_events import decode_table_map
from extractor import TxnKind, extract, storage_sequences
from schema_shaper import LogicalKind, MarkEntry, MetaStore, PhysEntry, Shaper, collect_history, shape
from tests.mariadb import MariaDB
from tests.test_shape_util import FIXTURES, fixture_txns, truth

NAME = "ddl-3dn"


def signature(o) -> tuple:
    """Everything of a LogicalTxn the dumper writes."""
    return (o.vtso, o.kind, o.query, o.db, o.sql, o.server_id, o.archive,
            tuple((b.db, b.table, b.table_map, tuple(b.rows), b.hint) for b in o.blocks))


@cache
def full_run() -> list[tuple]:
    return [signature(o) for o in shape(fixture_txns(NAME))]


def cut_points() -> list[str]:
    """Every mark, every third physical DDL, and every 40th txn."""
    txns = fixture_txns(NAME)
    phys = [g.vtso for g in txns if g.kind is TxnKind.PHYSICAL_DDL][::3]
    marks = [g.vtso for g in txns if g.kind is TxnKind.DDL_MARK]
    return sorted(set(marks + phys + [g.vtso for g in txns[::40]]))


def stored_rows(store: MetaStore) -> tuple[int, int]:
    h = store.history()
    return sum(isinstance(e, MarkEntry) for e in h), sum(isinstance(e, PhysEntry) for e in h)


def test_sqlite_history_matches_the_truth(tmp_path):
    t = truth(NAME)
    path = tmp_path / "meta.db"
    with MetaStore.open(path) as store:
        out = [signature(o) for o in shape(fixture_txns(NAME), store=store)]
        assert out == full_run()
        history = store.history()
        for e in history:  # storing an entry again is a no-op
            store.add(e)
        assert store.history() == history
    marks = [e for e in history if isinstance(e, MarkEntry)]
    assert [(e.vtso, e.db, e.table or None, e.sql_kind, e.ddl) for e in marks] == [
        (d["vtso"], d["db"], d["table"], d["sql_kind"], d["sql"]) for d in t["ddls"]]
    phys = sorted((e.dn, e.file, e.offset, e.ddl) for e in history if isinstance(e, PhysEntry))
    assert phys == sorted((dn, p["file"], p["pos"], p["sql"]) for dn, v in t["physical_ddls"].items() for p in v)
    assert [e.vtso for e in history] == sorted(e.vtso for e in history)


@pytest.mark.slow
def test_restart_as_of_any_point_gives_identical_output(tmp_path):
    path = tmp_path / "meta.db"
    txns = fixture_txns(NAME)
    with MetaStore.open(path) as store:
        for _ in shape(txns, store=store):
            pass
        counts = stored_rows(store)
    full = full_run()
    points = cut_points()
    assert len(points) > 30, len(points)
    for x in points:
        with MetaStore.open(path) as store:
            shaper = Shaper.as_of(store, x)
            # A restart re-reads DNs from a position before x: marks and physical DDLs already
            # stored come again and must change nothing.
            for g in txns:
                if g.vtso <= x and g.kind in (TxnKind.DDL_MARK, TxnKind.PHYSICAL_DDL):
                    shaper.shape_txn(g)
            rest = [signature(shaper.shape_txn(g)) for g in txns if g.vtso > x]
            assert rest == [s for s in full if s[0] > x], x
            assert stored_rows(store) == counts


def test_history_collected_up_front_rebuilds_any_range():
    """Spark: marks and physical DDLs collected first (here from the per-DN streams, unmerged: every
    DN carries the mark), then each range shaped from ``Shaper.from_history(entries, start)``."""
    t = truth(NAME)
    dns = [d["id"] for d in t["dns"]]
    seqs = storage_sequences(dns)
    per_dn = itertools.chain.from_iterable(extract(FIXTURES / NAME / dn, storage_seq=seqs[dn]) for dn in dns)
    entries = collect_history(per_dn)
    merged = collect_history(fixture_txns(NAME))
    strip = [(type(e).__name__, e.vtso, getattr(e, "ddl", None), getattr(e, "topology", None),
              getattr(e, "offset", None)) for e in entries]
    assert strip == [(type(e).__name__, e.vtso, getattr(e, "ddl", None), getattr(e, "topology", None),
                      getattr(e, "offset", None)) for e in merged]
    assert sum(isinstance(e, MarkEntry) for e in entries) == len(t["ddls"])
    txns = fixture_txns(NAME)
    full = full_run()
    bounds = [None] + [txns[i].vtso for i in range(50, len(txns), 50)]
    for start, end in itertools.pairwise(bounds + [None]):
        shaper = Shaper.from_history(entries, start) if start else Shaper()
        part = [signature(shaper.shape_txn(g)) for g in txns
                if (start is None or g.vtso > start) and (end is None or g.vtso <= end)]
        assert part == [s for s in full if (start is None or s[0] > start) and (end is None or s[0] <= end)]


def test_table_ids_follow_logical_table_versions():
    """The TABLE_MAP id of every shaped block is 1 + the index of the logical table version its rows
    follow (the truth numbers versions in mark order): a function of the schema history alone."""
    t = truth(NAME)
    out = list(shape(fixture_txns(NAME)))
    changes = {x["vtso"]: x["changes"] for x in t["txns"] if x["kind"] == "dml"}
    n = 0
    for o in out:
        if o.kind is LogicalKind.DML:
            for block, change in zip(o.blocks, changes[o.vtso], strict=True):
                assert decode_table_map(block.table_map).table_id == change["schema"] + 1
                n += 1
    assert n > 300


@pytest.fixture(scope="module")
def metadb(tmp_path_factory):
    srv = MariaDB.start(tmp_path_factory.mktemp("metadb"))
    yield srv
    srv.stop()


def test_mariadb_meta_store(metadb, tmp_path):
    url = f"mysql://root@localhost/gbinlog_meta?unix_socket={metadb.socket}"
    txns = fixture_txns(NAME)
    with MetaStore.open(url) as store, MetaStore.open(tmp_path / "meta.db") as lite:
        out = [signature(o) for o in shape(txns, store=store)]
        assert out == full_run()
        for _ in shape(txns, store=lite):
            pass
        assert store.history() == lite.history()
        # idempotent: storing the same history again adds nothing
        for e in lite.history():
            store.add(e)
        assert store.history() == lite.history()
    tables = {r[0] for r in metadb.query("SHOW TABLES", "gbinlog_meta")}
    assert tables == {"binlog_logic_meta_history", "binlog_phy_ddl_history"}
    x = [g.vtso for g in txns if g.kind is TxnKind.DDL_MARK][8]
    with MetaStore.open(url) as store:
        shaper = Shaper.as_of(store, x)
        assert [signature(shaper.shape_txn(g)) for g in txns if g.vtso > x] == [s for s in full_run() if s[0] > x]


_KILLED_AFTER_ADDING = """
import os, sys
from schema_shaper import MetaStore, PhysEntry, Shaper
store = MetaStore.open(sys.argv[1])
shaper = Shaper(store=store)
def phys(n, db, sql):
    return PhysEntry(f"{n:054d}", "dn1", "mysql-bin.000001", 100 * n, db, sql)
def synchronous():
    return store.conn.execute("PRAGMA synchronous").fetchone()[0]
modes = []
shaper.apply(phys(1, "bank_p00001", "CREATE TABLE `t_1` (`id` bigint)"))               # the model changes
modes.append(synchronous())
shaper.apply(phys(2, "", "CREATE DATABASE IF NOT EXISTS `bank_p00002` CHARACTER SET utf8mb4"))  # nothing
modes.append(synchronous())
shaper.apply(phys(3, "__cdc___000001", "CREATE TABLE `__cdc_heartbeat__` (`id` bigint)"))       # nothing
modes.append(synchronous())
print(modes, flush=True)
os.kill(os.getpid(), 9)
"""


def test_entries_that_change_nothing_skip_the_disk_wait_and_survive_a_kill(tmp_path):
    """A physical DDL the model has nothing of is committed without synchronous=FULL's wait (2 = FULL,
    1 = NORMAL), and is still stored when the process is killed right after, without closing."""
    path = tmp_path / "meta.db"
    res = subprocess.run([sys.executable, "-c", _KILLED_AFTER_ADDING, str(path)], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == -9, res.stderr
    assert res.stdout.strip() == "[2, 1, 1]"
    with MetaStore.open(path) as store:
        assert [(e.vtso[-1], e.db) for e in store.history()] == [
            ("1", "bank_p00001"), ("2", ""), ("3", "__cdc___000001")]


def test_sync_puts_entries_added_without_a_disk_wait_in_the_database_file(tmp_path):
    """``MetaStore.sync`` makes what was committed without a disk wait durable: after it the database
    file alone (without its WAL) holds every entry."""
    import shutil
    import sqlite3

    path = tmp_path / "meta.db"
    entries = [PhysEntry(f"{n:054d}", "dn1", "mysql-bin.000001", 100 * n, "bank_p00001",
                         f"CREATE TABLE `t_{n}` (`id` bigint)") for n in range(1, 6)]

    def rows_in_the_file_alone() -> int:
        alone = tmp_path / f"alone-{len(list(tmp_path.iterdir()))}.db"
        shutil.copyfile(path, alone)                      # no -wal next to it
        con = sqlite3.connect(alone)
        try:
            return con.execute("SELECT COUNT(*) FROM binlog_phy_ddl_history").fetchone()[0]
        finally:
            con.close()
    with MetaStore.open(path) as store:
        store.sync()                                      # the tables themselves in the file
        assert rows_in_the_file_alone() == 0
        for e in entries:
            store.add(e, sync=False)
        assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
        assert rows_in_the_file_alone() == 0              # in the WAL only
        store.sync()
        assert rows_in_the_file_alone() == 5
        assert store.history() == entries


def test_the_pipeline_syncs_the_meta_store_before_it_writes_what_follows_a_ddl(tmp_path, monkeypatch):
    """A build defers the meta store's disk waits (a physical DDL is committed without one) and syncs
    it before each write of the global binlog: every write comes after a sync that follows the last
    entry a restart would need. The bytes and the stored history are those of an undeferred build."""
    import dumper.global_binlog as gb
    from gbinlog.local_engine import build
    from schema_shaper.meta_store import MetaStore as Store
    from schema_shaper.shaper import Shaper as RealShaper

    fixture = FIXTURES / NAME
    dirs = sorted((d for d in fixture.iterdir() if d.is_dir()), key=lambda d: int(d.name[2:]))
    plain = tmp_path / "plain"
    monkeypatch.setattr(RealShaper, "defer_store_sync", lambda self: (lambda: None))
    build(dirs, plain)
    monkeypatch.undo()

    log: list[tuple] = []
    real_store, real_sync, real_write = RealShaper._store, Store.sync, gb._write_all

    def store(self, entry, needed):
        log.append(("needed" if needed else "store", entry.vtso))
        return real_store(self, entry, needed)

    def sync(self):
        log.append(("sync",))
        return real_sync(self)

    def write(fd, data):
        log.append(("write", len(data)))
        return real_write(fd, data)
    monkeypatch.setattr(RealShaper, "_store", store)
    monkeypatch.setattr(Store, "sync", sync)
    monkeypatch.setattr(gb, "_write_all", write)
    deferred = tmp_path / "deferred"
    build(dirs, deferred)
    needed = [i for i, e in enumerate(log) if e[0] == "needed"]
    assert len(needed) > 10 and any(e[0] == "sync" for e in log)
    for i, e in enumerate(log):
        if e[0] == "write":
            last_needed = max((n for n in needed if n < i), default=None)
            assert last_needed is None or any(log[k][0] == "sync" for k in range(last_needed + 1, i)), (i, log[max(0, i - 5):i + 1])
    assert sum(e[0] == "sync" for e in log) < len(needed)      # fewer disk waits than entries
    for f in ("binlog.000001", "binlog.index"):
        assert (deferred / f).read_bytes() == (plain / f).read_bytes()
    with Store.open(plain / "meta.db") as a, Store.open(deferred / "meta.db") as b:
        assert a.history() == b.history()


def test_sync_with_a_reader_holding_the_wal_syncs_the_wal_file(tmp_path, monkeypatch):
    """A reader in another connection (the endpoint's catalog) keeps the checkpoint from copying the
    newest entries: ``sync`` then syncs the WAL file itself."""
    import os
    import sqlite3

    import schema_shaper.meta_store as meta_store

    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)
    monkeypatch.setattr(meta_store.os, "fsync", fsync)
    path = tmp_path / "meta.db"
    with MetaStore.open(path) as store:
        store.sync()
        assert synced == []                           # the checkpoint copied and synced everything
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM binlog_phy_ddl_history").fetchone()   # a snapshot held
        store.add(PhysEntry(f"{1:054d}", "dn1", "mysql-bin.000001", 100, "bank_p00001", "CREATE TABLE `t` (`id` int)"),
                  sync=False)
        store.sync()
        assert synced == [str(path) + "-wal"]
        reader.execute("COMMIT")
        reader.close()
