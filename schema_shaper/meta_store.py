"""The meta store: logical meta history (marks and snapshot rows, by vtso) and physical DDL history
(by DN + position), polardbx-cdc's ``binlog_logic_meta_history`` / ``binlog_phy_ddl_history``.

``MetaStore.open(target)``: a path → SQLite file (``meta.db`` in the output dir by default); a URL
``mysql://user:pass@host:port/db`` (or ``mariadb://``; ``?unix_socket=/path`` for a socket) → that
MySQL/MariaDB database through pymysql, created if missing. Inserts are idempotent (a restart replays
marks and physical DDLs already stored); ``history(upto)`` returns both kinds merged in vtso order,
which is the order the shaper applies them in, so a ``Shaper`` rebuilt from it is in the state it
was in after ``upto``.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SNAPSHOT = 1
DDL = 2

# scheme://user:password@…: the password runs to the last "@" (an unencoded "@" or "/" in it must not
# leave part of it in the clear).
_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@]*):(.*)@", re.DOTALL)


def mask_url(url: str | os.PathLike) -> str:
    """``url`` as errors and logs show it: the password replaced by ``***``
    (``mysql://gb:***@meta:3306/gbinlog_meta``); a URL without a password, or a path, is unchanged."""
    return _URL_PASSWORD.sub(r"\1:***@", os.fspath(url), count=1)


class MetaStoreUnavailable(Exception):
    """The meta store cannot be opened (a server that does not answer, a full disk, …): ``str()`` is
    its path or URL (without the password) and the reason, for the caller to prefix with its key."""

    def __init__(self, target: str, exc: BaseException) -> None:
        self.target = mask_url(target)
        self.is_url = "://" in target
        # pymysql's (code, "text") → the text; others as they print
        args = getattr(exc, "args", ())
        self.reason = " ".join(str(args[-1] if len(args) == 2 and isinstance(args[0], int) else exc).split())
        super().__init__(f"{self.target}: {self.reason}")

    @property
    def advice(self) -> str:
        """What the operator can do about it."""
        if self.is_url:
            return "check the URL, that the server runs and that it takes the user and password"
        if _free_bytes(Path(self.target).parent) < 1 << 20:
            return "its file system is full: free space there"
        return "check that the path can be created and written"


def _free_bytes(directory: Path) -> int:
    """Bytes free for us on the file system of ``directory`` (or of its nearest existing parent)."""
    for d in (directory, *directory.parents):
        try:
            st = os.statvfs(d)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return 0


@dataclass(frozen=True, slots=True)
class MarkEntry:
    """One logical meta history row: a DDL mark (kind 2) or an initial-snapshot table (kind 1).
    ``ddl`` is the mark's DDL_SQL, ``topology`` its META_INFO JSON, ``ext`` its EXT JSON;
    ``source`` says where it was read (``dn:file:offset``) for messages."""

    vtso: str
    db: str
    table: str
    sql_kind: str
    ddl: str
    topology: str | None = None
    ext: str | None = None
    kind: int = DDL
    visibility: int = 1
    record_id: int | None = None
    job_id: int | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class PhysEntry:
    """One physical DDL of DN ``dn`` at ``file``:``offset`` (default db ``db``)."""

    vtso: str
    dn: str
    file: str
    offset: int
    db: str
    ddl: str


Entry = MarkEntry | PhysEntry

_LOGIC_COLUMNS = ("tso", "db_name", "table_name", "sql_kind", "ddl", "topology", "ext_info", "type",
                  "visibility", "ddl_record_id", "ddl_job_id", "source")
_PHY_COLUMNS = ("tso", "storage_inst_id", "binlog_file", "pos", "db_name", "ddl")


def _ddl(auto: str, text: str, key_text: str) -> list[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS binlog_logic_meta_history (
            id {auto},
            tso VARCHAR(64) NOT NULL,
            db_name VARCHAR(200) NOT NULL,
            table_name VARCHAR(200) NOT NULL,
            sql_kind VARCHAR(64) NOT NULL,
            ddl {text} NOT NULL,
            topology {text},
            ext_info {text},
            type SMALLINT NOT NULL,
            visibility SMALLINT NOT NULL,
            ddl_record_id BIGINT,
            ddl_job_id BIGINT,
            source {key_text},
            UNIQUE (tso, db_name, table_name))""",
        f"""CREATE TABLE IF NOT EXISTS binlog_phy_ddl_history (
            id {auto},
            tso VARCHAR(64) NOT NULL,
            storage_inst_id VARCHAR(64) NOT NULL,
            binlog_file VARCHAR(128) NOT NULL,
            pos BIGINT NOT NULL,
            db_name VARCHAR(200) NOT NULL,
            ddl {text} NOT NULL,
            UNIQUE (storage_inst_id, binlog_file, pos))""",
    ]


def _fsync_file(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)    # the file's data, whoever wrote it
    finally:
        os.close(fd)


class MetaStore:
    """Logical and physical schema history in SQLite or MySQL/MariaDB (see the module doc)."""

    def __init__(self, conn: Any, *, mysql: bool, where: str) -> None:
        self.conn = conn
        self.mysql = mysql
        self.where = where
        self._p = "%s" if mysql else "?"
        self._synced = True     # SQLite: commits wait for the disk (synchronous=FULL, as opened)
        self._ignore = "INSERT IGNORE" if mysql else "INSERT OR IGNORE"
        statements = _ddl("BIGINT AUTO_INCREMENT PRIMARY KEY", "LONGTEXT", "VARCHAR(255)") if mysql else \
            _ddl("INTEGER PRIMARY KEY AUTOINCREMENT", "TEXT", "TEXT")
        for sql in statements:
            self._execute(sql)

    # -- opening ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, target: str | os.PathLike) -> MetaStore:
        """The store at ``target`` (a path or URL); ``MetaStoreUnavailable`` when it cannot be opened."""
        text = os.fspath(target)
        mysql = text.startswith(("mysql://", "mariadb://", "mysql+pymysql://"))
        try:
            return cls.open_mysql(text) if mysql else cls.open_sqlite(text)
        except (sqlite3.Error, OSError) as exc:
            raise MetaStoreUnavailable(text, exc) from exc
        except Exception as exc:
            import pymysql

            if isinstance(exc, pymysql.MySQLError):
                raise MetaStoreUnavailable(text, exc) from exc
            raise

    @classmethod
    def open_sqlite(cls, path: str | os.PathLike) -> MetaStore:
        path = Path(path)
        if str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return cls(conn, mysql=False, where=str(path))

    @classmethod
    def memory(cls) -> MetaStore:
        return cls.open_sqlite(":memory:")

    @classmethod
    def open_mysql(cls, url: str) -> MetaStore:
        import pymysql

        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        database = unquote(parts.path.lstrip("/")) or "gbinlog_meta"
        kwargs: dict[str, Any] = {"user": unquote(parts.username or "root"),
                                  "password": unquote(parts.password or ""), "charset": "utf8mb4",
                                  "autocommit": True}
        if "unix_socket" in query:
            kwargs["unix_socket"] = query["unix_socket"]
        else:
            kwargs["host"] = parts.hostname or "127.0.0.1"
            kwargs["port"] = parts.port or 3306
        conn = pymysql.connect(**kwargs)
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database.replace('`', '``')}` "
                        "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        conn.select_db(database)
        where = f"{parts.scheme}://{parts.hostname or query.get('unix_socket', '')}/{database}"
        return cls(conn, mysql=True, where=where)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> MetaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- io -----------------------------------------------------------------------------------------
    def _execute(self, sql: str, args: tuple = ()) -> list[tuple]:
        if self.mysql:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        return list(self.conn.execute(sql, args).fetchall())

    def add(self, entry: Entry, *, sync: bool = True) -> None:
        """Store one history entry; an entry already stored (same vtso/db/table, or same DN
        position) is left as it is. ``sync=False``: the entry changes nothing of the model (a
        physical DDL of a system database, a physical CREATE DATABASE …), so a restart without it
        is in the same state: SQLite commits it without waiting for the disk — it is in the WAL, safe
        from a crash of this process, and the next synced commit makes it durable too. At 32 DNs
        two thirds of the physical DDLs are such, and a wait for the disk each was most of their
        cost."""
        if not self.mysql and sync != self._synced:
            self.conn.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
            self._synced = sync
        p = self._p
        if isinstance(entry, MarkEntry):
            values = (entry.vtso, entry.db, entry.table, entry.sql_kind, entry.ddl, entry.topology,
                      entry.ext, entry.kind, entry.visibility, entry.record_id, entry.job_id, entry.source)
            sql = (f"{self._ignore} INTO binlog_logic_meta_history ({', '.join(_LOGIC_COLUMNS)}) "
                   f"VALUES ({', '.join([p] * len(values))})")
        else:
            values = (entry.vtso, entry.dn, entry.file, entry.offset, entry.db, entry.ddl)
            sql = (f"{self._ignore} INTO binlog_phy_ddl_history ({', '.join(_PHY_COLUMNS)}) "
                   f"VALUES ({', '.join([p] * len(values))})")
        self._execute(sql, values)

    def sync(self) -> None:
        """Make every entry stored so far durable (those added with ``sync=False`` too). SQLite: a WAL
        checkpoint, which with synchronous=NORMAL syncs the WAL, copies it into the database and syncs
        that (https://www.sqlite.org/wal.html); when a reader elsewhere (the endpoint's catalog) keeps
        it from copying everything, the WAL file is synced here. MySQL/MariaDB: each insert was
        committed already."""
        if self.mysql or self.where == ":memory:":
            return
        busy, frames, copied = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        if frames < 0:                      # not in WAL mode (a file system without it)
            _fsync_file(self.where)
        elif busy or copied < frames:
            _fsync_file(self.where + "-wal")

    def history(self, upto: str | None = None) -> list[Entry]:
        """Every entry with vtso ≤ ``upto`` (all when None), in apply order: by vtso, entries of one
        vtso (snapshot rows) in the order they were stored."""
        cond, args = (f" WHERE tso <= {self._p}", (upto,)) if upto is not None else ("", ())
        marks = [(r[0], 0, r[-1], MarkEntry(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                                            r[10], r[11] or ""))
                 for r in self._execute(f"SELECT {', '.join(_LOGIC_COLUMNS)}, id FROM "
                                        f"binlog_logic_meta_history{cond}", args)]
        phys = [(r[0], 1, r[-1], PhysEntry(r[0], r[1], r[2], int(r[3]), r[4], r[5]))
                for r in self._execute(f"SELECT {', '.join(_PHY_COLUMNS)}, id FROM "
                                       f"binlog_phy_ddl_history{cond}", args)]
        return [e for *_, e in sorted(marks + phys, key=lambda x: (x[0], x[1], x[2]))]

    def last_vtso(self) -> str | None:
        rows = self._execute("SELECT MAX(tso) FROM binlog_logic_meta_history")
        rows += self._execute("SELECT MAX(tso) FROM binlog_phy_ddl_history")
        found = [r[0] for r in rows if r[0] is not None]
        return max(found) if found else None
