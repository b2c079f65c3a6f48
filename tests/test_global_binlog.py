"""The global binlog writer (docs/formats.md): event layout per transaction,
heartbeats, rotation, index, determinism, disk full; ``mariadb-binlog`` reads what it writes.

Transactions here are built by hand (``dml``, ``ddl``, ``heartbeat``); the end-to-end build over
the fixtures is in ``test_build.py``.
"""

from __future__ import annotations

import errno
import re
import zlib

import pytest

from binlog import EventType, read_all
from binlog.columns import Column
from binlog.constants import ColumnType, EventFlag
from binlog.events import encode_body
from dumper import global_binlog as gb
from dumper.global_binlog import (
    DiskFull,
    DumperError,
    GlobalBinlog,
    encode_txn,
    render_file,
    xid_of,
)
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn
from tests.mariadb import mariadb_binlog

E = EventType
COLUMNS = [Column(ColumnType.LONGLONG, nullable=False, name="id"), Column(ColumnType.VARCHAR, 80, name="v")]
T0 = 1_717_200_000  # 2024-06-01 00:00:00 UTC, a multiple of 30


def tso_at(second: int, logical: int = 0) -> int:
    return ((second * 1000) << 22) | logical


def vtso(second: int, n: int, seq: int = 0, storage: str = "000000") -> str:
    return f"{tso_at(second, n):019d}{n:019d}{seq:010d}{storage}"


def block(db: str, table: str, rows: list[tuple], *, table_id: int = 70, hint: str | None = None,
          kind: int = E.WRITE_ROWS) -> LogicalBlock:
    tmap = encode_body(E.TABLE_MAP, table_id=table_id, db=db, table=table, columns=COLUMNS)
    if kind == E.UPDATE_ROWS:
        body_rows = [(r, (r[0], r[1] + "!")) for r in rows]
    else:
        body_rows = rows
    payload = encode_body(kind, table_id=table_id, columns=COLUMNS, rows=body_rows)
    return LogicalBlock(db, table, tmap, [(kind, payload)], hint)


def dml(second: int, n: int, blocks: list[LogicalBlock] | None = None, **kw) -> LogicalTxn:
    blocks = blocks if blocks is not None else [block("shop", "orders", [(n, f"row {n}")])]
    return LogicalTxn(vtso(second, n), LogicalKind.DML, blocks, **kw)


def ddl(second: int, n: int, sql: str, db: str = "shop") -> LogicalTxn:
    payload = encode_body(E.QUERY, thread_id=0, exec_time=0, error_code=0,
                          status_vars=b"", db=db, query=sql.encode())
    return LogicalTxn(vtso(second, n), LogicalKind.DDL, query=payload, db=db, sql=sql)


def heartbeat(second: int, n: int) -> LogicalTxn:
    return LogicalTxn(vtso(second, n), LogicalKind.HEARTBEAT)


def none(second: int, n: int) -> LogicalTxn:
    return LogicalTxn(vtso(second, n), LogicalKind.NONE)


def workload(n_txns: int, *, start: int = T0, rows: int = 3) -> list[LogicalTxn]:
    """A deterministic mix: CREATE, DML (1–3 blocks, hints), heartbeats (some on a second that
    divides 30), NONE, a DDL in the middle; one txn every 0.2 s of TSO time."""
    out = [ddl(start, 1, "CREATE DATABASE shop", db=""),
           ddl(start, 2, "CREATE TABLE orders (id bigint primary key, v varchar(80))")]
    for i in range(3, n_txns):
        second = start + i // 5
        if i % 7 == 0:
            out.append(heartbeat(second, i))
        elif i % 11 == 0:
            out.append(none(second, i))
        elif i == n_txns // 2:
            out.append(ddl(second, i, "ALTER TABLE orders ADD INDEX iv (v)"))
        else:
            blocks = [block("shop", "orders", [(i * 10 + k, f"txn {i} row {k} " + "x" * (i % 13))
                                               for k in range(rows)],
                            hint=f"/*DRDS /10.0.0.1/{i:x}-1/0/1/ */" if i % 3 else None)]
            if i % 4 == 0:
                blocks.append(block("shop", "orders", [(i * 10 + 9, "second block")], hint=f"/*DRDS /10.0.0.1/{i:x}-2/0/1/ */"))
            out.append(LogicalTxn(vtso(second, i), LogicalKind.DML, blocks, server_id=7 if i % 5 == 0 else None))
    return out


def write_all(directory, txns, **kw) -> GlobalBinlog:
    w = GlobalBinlog(directory, **kw)
    for t in txns:
        w.append(t)
    w.close()
    return w


def binlog_files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("binlog.[0-9]*"))}


# -- layout of one transaction --------------------------------------------------------------------
def test_dml_layout_begin_hint_cts_maps_rows_xid_marker():
    b1 = block("shop", "orders", [(1, "a")], hint="/*DRDS /10.0.0.1/abc-1/0/1/ */")
    b2 = block("shop", "orders", [(2, "b")], hint="/*DRDS /10.0.0.1/abc-2/0/1/ */", kind=E.UPDATE_ROWS)
    b3 = block("shop", "orders", [(3, "c")], kind=E.DELETE_ROWS)
    t = dml(T0 + 5, 9, [b1, b2, b3], server_id=42)
    head = gb.file_start(server_id=3, timestamp=T0)
    data = head + encode_txn(t, len(head), 3)
    evs = read_all(data)
    types = [e.type_code for e in evs]
    assert types == [E.FORMAT_DESCRIPTION, E.QUERY, E.ROWS_QUERY, E.TABLE_MAP, E.WRITE_ROWS, E.ROWS_QUERY,
                     E.TABLE_MAP, E.UPDATE_ROWS, E.TABLE_MAP, E.DELETE_ROWS, E.XID, E.ROWS_QUERY]
    begin = evs[1]
    assert len(begin.raw) == 42 and begin.h[5] == EventFlag.SUPPRESS_USE
    assert begin.body.query == b"BEGIN" and begin.body.db == "" and begin.payload[11:13] == b"\0\0"
    assert evs[2].body.query == f"/*DRDS /10.0.0.1/abc-1/0/1/ */\n# CTS::{t.vtso}".encode()
    assert evs[5].body.query == b"/*DRDS /10.0.0.1/abc-2/0/1/ */"
    assert evs[3].payload == b1.table_map and evs[4].payload == b1.rows[0][1]
    assert evs[7].payload == b2.rows[0][1] and evs[9].payload == b3.rows[0][1]
    assert evs[10].body.xid == xid_of(t.vtso)
    assert evs[11].body.query == f"CTS::{t.vtso}".encode() and len(evs[11].raw) == 83
    for e in evs[1:]:
        assert e.h[0] == (tso_at(T0 + 5, 9) >> 22) // 1000 == T0 + 5  # timestamp from the TSO
        assert e.h[2] == 42                                          # the hint's server id
        assert e.h[4] == e.pos + e.h[3]                              # log_pos = end
        assert zlib.crc32(e.raw[:-4]) == int.from_bytes(e.raw[-4:], "little")
    assert evs[0].body.server_version == gb.DEFAULT_SERVER_VERSION and evs[0].body.created == 0
    assert evs[0].h[2] == 3


def test_first_block_without_hint_gets_the_cts_line_alone_and_archive_suffix():
    t = dml(T0, 1, [block("shop", "orders", [(1, "a")])], archive=True)
    evs = read_all(gb.file_start(server_id=1) + encode_txn(t, 4 + 119, 1))
    assert evs[2].body.query == f"# CTS::{t.vtso}::ARCHIVE".encode()
    assert evs[-1].body.query == f"CTS::{t.vtso}".encode()
    assert evs[1].h[2] == 1  # no hint server id: the writer's


def test_ddl_heartbeat_none():
    d = ddl(T0 + 1, 1, "CREATE TABLE t (id int)")
    evs = read_all(gb.file_start(server_id=1) + encode_txn(d, 123, 1))
    assert [e.type_code for e in evs] == [E.FORMAT_DESCRIPTION, E.QUERY, E.ROWS_QUERY]
    assert evs[1].payload == d.query and evs[1].body.query == b"CREATE TABLE t (id int)"
    assert evs[2].body.query == f"CTS::{d.vtso}".encode()
    hb = heartbeat(T0 + 30, 2)
    evs = read_all(gb.file_start(server_id=1) + encode_txn(hb, 123, 1))
    assert [e.type_code for e in evs[1:]] == [E.QUERY, E.ROWS_QUERY, E.XID, E.ROWS_QUERY]
    assert evs[2].body.query == b"# TSO HEARTBEAT TXN" and evs[4].body.query == f"CTS::{hb.vtso}".encode()
    for second in (T0 + 1, T0 + 29, T0 + 31):
        assert encode_txn(heartbeat(second, 3), 123, 1) == b""
    assert encode_txn(none(T0, 4), 123, 1) == b""


def test_xid_is_a_function_of_the_vtso():
    assert xid_of(vtso(T0, 1)) == xid_of(vtso(T0, 1)) != xid_of(vtso(T0, 2))
    assert 0 <= xid_of(vtso(T0, 1)) < 1 << 63


def test_server_version_must_start_with_5_or_8(tmp_path):
    """The two FDE dialects: 5.7 (default) and 8.0 (MySQL 8.0's post-header table)."""
    with pytest.raises(ValueError, match="'5\\.' or '8\\.'"):
        GlobalBinlog(tmp_path / "a", server_version="10.11.6")
    GlobalBinlog(tmp_path / "b", server_version="8.0.32").close()
    assert len(read_all(gb.file_start(server_id=1, server_version="8.0.32"))[0].body.post_header_len) == 41


def test_append_refuses_a_vtso_not_above_the_last(tmp_path):
    w = GlobalBinlog(tmp_path)
    w.append(dml(T0, 5))
    with pytest.raises(DumperError, match="not above"):
        w.append(dml(T0, 5))
    with pytest.raises(DumperError, match="not above"):
        w.append(dml(T0, 4))
    w.close()


# -- files ----------------------------------------------------------------------------------------
def test_rotation_many_files_each_fde_rotate_no_txn_spans(tmp_path):
    txns = workload(400)
    w = write_all(tmp_path, txns, max_file_size=4096)
    names = [p.name for p in sorted(tmp_path.glob("binlog.[0-9]*"))]
    assert len(names) > 10 and w.files == names
    assert (tmp_path / "binlog.index").read_text() == "".join(f"./{n}\n" for n in names)
    seen = []
    for i, name in enumerate(names):
        evs = read_all(tmp_path / name)
        assert evs[0].type_code == E.FORMAT_DESCRIPTION
        if i < len(names) - 1:
            assert evs[-1].type_code == E.ROTATE and evs[-1].body.next_file == names[i + 1]
            assert evs[-2].type_code == E.ROWS_QUERY and evs[-2].body.query.startswith(b"CTS::")
            # rotated after the txn that crossed the limit: the one before it ended below it
            ends = [e.end_pos for e in evs if e.type_code == E.FORMAT_DESCRIPTION
                    or (e.type_code == E.ROWS_QUERY and e.body.query.startswith(b"CTS::"))]
            assert ends[-1] == evs[-1].pos >= 4096 > ends[-2]
        else:
            assert all(e.type_code != E.ROTATE for e in evs)
        # txns are whole inside a file: it starts with BEGIN or a DDL right after the FDE, and the
        # last event before ROTATE is a marker
        body = [e for e in evs[1:] if e.type_code != E.ROTATE]
        if body:
            assert body[0].type_code == E.QUERY and body[-1].body.query.startswith(b"CTS::")
        seen += [e.body.query[5:].decode() for e in body if e.type_code == E.ROWS_QUERY
                 and e.body.query.startswith(b"CTS::")]
    written = [t.vtso for t in txns if gb.writes(t)]
    assert seen == written


def test_render_file_equals_what_the_writer_wrote(tmp_path):
    """The Spark engine's path: the same txns rendered file by file give the writer's bytes."""
    txns = workload(300)
    write_all(tmp_path, txns, max_file_size=3000, server_id=9)
    files = binlog_files(tmp_path)
    names = list(files)
    # split the txns the way the writer did, by their CTS markers per file
    per_file: list[list[LogicalTxn]] = [[] for _ in names]
    where = {}
    for i, name in enumerate(names):
        for m in re.finditer(rb"\x01CTS::(\d{54})", files[name]):
            where[m.group(1).decode()] = i
    current = 0
    for t in txns:
        current = where.get(t.vtso, current)
        per_file[current].append(t)
    fde_ts = None
    for i, name in enumerate(names):
        got = render_file(per_file[i], seq=i + 1, server_id=9, fde_timestamp=fde_ts, rotate=i < len(names) - 1)
        assert got == files[name], name
        written = [t for t in per_file[i] if gb.writes(t)]
        fde_ts = written[-1].timestamp if written else fde_ts


def test_same_txns_same_bytes(tmp_path):
    txns = workload(200)
    write_all(tmp_path / "a", txns, max_file_size=5000)
    write_all(tmp_path / "b", txns, max_file_size=5000)
    assert binlog_files(tmp_path / "a") == binlog_files(tmp_path / "b")


def test_flush_logs_rotates_now(tmp_path):
    w = GlobalBinlog(tmp_path)
    w.append(dml(T0, 1))
    assert w.flush_logs() == "binlog.000002"
    w.append(dml(T0, 2))
    w.close()
    evs1 = read_all(tmp_path / "binlog.000001")
    assert [e.type_code for e in evs1][-2:] == [E.ROWS_QUERY, E.ROTATE]
    assert read_all(tmp_path / "binlog.000002")[1].body.query == b"BEGIN"


def test_nothing_written_no_file(tmp_path):
    w = GlobalBinlog(tmp_path)
    w.append(none(T0, 1))
    w.append(heartbeat(T0 + 1, 2))
    w.close()
    assert binlog_files(tmp_path) == {} and w.last_vtso == vtso(T0 + 1, 2)


def test_disk_full_cuts_back_to_the_last_whole_txn(tmp_path, monkeypatch):
    """A write that fails half-way (ENOSPC) leaves the file ending at the last transaction that
    reached it; the error names the file and offset; reopening finds exactly those."""
    txns = workload(120)
    w = GlobalBinlog(tmp_path, buffer_size=2000)
    real = gb._write_all
    budget = {"left": 9000}

    def tight(fd, data):
        if len(data) > budget["left"]:
            real(fd, bytes(data[:budget["left"]]))  # part of it lands, then the disk is full
            budget["left"] = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        budget["left"] -= len(data)
        real(fd, data)

    monkeypatch.setattr(gb, "_write_all", tight)
    with pytest.raises(DiskFull, match=r"binlog\.000001: offset \d+: write failed: No space left"):
        for t in txns:
            w.append(t)
    monkeypatch.setattr(gb, "_write_all", real)
    data = (tmp_path / "binlog.000001").read_bytes()
    assert len(data) < 9000
    evs = read_all(data)  # whole events only, ends with a marker
    assert evs[-1].body.query.startswith(b"CTS::")
    last = evs[-1].body.query[5:].decode()
    w2 = GlobalBinlog(tmp_path)
    assert w2.last_vtso == last and not w2.recovery.repaired
    for t in txns:
        if t.vtso > last:
            w2.append(t)
    w2.close()
    write_all(tmp_path / "ref", txns)
    assert binlog_files(tmp_path) == binlog_files(tmp_path / "ref")


# -- a real reader ----------------------------------------------------------------------------------
def test_mariadb_binlog_reads_every_file(tmp_path):
    txns = workload(150)
    write_all(tmp_path, txns, max_file_size=6000)
    names = sorted(str(p) for p in tmp_path.glob("binlog.[0-9]*"))
    out = mariadb_binlog("-v", "--base64-output=DECODE-ROWS", *names)
    inserted = re.findall(r"### INSERT INTO `shop`.`orders`\n### SET\n###   @1=(\d+)", out)
    want = [str(r[0]) for t in txns if t.kind is LogicalKind.DML for b in t.blocks
            for r in _rows_of(b)]
    assert inserted == want
    assert out.count("CREATE TABLE orders") == 1 and out.count("ALTER TABLE orders ADD INDEX") == 1
    assert out.count("Xid = ") == sum(1 for t in txns if gb.writes(t) and t.kind is not LogicalKind.DDL)


def _rows_of(b: LogicalBlock) -> list[tuple]:
    from binlog.constants import POST_HEADER_LEN_57
    from binlog.event import FormatContext
    from binlog.rows_events import decode_rows_event
    from binlog.table_map import decode_table_map
    ctx = FormatContext(post_header_len=POST_HEADER_LEN_57)
    tm = decode_table_map(b.table_map, ctx)
    return [r for t, p in b.rows for r in decode_rows_event(t, p, ctx).rows(tm)]
