"""Full row metadata, column names included: every TABLE_MAP of the global binlog
carries the optional metadata block a MySQL 8 server writes with ``binlog_row_metadata=FULL``, from
the logical schema in force at that transaction. python-mysql-replication names every column by its
logical name — across the ``ddl`` fixture's online ADD COLUMN and DROP COLUMN, the names change exactly
at the DDL — and ``mariadb-binlog --print-table-metadata`` prints them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from binlog import EventType, read_all
from binlog.columns import Column, enum_column, set_column, varchar_column
from binlog.constants import ColumnType as T
from binlog.table_map import decode_table_map, encode_table_map
from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.mariadb import mariadb_binlog
from tests.test_server_support import PASSWORD, USER, USERS

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
CONN = {"host": "127.0.0.1", "user": USER, "password": PASSWORD}
ROW_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


@pytest.fixture(scope="module")
def ddl_global(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddl") / "global"
    build(sorted(p for p in (ROOT / "ddl-3dn").iterdir() if p.is_dir()), out,
          settings=Settings(max_file_size=64 << 10))
    return out, json.loads((ROOT / "ddl-3dn" / "truth.json").read_text())


def truth_changes_by_name(truth: dict) -> list[tuple]:
    """Every logical row change of the truth, in order, as (db, table, op, {column name: value}) —
    names from the logical schema the change was made under (``schema`` indexes ``logical_schemas``)."""
    schemas = truth["logical_schemas"]
    out = []
    for txn in truth["txns"]:
        for change in txn.get("changes", []):
            names = [c["name"] for c in schemas[change["schema"]]["columns"]]
            for row in change["rows"]:
                if change["op"] == "update":
                    value = tuple(dict(zip(names, image, strict=True)) for image in row)
                else:
                    value = dict(zip(names, row, strict=True))
                out.append((change["db"], change["table"], change["op"], value))
    return out


def pmr_changes(port: int, **kwargs) -> list[tuple]:
    stream = BinLogStreamReader(connection_settings={**CONN, "port": port}, server_id=411, blocking=False,
                                only_events=ROW_EVENTS, **kwargs)
    got = []
    try:
        for ev in stream:
            for row in ev.rows:
                if isinstance(ev, UpdateRowsEvent):
                    got.append((ev.schema, ev.table, "update", (row["before_values"], row["after_values"])))
                else:
                    got.append((ev.schema, ev.table, "insert" if isinstance(ev, WriteRowsEvent) else "delete",
                                row["values"]))
    finally:
        stream.close()
    return got


def test_pmr_names_every_column_by_its_logical_name_across_add_and_drop_column(ddl_global):
    out, truth = ddl_global
    want = truth_changes_by_name(truth)
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        got = pmr_changes(h.port, log_file="binlog.000001", log_pos=4)
    assert len(want) > 500
    assert got == want
    # The fixture's online DDLs are in what was compared: t1 gained `c` and lost `note`, 客户 gained 等级
    # (no rows follow its DROP COLUMN); rows on both sides of each change were named by the schema of
    # their moment.
    t1 = [tuple(v) for db, t, op, v in got if (t, op) == ("t1", "insert")]
    assert ("id", "name", "amount", "note") in t1 and ("id", "name", "c", "amount", "note") in t1 \
        and ("id", "name", "c", "amount") in t1
    kunde = {tuple(v[0] if op == "update" else v) for db, t, op, v in got if t == "客户"}
    assert {("id", "名字", "score"), ("id", "名字", "score", "等级")} <= kunde


def test_every_table_map_names_the_logical_columns_of_its_moment(ddl_global):
    """Our own decoder over the files: the TABLE_MAP names equal the truth's logical schema in force at
    the transaction's vtso (the CTS marker after it), for every TABLE_MAP."""
    out, truth = ddl_global
    history: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
    for s in truth["logical_schemas"]:
        history.setdefault((s["db"], s["table"]), []).append((s["since_vtso"], [c["name"] for c in s["columns"]]))
    pending: list = []
    checked = 0
    for name in [ln.strip()[2:] for ln in (out / "binlog.index").read_text().splitlines()]:
        for ev in read_all(out / name):
            if ev.header.type_code == EventType.TABLE_MAP:
                pending.append(ev.body)
            elif ev.header.type_code == 29 and bytes(ev.raw[19:-4]).startswith(b"\x01CTS::"):
                vtso = bytes(ev.raw[25:-4]).decode()
                for body in pending:
                    since = [names for v, names in history[(body.db, body.table)] if v <= vtso]
                    assert [c.name for c in body.columns] == since[-1], (body.db, body.table, vtso)
                    assert body.optional_metadata is not None and body.optional_metadata.primary_key == ((0, 0),)
                    checked += 1
                pending = []
    assert checked > 200


def test_mariadb_binlog_print_table_metadata_shows_the_logical_names(ddl_global):
    out, _ = ddl_global
    text = mariadb_binlog("-v", "--print-table-metadata", str(out / "binlog.000001"))
    blocks = re.findall(r"Table_map: `ddl`\.`t1` mapped to number \d+\n# Columns\((.*?)\)\n# Primary Key\(id\)",
                        text, re.S)
    assert blocks
    first = re.findall(r"`([^`]+)` ", blocks[0])
    assert first == ["id", "name", "amount", "note"]
    assert "`id` BIGINT NOT NULL" in blocks[0] and "`name` VARCHAR(20) CHARSET utf8mb4" in blocks[0]
    kunde = re.findall(r"Table_map: `ddl`\.`客户` mapped to number \d+\n# Columns\((.*?)\)", text, re.S)
    assert kunde and re.findall(r"`([^`]+)` ", kunde[0])[:2] == ["id", "名字"]


def test_optional_metadata_round_trips_signedness_charsets_enum_set_and_key():
    """The encoder's block decodes to the same facts (the fields MySQL 8 writes with FULL)."""
    cols = [Column(T.LONGLONG, 0, unsigned=True, nullable=False, name="id", primary_key=True),
            Column(T.LONG, 0, name="n"),
            varchar_column(80, charset=45, name="v"), varchar_column(20, charset=63, name="b"),
            varchar_column(40, charset=45, name="w"),
            enum_column(("a", "b"), charset=45, name="e"), set_column(("x", "y", "z"), charset=45, name="s"),
            Column(T.GEOMETRY, 4, name="g")]
    body = decode_table_map(encode_table_map(table_id=7, db="d", table="t", columns=cols))
    meta = body.optional_metadata
    assert meta.signedness == (True, False)
    assert meta.column_names == ("id", "n", "v", "b", "w", "e", "s", "g")
    assert meta.column_charsets == (45, 63, 45)
    assert meta.enum_values == (("a", "b"),) and meta.set_values == (("x", "y", "z"),)
    assert meta.geometry_types == (0,)
    assert meta.primary_key == ((0, 0),)
    assert [c.name for c in body.columns] == [c.name for c in cols]


# -- the MySQL 8.0 dialect --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    from tests.mariadb import MariaDB

    server = MariaDB.start(tmp_path_factory.mktemp("replica"), server_id=2)
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ddl-3dn", "mixed-2dn"])
def test_the_80_dialect_reads_as_the_57_one_and_a_mariadb_replica_replicates_it(replica, tmp_path, name):
    """``server_version=8.0.36-gbinlog``: the FDE carries MySQL 8.0's post-header table (98-byte FDE
    post-header, 41 event types); mariadb-binlog prints exactly the rows of the 5.7 build, `gbinlog
    verify` accepts it, and a MariaDB replica applies it to the truth's checksums."""
    from tests.test_server_support import change_master, replica_checksums, truth_checksums, wait_caught_up

    dns = sorted(p for p in (ROOT / name).iterdir() if p.is_dir())
    truth = json.loads((ROOT / name / "truth.json").read_text())
    v57, v80 = tmp_path / "v57", tmp_path / "v80"
    build(dns, v57, settings=Settings(max_file_size=1 << 30))
    build(dns, v80, settings=Settings(max_file_size=1 << 30, server_version="8.0.36-gbinlog"))
    fde = read_all(v80 / "binlog.000001")[0].body
    assert fde.server_version == "8.0.36-gbinlog" and len(fde.post_header_len) == 41
    assert fde.post_header_len[EventType.FORMAT_DESCRIPTION - 1] == 98

    def rows(d: Path) -> list[str]:
        return [ln for ln in mariadb_binlog("-v", str(d / "binlog.000001")).splitlines() if ln.startswith("###")]

    assert rows(v80) == rows(v57) and len(rows(v57)) > 1000
    from dumper.verify import verify

    report = verify(v80, truth)
    assert report.ok, report.errors[:3]
    replica.query("STOP SLAVE")
    replica.query("RESET SLAVE ALL")
    for db in {t["db"] for t in truth["tables"].values()} | {"ddl_extra"}:
        replica.query(f"DROP DATABASE IF EXISTS `{db}`")
    with start_in_thread(ServerConfig(dir=v80, users=USERS, server_id=100)) as h:
        change_master(replica, h.port, "binlog.000001", 4)
        replica.query("START SLAVE")
        wait_caught_up(replica, "binlog.000001", (v80 / "binlog.000001").stat().st_size, timeout=90)
        assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
    replica.query("STOP SLAVE")
