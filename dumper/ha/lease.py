"""The leader lease: one row in the shared meta store, with a fencing epoch.

The rules, each one conditional statement the store applies atomically (so two members racing
cannot both win; ``rowcount`` says who did):

- ``acquire``: a member takes the lease only when no one holds it or the holder's lease has
  expired (``expires_ms <= now``); the epoch goes up by one on every acquisition. A member never
  takes over an unexpired lease, not even one held under its own name (a restarted member waits
  its old lease out: the old process may still be alive).
- ``renew``: the holder pushes ``expires_ms`` out, only while the row still names it *with its
  epoch* and the lease has not expired. A stale epoch, an expired lease or another holder: refused.
- ``release``: the holder ends its lease early (step-down); a stale epoch changes nothing.
- ``request_step_down``: anyone (``gbinlog ha step-down``) asks the holder of an epoch to hand over;
  the holder sees it at its next renewal and releases.

Fencing: the member keeps a local deadline, ``lease_ms`` (less a drift margin) after the moment
it *sent* the acquire/renew, on its monotonic clock. The store set ``expires_ms`` from its clock
reading taken after that moment, so the local deadline passes before the store lets anyone else
acquire: a member that lost the lease has stopped writing before the next leader may start.
``Fence.check()`` is what a writer calls before each durable write.

``now`` comes from the store's clock (``UNIX_TIMESTAMP(NOW(6))`` on MySQL/MariaDB; members on one
host share the clock of a SQLite store), so member hosts need no synchronised clocks; tests pass
a fake clock.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from schema_shaper.meta_store import mask_url

LEASE_NAME = "dumper"
DRIFT_MARGIN = 0.05    # the local deadline is 5 % short of the lease: clock rates differ a little


class LeaseStoreError(Exception):
    """The meta store holding the lease cannot be reached or used."""


class FencedOut(Exception):
    """This member no longer holds the lease (expired, lost or stepped down): it must not write."""


@dataclass(frozen=True)
class LeaseRow:
    holder: str
    address: str
    epoch: int
    expires_ms: int

    def live(self, now_ms: int) -> bool:
        return bool(self.holder) and self.expires_ms > now_ms


@dataclass(frozen=True)
class MemberRow:
    member: str
    address: str
    role: str
    epoch: int
    file: str
    pos: int
    vtso: str
    seen_ms: int


def _ddl(mysql: bool) -> list[str]:
    text = "VARCHAR(255)" if mysql else "TEXT"
    return [
        f"CREATE TABLE IF NOT EXISTS gbinlog_ha_lease (name {text} PRIMARY KEY, holder {text} NOT NULL, "
        f"address {text} NOT NULL, epoch BIGINT NOT NULL, expires_ms BIGINT NOT NULL, "
        "step_down BIGINT NOT NULL DEFAULT 0)",
        f"CREATE TABLE IF NOT EXISTS gbinlog_ha_member (member {text} PRIMARY KEY, address {text} NOT NULL, "
        f"role {text} NOT NULL, epoch BIGINT NOT NULL, file {text} NOT NULL, pos BIGINT NOT NULL, "
        f"vtso {text} NOT NULL, seen_ms BIGINT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS gbinlog_ha_purge (name {text} PRIMARY KEY, keep_from {text} NOT NULL, "
        f"member {text} NOT NULL, epoch BIGINT NOT NULL, at_ms BIGINT NOT NULL)",
    ]


class LeaseStore:
    """The lease and member rows in SQLite (``sqlite:///path`` or a path) or MySQL/MariaDB
    (``mysql://user:pw@host:port/db``, ``?unix_socket=``). One connection, used under a lock."""

    def __init__(self, conn: Any, *, mysql: bool, where: str, clock: Callable[[], int] | None = None,
                 reconnect: Callable[[], Any] | None = None) -> None:
        self.conn = conn
        self._reconnect = reconnect      # MySQL: a new connection after one failed (the store came back)
        self.mysql = mysql
        self.where = where
        self._p = "%s" if mysql else "?"
        self._lock = threading.Lock()
        self._clock = clock
        for sql in _ddl(mysql):
            self._execute(sql)
        ignore = "INSERT IGNORE" if mysql else "INSERT OR IGNORE"
        self._execute(f"{ignore} INTO gbinlog_ha_lease VALUES ({self._p}, '', '', 0, 0, 0)", (LEASE_NAME,))
        self._execute(f"{ignore} INTO gbinlog_ha_purge VALUES ({self._p}, '', '', 0, 0)", (LEASE_NAME,))

    # -- opening ------------------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | os.PathLike, *, clock: Callable[[], int] | None = None) -> LeaseStore:
        text = os.fspath(url)
        try:
            if text.startswith(("mysql://", "mariadb://", "mysql+pymysql://")):
                return cls._open_mysql(text, clock)
            path = text.split("://", 1)[1] if text.startswith("sqlite") else text
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
            conn.execute("PRAGMA journal_mode=WAL")
            return cls(conn, mysql=False, where=path, clock=clock)
        except LeaseStoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - sqlite3 / pymysql errors alike, one typed error
            raise LeaseStoreError(f"lease store {mask_url(text)}: {exc}") from None

    @classmethod
    def _open_mysql(cls, url: str, clock: Callable[[], int] | None) -> LeaseStore:
        import pymysql
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        database = unquote(parts.path.lstrip("/")) or "gbinlog_meta"
        kwargs: dict[str, Any] = {"user": unquote(parts.username or "root"), "password": unquote(parts.password or ""),
                                  "charset": "utf8mb4", "autocommit": True, "connect_timeout": 2,
                                  "client_flag": pymysql.constants.CLIENT.FOUND_ROWS,
                                  "read_timeout": 2, "write_timeout": 2}
        if "unix_socket" in query:
            kwargs["unix_socket"] = query["unix_socket"]
        else:
            kwargs["host"] = parts.hostname or "127.0.0.1"
            kwargs["port"] = parts.port or 3306
        with pymysql.connect(**kwargs) as first, first.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database.replace('`', '``')}`")
        connect = lambda: pymysql.connect(**kwargs, database=database)  # noqa: E731
        return cls(connect(), mysql=True, clock=clock, reconnect=connect,
                   where=f"{parts.scheme}://{parts.hostname or query.get('unix_socket', '')}/{database}")

    def close(self) -> None:
        try:
            if self.conn is not None:
                self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    # -- plumbing -----------------------------------------------------------------------------------
    def _execute(self, sql: str, args: tuple = ()) -> tuple[int, list[tuple]]:
        with self._lock:
            try:
                if self.mysql:
                    if self.conn is None:
                        self.conn = self._reconnect()
                    with self.conn.cursor() as cur:
                        n = cur.execute(sql, args)
                        return n, list(cur.fetchall())
                cur = self.conn.execute(sql, args)
                return cur.rowcount, cur.fetchall()
            except Exception as exc:  # noqa: BLE001 - one typed error for the member loop
                if self.mysql and self._reconnect is not None:
                    self.close()
                    self.conn = None                      # the next call connects anew
                raise LeaseStoreError(f"lease store {self.where}: {exc}") from None

    def now_ms(self) -> int:
        """The store's clock, in ms (the one clock every member's lease is measured on)."""
        if self._clock is not None:
            return self._clock()
        if self.mysql:
            return int(float(self._execute("SELECT UNIX_TIMESTAMP(NOW(6))")[1][0][0]) * 1000)
        return int(time.time() * 1000)

    # -- the rules ---------------------------------------------------------------------------------
    def read(self) -> LeaseRow:
        rows = self._execute("SELECT holder, address, epoch, expires_ms FROM gbinlog_ha_lease WHERE name = "
                             f"{self._p}", (LEASE_NAME,))[1]
        holder, address, epoch, expires = rows[0]
        return LeaseRow(holder, address, int(epoch), int(expires))

    def acquire(self, member: str, address: str, lease_ms: int, now_ms: int) -> int | None:
        """Take a free or expired lease: the new epoch, or None when someone holds it."""
        p = self._p
        n, _ = self._execute(f"UPDATE gbinlog_ha_lease SET holder = {p}, address = {p}, epoch = epoch + 1, "
                             f"expires_ms = {p} WHERE name = {p} AND (holder = '' OR expires_ms <= {p})",
                             (member, address, now_ms + lease_ms, LEASE_NAME, now_ms))
        if n != 1:
            return None
        row = self.read()
        return row.epoch if row.holder == member else None

    def renew(self, member: str, epoch: int, lease_ms: int, now_ms: int) -> bool:
        """Extend the holder's unexpired lease; False for a stale epoch, another holder or an expired lease."""
        p = self._p
        n, _ = self._execute(f"UPDATE gbinlog_ha_lease SET expires_ms = {p} WHERE name = {p} AND holder = {p} "
                             f"AND epoch = {p} AND expires_ms > {p}",
                             (now_ms + lease_ms, LEASE_NAME, member, epoch, now_ms))
        return n == 1

    def release(self, member: str, epoch: int) -> bool:
        """End the holder's lease now (step-down); the epoch stays, the next acquire raises it."""
        p = self._p
        n, _ = self._execute(f"UPDATE gbinlog_ha_lease SET holder = '', expires_ms = 0 WHERE name = {p} "
                             f"AND holder = {p} AND epoch = {p}", (LEASE_NAME, member, epoch))
        return n == 1

    def request_step_down(self, epoch: int) -> bool:
        """Ask the holder of ``epoch`` to hand over (False: that epoch no longer holds the lease)."""
        p = self._p
        n, _ = self._execute(f"UPDATE gbinlog_ha_lease SET step_down = {p} WHERE name = {p} AND epoch = {p} "
                             "AND holder <> ''", (epoch, LEASE_NAME, epoch))
        return n == 1

    def step_down_requested(self, epoch: int) -> bool:
        rows = self._execute(f"SELECT step_down FROM gbinlog_ha_lease WHERE name = {self._p}", (LEASE_NAME,))[1]
        return int(rows[0][0]) == epoch

    # -- the purge horizon: the leader purged every file before it; followers follow -----------------
    def record_purge(self, member: str, epoch: int, keep_from: str, now_ms: int) -> bool:
        """The holder of an unexpired lease under ``epoch`` records that it purges every file before
        ``keep_from``. False (nothing recorded) for anyone else: a fenced ex-leader cannot move it."""
        p = self._p
        n, _ = self._execute(f"UPDATE gbinlog_ha_purge SET keep_from = {p}, member = {p}, epoch = {p}, at_ms = {p} "
                             f"WHERE name = {p} AND EXISTS (SELECT 1 FROM gbinlog_ha_lease WHERE name = {p} "
                             f"AND holder = {p} AND epoch = {p} AND expires_ms > {p})",
                             (keep_from, member, epoch, now_ms, LEASE_NAME, LEASE_NAME, member, epoch, now_ms))
        return n == 1

    def purge_horizon(self) -> tuple[str, str, int]:
        """(keep_from, member, epoch) of the last recorded purge; keep_from '' before any."""
        rows = self._execute(f"SELECT keep_from, member, epoch FROM gbinlog_ha_purge WHERE name = {self._p}",
                             (LEASE_NAME,))[1]
        keep_from, member, epoch = rows[0]
        return keep_from, member, int(epoch)

    # -- member rows (what `gbinlog status` shows of every member) ----------------------------------
    def report(self, row: MemberRow) -> None:
        p = self._p
        verb = "REPLACE" if self.mysql else "INSERT OR REPLACE"
        self._execute(f"{verb} INTO gbinlog_ha_member VALUES ({', '.join([p] * 8)})",
                      (row.member, row.address, row.role, row.epoch, row.file, row.pos, row.vtso, row.seen_ms))

    def members(self) -> list[MemberRow]:
        rows = self._execute("SELECT member, address, role, epoch, file, pos, vtso, seen_ms FROM gbinlog_ha_member "
                             "ORDER BY member")[1]
        return [MemberRow(m, a, r, int(e), f, int(pos), v, int(s)) for m, a, r, e, f, pos, v, s in rows]


class Fence:
    """This member's right to write: valid while it holds the lease under ``epoch`` and its local
    deadline (monotonic) has not passed. ``check()`` before each durable write."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._mono = monotonic
        self._lock = threading.Lock()
        self.epoch = 0
        self.deadline = 0.0          # monotonic seconds; 0 = not the leader

    def grant(self, epoch: int, sent_at: float, lease_ms: int) -> None:
        """The store accepted an acquire/renew sent at ``sent_at`` (monotonic, before the request)."""
        with self._lock:
            self.epoch = epoch
            self.deadline = sent_at + lease_ms * (1 - DRIFT_MARGIN) / 1000

    def revoke(self) -> None:
        with self._lock:
            self.deadline = 0.0

    def valid(self) -> bool:
        with self._lock:
            return self.deadline > 0 and self._mono() < self.deadline

    def check(self) -> int:
        """The epoch, or ``FencedOut`` when this member may not write."""
        with self._lock:
            if self.deadline > 0 and self._mono() < self.deadline:
                return self.epoch
            epoch = self.epoch
        raise FencedOut(f"not the leader (epoch {epoch}: lease lost or expired)")
