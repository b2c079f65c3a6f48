"""Shaping the ``ddl`` fixture against its truth.

Every DML row of every logical table, decoded from the shaped TABLE_MAP and rows payloads, has
exactly the logical columns in force at its vtso — during each physical-DDL window too — and the
values of the truth; every logical DDL appears once, in vtso order, as the truth's MySQL DDL; no
physical DDL appears. The add-column, drop-column and modify-column windows are checked one by one
against what the DN actually wrote (the input TABLE_MAP's columns).
"""

from __future__ import annotations

from functools import cache

import sqlglot

from binlog.constants import ColumnType as T
from binlog.rows_events import decode_table_map
from extractor import TxnKind
from schema_shaper import LogicalKind, Shaper, shape
from schema_shaper.types import binlog_column
from simulator.values import decode_value
from tests.test_shape_util import block_rows, fixture_txns, query_text, truth, truth_rows

NAME = "ddl-3dn"


@cache
def shaped(name: str = NAME) -> tuple:
    txns = fixture_txns(name)
    return txns, list(shape(txns))


def truth_column(c: dict):
    """The TABLE_MAP column MySQL writes for a truth column ({name, type, nullable}), from the type
    text alone (utf8mb4 tables)."""
    dtype = sqlglot.parse_one(f"CREATE TABLE x (c {c['type']})", read="mysql").this.expressions[0].args["kind"]
    return binlog_column(c["name"], dtype, nullable=c["nullable"], charset="utf8mb4")


def test_one_output_per_input_in_order_and_no_system_tables():
    txns, out = shaped()
    assert [o.vtso for o in out] == [g.vtso for g in txns]
    assert all(o.source is g for o, g in zip(out, txns, strict=True))
    kinds = {TxnKind.DML: LogicalKind.DML, TxnKind.HEARTBEAT: LogicalKind.HEARTBEAT,
             TxnKind.PHYSICAL_DDL: LogicalKind.NONE, TxnKind.INSTRUCTION: LogicalKind.NONE}
    for g, o in zip(txns, out, strict=True):
        if g.kind in kinds:
            assert o.kind is kinds[g.kind], g.describe()
        else:
            assert g.kind is TxnKind.DDL_MARK and o.kind is LogicalKind.DDL
        for b in o.blocks:
            assert not b.db.startswith("__cdc") and not b.table.startswith("__cdc")


def test_every_row_has_the_logical_columns_in_force_at_its_vtso():
    """Rows decoded from the output equal the truth's logical rows, with the truth's
    logical column list and types, for every change of every DML txn."""
    t = truth(NAME)
    _, out = shaped()
    dml = [o for o in out if o.kind is LogicalKind.DML]
    expected = [x for x in t["txns"] if x["kind"] == "dml"]
    assert [o.vtso for o in dml] == [x["vtso"] for x in expected]
    windows = 0
    for o, x in zip(dml, expected, strict=True):
        assert len(o.blocks) == len(x["changes"]), o.vtso
        for block, change in zip(o.blocks, x["changes"], strict=True):
            version = t["logical_schemas"][change["schema"]]
            tm, op, rows = block_rows(block)
            assert (block.db, block.table, op) == (change["db"], change["table"], change["op"])
            assert (tm.db, tm.table) == (change["db"], change["table"])
            assert [(c.type, c.meta) for c in tm.columns] == [
                (truth_column(c).type, truth_column(c).meta) for c in version["columns"]], (o.vtso, change)
            assert rows == truth_rows(change), (o.vtso, change["trace"])
            windows += bool(change.get("filled") or change.get("dropped"))
    assert windows >= 15  # rows written by shards in the middle of a DDL did come through (17 in the fixture)


def test_each_logical_ddl_once_in_order_and_no_physical_ddl():
    t = truth(NAME)
    txns, out = shaped()
    ddls = [o for o in out if o.kind is LogicalKind.DDL]
    assert [(o.vtso, o.sql) for o in ddls] == [(d["vtso"], d["mysql_sql"]) for d in t["ddls"]]
    for o, d in zip(ddls, t["ddls"], strict=True):
        db, text = query_text(o)
        assert db == ("" if d["sql_kind"] == "CREATE_DATABASE" else d["db"]) == o.db
        lines = text.split("\n")
        assert f"# POLARX_TSO={d['vtso']}" in lines
        assert f"# POLARX_DDL_ID={d['job_id']}" in lines
        assert text.endswith("\n" + d["mysql_sql"])
    physical = {p["sql"] for dn in t["physical_ddls"].values() for p in dn}
    assert sum(g.kind is TxnKind.PHYSICAL_DDL for g in txns) == sum(len(v) for v in t["physical_ddls"].values())
    for g, o in zip(txns, out, strict=True):
        if g.kind is TxnKind.PHYSICAL_DDL:
            assert o.kind is LogicalKind.NONE and o.query is None and not o.blocks
        if o.query is not None:
            assert query_text(o)[1].rsplit("\n", 1)[-1] not in physical
            assert "_p0000" not in query_text(o)[1]


def input_columns(g, change_index: int) -> list:
    tm = g.blocks[change_index].events[0]
    return decode_table_map(tm.payload, tm.ctx).columns


def window_blocks(table: str):
    """(input txn, block index, shaped block, truth change, mark vtso) for the rows of ``table``."""
    t = truth(NAME)
    txns, out = shaped()
    by_vtso = {x["vtso"]: x for x in t["txns"] if x["kind"] == "dml"}
    for g, o in zip(txns, out, strict=True):
        if o.kind is not LogicalKind.DML:
            continue
        for i, (block, change) in enumerate(zip(o.blocks, by_vtso[o.vtso]["changes"], strict=True)):
            if change["table"] == table:
                yield g, i, block, change


def mark_vtso(sql: str) -> str:
    return next(d["vtso"] for d in truth(NAME)["ddls"] if d["sql"] == sql)


def test_add_column_window():
    """Rows from shards already altered lose the new column until the mark; after it every row has it."""
    mark = mark_vtso("ALTER TABLE `t1` ADD COLUMN `c` varchar(16) DEFAULT 'x' AFTER `name`")
    before_with_c = after = 0
    for g, i, block, change in window_blocks("t1"):
        phys = [c.name for c in input_columns(g, i)]
        tm, _, rows = block_rows(block)
        width = len(tm.columns)
        if g.vtso < mark:
            assert width == 4  # id, name, amount, note
            if "c" in phys:
                before_with_c += 1
                assert change["dropped"] == ["c"]
                assert all(len(r) == 4 for r in (x for row in rows for x in (row if change["op"] == "update" else [row])))
        elif g.vtso < mark_vtso("ALTER TABLE `t1` DROP COLUMN `note`"):
            after += 1
            assert width == 5 and "c" in phys
            assert rows == truth_rows(change)
    assert before_with_c >= 2 and after >= 10


def test_drop_column_window():
    """Rows from shards that already dropped the column get the logical default until the mark."""
    mark = mark_vtso("ALTER TABLE `t1` DROP COLUMN `note`")
    filled = 0
    for g, i, block, change in window_blocks("t1"):
        phys = [c.name for c in input_columns(g, i)]
        tm, op, rows = block_rows(block)
        if g.vtso < mark and "note" not in phys and "c" in phys:
            filled += 1
            assert change["filled"] == ["note"]
            assert len(tm.columns) == 5
            images = [x for row in rows for x in (row if op == "update" else [row])]
            assert all(img[4] == b"n/a" for img in images)  # note DEFAULT 'n/a'
            assert rows == truth_rows(change)
        elif g.vtso > mark:
            assert len(tm.columns) == 4
    assert filled >= 2


def test_modify_column_window_reencodes_values():
    """INT → BIGINT and VARCHAR(20) → VARCHAR(64): rows from altered shards carry the new physical
    types until the mark and are re-encoded in the logical ones (values unchanged)."""
    mark_amount = mark_vtso("ALTER TABLE `t1` MODIFY COLUMN `amount` bigint NOT NULL DEFAULT 0")
    mark_name = mark_vtso("ALTER TABLE `t1` MODIFY COLUMN `name` varchar(64) DEFAULT NULL")
    seen = {"amount": 0, "name": 0}
    for g, i, block, change in window_blocks("t1"):
        phys = {c.name: c for c in input_columns(g, i)}
        tm, _, rows = block_rows(block)
        out = {c: tm.columns[k] for k, c in enumerate(["id", "name", "c", "amount", "note"][:len(tm.columns)])}
        if len(tm.columns) != 5:
            continue
        if g.vtso < mark_amount and phys["amount"].type == T.LONGLONG:
            seen["amount"] += 1
            assert out["amount"].type == T.LONG
        if g.vtso < mark_name and phys["name"].meta == 64 * 4:
            seen["name"] += 1
            assert (out["name"].type, out["name"].meta) == (T.VARCHAR, 20 * 4)
        if g.vtso > mark_amount:
            assert out["amount"].type == T.LONGLONG
        if g.vtso > mark_name:
            assert out["name"].meta == 64 * 4
        assert rows == truth_rows(change)
    assert seen["amount"] >= 1 and seen["name"] >= 1, seen


def test_model_alter_results_equal_meta_info_create_sql(caplog):
    """The ALTER engine (sqlglot) and META_INFO createSql agree after every mark of the fixture; a
    difference would be logged (createSql wins)."""
    caplog.set_level("WARNING")
    shaper = Shaper()
    for g in fixture_txns(NAME):
        shaper.shape_txn(g)
    assert not [r for r in caplog.records if "differs from META_INFO" in r.getMessage()]
    t = truth(NAME)
    for key, table in t["tables"].items():
        model = shaper.tables[(table["db"].lower(), table["table"].lower())].schema
        assert model.names == [c["name"] for c in table["columns"]], key
        assert [c.nullable for c in model.columns] == [c["nullable"] for c in table["columns"]]
        assert [c.default for c in model.columns] == [decode_value(c["default"]) for c in table["columns"]]
        assert list(model.primary_key) == [table["pk"]]
