"""Deterministic GTIDs and auto-position.

python-mysql-replication with ``auto_position`` resumes exactly after the last transaction it saw —
across a restart of the endpoint and across a rebuild of the output from scratch — with no transaction
lost or repeated (the concatenation equals the truth, columns by logical name); two independent builds
with different file sizes give the same GTID for every vtso; a MariaDB replica replicates every fixture
with GTIDs turned off; the endpoint's GTID variables follow the files (PURGE moves gtid_purged); a
client set with transactions we never wrote, or lacking purged ones, gets MySQL's ERR 1236; the start
is found by binary search over the files. (Byte-identity with GTIDs of local vs Spark and resume after
SIGKILL: tests/test_spark_build.py and tests/test_build_crash.py, which build with GTIDs on, the default.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

import dumper.gtid as gtid_mod
from binlog import EventType, read_all
from dumper.gtid import locate_gno, parse_gtid_set
from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.mariadb import mariadb_binlog
from tests.test_consumers_metadata import truth_changes_by_name
from tests.test_server_support import ADMIN, ADMIN_PASSWORD, PASSWORD, USER, USERS

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
CONN = {"host": "127.0.0.1", "user": USER, "password": PASSWORD}


def build_fixture(name: str, out: Path, **settings) -> Path:
    build(sorted(p for p in (ROOT / name).iterdir() if p.is_dir()), out, settings=Settings(**settings))
    return out


def index(d: Path) -> list[str]:
    return [ln.strip()[2:] for ln in (d / "binlog.index").read_text().splitlines()]


def gno_by_vtso(d: Path) -> dict[str, str]:
    """vtso → 'uuid:gno' of every written transaction (the GTID event before it, its CTS marker after)."""
    out, pending = {}, None
    for name in index(d):
        for ev in read_all(d / name):
            t = ev.header.type_code
            if t == EventType.GTID:
                pending = f"{ev.body.uuid}:{ev.body.gno}"
            elif t == 29 and bytes(ev.raw[19:25]) == b"\x01CTS::":
                out[bytes(ev.raw[25:79]).decode()] = pending
                pending = None
    return out


def variables(port: int, *names: str) -> tuple:
    with pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD) as c, c.cursor() as cur:
        cur.execute("SELECT " + ", ".join(f"@@{n}" for n in names))
        return cur.fetchone()


def read_changes(port: int, auto_position: str | None, stop_after: int | None = None) -> tuple[list, list[int]]:
    """Row changes (by column name) and the gnos of the transactions they came in, read by pmr with
    ``auto_position`` (None: by position from the first file's start); ``stop_after``: stop after that
    many transactions with rows."""
    where = {"auto_position": auto_position} if auto_position is not None else {
        "log_file": "binlog.000001", "log_pos": 4, "resume_stream": True}
    stream = BinLogStreamReader(connection_settings={**CONN, "port": port}, server_id=415, blocking=False,
                                only_events=[GtidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], **where)
    changes: list = []
    gnos: list[int] = []
    current = None
    try:
        for ev in stream:
            if isinstance(ev, GtidEvent):
                if stop_after is not None and len(gnos) >= stop_after and gnos[-1] == current:
                    break
                current = int(ev.gtid.split(":")[1])
                continue
            if not gnos or gnos[-1] != current:
                gnos.append(current)
            for row in ev.rows:
                if isinstance(ev, UpdateRowsEvent):
                    changes.append((ev.schema, ev.table, "update", (row["before_values"], row["after_values"])))
                else:
                    changes.append((ev.schema, ev.table, "insert" if isinstance(ev, WriteRowsEvent) else "delete",
                                    row["values"]))
    finally:
        stream.close()
    return changes, gnos


def test_pmr_auto_position_resumes_exactly_across_endpoint_restart_and_rebuild(tmp_path):
    truth = json.loads((ROOT / "ddl-3dn" / "truth.json").read_text())
    want = truth_changes_by_name(truth)
    out = build_fixture("ddl-3dn", tmp_path / "a", max_file_size=24 << 10)
    assert len(index(out)) >= 5
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        uuid, executed = variables(h.port, "server_uuid", "gtid_executed")
        last = int(executed.rsplit("-", 1)[1])
        part1, gnos1 = read_changes(h.port, None, stop_after=60)   # from the start, by position
    seen1 = gnos1[-1]
    # A new endpoint on the same files: from the first transaction after the last one seen.
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        part2, gnos2 = read_changes(h.port, f"{uuid}:1-{seen1}", stop_after=60)
    seen2 = gnos2[-1]
    # The output rebuilt from scratch elsewhere (other file sizes): the same GTIDs, so the same resume.
    again = build_fixture("ddl-3dn", tmp_path / "b", max_file_size=1 << 30)
    with start_in_thread(ServerConfig(dir=again, users=USERS)) as h:
        assert variables(h.port, "server_uuid", "gtid_executed") == (uuid, executed)
        part3, gnos3 = read_changes(h.port, f"{uuid}:1-{seen2}")
    assert gnos2[0] > seen1 and gnos3[0] > seen2 and gnos3[-1] <= last
    assert part1 + part2 + part3 == want                    # nothing lost, nothing twice, names logical
    assert {len(v) for _, t, op, v in part2 + part3 if t == "t1" and op == "insert"} >= {4, 5}


def test_two_independent_builds_give_the_same_gtid_for_the_same_vtso(tmp_path):
    a = gno_by_vtso(build_fixture("bank-4dn", tmp_path / "a", max_file_size=16 << 10))
    b = gno_by_vtso(build_fixture("bank-4dn", tmp_path / "b", max_file_size=1 << 30))
    assert a == b and len(a) > 200
    gnos = [int(v.rsplit(":", 1)[1]) for _, v in sorted(a.items())]
    assert gnos == list(range(1, len(gnos) + 1))            # 1-based ordinal in the global order
    assert len({v.split(":")[0] for v in a.values()}) == 1


def test_mariadb_binlog_reads_gtid_files_and_every_file_starts_with_previous_gtids(tmp_path):
    out = build_fixture("ddl-3dn", tmp_path / "g", max_file_size=24 << 10)
    total = 0
    for name in index(out):
        evs = read_all(out / name)
        assert evs[1].header.type_code == EventType.PREVIOUS_GTIDS
        sids = evs[1].body.sids
        assert (sids[0][1] if sids else []) == ([(1, total + 1)] if total else [])
        gtid_events = [e for e in evs if e.header.type_code == EventType.GTID]
        assert [(e.body.last_committed, e.body.sequence_number) for e in gtid_events] == \
            [(i, i + 1) for i in range(len(gtid_events))]
        total += len(gtid_events)
        text = mariadb_binlog("-v", str(out / name))
        assert text.count("Ignorable event type 33 (MySQL Gtid)") == len(gtid_events)


def test_gtid_variables_follow_the_files_and_purge_moves_gtid_purged(tmp_path):
    out = build_fixture("ddl-3dn", tmp_path / "g", max_file_size=24 << 10)
    files = index(out)
    vt = gno_by_vtso(out)
    uuid = next(iter(vt.values())).split(":")[0]
    with start_in_thread(ServerConfig(dir=out, users=USERS, admins={ADMIN})) as h:
        assert variables(h.port, "gtid_mode", "enforce_gtid_consistency", "server_uuid", "gtid_executed",
                         "gtid_purged") == ("ON", "ON", uuid, f"{uuid}:1-{len(vt)}", "")
        with pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD) as c, c.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            assert cur.fetchone()[4] == f"{uuid}:1-{len(vt)}"
            cur.execute("SELECT GTID_SUBTRACT(%s, %s), GTID_SUBSET(%s, %s)",
                        (f"{uuid}:1-10", f"{uuid}:3-5", f"{uuid}:2", f"{uuid}:1-10"))
            assert cur.fetchone() == (f"{uuid}:1-2:6-10", 1)
        before_third = sum(1 for e in read_all(out / files[0]) + read_all(out / files[1])
                           if e.header.type_code == EventType.GTID)
        with pymysql.connect(host="127.0.0.1", port=h.port, user=ADMIN, password=ADMIN_PASSWORD) as c, \
                c.cursor() as cur:
            cur.execute(f"PURGE BINARY LOGS TO '{files[2]}'")
        assert variables(h.port, "gtid_purged") == (f"{uuid}:1-{before_third}",)
        # A client that lacks purged transactions is refused with MySQL's text; one past them resumes.
        with pytest.raises(Exception) as info:
            read_changes(h.port, f"{uuid}:1-{before_third - 1}")
        assert "1236" in str(info.value) and "purged required binary logs" in str(info.value)
        _, gnos = read_changes(h.port, f"{uuid}:1-{before_third}")
        assert gnos[0] == before_third + 1
        with pytest.raises(Exception) as info:
            read_changes(h.port, f"{uuid}:1-{len(vt) + 5}")
        assert "1236" in str(info.value) and "more GTIDs than the source" in str(info.value)


def test_the_start_is_found_by_binary_search_over_the_files(tmp_path, monkeypatch):
    out = build_fixture("bank-4dn", tmp_path / "g", max_file_size=4 << 10)
    files = index(out)
    assert len(files) > 40
    vt = gno_by_vtso(out)
    probes: list[str] = []
    scans: list[str] = []
    real_prev, real_pos = gtid_mod.previous_gtids_of, gtid_mod.gtid_position_in
    monkeypatch.setattr(gtid_mod, "previous_gtids_of", lambda p: probes.append(p.name) or real_prev(p))
    monkeypatch.setattr(gtid_mod, "gtid_position_in", lambda p, g: scans.append(p.name) or real_pos(p, g))
    for gno in (1, 2, len(vt) // 3, len(vt) // 2, len(vt)):
        probes.clear()
        scans.clear()
        name, pos = locate_gno(out, files, gno)
        ev = next(e for e in read_all(out / name) if e.pos == pos)
        assert ev.header.type_code == EventType.GTID and ev.body.gno == gno
        assert len(probes) <= len(files).bit_length() + 1 and scans == [name]
    assert locate_gno(out, files, len(vt) + 1) is None


def test_gtids_off_writes_none_and_auto_position_is_refused_clearly(tmp_path):
    out = build_fixture("drift-2dn", tmp_path / "g", gtids=False)
    assert not any(e.header.type_code in (EventType.GTID, EventType.PREVIOUS_GTIDS) for e in read_all(out / "binlog.000001"))
    assert json.loads((out / "state.json").read_text())["settings"]["gtids"] is False
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        assert variables(h.port, "gtid_mode", "gtid_executed") == ("OFF", "")
        with pytest.raises(Exception) as info:
            read_changes(h.port, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1")
        assert "1236" in str(info.value) and "no GTIDs" in str(info.value)


def test_parse_gtid_sets():
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert parse_gtid_set(f"{u}:1-5:7,{u}:6") == {u: [(1, 7)]}
    with pytest.raises(ValueError):
        parse_gtid_set("nope:1")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    from tests.mariadb import MariaDB

    server = MariaDB.start(tmp_path_factory.mktemp("replica"), server_id=2)
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("gtids", [True, False], ids=["gtids-on", "gtids-off"])
@pytest.mark.parametrize("name", sorted(p.parent.name for p in ROOT.glob("*/truth.json")))
def test_a_mariadb_replica_replicates_every_fixture_with_gtids_on_and_off(replica, tmp_path, name, gtids):
    """By file and position (MASTER_USE_GTID=no): MariaDB skips MySQL's GTID events as ignorable."""
    from tests.test_server_support import change_master, replica_checksums, truth_checksums, wait_caught_up

    truth = json.loads((ROOT / name / "truth.json").read_text())
    out = build_fixture(name, tmp_path / "g", max_file_size=32 << 10, gtids=gtids)
    files = index(out)
    n_gtids = sum(e.header.type_code == EventType.GTID for f in files for e in read_all(out / f))
    assert (n_gtids > 0) == gtids
    replica.query("STOP SLAVE")
    replica.query("RESET SLAVE ALL")
    for db in {t["db"] for t in truth["tables"].values()}:
        replica.query(f"DROP DATABASE IF EXISTS `{db}`")
    with start_in_thread(ServerConfig(dir=out, users=USERS, server_id=100)) as h:
        change_master(replica, h.port, files[0], 4)
        replica.query("START SLAVE")
        wait_caught_up(replica, files[-1], (out / files[-1]).stat().st_size, timeout=90)
        assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
    replica.query("STOP SLAVE")
