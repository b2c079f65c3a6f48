"""Stream groups (docs/streams.md): the `all` workload built into 3 streams at each hash level and
read back with the real ``mariadb-binlog``; each table's (or row's) changes in exactly one stream,
the one its hash names, and the union of the streams equal to the single stream, table by table
and row by row; crash and resume stream by stream; ``verify --truth`` on the group."""

from __future__ import annotations

import binascii
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from binlog.columns import Column
from binlog.constants import ColumnType, EventType, RowsFlag
from binlog.rows_events import decode_rows_event, encode_rows_event
from binlog.table_map import encode_table_map
from dumper.streams import RecordRouter, StreamMap, StreamsError, StreamSpec, route_transaction
from dumper.verify import verify
from gbinlog.local_engine import Settings, build
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn
from tests.mariadb import mariadb_binlog
from tests.test_simulator_binlogs import printed_rows

LEVELS = ("database", "table", "record")
N = 3


def crc_stream(text: str, count: int = N) -> int:
    return binascii.crc32(text.encode()) % count


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("all")
    proc = run_cli("simulate", "--workload", "all", "--dns", "3", "--txns", "400", "--seed", "11", "--out",
                   str(d / "dns"))
    assert proc.returncode == 0, proc.stderr
    return d


def dn_args(cluster: Path) -> list[str]:
    return [a for dn in sorted((cluster / "dns").glob("dn*")) for a in ("--dn", str(dn))]


@pytest.fixture(scope="module")
def outputs(cluster) -> dict[str, Path]:
    out = {}
    dns = [str(p) for p in sorted((cluster / "dns").glob("dn*"))]
    out["single"] = cluster / "single"
    build(dns, out["single"], settings=Settings(max_file_size=128 << 10))
    for level in LEVELS:
        out[level] = cluster / level
        build(dns, out[level], settings=Settings(max_file_size=128 << 10,
                                                 streams={"count": N, "hash": level}))
    return out


def stream_files(out: Path, k: int) -> list[Path]:
    d = out / f"stream{k}"
    names = [line.strip()[2:] for line in (d / f"group1_stream_{k}_binlog.index").read_text().splitlines()]
    assert names and all(n.startswith(f"group1_stream_{k}_binlog.0") for n in names)
    return [d / n for n in names]


def changes_of(files: list[Path]) -> list[tuple[str, str, str, list]]:
    """(db, table, op, images) per row, as mariadb-binlog prints them."""
    text = mariadb_binlog("-v", "--base64-output=DECODE-ROWS", *map(str, files))
    return [(g["db"], g["table"], g["op"], img) for g in printed_rows(text) for img in g["rows"]]


def by_row(changes) -> dict[tuple[str, str, str], list]:
    """Each row's changes in order, keyed by (db, table, primary key as printed: @1 of the first image)."""
    rows: dict[tuple[str, str, str], list] = defaultdict(list)
    for db, table, op, images in changes:
        rows[(db, table, images[0][0])].append((op, images))
    return rows


@pytest.mark.parametrize("level", LEVELS)
def test_each_stream_read_by_mariadb_binlog_and_the_union_is_the_single_stream(outputs, level):
    single = changes_of(stream_files_single(outputs["single"]))
    assert len(single) > 10_000
    per_stream = [changes_of(stream_files(outputs[level], k)) for k in range(N)]
    assert all(per_stream), "every stream holds rows"
    # the union, table by table in order (table and database levels) or row by row (record)
    union = [c for part in per_stream for c in part]
    assert sorted(map(repr, union)) == sorted(map(repr, single))
    want_rows = by_row(single)
    got_rows: dict = defaultdict(list)
    owner: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    tables: dict[tuple[str, str], set[int]] = defaultdict(set)
    for k, part in enumerate(per_stream):
        for key, ch in by_row(part).items():
            got_rows[key].extend(ch)
            owner[key].add(k)
        for db, table, _op, _images in part:
            tables[(db, table)].add(k)
    assert got_rows == want_rows
    if level == "record":
        for (db, table, key), ks in owner.items():
            assert ks == {crc_stream(key)}, (db, table, key, ks)
        assert sum(len(ks) > 1 for ks in tables.values()) == len(tables), "record hashing spreads each table"
    else:
        for (db, table), ks in tables.items():
            assert ks == {crc_stream(db if level == "database" else f"{db}.{table}")}, (db, table, ks)
        if level == "table":
            by_table: dict = defaultdict(list)
            for db, table, op, images in single:
                by_table[(db, table)].append((op, images))
            for (db, table), ks in tables.items():
                part = per_stream[next(iter(ks))]
                assert [(op, im) for d, t, op, im in part if (d, t) == (db, table)] == by_table[(db, table)]


def stream_files_single(out: Path) -> list[Path]:
    return [out / line.strip()[2:] for line in (out / "binlog.index").read_text().splitlines()]


@pytest.mark.parametrize("level", LEVELS)
def test_every_stream_has_every_ddl_and_its_own_gtids(outputs, level):
    single = mariadb_binlog(*map(str, stream_files_single(outputs["single"])))
    ddls = [line for line in single.split("\n") if line.startswith(("CREATE ", "ALTER ", "DROP ", "RENAME ",
                                                                     "TRUNCATE "))]
    assert len(ddls) > 20
    sids = set()
    for k in range(N):
        text = mariadb_binlog(*map(str, stream_files(outputs[level], k)))
        got = [line for line in text.split("\n") if line.startswith(("CREATE ", "ALTER ", "DROP ", "RENAME ",
                                                                      "TRUNCATE "))]
        assert got == ddls
        assert any(b"# TSO HEARTBEAT TXN" in f.read_bytes() for f in stream_files(outputs[level], k))
        st = json.loads((outputs[level] / f"stream{k}" / "state.json").read_text())
        assert st["settings"]["stream"] == k and st["meta_store"] == "../meta.db"
        from dumper.gtid import file_gtids
        files = stream_files(outputs[level], k)
        facts = file_gtids(files[-1], files[-1].stat().st_size)
        sids.add(bytes(facts.sid))
    assert len(sids) == N, "each stream names its GTIDs with a source id of its own"


@pytest.mark.parametrize("level", LEVELS)
def test_verify_with_the_truth_checks_the_group(cluster, outputs, level):
    truth = cluster / "dns" / "truth.json"
    report = verify(outputs[level], truth)
    assert report.ok and report.truth_checked, report.errors[:3] or report.fatal
    proc = run_cli("verify", str(outputs[level]), "--truth", str(truth))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    for k in range(N):                           # one stream: an ordinary global binlog directory
        proc = run_cli("verify", str(outputs[level] / f"stream{k}"))
        assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr


def test_verify_finds_a_stream_that_lost_a_ddl(tmp_path, cluster, outputs):
    import shutil

    broken = tmp_path / "g"
    shutil.copytree(outputs["table"], broken)
    files = stream_files(broken, 1)
    files[-1].unlink()
    (broken / "stream1" / "group1_stream_1_binlog.index").write_text(
        "".join(f"./{f.name}\n" for f in files[:-1]))
    report = verify(broken, cluster / "dns" / "truth.json")
    assert not report.ok and any("DDL and heartbeat" in e or "ROTATE" in e for e in report.errors), report.errors


def test_one_stream_is_todays_output(tmp_path, cluster):
    a, b = tmp_path / "a", tmp_path / "b"
    assert run_cli("build", *dn_args(cluster), "--out", str(a)).returncode == 0
    proc = run_cli("build", *dn_args(cluster), "--out", str(b), "--streams", "1")
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in a.iterdir() if p.name != "gbinlog.lock")
    assert names == sorted(p.name for p in b.iterdir() if p.name != "gbinlog.lock")
    for n in names:
        if n != "meta.db":
            assert (a / n).read_bytes() == (b / n).read_bytes(), n


@pytest.mark.parametrize("crash", ["torn:300", "checkpoint:3", "rotated:4", "opened:2"])
def test_killed_and_resumed_every_stream_is_byte_identical(tmp_path, cluster, outputs, crash):
    out = tmp_path / "g"
    config = tmp_path / "b.toml"
    config.write_text('[build]\nmax_file_size = "128KB"\ncheckpoint_bytes = "64KB"\n'
                      '[streams]\ncount = 3\nhash = "record"\n')
    args = ["build", *dn_args(cluster), "--out", str(out), "--config", str(config)]
    killed = run_cli(*args, env={"GBINLOG_CRASH_AT": crash})
    assert killed.returncode == -9, killed.stderr
    resumed = run_cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed" in resumed.stdout
    ref = tmp_path / "ref"
    assert run_cli("build", *dn_args(cluster), "--out", str(ref), "--config", str(config)).returncode == 0
    for k in range(N):
        got, want = out / f"stream{k}", ref / f"stream{k}"
        assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in want.iterdir())
        for p in want.iterdir():
            assert (got / p.name).read_bytes() == p.read_bytes(), (crash, p)
    assert json.loads((out / "state.json").read_text()) == json.loads((ref / "state.json").read_text())


def test_stream_settings_are_checked(tmp_path, cluster):
    out = tmp_path / "g"
    proc = run_cli("build", *dn_args(cluster), "--out", str(out), "--stream-hash", "record")
    assert proc.returncode == 2 and "--stream-hash needs --streams N" in proc.stderr
    proc = run_cli("build", *dn_args(cluster), "--out", str(out), "--streams", "3", "--engine", "spark")
    assert proc.returncode == 2 and "not supported with --engine spark" in proc.stderr
    assert run_cli("build", *dn_args(cluster), "--out", str(out), "--streams", "3").returncode == 0
    proc = run_cli("build", *dn_args(cluster), "--out", str(out), "--streams", "4")
    assert proc.returncode == 1 and "would give different bytes" in proc.stderr, proc.stderr
    with pytest.raises(StreamsError, match="streams.hash"):
        StreamSpec(count=2, hash="column")
    with pytest.raises(StreamsError, match="streams.count"):
        StreamSpec(count=0)


# -- the routing rules on hand-made transactions -----------------------------------------------------
COLS = [Column(ColumnType.LONGLONG, name="id", primary_key=True), Column(ColumnType.LONG, name="v")]


def block(table: str, rows: list[list], *, key: bool = True, db: str = "d") -> LogicalBlock:
    cols = COLS if key else [Column(c.type, name=c.name) for c in COLS]
    tm = encode_table_map(table_id=7, db=db, table=table, columns=cols)
    ev = encode_rows_event(EventType.WRITE_ROWS, table_id=7, columns=cols, rows=rows)
    return LogicalBlock(db, table, tm, [(int(EventType.WRITE_ROWS), ev)])


def test_record_hashing_splits_a_rows_event_by_key_and_ends_each_statement():
    txn = LogicalTxn("1" * 54, LogicalKind.DML, [block("t", [[i, i * 10] for i in range(1, 13)])])
    parts = route_transaction(txn, StreamSpec(count=N, hash="record"), StreamMap(N), RecordRouter(N))
    assert [k for k, _ in parts] == sorted({crc_stream(str(i)) for i in range(1, 13)})
    seen = []
    for k, part in parts:
        assert part.vtso == txn.vtso and part.kind is LogicalKind.DML
        (b,) = part.blocks
        (type_code, payload), = b.rows
        body = decode_rows_event(type_code, payload)
        assert body.flags & RowsFlag.STMT_END
        ids = [r[0] for r in body.rows(COLS)]
        assert all(crc_stream(str(i)) == k for i in ids)
        seen += [tuple(r) for r in body.rows(COLS)]
    assert sorted(seen) == [(i, i * 10) for i in range(1, 13)]


def test_a_table_without_a_primary_key_goes_by_table_under_record_hashing():
    txn = LogicalTxn("1" * 54, LogicalKind.DML, [block("nokey", [[i, i] for i in range(1, 13)], key=False)])
    parts = route_transaction(txn, StreamSpec(count=N, hash="record"), StreamMap(N), RecordRouter(N))
    assert [(k, p is txn) for k, p in parts] == [(crc_stream("d.nokey"), True)]


def test_ddl_and_heartbeats_go_to_every_stream_and_a_rename_keeps_the_stream():
    names = [f"t{i}" for i in range(40)]
    old = next(n for n in names if crc_stream(f"d.{n}") == 0)
    new = next(n for n in names if crc_stream(f"d.{n}") == 2)
    m = StreamMap(N)
    spec = StreamSpec(count=N, hash="table")
    ddl = LogicalTxn("2" * 54, LogicalKind.DDL, db="d", sql=f"RENAME TABLE `{old}` TO `{new}`", query=b"")
    assert [k for k, _ in route_transaction(ddl, spec, m, None)] == [0, 1, 2]
    beat = LogicalTxn("3" * 54, LogicalKind.HEARTBEAT)
    assert [k for k, _ in route_transaction(beat, spec, m, None)] == [0, 1, 2]
    rows = LogicalTxn("4" * 54, LogicalKind.DML, [block(new, [[1, 1]])])
    assert [k for k, _ in route_transaction(rows, spec, m, None)] == [0]
    assert m.moves == [["2" * 54, f"d.{new}", 0]]
    # restored from the saved history up to a vtso: the move is kept after it, dropped before it
    assert StreamMap.restored(N, m.moves, "2" * 54).stream_of_table("d", new) == 0
    assert StreamMap.restored(N, m.moves, "1" * 54).stream_of_table("d", new) == 2
    # ALTER TABLE … RENAME TO moves it back under the old name's hash
    alter = LogicalTxn("5" * 54, LogicalKind.DDL, db="d", sql=f"ALTER TABLE `{new}` RENAME TO `{old}`", query=b"")
    route_transaction(alter, spec, m, None)
    assert m.stream_of_table("d", old) == 0


def test_a_transaction_over_two_streams_is_one_transaction_in_each(outputs):
    from dumper.verify import _Checker

    parts = defaultdict(set)
    for k in range(N):
        ck = _Checker(outputs["table"] / f"stream{k}", True, 50)
        ck.run()
        for w in ck.written:
            if w.kind == "dml":
                parts[w.vtso].add(k)
    assert any(len(ks) > 1 for ks in parts.values()), "the bank transfers touch two tables"


# -- served: one endpoint, a replica per stream ------------------------------------------------------
@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    from tests.mariadb import MariaDB

    servers = [MariaDB.start(tmp_path_factory.mktemp(f"replica{k}"), server_id=10 + k) for k in range(N)]
    yield servers
    for s in servers:
        s.stop()


@pytest.mark.slow
@pytest.mark.parametrize("level", ["table", "record"])
def test_three_mariadb_replicas_one_per_stream_hold_the_truth_together(cluster, outputs, replicas, level):
    from dumper.server import ServerConfig, start_in_thread
    from tests.test_server_support import (
        USERS,
        change_master,
        replica_checksums,
        truth_checksums,
        wait_caught_up,
    )

    truth = json.loads((cluster / "dns" / "truth.json").read_text())
    out = outputs[level]
    for r in replicas:
        r.query("STOP SLAVE")
        r.query("RESET SLAVE ALL")
        for db in {t["db"] for t in truth["tables"].values()} | {"ddl_extra", "ddl"}:
            r.query(f"DROP DATABASE IF EXISTS `{db}`")
    want = truth_checksums(replicas[0], truth)
    with start_in_thread(ServerConfig(dir=out, users=USERS, server_id=100)) as h:
        for k, r in enumerate(replicas):
            change_master(r, h.port, f"group1_stream_{k}_binlog.000001", 4)
            r.query("START SLAVE")
        for k, r in enumerate(replicas):
            last = stream_files(out, k)[-1]
            wait_caught_up(r, last.name, last.stat().st_size, timeout=90)
    got = [replica_checksums(r, truth) for r in replicas]
    for key in sorted(truth["tables"]):
        parts = [g[key] for g in got]
        if level == "table":
            owner = crc_stream(key)
            assert parts[owner] == want[key], key
            assert all(p == (0, 0) for k, p in enumerate(parts) if k != owner), (key, parts)
        else:
            rows = sum(p[0] for p in parts)
            xor = 0
            for p in parts:
                xor ^= p[1]
            assert (rows, xor) == want[key], (key, parts)
            assert sum(p[0] > 0 for p in parts) > 1 or want[key][0] < 3, (key, parts)


def test_the_endpoint_picks_the_stream_by_file_name_user_or_with_clause(outputs):
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent

    from dumper.server import ServerConfig, start_in_thread

    out = outputs["table"]
    bound = "group1_stream_2_cdc_user"
    users = {"repl": "pw", bound: "pw2"}
    heads = [stream_files(out, k)[-1] for k in range(N)]
    with start_in_thread(ServerConfig(dir=out, users=users, server_id=100)) as h:
        def query(sql, user="repl", password="pw"):
            with pymysql.connect(host="127.0.0.1", port=h.port, user=user, password=password) as c, c.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()

        assert query("SHOW BINARY STREAMS") == tuple(
            ("group1", f"group1_stream_{k}", heads[k].name, heads[k].stat().st_size) for k in range(N))
        assert query("SHOW MASTER STATUS WITH 'group1_stream_1'")[0][:2] == (heads[1].name, heads[1].stat().st_size)
        assert query("SHOW MASTER STATUS", bound, "pw2")[0][:2] == (heads[2].name, heads[2].stat().st_size)
        assert query("SHOW MASTER STATUS")[0][0] == heads[0].name          # unbound: stream 0
        assert [r[0] for r in query("SHOW BINARY LOGS WITH 'group1_stream_2'")] == \
            [f.name for f in stream_files(out, 2)]
        events = query("SHOW BINLOG EVENTS WITH 'group1_stream_1' LIMIT 2")
        assert [e[:3] for e in events] == [(stream_files(out, 1)[0].name, 4, "Format_desc"),
                                           (stream_files(out, 1)[0].name, 123, "Previous_gtids")]
        with pytest.raises(pymysql.err.OperationalError, match="Stream 'group9_stream_0' not found"):
            query("SHOW BINARY LOGS WITH 'group9_stream_0'")
        uuid2 = query("SELECT @@server_uuid", bound, "pw2")[0][0]
        assert uuid2 != query("SELECT @@server_uuid")[0][0]

        def gtids(user, password, **kw):
            stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": h.port, "user": user,
                                                             "password": password},
                                        server_id=77, blocking=False, only_events=[GtidEvent], **kw)
            try:
                return [ev.gtid for ev in stream]
            finally:
                stream.close()

        # GTID auto-position names no file: the bound user's stream, from after the set it has
        got = gtids(bound, "pw2", auto_position=f"{uuid2}:1-5")
        assert got and got[0] == f"{uuid2}:6" and all(g.startswith(uuid2) for g in got)
        by_file = gtids("repl", "pw", log_file=stream_files(out, 2)[0].name, log_pos=4)
        assert by_file[5:] == got
        with pytest.raises(pymysql.err.OperationalError, match="log in as a user bound to a stream"):
            gtids("repl", "pw", auto_position=f"{uuid2}:1-5")
        with pytest.raises(pymysql.err.OperationalError, match="is not a file of stream group group1"):
            gtids("repl", "pw", log_file="binlog.000001", log_pos=4)


def test_filters_apply_before_routing(tmp_path, cluster):
    out = tmp_path / "g"
    proc = run_cli("build", *dn_args(cluster), "--out", str(out), "--streams", "3", "--stream-hash", "record",
                   "--exclude", "bank.audit*")
    assert proc.returncode == 0, proc.stderr
    tables = {(db, table) for k in range(N) for db, table, _op, _img in changes_of(stream_files(out, k))}
    assert ("bank", "accounts") in tables and not any(t.startswith("audit") for db, t in tables if db == "bank")


def test_one_stream_alone_is_an_ordinary_directory_for_serve_and_position(outputs):
    from dumper.server import ServerConfig, start_in_thread
    from tests.test_server_support import USERS

    d = outputs["table"] / "stream1"
    files = stream_files(outputs["table"], 1)
    with start_in_thread(ServerConfig(dir=d, users=USERS, server_id=100)) as h:
        import pymysql

        from tests.test_server_support import PASSWORD, USER
        with pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD) as c, c.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            assert [r[0] for r in cur.fetchall()] == [f.name for f in files]
            cur.execute("SHOW BINARY STREAMS")
            assert cur.fetchall() == ()
    proc = run_cli("position", str(d), "--tso", "0")
    assert proc.returncode == 0 and proc.stdout.startswith(f"{files[0].name}:"), proc.stdout + proc.stderr
    proc = run_cli("position", str(outputs["table"]), "--tso", "0")
    assert proc.returncode == 1 and "is a stream group: give one stream's directory" in proc.stderr


def test_purge_to_a_streams_file_purges_that_stream_only(tmp_path, outputs):
    import shutil

    import pymysql

    from dumper.server import ServerConfig, start_in_thread
    from tests.test_server_support import ADMIN, ADMIN_PASSWORD, USERS

    out = tmp_path / "g"
    shutil.copytree(outputs["table"], out)
    k = max(range(N), key=lambda i: len(stream_files(out, i)))
    before = {i: [f.name for f in stream_files(out, i)] for i in range(N)}
    assert len(before[k]) >= 2
    with start_in_thread(ServerConfig(dir=out, users=USERS, admins=frozenset({ADMIN}), server_id=100)) as h:
        with pymysql.connect(host="127.0.0.1", port=h.port, user=ADMIN, password=ADMIN_PASSWORD) as c, \
                c.cursor() as cur:
            cur.execute(f"PURGE BINARY LOGS TO '{before[k][1]}'")
            cur.execute(f"SHOW BINARY LOGS WITH 'group1_stream_{k}'")
            assert [r[0] for r in cur.fetchall()] == before[k][1:]
    for i in range(N):
        assert [f.name for f in stream_files(out, i)] == (before[i][1:] if i == k else before[i])


def test_status_lists_each_stream(outputs):
    from gbinlog.run_cmd import format_status

    state = json.loads((outputs["record"] / "state.json").read_text())
    text = format_status({"running": False, "output": str(outputs["record"]), "state_json": state})
    assert "stream group group1: 3 streams by record" in text
    for k in range(N):
        mark = state["streams"]["marks"][str(k)]
        assert f"stream {k}: {mark['file']}:{mark['pos']}" in text


def test_run_with_spark_refuses_a_stream_group(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[output]\ndir = "{tmp_path / "out"}"\n[server]\nport = 0\n[streams]\ncount = 2\n'
                   f'[[dn]]\nid = "dn0"\ndir = "{tmp_path}"\n')
    proc = run_cli("run", "--config", str(cfg), "--engine", "spark")
    assert proc.returncode == 2 and "not supported with --engine spark" in proc.stderr, proc.stderr
    cfg.write_text(cfg.read_text().replace("count = 2", 'count = 2\nhash = "rows"'))
    proc = run_cli("run", "--config", str(cfg))
    assert proc.returncode == 2 and "streams.hash = 'rows'" in proc.stderr, proc.stderr
