"""Names and bad input, plus the pass-through and physical-model paths.

* A logical database and table whose names carry unicode, backticks, spaces and mixed case (the bank
  fixture's marks rewritten) round-trip: DDL text, TABLE_MAP names, and a real MariaDB that ends with
  exactly those names and the truth's rows.
* Rows of a physical table with no topology entry, an unparseable logical or physical DDL, a value
  that does not fit the logical column: a typed error naming DN, position (checked by reading the
  DN file at that offset) and table; with ``on_error="skip"`` the offending block or DDL is left out
  with a warning and everything else is exactly what a clean run emits.
"""

from __future__ import annotations

import base64
import dataclasses

import pytest

from binlog import read_events
from binlog.constants import EventType
from binlog.events import decode_body
from binlog.rows_events import decode_rows_event, decode_table_map, encode_rows_event
from binlog.table_map import decode_optional_metadata
from extractor import TxnKind
from merger import GlobalTxn
from schema_shaper import (
    BadDdl,
    LogicalKind,
    MetaStore,
    Shaper,
    UnknownPhysicalSchema,
    UnknownTable,
    ValueMismatch,
    collect_history,
    shape,
)
from schema_shaper.rows import _name, table_map_core
from simulator.schema import quote_ident
from tests.test_meta_store import signature
from tests.test_shape_util import (
    FIXTURES,
    Replayer,
    block_rows,
    fixture_txns,
    query_text,
    rewrite_mark,
    rewrite_meta,
    truth,
    with_payload,
    without_column_names,
)
from tests.test_simulator_truth import expected_row, fetch

DB = "Bänk`Ö 数据"
TABLE = "Acc`Ünts 账户"


def renamed_bank() -> list[GlobalTxn]:
    def change(row: dict, meta: dict) -> None:
        meta["lowerCased"] = False
        row["SCHEMA_NAME"] = DB
        if row["SQL_KIND"] == "CREATE_DATABASE":
            row["DDL_SQL"] = f"CREATE DATABASE {quote_ident(DB)}"
            meta["logicDbMeta"]["schema"] = DB
        else:
            row["TABLE_NAME"] = TABLE
            row["DDL_SQL"] = row["DDL_SQL"].replace("`accounts`", quote_ident(TABLE), 1)
            tm = meta["logicTableMeta"]
            tm["tableName"] = TABLE
            tm["createSql"] = tm["createSql"].replace("`accounts`", quote_ident(TABLE), 1)
    # bank.audit_log (rows and its CREATE TABLE) is left out: only the renamed table remains
    audit = {d["vtso"] for d in truth("bank-4dn")["ddls"] if d["table"] == "audit_log"}
    out = []
    for g in fixture_txns("bank-4dn"):
        if g.vtso in audit:
            continue
        if g.kind is TxnKind.DDL_MARK:
            out.append(rewrite_meta(g, change))
            continue
        if g.kind is TxnKind.DML:
            kept = [b for b in g.blocks if not b.table.startswith("audit_log_")]
            if not kept:
                continue
            if len(kept) != len(g.blocks):
                g = dataclasses.replace(g, blocks=kept)
        out.append(g)
    return out


def test_unicode_backtick_mixed_case_names_round_trip(mariadb):
    out = list(shape(renamed_bank()))
    ddls = [o for o in out if o.kind is LogicalKind.DDL]
    assert [query_text(o)[0] for o in ddls] == ["", DB]
    assert ddls[0].sql == "CREATE DATABASE `Bänk``Ö 数据`"
    assert ddls[1].sql.startswith("CREATE TABLE `Acc``Ünts 账户` (")
    blocks = [b for o in out for b in o.blocks]
    assert len(blocks) > 400
    for b in blocks:
        tm = decode_table_map(b.table_map)
        assert (b.db, b.table) == (tm.db, tm.table) == (DB, TABLE)
    replayer = Replayer(mariadb)
    replayer.apply_all(out)
    names = mariadb.query("SELECT table_schema, table_name FROM information_schema.tables "
                          "WHERE table_schema NOT IN ('mysql', 'sys', 'information_schema', 'performance_schema')")
    assert names == [(DB, TABLE)]
    final = truth("bank-4dn")["tables"]["bank.accounts"]
    cur = mariadb.connect(DB).cursor()
    schema = {"table": TABLE, "pk": final["pk"], "columns": final["columns"]}
    assert fetch(cur, schema) == [expected_row(r, final["columns"]) for r in final["rows"]]


# -- bad input ------------------------------------------------------------------------------------------
def event_at(dn: str, file: str, offset: int, fixture: str):
    return next(iter(read_events(FIXTURES / fixture / dn / file, start=offset)))


def without_mark(fixture: str, table: str) -> list[GlobalTxn]:
    t = truth(fixture)
    skip = {d["vtso"] for d in t["ddls"] if d["sql_kind"] == "CREATE_TABLE" and d["table"] == table}
    assert len(skip) == 1
    return [g for g in fixture_txns(fixture) if g.vtso not in skip]


def test_rows_of_a_table_without_topology_stop_with_dn_position_and_table():
    with pytest.raises(UnknownTable) as info:
        list(shape(without_mark("bank-4dn", "accounts")))
    e = info.value
    assert e.dn in {d["id"] for d in truth("bank-4dn")["dns"]} and e.file.startswith("mysql-bin.")
    ev = event_at(e.dn, e.file, e.offset, "bank-4dn")
    assert ev.type_code == EventType.TABLE_MAP
    body = decode_table_map(ev.payload, ev.ctx)
    assert e.table == f"{body.db}.{body.table}" and body.table.startswith("accounts_")
    assert f"DN {e.dn} at {e.file}:{e.offset}, table {e.table}" in str(e)


def test_skip_leaves_out_only_the_unmapped_table(caplog):
    """ddl fixture without the CREATE TABLE mark of 客户: its rows and its ALTER marks are skipped
    loudly; every other transaction, block and DDL is byte-identical to the clean run."""
    caplog.set_level("WARNING")
    clean = {o.vtso: o for o in shape(fixture_txns("ddl-3dn"))}
    out = list(shape(without_mark("ddl-3dn", "客户"), on_error="skip"))
    warnings = [r.getMessage() for r in caplog.records if "SKIPPED" in r.getMessage()]
    assert any("UnknownTable" in w or "no topology entry" in w for w in warnings)
    assert sum("客户" in w for w in warnings) >= 2  # the ALTERs of 客户 that no longer apply
    skipped_blocks = 0
    def no_ids(blocks: list) -> list:
        # Table ids differ (one table version fewer in the history); everything else must not.
        return [(b.db, b.table, b.table_map[6:], [(t, p[6:]) for t, p in b.rows], b.hint) for b in blocks]
    for o in out:
        ref = clean[o.vtso]
        keep = [b for b in ref.blocks if b.table != "客户"]
        skipped_blocks += len(ref.blocks) - len(keep)
        assert no_ids(o.blocks) == no_ids(keep), o.vtso
        if ref.kind is LogicalKind.DDL and "客户" not in ref.sql:
            assert signature(o) == signature(ref)
        elif ref.kind is LogicalKind.DDL:
            assert o.kind is LogicalKind.NONE
    assert skipped_blocks > 20


def mark_of(fixture: str, sql: str) -> GlobalTxn:
    vtso = next(d["vtso"] for d in truth(fixture)["ddls"] if d["sql"] == sql)
    return next(g for g in fixture_txns(fixture) if g.vtso == vtso)


def garbled_ddl() -> tuple[GlobalTxn, list[GlobalTxn]]:
    """The ddl fixture with the ADD COLUMN c mark's DDL_SQL made unparseable."""
    target = mark_of("ddl-3dn", "ALTER TABLE `t1` ADD COLUMN `c` varchar(16) DEFAULT 'x' AFTER `name`")

    def garble(row: dict) -> dict:
        row["DDL_SQL"] = b"ALTER TABLE `t1` FROBNICATE COLUMN `c`"
        return row
    bad = rewrite_mark(target, garble)
    return target, [bad if g is target else g for g in fixture_txns("ddl-3dn")]


def test_unparseable_logical_ddl_names_dn_position_and_table(caplog):
    target, txns = garbled_ddl()
    with pytest.raises(BadDdl) as info:
        list(shape(txns))
    e = info.value
    assert e.table == "ddl.t1" and e.vtso == target.vtso
    ev = event_at(e.dn, e.file, e.offset, "ddl-3dn")
    assert decode_table_map(ev.payload, ev.ctx).table == "__cdc_ddl_record__"
    assert "unparseable DDL" in str(e)

    caplog.set_level("WARNING")
    out = list(shape(txns, on_error="skip"))
    assert next(o for o in out if o.vtso == target.vtso).kind is LogicalKind.NONE
    assert any("SKIPPED" in r.getMessage() and "unparseable" in r.getMessage() for r in caplog.records)
    # Never a wrong-shaped row: every row decodes with its own TABLE_MAP, and t1 keeps its 4
    # columns until the next mark (whose createSql brings c back, with a warning).
    next_mark = next(d["vtso"] for d in truth("ddl-3dn")["ddls"] if d["vtso"] > target.vtso)
    widths = set()
    for o in out:
        for b in o.blocks:
            tm, op, rows = block_rows(b)
            images = [x for r in rows for x in (r if op == "update" else [r])]
            assert all(len(img) == len(tm.columns) for img in images)
            if b.table == "t1" and target.vtso < o.vtso < next_mark:
                widths.add(len(tm.columns))
    assert widths == {4}
    assert any("differs from META_INFO" in r.getMessage() for r in caplog.records)


def test_a_skipped_ddl_is_skipped_alike_after_a_restart_and_in_a_range(tmp_path):
    """A skipped mark is not stored, and a shaper rebuilt from the store (restart) or from the
    collected history (which still holds it: a Spark range) skips it too: the same bytes."""
    target, txns = garbled_ddl()
    with MetaStore.open(tmp_path / "meta.db") as store:
        full = [signature(o) for o in shape(txns, store=store, on_error="skip")]
        assert target.vtso not in {e.vtso for e in store.history()}
    entries = collect_history(txns)
    assert target.vtso in {e.vtso for e in entries}
    later = [g.vtso for g in txns if g.vtso > target.vtso]
    for x in (target.vtso, later[10], later[60]):
        with MetaStore.open(tmp_path / "meta.db") as store:
            restarted = Shaper.as_of(store, x, on_error="skip")
            assert [signature(restarted.shape_txn(g)) for g in txns if g.vtso > x] == [f for f in full if f[0] > x]
        ranged = Shaper.from_history(entries, x, on_error="skip")
        assert [signature(ranged.shape_txn(g)) for g in txns if g.vtso > x] == [f for f in full if f[0] > x]


def test_unparseable_physical_ddl_names_dn_position_and_table(caplog):
    txns = list(fixture_txns("ddl-3dn"))
    i = next(k for k, g in enumerate(txns) if g.kind is TxnKind.PHYSICAL_DDL
             and g.branches[0].sql.startswith("ALTER TABLE `t1_"))
    g = txns[i]
    branch = dataclasses.replace(g.branches[0], sql="ALTER TABLE `t1_zz` FROBNICATE")
    txns[i] = GlobalTxn(g.vtso, g.kind, [], [branch])
    with pytest.raises(BadDdl) as info:
        list(shape(txns))
    e = info.value
    assert (e.dn, e.file, e.offset, e.table) == (branch.dn, branch.start.file, branch.start.offset, branch.db)
    ev = event_at(e.dn, e.file, e.offset, "ddl-3dn")
    assert ev.type_code == EventType.QUERY and decode_body(EventType.QUERY, ev.payload).query.startswith(b"ALTER")
    caplog.set_level("WARNING")
    out = list(shape(txns, on_error="skip"))
    assert out[i].kind is LogicalKind.NONE
    assert any("SKIPPED" in r.getMessage() and "physical DDL" in r.getMessage() for r in caplog.records)


def test_value_that_does_not_fit_the_logical_column(caplog):
    """In the MODIFY amount INT → BIGINT window a shard already on BIGINT writes 2**40: the logical
    column is still INT, so the row cannot be shaped."""
    mark = mark_of("ddl-3dn", "ALTER TABLE `t1` MODIFY COLUMN `amount` bigint NOT NULL DEFAULT 0").vtso
    txns = list(fixture_txns("ddl-3dn"))

    def insert_on_bigint_shard():
        for k, g in enumerate(txns):
            if g.kind is not TxnKind.DML or g.vtso > mark:
                continue
            for j, blk in enumerate(g.blocks):
                tm = blk.events[0]
                body = decode_table_map(tm.payload, tm.ctx)
                names = [c.name for c in body.columns]
                if blk.table.startswith("t1_") and "amount" in names and \
                        body.columns[names.index("amount")].type == 8 and blk.events[1].type_code == EventType.WRITE_ROWS:
                    return k, g, j, blk, tm, body, names
        raise AssertionError("no insert from an altered shard in the window")
    k, g, j, blk, tm, body, names = insert_on_bigint_shard()
    ev = blk.events[1]
    rows = decode_rows_event(ev.type_code, ev.payload, ev.ctx).rows(body)
    rows[0][names.index("amount")] = 2 ** 40
    payload = encode_rows_event(ev.type_code, table_id=body.table_id, columns=list(body.columns), rows=rows)
    new_blk = dataclasses.replace(blk, events=[tm, with_payload(ev, ev.type_code, payload), *blk.events[2:]])
    txns[k] = GlobalTxn(g.vtso, g.kind, [new_blk if b is blk else b for b in g.blocks], g.branches)
    with pytest.raises(ValueMismatch) as info:
        list(shape(txns))
    e = info.value
    assert (e.file, e.offset, e.table) == (ev.ctx.source.rsplit("/", 1)[-1], ev.pos, f"{blk.db}.{blk.table}")
    assert e.dn == next(b.dn for b in g.branches if any(x.events[0] is tm for x in b.blocks))
    caplog.set_level("WARNING")
    clean = list(shape(fixture_txns("ddl-3dn")))
    out = list(shape(txns, on_error="skip"))
    assert [b.rows for b in out[k].blocks] == [b.rows for i, b in enumerate(clean[k].blocks) if i != j]
    assert any("SKIPPED" in r.getMessage() and "cannot be put in the logical form" in r.getMessage()
               for r in caplog.records)


def strip_optional_metadata(txns) -> list[GlobalTxn]:
    """Every TABLE_MAP re-encoded without optional metadata (no column names), as a DN with
    ``binlog_row_metadata=MINIMAL`` writes them."""
    return [GlobalTxn(g.vtso, g.kind, without_column_names(g.blocks), g.branches) for g in txns]


@pytest.mark.parametrize("fixture", ["ddl-3dn", "mixed-2dn"])
def test_table_maps_without_column_names_use_the_physical_model(fixture):
    """Same output when the DN's TABLE_MAPs carry no names: the physical model (physical DDL and
    META_INFO createSql4Phy) supplies them, during DDL windows too."""
    clean = [signature(o) for o in shape(fixture_txns(fixture))]
    stripped = [signature(o) for o in shape(strip_optional_metadata(fixture_txns(fixture)))]
    assert stripped == clean


def test_no_names_and_no_physical_model_is_an_error():
    txns = strip_optional_metadata(fixture_txns("bank-4dn"))
    shaper = Shaper()
    it = iter(txns)
    for g in it:
        shaper.shape_txn(g)
        if g.kind is TxnKind.DDL_MARK and shaper.tables:
            break
    shaper.physical.clear()
    g = next(g for g in it if g.kind is TxnKind.DML)
    with pytest.raises(UnknownPhysicalSchema) as info:
        shaper.shape_txn(g)
    assert info.value.table.startswith("bank_p0000") and info.value.offset == g.blocks[0].events[0].pos


# -- pass-through, snapshot, QUERY payload ----------------------------------------------------------------
@pytest.mark.parametrize("fixture", ["bank-4dn", "mixed-2dn", "drift-2dn", "scale-2dn"])
def test_pass_through_only_replaces_table_id_and_names(fixture):
    """Without DDL windows every block passes: the TABLE_MAP is the DN's column part behind the new
    id and logical names, then the logical optional metadata (names of the logical table), each rows
    payload the DN's bytes after the id."""
    shaper = Shaper()
    n = 0
    tables = truth(fixture)["tables"]
    for g in fixture_txns(fixture):
        o = shaper.shape_txn(g)
        if o.kind is not LogicalKind.DML:
            continue
        assert len(o.blocks) == len(g.blocks)
        for src, b in zip(g.blocks, o.blocks, strict=True):
            tm = src.events[0]
            start, end = table_map_core(tm.payload)
            core = tm.payload[start:end]
            assert len(tm.payload) > end  # the DN's optional metadata (physical) is not kept
            head, _, optional = b.table_map.partition(core)
            assert head.endswith(_name(b.db) + _name(b.table))
            meta = decode_optional_metadata(optional, decode_table_map(b.table_map).columns)
            assert list(meta.column_names) == [c["name"] for c in tables[f"{b.db}.{b.table}"]["columns"]]
            assert all(p[:6] == b.table_map[:6] for _, p in b.rows)
            assert [(t, p[6:]) for t, p in b.rows] == [(e.type_code, e.payload[6:]) for e in src.events[1:]]
            n += len(b.rows)
    assert shaper.counts["reshape"] == 0 and n > 100


def test_initial_snapshot_gives_the_same_stream():
    """A shaper started from a snapshot (TopologyRecords with createSql) shapes the DML exactly as
    one that saw the marks: table ids come from the snapshot's sorted order."""
    t = truth("bank-4dn")
    records = [d["meta_info"] for d in t["ddls"]]
    records[1:] = [{**r, "schema": "bank"} for r in records[1:]]     # accounts, audit_log
    shaper = Shaper()
    shaper.load_snapshot(records)
    clean = {o.vtso: signature(o) for o in shape(fixture_txns("bank-4dn"))}
    marks = {d["vtso"] for d in t["ddls"]}
    for g in fixture_txns("bank-4dn"):
        if g.vtso not in marks:
            assert signature(shaper.shape_txn(g)) == clean[g.vtso]


def test_ddl_query_payload():
    d = next(d for d in truth("ddl-3dn")["ddls"] if d["sql_kind"] == "CREATE_TABLE")
    o = next(o for o in shape(fixture_txns("ddl-3dn")) if o.vtso == d["vtso"])
    body = decode_body(EventType.QUERY, o.query)
    assert (body.thread_id, body.exec_time, body.error_code, body.db) == (1, 0, 0, "ddl")
    sv = body.status_vars
    assert sv.flags2 == 0
    assert sv.sql_mode == (1 << 21) | (1 << 30)  # STRICT_TRANS_TABLES, NO_ENGINE_SUBSTITUTION
    assert (sv.catalog_nz, sv.time_zone, sv.charset, sv.updated_db_names) == ("std", "SYSTEM", (45, 45, 45), ("ddl",))
    lines = body.query.decode().split("\n")
    assert lines[0] == "# POLARX_ORIGIN_SQL_ENCODE=BASE64"
    assert base64.b64decode(lines[1].split("=", 1)[1]).decode() == d["sql"]  # with dbpartition by
    assert lines[2:4] == [f"# POLARX_TSO={d['vtso']}", f"# POLARX_DDL_ID={d['job_id']}"]
    assert "\n".join(lines[4:]) == d["mysql_sql"]
    create_db = next(o for o in shape(fixture_txns("ddl-3dn")) if o.kind is LogicalKind.DDL)
    body = decode_body(EventType.QUERY, create_db.query)
    assert body.db == "" and body.query.decode().split("\n")[0] == "# POLARX_ORIGIN_SQL=CREATE DATABASE `ddl`"


def test_dml_only_on_system_tables_is_none():
    """Rows on ``__cdc__*`` / ``__drds_*`` tables never reach the output: a DML txn with nothing
    else is NONE (still yielded, for checkpoints)."""
    shaper = Shaper()
    txns = fixture_txns("bank-4dn")
    mark = next(g for g in txns if g.kind is TxnKind.DDL_MARK)
    for g in txns[:txns.index(mark) + 1]:
        shaper.shape_txn(g)
    fake = GlobalTxn(mark.vtso[:-1] + "9", TxnKind.DML, mark.blocks, mark.branches)
    assert mark.blocks[0].db.startswith("__cdc__")
    out = shaper.shape_txn(fake)
    assert out.kind is LogicalKind.NONE and out.blocks == [] and out.source is fake
    dml = next(g for g in txns if g.kind is TxnKind.DML and g.vtso > mark.vtso)
    drds = [dataclasses.replace(b, table="__drds_global_tx_log") for b in dml.blocks]
    assert shaper.shape_txn(GlobalTxn(dml.vtso, TxnKind.DML, drds, dml.branches)).kind is LogicalKind.NONE


def test_ddl_not_visible_to_mysql_changes_the_model_but_is_not_written():
    """VISIBILITY 2 (PolarDB-X only) or a GSI: no QUERY in the output, the model still follows."""
    txns = list(fixture_txns("bank-4dn"))
    i = next(k for k, g in enumerate(txns) if g.kind is TxnKind.DDL_MARK and b"CREATE TABLE" in
             g.blocks[0].events[1].raw)

    def protect(row: dict) -> dict:
        row["VISIBILITY"] = 2
        return row
    txns[i] = rewrite_mark(txns[i], protect)
    clean = [signature(o) for o in shape(fixture_txns("bank-4dn"))]
    out = [signature(o) for o in shape(txns)]
    assert out[i][1] is LogicalKind.NONE and clean[i][1] is LogicalKind.DDL
    assert out[:i] + out[i + 1:] == clean[:i] + clean[i + 1:]


def test_on_error_is_checked():
    with pytest.raises(ValueError):
        Shaper(on_error="ignore")
