"""The truth is self-consistent: replaying each fixture's logical txns in vtso
order into a real MariaDB — the logical DDLs at their marks, every row change checked against the
server's row before it is applied — ends with the truth's final tables, and the bank total equals
the expected total after every txn once the accounts are loaded."""

import datetime as dt
import json
from functools import cache
from pathlib import Path

import pytest
from pymysql.constants import CLIENT

from simulator.replay import change_statements, ddl_statement, where_pk
from simulator.schema import quote_ident
from simulator.types import parse_type
from simulator.values import decode_value
from tests.mariadb import MariaDB

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SETS = sorted(p.name for p in FIXTURES.iterdir() if (p / "truth.json").is_file())


@cache
def truth(name: str) -> dict:
    return json.loads((FIXTURES / name / "truth.json").read_text())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MariaDB.start(tmp_path_factory.mktemp("truth-replay"))
    yield srv
    srv.stop()


def select_list(columns: list[dict]) -> str:
    """Columns as comparable values: FLOAT widened exactly, ENUM/SET/BIT as their numbers."""
    out = []
    for c in columns:
        f = parse_type(c["type"]).family
        name = quote_ident(c["name"])
        if f == "float":
            out.append(f"CAST({name} AS DOUBLE)")
        elif f in ("enum", "set", "bit"):
            out.append(f"{name} + 0")
        else:
            out.append(name)
    return ", ".join(out)


def expected(value, column: dict):
    """A truth value as pymysql returns the ``select_list`` column."""
    v = decode_value(value)
    if v is None:
        return None
    t = parse_type(column["type"])
    if isinstance(v, bytes) and t.is_text:
        return v.decode()
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)          # session time_zone is +00:00
    return v


def expected_row(row: list, columns: list[dict], skip: frozenset = frozenset()) -> tuple:
    return tuple(expected(v, c) for v, c in zip(row, columns, strict=True) if c["name"] not in skip)


def fetch(cur, schema: dict, where: str = "", skip: frozenset = frozenset()) -> list[tuple]:
    columns = [c for c in schema["columns"] if c["name"] not in skip]
    cur.execute(f"SELECT {select_list(columns)} FROM {quote_ident(schema['table'])} {where} "
                f"ORDER BY {quote_ident(schema['pk'])}")
    return [tuple(r) for r in cur.fetchall()]


def pk_order(schema: dict, rows: list[list]) -> list[list]:
    i = [c["name"] for c in schema["columns"]].index(schema["pk"])
    return sorted(rows, key=lambda r: r[i])


def check_before_images(cur, change: dict, schema: dict) -> None:
    """The server's rows equal the change's before images (columns the shard lacked are the
    logical default in the image, the real value on the server: not compared)."""
    before = [r[0] for r in change["rows"]] if change["op"] == "update" else change["rows"]
    skip = frozenset(change.get("filled", ()))
    want = [expected_row(r, schema["columns"], skip) for r in pk_order(schema, before)]
    assert fetch(cur, schema, "WHERE " + where_pk(schema, before), skip) == want, change["trace"]


def replay(srv: MariaDB, t: dict) -> dict:
    conn = srv.connect(client_flag=CLIENT.FOUND_ROWS)
    cur = conn.cursor()
    cur.execute("SET time_zone = '+00:00'")
    bank = t.get("bank")
    stats = {"txns": 0, "changes": 0, "ddls": 0, "bank_checks": 0}
    vtsos = [x["vtso"] for x in t["txns"]]
    assert vtsos == sorted(vtsos) and len(set(vtsos)) == len(vtsos)
    for txn in t["txns"]:
        if txn["kind"] == "ddl":
            db, sql = ddl_statement(txn["ddl"])
            if db is not None:
                cur.execute(f"USE {quote_ident(db)}")
            cur.execute(sql)
            stats["ddls"] += 1
            continue
        if txn["kind"] != "dml":
            continue                           # heartbeats and instructions change no user data
        cur.execute("BEGIN")
        deltas = 0
        for change in txn["changes"]:
            schema = t["logical_schemas"][change["schema"]]
            assert (schema["db"], schema["table"]) == (change["db"], change["table"])
            cur.execute(f"USE {quote_ident(change['db'])}")
            if change["op"] != "insert":
                check_before_images(cur, change, schema)
            for sql, rows in change_statements(change, schema):
                assert cur.execute(sql) == rows, sql[:200]
            if bank and change["table"] == bank["table"] and change["op"] == "update":
                i = [c["name"] for c in schema["columns"]].index("balance")
                deltas += sum(after[i] - before[i] for before, after in change["rows"])
            stats["changes"] += 1
        cur.execute("COMMIT")
        stats["txns"] += 1
        if bank:
            assert deltas == 0, txn["vtso"]                 # no transfer creates or destroys money
            cur.execute(f"SELECT COUNT(*), SUM(balance) FROM {bank['db']}.{bank['table']}")
            count, total = cur.fetchone()
            if count == bank["accounts"]:
                assert total == bank["expected_total"], txn["vtso"]
                stats["bank_checks"] += 1
    return stats


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_replaying_the_truth_gives_its_final_tables(server, name):
    t = truth(name)
    stats = replay(server, t)
    assert stats["txns"] > 80 and stats["ddls"] >= 2
    cur = server.connect().cursor()
    cur.execute("SET time_zone = '+00:00'")
    dbs = {x["ddl"]["db"] for x in t["txns"] if x["kind"] == "ddl"}
    for db in sorted(dbs):
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (db,))
        assert sorted(r[0] for r in cur.fetchall()) == sorted(
            v["table"] for v in t["tables"].values() if v["db"] == db), db
    assert t["tables"]
    for key, table in t["tables"].items():
        cur.execute(f"USE {quote_ident(table['db'])}")
        schema = {"table": table["table"], "pk": table["pk"], "columns": table["columns"]}
        got = fetch(cur, schema)
        assert got == [expected_row(r, table["columns"]) for r in table["rows"]], key
        cur.execute(f"SHOW CREATE TABLE {quote_ident(table['table'])}")
        shown = cur.fetchone()[1]
        for c in table["columns"]:
            assert quote_ident(c["name"]) in shown
    if t.get("bank"):
        assert stats["bank_checks"] >= 200
        total = sum(r[2] for r in t["tables"]["bank.accounts"]["rows"])
        assert total == t["bank"]["expected_total"] == t["bank"]["accounts"] * 1000
    for db in sorted(dbs):
        cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(db)}")
