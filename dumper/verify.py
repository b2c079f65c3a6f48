"""``gbinlog verify`` / ``gbinlog binlogs``: check and list a global binlog directory.

``verify(dir)`` reads every file event by event and checks what a consumer relies on: magic, FDE
(binlog v4, a ``5.`` server version, CRC32), every event's CRC32 and ``log_pos``, ROTATE at the end
of every file but the last naming the next one, ``binlog.index`` listing the files, every
transaction whole inside one file and well formed (``BEGIN [hint+CTS] maps/rows … XID CTS``, a
heartbeat ``BEGIN "# TSO HEARTBEAT TXN" XID CTS``, a DDL ``QUERY CTS``), the vtso of the first
ROWS_QUERY equal to the marker's, vtsos strictly increasing, rows events after a table map of
their table id, no system table (``__cdc__*``, ``__drds_*``). With the simulator's truth
(``truth=``) also: every logical transaction exactly once in vtso order, its rows equal the truth's
logical rows, each DDL the truth's statement, and the final state (the decoded rows replayed with the
DDLs' effects) equal to the truth's tables.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from binlog import BinlogError, EventType, read_events
from dumper.global_binlog import BASE, CTS_PREFIX
from dumper.recovery import list_files, list_index
from dumper.verify_file import FileInfo, FileScan, Written
from extractor.vtso import vtso_timestamp

E = EventType


@dataclass(slots=True)
class VerifyReport:
    files: list[FileInfo] = field(default_factory=list)
    txns: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    events: int = 0
    errors: list[str] = field(default_factory=list)
    truth_checked: bool = False
    tables_checked: int = 0
    fatal: str | None = None      # nothing could be checked: not a global binlog, a bad truth, not the cluster

    @property
    def ok(self) -> bool:
        return not self.errors and self.fatal is None


class _Stop(Exception):
    pass


class _Checker:
    def __init__(self, directory: Path, decode_rows: bool, max_errors: int) -> None:
        self.directory = directory
        self.decode_rows = decode_rows
        self.max_errors = max_errors
        self.report = VerifyReport()
        self.written: list[Written] = []
        self.last_vtso: str | None = None
        self.gtids = False                 # GTID events seen: every transaction must have one
        self.gtid_pending = False
        self.gtid_sid: bytes | None = None
        self.gno = self.file_gtids = 0

    def error(self, msg: str) -> None:
        self.report.errors.append(msg)
        if len(self.report.errors) >= self.max_errors:
            raise _Stop

    def run(self) -> VerifyReport:
        d = self.directory
        try:
            names = list_files(d)
        except Exception as exc:  # DumperError: the index names a missing file
            self.report.errors.append(str(exc))
            return self.report
        listed = list_index(d)
        try:
            if listed is None and names:
                self.error(f"{d}/{BASE}.index is missing")
            elif listed is not None and listed != names:
                self.error(f"{d}/{BASE}.index lists {listed}, the directory holds {names}")
            for i, name in enumerate(names):
                self.file(name, names[i + 1] if i + 1 < len(names) else None)
        except _Stop:
            pass
        return self.report

    # -- GTIDs (dumper.gtid): PREVIOUS_GTIDS after the FDE, one GTID per transaction, gno +1 each ---
    def gtid_event(self, ev: Any, at: str, info: FileInfo) -> None:
        body = ev.body
        if ev.h[1] == E.PREVIOUS_GTIDS:
            before = body.sids[0][1][-1][1] - 1 if body.sids and body.sids[0][1] else 0
            if info.txns or before != self.gno:
                self.error(f"{at}: PREVIOUS_GTIDS says {before} transactions before this file, "
                           f"{self.gno} were written")
            self.file_gtids = 0
            return
        self.gtids = True
        self.file_gtids += 1
        if body.gno != self.gno + 1 or (self.gtid_sid is not None and body.sid != self.gtid_sid):
            self.error(f"{at}: GTID {body.uuid}:{body.gno} after {self.gno} (expected gno {self.gno + 1}, one sid)")
        if (body.last_committed, body.sequence_number) != (self.file_gtids - 1, self.file_gtids):
            self.error(f"{at}: GTID logical clock {body.last_committed}/{body.sequence_number}, expected "
                       f"{self.file_gtids - 1}/{self.file_gtids}")
        self.gno, self.gtid_sid, self.gtid_pending = body.gno, body.sid, True

    # -- one file: the transaction grammar --------------------------------------------------------
    def file(self, name: str, next_name: str | None) -> None:
        path = self.directory / name
        info = FileInfo(name, path.stat().st_size)
        self.report.files.append(info)
        where = str(path)
        scan = FileScan(self, name, next_name, info)
        try:
            for ev in read_events(path):
                self.report.events += 1
                pos = ev.pos
                at = f"{where}: offset {pos}"
                if ev.h[4] != pos + ev.h[3]:
                    self.error(f"{at}: log_pos {ev.h[4]} is not the event's end {pos + ev.h[3]}")
                if not scan.event(ev, at):
                    return
        except BinlogError as exc:
            self.error(str(exc))
            return
        scan.end(where)


def verify(directory: str | os.PathLike, truth: str | os.PathLike | dict | None = None, *,
           max_errors: int = 50) -> VerifyReport:
    """Check a global binlog directory (and, with ``truth``, its content); see the module doc."""
    from dumper.stream_group import is_stream_group

    if is_stream_group(directory):
        from dumper.verify_group import verify_group

        return verify_group(Path(directory), truth, max_errors=max_errors)
    checker = _Checker(Path(directory), truth is not None, max_errors)
    report = checker.report
    try:
        has_files = bool(list_files(Path(directory)))
    except Exception:  # noqa: BLE001 - DumperError (the index names a missing file): run() reports it
        has_files = True
    if not has_files:
        report.fatal = (f"{directory}: no global binlog here (no {BASE}.index, no {BASE}.NNNNNN file)"
                        + (" — a DN's binlog directory? verify checks gbinlog build's output"
                           if any(Path(directory).glob("mysql-bin.*")) else ""))
        return report
    data, report.fatal = truth_for(Path(directory), truth)
    if report.fatal:
        return report
    checker.run()
    if data is not None and report.ok:
        try:
            _check_truth(checker, data)
        except _Stop:
            pass
        report.truth_checked = True
    return report


# -- against the simulator's truth ---------------------------------------------------------------------
def truth_for(directory: Path, truth: str | os.PathLike | dict | None) -> tuple[dict | None, str | None]:
    """(the truth as ``directory`` must hold it, None) — read, checked to be the cluster the output
    was built from, filtered as the output was — or (None, why not)."""
    if truth is None:
        return None, None
    data = truth if isinstance(truth, dict) else load_truth(truth)
    if isinstance(data, str):
        return None, data
    fatal = check_cluster_of_output(directory, data)
    if fatal:
        return None, fatal
    return filtered_truth(directory, data), None


def load_truth(path: str | os.PathLike) -> dict | str:
    """The simulator's truth.json, or a one-line reason why ``path`` is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"--truth {path}: not a truth.json ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith("gbinlog-simulator-truth/") \
            or not isinstance(data.get("txns"), list):
        return f"--truth {path}: not a truth.json (no gbinlog-simulator-truth format, no txns)"
    return data


def filtered_truth(directory: Path, truth: dict) -> dict:
    """The truth as an output built with ``[filter]`` (``state.json`` settings) must hold it: rows of
    dropped tables out of their transactions (a transaction left empty out), their DDLs and final
    tables out."""
    from dumper.state import StateError, load_state
    from schema_shaper.filters import TableFilter

    try:
        state = load_state(directory)
    except StateError:
        return truth
    f = TableFilter.from_settings((state.settings or {}).get("filter")) if state else None
    if f is None:
        return truth
    txns = []
    for t in truth["txns"]:
        if t["kind"] == "dml" and t.get("changes"):
            changes = [c for c in t["changes"] if f.wants_table(c["db"], c["table"])]
            if not changes:
                continue
            t = {**t, "changes": changes}
        elif t["kind"] == "ddl":
            d = t["ddl"]
            if not (f.wants_table(d["db"], d["table"]) if d.get("table") else f.wants_database(d["db"])):
                continue
        txns.append(t)
    tables = {k: v for k, v in truth["tables"].items() if f.wants_table(v["db"], v["table"])}
    return {**truth, "txns": txns, "tables": tables}


def check_cluster_of_output(directory: Path, truth: dict) -> str | None:
    """The DNs the output was built from (``state.json``) are the cluster's DNs (the truth's): a DN
    missing, or one the cluster does not have, is named."""
    from dumper.state import StateError, load_state

    try:
        state = load_state(directory)
    except StateError as exc:
        return str(exc)
    if state is None or not state.server_ids:
        return None
    built = set(state.server_ids) - {"live"}
    cluster = {d["id"] for d in truth.get("dns") or [] if isinstance(d, dict) and "id" in d}
    if not built or not cluster:
        return None
    for dn in sorted(built - cluster):
        return (f"DN {dn} is of another cluster: {directory} was built from DNs {', '.join(sorted(built))}, the "
                f"cluster has {', '.join(sorted(cluster))}")
    for dn in sorted(cluster - built):
        return (f"DN {dn} is missing: {directory} was built from DNs {', '.join(sorted(built))}, the cluster has "
                f"{', '.join(sorted(cluster))}: its transactions are not in this global binlog")
    return None


_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}


def _same(type_text: str, got: Any, want: Any) -> bool:
    if got is None or want is None:
        return got is None and want is None
    family = type_text.split("(", 1)[0].split(" ", 1)[0].strip().lower()
    bits = _INT_BITS.get(family)
    if bits is not None and "unsigned" in type_text.lower() and isinstance(got, int) and got < 0:
        got += 1 << bits  # a table map without signedness metadata decodes as signed
    if family == "float":
        return math.isclose(got, want, rel_tol=1e-6)
    if family == "double":
        return math.isclose(got, want, rel_tol=1e-12)
    return got == want


def _check_truth(ck: _Checker, truth: dict, *, any_row_order: bool = False) -> None:
    """``any_row_order``: a transaction's rows may come in another order than the truth's as long
    as each row's changes keep theirs (a stream group's parts joined again, ``dumper.verify_group``)."""
    from binlog.json_values import decode_value

    schemas = truth["logical_schemas"]
    expected = [t for t in truth["txns"] if t["kind"] in ("dml", "ddl")]
    got = [w for w in ck.written if w.kind != "heartbeat"]
    beats = [w.vtso for w in ck.written if w.kind == "heartbeat"]
    want_beats = [t["vtso"] for t in truth["txns"] if t["kind"] == "heartbeat"
                  and vtso_timestamp(t["vtso"]) % 30 == 0]
    if beats != want_beats:
        ck.error(f"heartbeats written {len(beats)}, the truth has {len(want_beats)} on a second dividing 30")
    if [w.vtso for w in got] != [t["vtso"] for t in expected]:
        have, want = {w.vtso for w in got}, {t["vtso"] for t in expected}
        ck.error(f"transactions differ from the truth: {len(got)} written, {len(expected)} expected; missing "
                 f"{sorted(want - have)[:3]}, unexpected {sorted(have - want)[:3]}")
        return
    tables: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
    for w, t in zip(got, expected, strict=True):
        where = f"{w.file}: offset {w.pos} (vtso {w.vtso})"
        if t["kind"] == "ddl":
            ddl = t["ddl"]
            if w.kind != "ddl":
                ck.error(f"{where}: a {w.kind} transaction where the truth has DDL {ddl['mysql_sql'][:60]!r}")
                continue
            statement = "\n".join(line for line in w.sql.split("\n") if not line.startswith("# POLARX_"))
            if statement.strip() != ddl["mysql_sql"].strip():
                ck.error(f"{where}: DDL {statement[:80]!r}, the truth has {ddl['mysql_sql'][:80]!r}")
            _apply_ddl(tables, ddl)
            continue
        if w.kind != "dml":
            ck.error(f"{where}: a {w.kind} transaction where the truth has DML")
            continue
        got_rows = [(db, table, op, r) for db, table, op, rows in w.changes for r in rows]
        want_rows = [(c["db"], c["table"], c["op"], r, c["schema"]) for c in t["changes"] for r in c["rows"]]
        if any_row_order:
            got_rows, want_rows = _by_key(got_rows, want_rows, schemas, decode_value)
        if len(got_rows) != len(want_rows):
            ck.error(f"{where}: {len(got_rows)} rows, the truth has {len(want_rows)}")
            continue
        for k, ((db, table, op, row), (tdb, ttable, top, trow, si)) in enumerate(zip(got_rows, want_rows, strict=True)):
            columns = schemas[si]["columns"]
            images = row if op == "update" else (row,)
            timages = trow if op == "update" else (trow,)
            if (db, table, op) != (tdb, ttable, top) or any(len(img) != len(columns) for img in images):
                ck.error(f"{where}: row {k} is {op} {db}.{table} with {[len(i) for i in images]} columns, the truth "
                         f"has {top} {tdb}.{ttable} with {len(columns)}")
                break
            for img, timg in zip(images, timages, strict=True):
                for c, v, tv in zip(columns, img, timg, strict=True):
                    if not _same(c["type"], v, decode_value(tv)):
                        ck.error(f"{where}: row {k} of {db}.{table} column {c['name']} is {v!r}, the truth has "
                                 f"{decode_value(tv)!r}")
                        break
            _apply_row(tables, db, table, op, images, schemas[si])
    _check_final(ck, tables, truth, decode_value)


def _by_key(got_rows: list, want_rows: list, schemas: list, decode_value) -> tuple[list, list]:
    """Both row lists in (db, table, primary key) order; the changes of one row keep their order."""
    pk = {}
    for db, table, _op, _r, si in want_rows:
        names = [c["name"] for c in schemas[si]["columns"]]
        pk[(db, table)] = names.index(schemas[si]["pk"])

    def text(v: Any) -> str:
        return bytes(v).decode("latin-1") if isinstance(v, bytes | bytearray) else str(v)

    def got_key(row: tuple) -> tuple:
        db, table, op, r = row
        image = r[0] if op == "update" else r
        i = pk.get((db, table))
        return db, table, "" if i is None or i >= len(image) else text(image[i])

    def want_key(row: tuple) -> tuple:
        db, table, op, r, _si = row
        image = r[0] if op == "update" else r
        return db, table, text(decode_value(image[pk[(db, table)]]))
    return sorted(got_rows, key=got_key), sorted(want_rows, key=want_key)


def _apply_row(tables: dict, db: str, table: str, op: str, images: tuple, schema: dict) -> None:
    names = [c["name"] for c in schema["columns"]]
    pk = names.index(schema["pk"])
    rows = tables.setdefault((db, table), {})
    if op == "insert":
        rows[images[0][pk]] = dict(zip(names, images[0], strict=True))
    elif op == "delete":
        rows.pop(images[0][pk], None)
    else:
        rows.pop(images[0][pk], None)
        rows[images[1][pk]] = dict(zip(names, images[1], strict=True))


_RENAME = re.compile(r"RENAME TABLE `((?:[^`]|``)+)` TO `((?:[^`]|``)+)`", re.I)


def _apply_ddl(tables: dict, ddl: dict) -> None:
    kind, db, table = ddl["sql_kind"], ddl["db"], ddl["table"]
    if kind == "RENAME_TABLE":
        m = _RENAME.search(ddl["mysql_sql"])
        if m and (db, table) in tables:
            tables[(db, m.group(2).replace("``", "`"))] = tables.pop((db, table))
    elif kind in ("TRUNCATE_TABLE", "CREATE_TABLE"):
        tables[(db, table)] = {}
    elif kind == "DROP_TABLE":
        tables.pop((db, table), None)
    elif kind == "DROP_DATABASE":
        for key in [k for k in tables if k[0] == db]:
            del tables[key]


def _check_final(ck: _Checker, tables: dict, truth: dict, decode_value) -> None:
    want = truth["tables"]
    have = {f"{db}.{t}" for (db, t), rows in tables.items()}
    if set(want) - have:
        ck.error(f"final state: tables {sorted(set(want) - have)} of the truth never got rows")
    for key, spec in want.items():
        db, table = spec["db"], spec["table"]
        rows = tables.get((db, table), {})
        columns = spec["columns"]
        defaults = {c["name"]: decode_value(c["default"]) if c.get("default") is not None else None
                    for c in columns}
        pk = [c["name"] for c in columns].index(spec["pk"])
        got = sorted(([r.get(c["name"], defaults[c["name"]]) for c in columns] for r in rows.values()),
                     key=lambda r: r[pk])
        exp = [[decode_value(v) for v in r] for r in spec["rows"]]
        ck.report.tables_checked += 1
        if len(got) != len(exp):
            ck.error(f"final state of {key}: {len(got)} rows, the truth has {len(exp)}")
            continue
        for g, e in zip(got, exp, strict=True):
            if not all(_same(c["type"], a, b) for c, a, b in zip(columns, g, e, strict=True)):
                ck.error(f"final state of {key}: row {g!r}, the truth has {e!r}")
                break


# -- listing --------------------------------------------------------------------------------------------------
def list_binlogs(directory: str | os.PathLike) -> list[FileInfo]:
    """Each file with its size and the first and last vtso of its CTS markers."""
    d = Path(directory)
    out = []
    for name in list_files(d):
        path = d / name
        info = FileInfo(name, path.stat().st_size)
        for ev in _markers(path):
            info.first_vtso = info.first_vtso or ev
            info.last_vtso = ev
            info.txns += 1
        out.append(info)
    return out


def _markers(path: Path) -> Iterator[str]:
    prefix = b"\x01" + CTS_PREFIX
    try:
        for ev in read_events(path):
            if ev.h[1] == E.ROWS_QUERY and ev.raw[19:25] == prefix:
                yield ev.raw[25:-4].decode("ascii", "replace").split("::", 1)[0]
    except BinlogError:
        return
