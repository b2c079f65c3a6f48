"""Debezium's MySQL connector reads the global binlog through the endpoint as it reads a MySQL
server: debezium-connector-mysql 3.6.3 with Connector/J 9.1.0 at its defaults (no
``driver.paranoid``, default snapshot locking), run by ``tests/debezium_support.py`` in a JVM.

* from the binlog's first file (no data or schema snapshot): every change event of the ``mixed``
  workload (every column type) equals the simulator's truth by operation, key and value, and the
  state the events build equals the truth's final tables; the ``ddl`` workload's DDL reaches the
  connector's schema history and the rows after each ADD/DROP COLUMN carry the fields of their
  moment;
* ``snapshot.mode=no_data`` against a growing directory: the schema snapshot under FLUSH TABLES
  WITH READ LOCK, then exactly the changes that follow the head it attached at;
* stopped half-way and started again with the same offset and history files: each change of the
  ``bank`` workload exactly once, with GTIDs in the files and without (file/position offsets).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import shutil
import struct
import time
from pathlib import Path

import pytest

from dumper.server import ServerConfig, start_in_thread
from dumper.server.catalog import head_vtso
from gbinlog.local_engine import Settings, build
from tests import debezium_support as dbz
from tests.test_consumers_metadata import truth_changes_by_name

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
USERS = {"dbz": "dbz-secret"}
EPOCH = dt.datetime(1970, 1, 1)
STREAMING = "Keepalive thread is running"     # Debezium's log line once its binlog client reads


def truth_of(name: str) -> dict:
    return json.loads((FIXTURES / name / "truth.json").read_text())


def build_fixture(name: str, out: Path, **settings) -> Path:
    build(sorted(p for p in (FIXTURES / name).iterdir() if p.is_dir()), out, settings=Settings(**settings))
    return out


# -- the truth's values as Debezium's JSON converter writes them ------------------------------------------

def _labels(column_type: str) -> list[str]:
    return [m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", column_type)]


def _fsp(column_type: str) -> int:
    m = re.search(r"\((\d+)\)", column_type)
    return int(m[1]) if m else 0


def _micros_of_time(text: str) -> int:
    negative = text.startswith("-")
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, frac = seconds.partition(".")
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + int((frac + "000000")[:6])
    return -micros if negative else micros


def debezium_value(value: object, column_type: str) -> object:
    """``value`` in the truth's encoding (``simulator.values``) as Debezium 3 renders the column:
    decimals as strings (decimal.handling.mode=string), DATE as days, TIME as microseconds,
    DATETIME as epoch milliseconds (precision ≤ 3) or microseconds, TIMESTAMP as an ISO string in
    UTC, bytes as base64, ENUM/SET as their labels, BIT as little-endian bytes, POINT as x/y/wkb."""
    if value is None:
        return None
    kind = column_type.lower().split("(")[0].split()[0]
    if isinstance(value, dict):
        (tag, text), = value.items()
        if tag == "$dec":
            return text
        if tag == "$date":
            return (dt.date.fromisoformat(text) - EPOCH.date()).days
        if tag == "$time":
            return _micros_of_time(text)
        if tag == "$datetime":
            delta = dt.datetime.fromisoformat(text) - EPOCH
            micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros if _fsp(column_type) > 3 else micros // 1000
        if tag == "$timestamp":
            when = dt.datetime.fromisoformat(text)
            frac = f"{when.microsecond:06d}"[:_fsp(column_type)]      # as many digits as the column has
            return when.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"
        if tag == "$json":
            return json.loads(text) if isinstance(text, str) else text
        if tag == "$hex":
            raw = bytes.fromhex(text)
            if kind in ("point", "geometry"):
                srid = int.from_bytes(raw[:4], "little")
                x, y = struct.unpack_from("<dd", raw, 9)
                return {"x": x, "y": y, "wkb": base64.b64encode(raw[4:]).decode(), "srid": srid or None}
            return base64.b64encode(raw).decode()
        raise AssertionError(f"unknown truth encoding {tag}")
    if kind == "enum":
        return _labels(column_type)[value - 1] if value else ""
    if kind == "set":
        labels = _labels(column_type)
        return ",".join(label for i, label in enumerate(labels) if value >> i & 1)
    if kind == "bit":
        return base64.b64encode(int(value).to_bytes((_fsp(column_type) + 7) // 8, "little")).decode()
    if kind in ("binary", "varbinary", "blob", "tinyblob", "mediumblob", "longblob") and isinstance(value, str):
        raw = value.encode()
        if kind == "binary":
            raw = raw.ljust(_fsp(column_type), b"\0")
        return base64.b64encode(raw).decode()
    return value


def expected_changes(truth: dict, after_vtso: str = "") -> list[tuple]:
    """The truth's row changes (after ``after_vtso``) as (db, table, op, values) in Debezium's terms."""
    schemas = truth["logical_schemas"]
    out = []
    for txn in truth["txns"]:
        if txn["vtso"] <= after_vtso:
            continue
        for change in txn.get("changes", []):
            columns = schemas[change["schema"]]["columns"]

            def row(values, columns=columns):
                return {c["name"]: debezium_value(v, c["type"]) for c, v in zip(columns, values, strict=True)}
            for images in change["rows"]:
                if change["op"] == "update":
                    out.append((change["db"], change["table"], "u", (row(images[0]), row(images[1]))))
                else:
                    out.append((change["db"], change["table"], "c" if change["op"] == "insert" else "d",
                                row(images)))
    return out


def _normal(value: object) -> object:
    """Debezium writes a JSON column as its text: compare it parsed."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def received_changes(events: list[dict]) -> list[tuple]:
    out = []
    for e in events:
        before = {k: _normal(v) for k, v in (e["before"] or {}).items()}
        after = {k: _normal(v) for k, v in (e["after"] or {}).items()}
        value = (before, after) if e["op"] == "u" else after if e["op"] == "c" else before
        out.append((e["source"]["db"], e["source"]["table"], e["op"], value))
    return out


def _normal_expected(changes: list[tuple]) -> list[tuple]:
    def norm(d):
        return {k: _normal(v) if not isinstance(v, (dict, list)) else v for k, v in d.items()}
    return [(db, t, op, tuple(norm(x) for x in v) if op == "u" else norm(v)) for db, t, op, v in changes]


def first_difference(got: tuple, want: tuple) -> object:
    """The first field that differs between two changes: what an assertion message should name."""
    if got[:3] != want[:3]:
        return got[:3], want[:3]
    pairs = zip(got[3], want[3], strict=True) if got[2] == "u" else [(got[3], want[3])]
    for g, w in pairs:
        for k in sorted(set(g) | set(w)):
            if g.get(k) != w.get(k):
                return got[:3], k, g.get(k), w.get(k)
    return None


def final_tables(changes: list[tuple], keys: dict[tuple[str, str], str]) -> dict:
    tables: dict[tuple[str, str], dict] = {}
    for db, table, op, value in changes:
        rows = tables.setdefault((db, table), {})
        key = keys[(db, table)]
        if op == "c":
            rows[value[key]] = value
        elif op == "u":
            rows.pop(value[0][key], None)
            rows[value[1][key]] = value[1]
        else:
            rows.pop(value[key], None)
    return tables


def run_connector(port: int, workdir: Path, *, count: int, server_id: int = 5401, snapshot_mode: str =
                  "configuration_based", timeout: float = 180, then=None) -> dict:
    """Debezium until ``count`` data events have arrived (``then()`` runs once it is streaming);
    stopped cleanly (offsets written). The run's status, with its events under "events"."""
    props = dbz.default_properties("127.0.0.1", port, "dbz", USERS["dbz"], server_id=server_id, workdir=workdir,
                                   snapshot_mode=snapshot_mode)
    run = dbz.start(props, workdir, max_events=count, timeout=timeout)
    try:
        if then is not None:    # once the binlog is being read (after any snapshot)
            deadline = time.monotonic() + 90
            while not (run.log.exists() and STREAMING in run.log.read_text(errors="replace")):
                assert run.alive() and time.monotonic() < deadline, run.tail()
                time.sleep(0.2)
            then()
        status = dbz.wait(run, timeout + 30)
    finally:
        if run.alive():
            dbz.stop(run)
    assert status["error"] is None and status["reason"] == "max events", run.tail()
    status["events"] = dbz.events(run)
    return status


def test_every_change_of_every_column_type_from_the_first_file(tmp_path):
    out = build_fixture("mixed-2dn", tmp_path / "mixed")
    truth = truth_of("mixed-2dn")
    want = _normal_expected(expected_changes(truth))
    assert len(want) > 20_000
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        status = run_connector(h.port, tmp_path / "dbz", count=len(want))
    got = received_changes([e for e in status["events"] if e["_kind"] == "data"])
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (i, first_difference(g, w))
    keys = {(t["db"], t["table"]): t["pk"] for t in truth["tables"].values()}
    built = final_tables(got, keys)
    for t in truth["tables"].values():
        columns = t["columns"]
        rows = {r[[c["name"] for c in columns].index(t["pk"])]:
                {c["name"]: _normal(debezium_value(v, c["type"])) for c, v in zip(columns, r, strict=True)}
                for r in t["rows"]}
        assert built.get((t["db"], t["table"]), {}) == rows, (t["db"], t["table"])
    print(f"\n{len(got)} change events; first after {status['first_event_s']} s, all in {status['run_s']} s")


def test_ddl_reaches_the_schema_history_and_rows_carry_the_fields_of_their_moment(tmp_path):
    out = build_fixture("ddl-3dn", tmp_path / "ddl")
    truth = truth_of("ddl-3dn")
    want = truth_changes_by_name(truth)
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        props = dbz.default_properties("127.0.0.1", h.port, "dbz", USERS["dbz"], server_id=5402,
                                       workdir=tmp_path / "dbz")
        run = dbz.start(props, tmp_path / "dbz", timeout=180)
        try:
            dbz.wait_for_events(run, len(want), timeout=120)
            # the DDLs after the last row change arrive too (TRUNCATE is not a schema change)
            schema_changes = len([d for d in truth["ddls"] if d["sql_kind"] != "TRUNCATE_TABLE"])
            deadline = time.monotonic() + 30
            while len(dbz.events(run, "schema")) < schema_changes and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            dbz.stop(run)
    data = dbz.events(run, "data")
    got = [(e["source"]["db"], e["source"]["table"],
            {"c": "insert", "u": "update", "d": "delete"}[e["op"]],
            (e["before"], e["after"]) if e["op"] == "u" else e["after"] if e["op"] == "c" else e["before"])
           for e in data]
    assert got == want
    ddls = [e["ddl"] for e in dbz.events(run, "schema")]
    # Debezium records a DROP TABLE by its qualified name
    assert ddls == [f"DROP TABLE `{d['db']}`.`{d['table']}`" if d["sql_kind"] == "DROP_TABLE" else d["mysql_sql"]
                    for d in truth["ddls"] if d["sql_kind"] != "TRUNCATE_TABLE"]
    history = [json.loads(line) for line in (tmp_path / "dbz" / "schema-history.jsonl").read_text().splitlines()]
    assert [h["ddl"] for h in history if h.get("ddl")] == ddls
    # ADD COLUMN `c` then DROP COLUMN `note`: t1's rows carry the fields of their moment
    fields = [tuple(v) for db, t, op, v in got if (t, op) == ("t1", "insert")]
    assert ("id", "name", "amount", "note") in fields and ("id", "name", "c", "amount", "note") in fields \
        and ("id", "name", "c", "amount") in fields


def test_no_data_snapshot_attaches_at_the_head_and_streams_what_follows(tmp_path):
    full = build_fixture("bank-4dn", tmp_path / "full", max_file_size=32 << 10)
    truth = truth_of("bank-4dn")
    files = [line.strip()[2:] for line in (full / "binlog.index").read_text().splitlines() if line.strip()]
    assert len(files) >= 4
    growing = tmp_path / "growing"
    growing.mkdir()
    for f in ("meta.db", "state.json"):
        shutil.copy(full / f, growing / f)
    half = len(files) // 2

    def publish(names: list[str]) -> None:
        for name in names:
            shutil.copy(full / name, growing / name)
        with open(growing / "binlog.index", "a") as index:
            index.writelines(f"./{name}\n" for name in names)

    publish(files[:half])
    head = head_vtso(growing, files[:half])
    want = _normal_expected(expected_changes(truth, after_vtso=head))
    assert 50 < len(want) < len(expected_changes(truth))
    with start_in_thread(ServerConfig(dir=growing, users=USERS)) as h:
        status = run_connector(h.port, tmp_path / "dbz", count=len(want), snapshot_mode="no_data",
                               then=lambda: publish(files[half:]))
    got = received_changes([e for e in status["events"] if e["_kind"] == "data"])
    assert got == want
    assert {e["source"]["snapshot"] for e in status["events"] if e["_kind"] == "data"} == {"false"}
    offset = status["offsets"][0]["value"]
    assert offset["file"] == files[-1]


@pytest.mark.parametrize("gtids", [True, False], ids=["gtids", "file-pos"])
def test_stopped_half_way_and_restarted_each_change_exactly_once(tmp_path, gtids):
    out = build_fixture("bank-4dn", tmp_path / "bank", gtids=gtids)
    truth = truth_of("bank-4dn")
    want = _normal_expected(expected_changes(truth))
    first = len(want) // 2 + 7       # inside a transaction: the resume must skip its rows already sent
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        one = run_connector(h.port, tmp_path / "dbz", count=first)
        offset = one["offsets"][0]["value"]
        assert ("gtids" in offset) == gtids, offset
        two = run_connector(h.port, tmp_path / "dbz", count=len(want) - first)
    got = received_changes([e for e in one["events"] + two["events"] if e["_kind"] == "data"])
    assert got == want
