"""The CDC system tables in the fixtures' DN binlogs, read back with the binlog library
(docs/formats.md): heartbeats every 200 ms on every DN; DDL marks after every physical DDL of
their job, with META_INFO as TopologyRecord JSON whose createSql is the logical schema; physical DDLs
at different times while DML continues on altered and unaltered shards; the scale-out instruction."""

import json
import re
from functools import cache
from pathlib import Path

import sqlglot
from sqlglot import exp

from binlog import EventType, read_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
T = EventType
ROWS = (T.WRITE_ROWS, T.UPDATE_ROWS, T.DELETE_ROWS)


@cache
def truth(name: str) -> dict:
    return json.loads((FIXTURES / name / "truth.json").read_text())


@cache
def items(name: str, dn: str) -> tuple:
    """(kind, order, payload, µs of its group) of one DN in binlog order: ("ddl", i, (sql, db)),
    ("rows", i, (db, table, type, rows, column names)) decoded with their TABLE_MAP, and
    ("commit", i, (query,))."""
    d = FIXTURES / name / dn
    out = []
    tm = None
    now = 0
    in_txn = False
    for line in (d / "mysql-bin.index").read_text().split():
        for e in read_events(d / line.removeprefix("./")):
            t = e.type_code
            if t == T.GTID:
                now = e.body.immediate_commit_timestamp
            elif t == T.QUERY:
                q = e.body.query.decode()
                if q.startswith(("XA START", "BEGIN")):
                    in_txn = True
                elif q.startswith("XA END"):
                    in_txn = False
                elif q.startswith("XA COMMIT"):
                    out.append(("commit", len(out), (q,), now))
                elif not q.startswith("XA ROLLBACK"):
                    assert not in_txn
                    out.append(("ddl", len(out), (q, e.body.db), now))
            elif t == T.XID:
                in_txn = False
            elif t == T.TABLE_MAP:
                tm = e.body
            elif t in ROWS:
                out.append(("rows", len(out), (tm.db, tm.table, t, e.body.rows(tm),
                                               [c.name for c in tm.columns]), now))
    return tuple(out)


def rows_on(name: str, dn: str, table: str) -> list:
    return [(i, p, now) for kind, i, p, now in items(name, dn) if kind == "rows" and p[1] == table]


def test_heartbeat_every_200ms_on_every_dn():
    t = truth("bank-4dn")
    beats = [x for x in t["txns"] if x["kind"] == "heartbeat"]
    assert len(beats) >= 5
    ms = [x["tso"] >> 22 for x in beats]
    gaps = [b - a for a, b in zip(ms, ms[1:], strict=False)]
    # Every 200 ms; the last one right after the workload ends. Prepare jitter moves the TSO a little.
    assert all(190 <= g <= 215 for g in gaps[:-1]), gaps
    for dn in [d["id"] for d in t["dns"]]:
        hb = rows_on("bank-4dn", dn, "__cdc_heartbeat__")
        assert len(hb) == len(beats)
        first, *rest = hb
        assert first[1][2] == T.WRITE_ROWS and all(p[2] == T.UPDATE_ROWS for _, p, _ in rest)
        assert first[1][0] == f"__cdc___{int(dn[2:]):06d}"
        for _, p, _ in hb:
            row = p[3][-1][1] if p[2] == T.UPDATE_ROWS else p[3][-1]
            assert row[:2] == [1, b"heartbeat"]


def mark_rows(name: str, dn: str) -> list[dict]:
    out = []
    for i, p, _ in rows_on(name, dn, "__cdc_ddl_record__"):
        (row,) = p[3]
        out.append({"at": i, **dict(zip(p[4], row, strict=True))})
    return out


def check_topology(meta: dict, t: dict) -> None:
    assert meta["lowerCased"] is True
    assert set(meta) <= {"lowerCased", "logicDbMeta", "logicTableMeta"} and len(meta) >= 2
    dns = {d["id"] for d in t["dns"]}
    if "logicDbMeta" in meta:
        db = meta["logicDbMeta"]
        assert set(db) == {"schema", "charset", "phySchemas"} and db["charset"] == "utf8mb4"
        for i, ps in enumerate(db["phySchemas"]):
            assert set(ps) == {"storageInstId", "group", "schema"} and ps["storageInstId"] in dns
            assert ps["schema"] == f"{db['schema']}_p{i:05d}" and ps["group"] == ps["schema"].upper() + "_GROUP"
    if "logicTableMeta" in meta:
        tm = meta["logicTableMeta"]
        assert set(tm) == {"tableName", "tableCollation", "tableType", "createSql", "createSql4Phy",
                           "phySchemas"}
        assert tm["tableCollation"] == "utf8mb4_general_ci" and tm["tableType"] == 0
        phy = {ps["phyTables"][0] for ps in tm["phySchemas"]}
        assert len(phy) == 1 and re.fullmatch(re.escape(tm["tableName"]) + r"_[a-z0-9]{4}", phy.pop())
        for ps in tm["phySchemas"]:
            assert set(ps) == {"storageInstId", "group", "schema", "phyTables"}
            assert ps["storageInstId"] in dns and ps["group"] == ps["schema"].upper() + "_GROUP"


def created_columns(sql: str) -> list[str]:
    tree = sqlglot.parse_one(sql, read="mysql")
    return [c.name for c in tree.find_all(exp.ColumnDef)]


def test_marks_carry_topology_json_and_the_logical_schema():
    for name in ("ddl-3dn", "scale-2dn", "bank-4dn"):
        t = truth(name)
        for dn in [d["id"] for d in t["dns"]][:2]:
            marks = mark_rows(name, dn)
            assert [m["ID"] for m in marks] == [d["record_id"] for d in t["ddls"]]
            for m, d in zip(marks, t["ddls"], strict=True):
                assert m["SQL_KIND"].decode() == d["sql_kind"] and m["DDL_SQL"].decode() == d["sql"]
                assert m["SCHEMA_NAME"].decode() == d["db"] and m["VISIBILITY"] == 1
                assert m["JOB_ID"] == d["job_id"]
                meta = json.loads(m["META_INFO"])
                assert meta == d["meta_info"]
                check_topology(meta, t)
                if d["sql_kind"] in ("CREATE_TABLE", "ALTER_TABLE", "RENAME_TABLE"):
                    version = next(v for v in t["logical_schemas"] if v["since_vtso"] == d["vtso"])
                    tm = meta["logicTableMeta"]
                    assert tm["tableName"] == version["table"] == (d["table"] if d["sql_kind"] != "RENAME_TABLE"
                                                                   else tm["tableName"])
                    assert created_columns(tm["createSql"]) == [c["name"] for c in version["columns"]]
                    assert created_columns(tm["createSql4Phy"]) == [c["name"] for c in version["columns"]]


def test_marks_follow_every_physical_ddl_of_their_job_at_different_times():
    name = "ddl-3dn"
    t = truth(name)
    dns = [d["id"] for d in t["dns"]]
    alters = [d for d in t["ddls"] if d["sql_kind"] == "ALTER_TABLE"]
    assert len(alters) >= 6
    saw_altered_rows = saw_unaltered_rows = 0
    for d in alters:
        clause = d["sql"].split(" ", 3)[3]                 # ALTER TABLE `t` <clause>
        phys = d["meta_info"]["logicTableMeta"]["phySchemas"][0]["phyTables"][0]
        times = []
        ddl_at: dict[str, int] = {}
        mark_at: dict[str, int] = {}
        for dn in dns:
            its = items(name, dn)
            hits = [(i, now) for kind, i, p, now in its
                    if kind == "ddl" and p[0] == f"ALTER TABLE `{phys}` {clause}"]
            assert len(hits) == 1, (dn, d["sql"])
            ddl_at[dn] = hits[0][0]
            times.append(hits[0][1])
            mark = next(m for m in mark_rows(name, dn) if m["ID"] == d["record_id"])
            mark_at[dn] = mark["at"]
            assert ddl_at[dn] < mark_at[dn]                # the mark after this shard's DDL
        assert len(set(times)) == len(times)               # shards change at different times
        first = min(times)
        for dn in dns:
            for i, _, now in rows_on(name, dn, phys):
                if ddl_at[dn] < i < mark_at[dn]:
                    saw_altered_rows += 1                 # physical schema ahead of the logical one
                elif i < ddl_at[dn] and now > first:
                    saw_unaltered_rows += 1               # another shard already changed
    assert saw_altered_rows >= 5 and saw_unaltered_rows >= 5


def test_scale_out_and_scale_in_instructions():
    """dn2 joins at 40 % (a group moves onto it), dn1 leaves at 75 % (its groups move away first)."""
    name = "scale-2dn"
    t = truth(name)
    assert [d["id"] for d in t["dns"]] == ["dn0", "dn1", "dn2"]
    start, instr, leave = [x for x in t["txns"] if x["kind"] == "instruction"]
    # CDC start: the initial topology (LogicMetaTopology) on the first two DNs, before any heartbeat
    assert start["instruction"]["type"] == "CdcStart" and start["dns"] == ["dn0", "dn1"]
    (cdc,) = start["instruction"]["content"]["logicDbMetas"]
    assert cdc["schema"] == "__cdc__" and [p["storageInstId"] for p in cdc["phySchemas"]] == ["dn0", "dn1"]
    assert start["vtso"] < min(x["vtso"] for x in t["txns"] if x["kind"] == "heartbeat")
    for dn in ("dn0", "dn1"):
        row = [p for _, p, _ in rows_on(name, dn, "__cdc_instruction__")][0]
        values = dict(zip(row[4], row[3][0], strict=True))
        assert values["INSTRUCTION_TYPE"] == b"CdcStart" and values["CLUSTER_ID"] == b"0"
        assert json.loads(values["INSTRUCTION_CONTENT"]) == start["instruction"]["content"]
    assert instr["instruction"]["content"] == {"storageInstList": ["dn0", "dn1", "dn2"]}
    assert leave["instruction"]["content"] == {"storageInstList": ["dn0", "dn2"]}
    assert instr["dns"] == leave["dns"] == ["dn0", "dn1", "dn2"] and leave["instruction"]["left_dn"] == "dn1"
    for dn in ("dn0", "dn1", "dn2"):
        rows = [p for _, p, _ in rows_on(name, dn, "__cdc_instruction__")]
        for row, want in zip(rows[-2:] if dn != "dn2" else rows, (instr, leave), strict=True):
            values = dict(zip(row[4], row[3][0], strict=True))
            assert values["INSTRUCTION_TYPE"] == b"StorageInstChange"
            assert json.loads(values["INSTRUCTION_CONTENT"]) == want["instruction"]["content"]
            assert re.fullmatch(rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                                values["INSTRUCTION_ID"])
    beats = [x for x in t["txns"] if x["kind"] == "heartbeat"]
    before = [b for b in beats if b["vtso"] < instr["vtso"]]
    between = [b for b in beats if instr["vtso"] < b["vtso"] < leave["vtso"]]
    after = [b for b in beats if b["vtso"] > leave["vtso"]]
    assert before and between and after
    assert all(b["dns"] == ["dn0", "dn1"] for b in before)
    assert all(b["dns"] == ["dn0", "dn1", "dn2"] for b in between)
    assert all(b["dns"] == ["dn0", "dn2"] for b in after)
    # dn2 starts later: its first group is after dn0 ran for a while; it then carries user data.
    assert items(name, "dn2")[0][3] > items(name, "dn0")[40][3]
    new_db = next(d for d in t["ddls"] if d["sql_kind"] == "CREATE_DATABASE" and d["vtso"] > instr["vtso"])
    assert [p["storageInstId"] for p in new_db["meta_info"]["logicDbMeta"]["phySchemas"]] == ["dn0", "dn1", "dn2"]
    assert any(kind == "rows" and p[0] == "scale_new_p00002" for kind, _, p, _ in items(name, "dn2"))
    # no committed transaction touches dn1 after its branch of the leaving instruction
    assert not [x for x in t["txns"] if x["vtso"] > leave["vtso"] and "dn1" in x["dns"]]
    changes = [(x["vtso"], c) for x in t["txns"] if x["kind"] == "dml" for c in x["changes"]]
    assert {c["dn"] for v, c in changes if v > leave["vtso"]} == {"dn0", "dn2"}
    assert {c["dn"] for v, c in changes if c["phys_db"] == "scale_p00001" and v < leave["vtso"]} == {"dn1"}


def test_group_moves_physical_ddl_and_ignored_backfill():
    """A moved group: the target creates the physical db and tables (dn2 before its join), the rows
    arrive as IGNORE_BINLOG XA (format id 4, none of it in the truth's transactions), and a source
    that stays drops its copy; the leaving dn1 drops nothing."""
    name = "scale-2dn"
    t = truth(name)
    instr = [x for x in t["txns"] if x["kind"] == "instruction"][1]
    phys = {dn: [d["sql"].split(" (")[0] for d in ddls
                if not d["db"].startswith("__cdc__") and "`__cdc__" not in d["sql"]]
            for dn, ddls in t["physical_ddls"].items()}
    assert phys["dn2"][:2] == ["CREATE DATABASE IF NOT EXISTS `scale_p00000` CHARACTER SET utf8mb4 COLLATE "
                               "utf8mb4_general_ci", f"CREATE TABLE `{phys['dn0'][1].split('`')[1]}`"]
    assert phys["dn0"][2:4] == [f"DROP TABLE IF EXISTS `{phys['dn0'][1].split('`')[1]}`",
                                "DROP DATABASE IF EXISTS `scale_p00000`"]
    assert not any(q.startswith("DROP") for q in phys["dn1"])
    # dn2's copy of scale_p00000 is made before the instruction that adds it reaches dn2
    dn2 = items(name, "dn2")
    created = next(i for kind, i, p, _ in dn2 if kind == "ddl" and p[1] == "scale_p00000")
    joined = next(i for kind, i, p, _ in dn2 if kind == "rows" and p[1] == "__cdc_instruction__")
    assert created < joined
    xa4 = 0
    for dn in ("dn0", "dn2"):
        d = FIXTURES / name / dn
        for line in (d / "mysql-bin.index").read_text().split():
            for e in read_events(d / line.removeprefix("./")):
                if e.type_code == T.QUERY and e.body.query.startswith(b"XA START") and e.body.query.endswith(b",4"):
                    xa4 += 1
    assert xa4 >= 3
    backfilled = {c["phys_db"] for x in t["txns"] if x["kind"] == "dml" and x["vtso"] < instr["vtso"]
                  for c in x["changes"]}
    assert "scale_p00000" in backfilled
