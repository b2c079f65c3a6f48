"""A small DN binlog writer for the ordering tests (the DN 8.0 dialect, docs/formats.md), and
checks that what it writes has the group shapes of the real captures.

Groups: ``GCN GTID statements``. XA prepare: ``XA START`` [ROWS_QUERY] TABLE_MAP WRITE_ROWS …
``XA END`` XA_PREPARE; commit: GCN(0x04, commit TSO) GTID ``XA COMMIT``; 1PC: ``BEGIN`` … XID;
physical DDL: one QUERY. Every group records the position of its XA START / BEGIN / query, which is
what the extractor reports as a transaction's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from binlog import BinlogWriter, read_all
from binlog.columns import Column
from binlog.constants import ColumnType, EventFlag, EventType, GcnFlag, post_header_table
from binlog.events import encode_body

E = EventType
INT_COLUMNS = [Column(ColumnType.LONG, nullable=False, name="id"), Column(ColumnType.LONG, name="v")]
GCN_PREPARE = GcnFlag.HAVE_GCN | GcnFlag.HAVE_SNAPSHOT_SEQ
GCN_COMMIT = GcnFlag.HAVE_GCN | GcnFlag.HAVE_COMMITTED_SEQ | GcnFlag.GCN_ASSIGNED
GCN_LOCAL = GcnFlag.HAVE_GCN


def xid_text(txn_id: int, group: str, format_id: int = 1, primary_uid: int = 0x9D11C57D) -> str:
    gtrid = f"drds-{txn_id:x}@{primary_uid:x}".encode()
    return f"X'{gtrid.hex()}',X'{group.encode().hex()}',{format_id}"


def hint(seq: int, sub: int = 0, trace: int = 0x1881C1536F401000, server: str = "") -> str:
    return f"/*DRDS /127.0.0.1/{trace:x}-{seq}/{sub}/{server}/ */"


@dataclass
class Stmt:
    """One physical statement: optional hint, then TABLE_MAP + one rows event."""

    db: str
    table: str
    rows: list[list[int]] = field(default_factory=lambda: [[1, 1]])
    hint: str | None = None
    kind: int = E.WRITE_ROWS
    table_map_only: bool = False  # a second TABLE_MAP of the same statement (no rows after it)


class DnWriter:
    """Writes one DN's ``mysql-bin.NNNNNN`` + ``mysql-bin.index`` into ``root/<dn_id>``."""

    def __init__(self, root: Path, dn_id: str, *, server_id: int = 1, max_file_size: int = 1 << 30) -> None:
        self.dn_id = dn_id
        self.dir = Path(root) / dn_id
        self.w = BinlogWriter(self.dir, base="mysql-bin", server_id=server_id,
                              server_version="8.0.32-X-Cluster-2.4.0-20240101-log",
                              post_header_len=post_header_table(41), max_file_size=max_file_size)
        self.gno = 0
        self.table_ids: dict[tuple[str, str], int] = {}
        self.ts = 1_700_000_000
        self.append(E.PREVIOUS_GTIDS, encode_body(E.PREVIOUS_GTIDS, sids=[]))

    # -- events -----------------------------------------------------------------------------------
    def append(self, type_code: int, payload: bytes, flags: int = 0) -> int:
        return self.w.append(type_code, payload, timestamp=self.ts, flags=flags)

    @property
    def file(self) -> str:
        return self.w.file_name

    def gcn(self, flags: int, value: int) -> int:
        return self.append(E.GCN, encode_body(E.GCN, flags=flags, gcn=value if flags & 1 else None,
                                              n_branch=None, n_local_branch=None), EventFlag.IGNORABLE)

    def gtid(self) -> int:
        self.gno += 1
        return self.append(E.GTID, encode_body(
            E.GTID, flags=1, sid=b"\x11" * 16, gno=self.gno, lt_type=2, last_committed=0,
            sequence_number=self.gno, immediate_commit_timestamp=0, original_commit_timestamp=None,
            transaction_length=0, immediate_server_version=80032, original_server_version=None,
            commit_group_ticket=None, extra=b""))

    def query(self, text: str, db: str = "", status_vars: bytes | None = None) -> int:
        return self.append(E.QUERY, encode_body(E.QUERY, thread_id=7, exec_time=0, error_code=0,
                                                status_vars=status_vars, db=db, query=text))

    def rows_query(self, text: str) -> int:
        return self.append(E.ROWS_QUERY, encode_body(E.ROWS_QUERY, query=text.encode()), EventFlag.IGNORABLE)

    def statement(self, s: Stmt) -> None:
        if s.hint is not None:
            self.rows_query(s.hint)
        tid = self.table_ids.setdefault((s.db, s.table), 100 + len(self.table_ids))
        self.append(E.TABLE_MAP, encode_body(E.TABLE_MAP, table_id=tid, db=s.db, table=s.table,
                                             columns=INT_COLUMNS))
        if s.table_map_only:
            return
        if s.kind in (E.UPDATE_ROWS, E.UPDATE_ROWS_V1):
            rows = [(r, r) for r in s.rows]
        else:
            rows = s.rows
        self.append(s.kind, encode_body(s.kind, table_id=tid, columns=INT_COLUMNS, rows=rows))

    def xa_prepare_event(self, xid: str, one_phase: bool) -> int:
        g, b, f = (p.strip() for p in xid.split(","))
        return self.append(E.XA_PREPARE, encode_body(
            E.XA_PREPARE, one_phase=int(one_phase), format_id=int(f),
            gtrid=bytes.fromhex(g[2:-1]), bqual=bytes.fromhex(b[2:-1])))

    # -- groups -----------------------------------------------------------------------------------
    def prepare(self, xid: str, stmts: list[Stmt], snapshot: int = 1, db: str = "d_p00000") -> int:
        """XA prepare group; returns the XA START position."""
        self.gcn(GCN_PREPARE, snapshot)
        self.gtid()
        start = self.query(f"XA START {xid}", db)
        for s in stmts:
            self.statement(s)
        self.query(f"XA END {xid}", db)
        self.xa_prepare_event(xid, False)
        return start

    def commit(self, xid: str, tso: int | None, db: str = "d_p00000") -> int:
        """XA commit group (GCN 0x04 with the commit TSO, or an automatic GCN without it)."""
        if tso is None:
            self.gcn(GCN_LOCAL, 5)
        else:
            self.gcn(GCN_COMMIT, tso)
        self.gtid()
        return self.query(f"XA COMMIT {xid}", db)

    def rollback(self, xid: str, db: str = "d_p00000") -> int:
        self.gtid()
        return self.query(f"XA ROLLBACK {xid}", db)

    def one_phase(self, xid: str, stmts: list[Stmt], tso: int | None = None, db: str = "d_p00000") -> int:
        """``XA COMMIT … ONE PHASE``: the whole branch in one group ending in XA_PREPARE(one_phase=1)."""
        self.gcn(GCN_PREPARE | (GCN_COMMIT if tso else 0), tso or 1)
        self.gtid()
        start = self.query(f"XA START {xid}", db)
        for s in stmts:
            self.statement(s)
        self.query(f"XA END {xid}", db)
        self.xa_prepare_event(xid, True)
        return start

    def local(self, stmts: list[Stmt], gcn_flags: int = GCN_LOCAL, db: str = "d_p00000") -> int:
        """A 1PC / autocommit transaction: BEGIN … XID; returns the BEGIN position."""
        self.gcn(gcn_flags, 3)
        self.gtid()
        start = self.query("BEGIN", db)
        for s in stmts:
            self.statement(s)
        self.append(E.XID, encode_body(E.XID, xid=self.gno))
        return start

    def ddl(self, sql: str, db: str = "d_p00000") -> int:
        self.gcn(GCN_LOCAL, 4)
        self.gtid()
        return self.query(sql, db)

    def rotate(self) -> str:
        return self.w.rotate(timestamp=self.ts)

    def close(self) -> Path:
        self.w.close()
        return self.dir


def test_writer_group_shapes(tmp_path):
    """The writer's groups have the DN 8.0 shapes and read back with the binlog reader."""
    w = DnWriter(tmp_path, "dn0")
    xid = xid_text(0x123, "D_P00000_GROUP")
    start = w.prepare(xid, [Stmt("d_p00000", "t_abcd", hint=hint(1))])
    w.commit(xid, 7 << 22)
    w.local([Stmt("d_p00000", "t_abcd")])
    w.close()
    events = read_all(tmp_path / "dn0" / "mysql-bin.000001")
    types = [e.type_code for e in events]
    assert types == [E.FORMAT_DESCRIPTION, E.PREVIOUS_GTIDS,
                     E.GCN, E.GTID, E.QUERY, E.ROWS_QUERY, E.TABLE_MAP, E.WRITE_ROWS, E.QUERY, E.XA_PREPARE,
                     E.GCN, E.GTID, E.QUERY,
                     E.GCN, E.GTID, E.QUERY, E.TABLE_MAP, E.WRITE_ROWS, E.XID]
    assert events[4].pos == start
    assert events[4].body.query.startswith(b"XA START X'647264732d313233")
    assert events[10].body.flags == GCN_COMMIT and events[10].body.gcn == 7 << 22
    assert (tmp_path / "dn0" / "mysql-bin.index").read_text() == "./mysql-bin.000001\n"
