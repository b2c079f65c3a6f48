"""A real MariaDB replays the shaped stream and ends with the truth's final tables
for the ``ddl`` and ``mixed`` fixtures: once rendered to SQL here (DDL text exactly as
emitted, rows by primary key with columns mapped by position as a replica maps them), once written
as a global binlog by ``dumper.GlobalBinlog`` and piped through the real ``mariadb-binlog``.
"""

from __future__ import annotations

import pytest

from dumper.global_binlog import GlobalBinlog
from schema_shaper import LogicalKind, shape
from simulator.schema import quote_ident
from tests.mariadb import MariaDB, mariadb_binlog
from tests.test_shape_util import Replayer, fixture_txns, truth
from tests.test_simulator_truth import expected_row, fetch


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MariaDB.start(tmp_path_factory.mktemp("shape-replay"))
    yield srv
    srv.stop()


def dbs_of(t: dict) -> list[str]:
    return sorted({x["ddl"]["db"] for x in t["txns"] if x["kind"] == "ddl"})


def check_final_tables(srv: MariaDB, t: dict) -> int:
    cur = srv.connect().cursor()
    cur.execute("SET time_zone = '+00:00'")
    for db in dbs_of(t):
        cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (db,))
        assert sorted(r[0] for r in cur.fetchall()) == sorted(
            v["table"] for v in t["tables"].values() if v["db"] == db), db
    rows = 0
    for key, table in t["tables"].items():
        cur.execute(f"USE {quote_ident(table['db'])}")
        schema = {"table": table["table"], "pk": table["pk"], "columns": table["columns"]}
        got = fetch(cur, schema)
        assert got == [expected_row(r, table["columns"]) for r in table["rows"]], key
        rows += len(got)
    return rows


def drop_dbs(srv: MariaDB, t: dict) -> None:
    for db in dbs_of(t):
        srv.query(f"DROP DATABASE IF EXISTS {quote_ident(db)}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ddl-3dn", "mixed-2dn"])
def test_mariadb_replaying_shaped_sql_ends_with_the_truth(server, name):
    t = truth(name)
    drop_dbs(server, t)
    replayer = Replayer(server)
    shaped = list(shape(fixture_txns(name)))
    replayer.apply_all(shaped)
    replayer.close()
    assert replayer.stats["ddl"] == len(t["ddls"])
    assert replayer.stats["dml"] == sum(x["kind"] == "dml" for x in t["txns"])
    rows = check_final_tables(server, t)
    assert rows > 100
    drop_dbs(server, t)


@pytest.mark.parametrize("name", ["ddl-3dn", "mixed-2dn"])
def test_mariadb_binlog_of_the_global_binlog_replays_to_the_truth(server, tmp_path, name):
    """Through the dumper's writer and the real mariadb-binlog: our TABLE_MAPs (no optional
    metadata), rows and DDL QUERY events (status vars, ``# POLARX_*`` lines) as MariaDB reads them."""
    t = truth(name)
    drop_dbs(server, t)
    shaped = list(shape(fixture_txns(name)))
    assert any(o.kind is LogicalKind.DDL for o in shaped)
    with GlobalBinlog(tmp_path / "out") as out:
        for txn in shaped:
            out.append(txn)
    files = sorted(str(p) for p in (tmp_path / "out").glob("binlog.0*"))
    sql = mariadb_binlog(*files)
    assert "POLARX_TSO=" in sql
    server.run_sql("SET time_zone = '+00:00';\n" + sql)
    check_final_tables(server, t)
    drop_dbs(server, t)
