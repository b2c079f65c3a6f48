"""``truth.json``: what a correct global binlog must contain, derived from what the cluster did.

Built after the run, in vtso order (TSO txns by (TSO, txnId); local txns right after
the TSO txn that preceded them in their DN's binlog). Row images are converted from the physical row
(by column name) to the logical columns in force at that vtso — the last DDL mark before it —
exactly as a shaper must (docs/architecture.md): missing column → logical default, extra → dropped.
Replaying the logical changes gives the final tables, which are checked against the cluster's
physical rows before anything is written (a mismatch is a simulator bug and stops the run).

Value encoding: ``simulator.values``. Layout: ``fixtures/README.md``.
"""

from __future__ import annotations

import json
from typing import Any

from simulator.schema import TableSchema
from simulator.txn import PhysOp, Txn
from simulator.values import encode_value

FORMAT = "gbinlog-simulator-truth/1"


class _Encoder:
    """Row dict → JSON value list for one schema (JSON columns tagged), cached per schema object."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[TableSchema, list[tuple[str, bool]]]] = {}

    def columns(self, schema: TableSchema) -> list[tuple[str, bool]]:
        hit = self._cache.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = (schema, [(c.name, c.type.family == "json") for c in schema.columns])
            self._cache[id(schema)] = hit
        return hit[1]

    def values(self, schema: TableSchema, row: dict[str, Any]) -> list[Any]:
        return [encode_value(row[n], j) for n, j in self.columns(schema)]


def logical_row(schema: TableSchema, phys: dict[str, Any]) -> dict[str, Any]:
    """reshape by name: logical columns only, a missing one takes its default."""
    return {c.name: phys[c.name] if c.name in phys else c.default for c in schema.columns}


class TruthBuilder:
    def __init__(self, cl: Any) -> None:
        self.cl = cl
        self.enc = _Encoder()
        self.schemas: dict[tuple[str, str], TableSchema] = {}
        self.state: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
        self.ddls: list[dict[str, Any]] = []
        # Logical table versions: a change names the version its rows follow ("schema": index).
        self.versions: list[dict[str, Any]] = []
        self.current: dict[tuple[str, str], int] = {}
        self._vtso = ""

    def new_version(self, db: str, table: str, schema: TableSchema) -> None:
        self.current[(db, table)] = len(self.versions)
        self.versions.append({"db": db, "table": table, "since_vtso": self._vtso, "pk": schema.pk,
                              "columns": describe_columns(schema),
                              "create_sql": schema.create_sql(table)})

    # -- txns -------------------------------------------------------------------------------------
    def dml_changes(self, txn: Txn) -> list[dict[str, Any]]:
        """One entry per physical statement (one TABLE_MAP block of the output) in trace order:
        logical db/table/columns and the rows as value lists ([before, after] for updates)."""
        out = []
        values = self.enc.values
        for op in sorted(txn.ops, key=lambda o: (o.seq, o.subseq)):
            key = (op.db_name, op.table_name)
            schema = self.schemas[key]
            rows = self.state[key]
            pk = schema.pk
            images: list[Any] = []
            for item in op.rows:
                if op.kind == "update":
                    before, after = logical_row(schema, item[0]), logical_row(schema, item[1])
                    self._expect(rows, before[pk], True, op)
                    rows[after[pk]] = after
                    images.append([values(schema, before), values(schema, after)])
                elif op.kind == "insert":
                    after = logical_row(schema, item)
                    self._expect(rows, after[pk], False, op)
                    rows[after[pk]] = after
                    images.append(values(schema, after))
                else:
                    before = logical_row(schema, item)
                    self._expect(rows, before[pk], True, op)
                    del rows[before[pk]]
                    images.append(values(schema, before))
            change = {"op": op.kind, "db": op.db_name, "table": op.table_name, "trace": op.trace,
                      "dn": f"dn{op.shard.dn}", "phys_db": op.shard.db, "phys_table": op.phys_table}
            if op.move:
                change["move"] = True
            # In a DDL window the shard's columns differ from the logical ones: say how.
            first = op.rows[0][0] if op.kind == "update" else op.rows[0]
            filled = [n for n in schema.names if n not in first]
            dropped = [n for n in first if not schema.has(n)]
            if filled:
                change["filled"] = filled          # logical columns the shard lacks: default
            if dropped:
                change["dropped"] = dropped        # shard columns not (yet) logical: left out
            change["schema"] = self.current[key]
            change["rows"] = images
            out.append(change)
        return out

    @staticmethod
    def _expect(rows: dict[Any, Any], pk: Any, present: bool, op: PhysOp) -> None:
        if (pk in rows) != present:
            raise AssertionError(f"simulator bug: {op.kind} of {op.db_name}.{op.table_name} "
                                 f"row {pk} that is {'absent' if present else 'present'}")

    def apply_ddl(self, effect: tuple) -> None:
        kind = effect[0]
        if kind == "create_db":
            return
        if kind == "drop_db":
            for key in [k for k in self.schemas if k[0] == effect[1]]:
                del self.schemas[key]
                del self.state[key]
                del self.current[key]
        elif kind in ("create_table", "alter"):
            _, db, table, schema = effect
            self.schemas[(db, table)] = schema
            self.new_version(db, table, schema)
            rows = self.state.setdefault((db, table), {})
            for pk, row in list(rows.items()):
                rows[pk] = logical_row(schema, row)
        elif kind == "rename":
            _, db, old, new = effect
            self.schemas[(db, new)] = self.schemas.pop((db, old))
            self.state[(db, new)] = self.state.pop((db, old))
            del self.current[(db, old)]
            self.new_version(db, new, self.schemas[(db, new)])
        elif kind == "truncate":
            self.state[(effect[1], effect[2])] = {}
        elif kind == "drop_table":
            del self.schemas[(effect[1], effect[2])]
            del self.state[(effect[1], effect[2])]
            del self.current[(effect[1], effect[2])]

    def txn_entry(self, txn: Txn) -> dict[str, Any]:
        dns = sorted({br.dn.id for br in txn.branches.values()}, key=lambda d: int(d[2:]))
        entry: dict[str, Any] = {
            "vtso": txn.vtso, "tso": txn.commit_tso if txn.mode == "xa" else None,
            "txn_id": txn.id, "kind": txn.kind, "commit": txn.mode, "dns": dns,
            "xid": txn.gtrid if txn.mode != "local" else None,
            "branches": [f"{br.dn.id}:{br.bqual.decode()}" for br in txn.branches.values()],
        }
        if txn.mode == "one_phase":
            entry["gcn_commit_tso"] = txn.commit_tso
        if txn.hint_server:
            entry["server_id"] = txn.hint_server
        if txn.kind == "dml":
            entry["changes"] = self.dml_changes(txn)
        elif txn.kind == "ddl":
            info = dict(txn.info["ddl"])
            self._vtso = txn.vtso
            self.apply_ddl(txn.info["effect"])
            entry["ddl"] = info
            self.ddls.append({"vtso": txn.vtso, "tso": txn.commit_tso, **info})
        elif txn.kind == "instruction":
            entry["instruction"] = txn.info["instruction"]
        return entry

    # -- the whole truth ----------------------------------------------------------------------------
    def build(self, params: dict[str, Any], command: str) -> dict[str, Any]:
        cl = self.cl
        ordered = sorted(cl.records, key=lambda t: t.vtso)
        for a, b in zip(ordered, ordered[1:], strict=False):
            if a.vtso == b.vtso:
                raise AssertionError(f"simulator bug: two txns share vtso {a.vtso}")
        txns = [self.txn_entry(t) for t in ordered]
        self.check_final_state()
        truth: dict[str, Any] = {
            "format": FORMAT, "command": command, "params": params,
            "value_encoding": "simulator/values.py: null/int/float/str as is; {$hex|$dec|$date|"
                              "$datetime|$timestamp|$time|$json: ...} for the rest",
            "dns": [{"id": n.id, "server_id": n.server_id, "storage_seq": n.storage_seq,
                     "files": self.files(n)} for n in cl.dns],
            "txns": txns,
            "rollbacks": [{"xid": t.gtrid, "txn_id": t.id,
                           "branches": [f"{br.dn.id}:{br.bqual.decode()}" for br in t.branches.values()],
                           "vtsos": t.dn_vtsos} for t in cl.rollbacks],
            "ddls": self.ddls,
            "logical_schemas": self.versions,
            "tables": self.tables(),
        }
        if cl.bank_accounts:
            truth["bank"] = {"db": "bank", "table": "accounts", "accounts": cl.bank_accounts,
                             "initial_balance": 1000, "expected_total": cl.bank_accounts * 1000}
        truth["physical_ddls"] = {n.id: n.ddl_log for n in cl.dns}
        writes = {n.id: self.dn_writes(n) for n in cl.dns}
        truth["phys_schemas"] = {dn: v for dn, (v, _) in writes.items()}
        truth["dn_writes"] = {dn: w for dn, (_, w) in writes.items()}
        truth["stats"] = stats(cl)
        return truth

    @staticmethod
    def files(node: Any) -> list[str]:
        index = node.log.directory / "mysql-bin.index"
        return [line.strip()[2:] for line in index.read_text().splitlines() if line.strip()]

    def tables(self) -> dict[str, Any]:
        out = {}
        for (db, table), schema in sorted(self.schemas.items()):
            rows = self.state[(db, table)]
            out[f"{db}.{table}"] = {
                "db": db, "table": table, "pk": schema.pk,
                "create_sql": schema.create_sql(table),
                "columns": describe_columns(schema),
                "rows": [self.enc.values(schema, rows[pk]) for pk in sorted(rows)],
            }
        return out

    def check_final_state(self) -> None:
        """The replayed logical history must equal the cluster's physical rows, table by table."""
        cl = self.cl
        live = {(t.db.name, t.name): t for t in cl.tables.values()}
        if set(live) != set(self.schemas):
            raise AssertionError(f"simulator bug: tables {sorted(live)} != truth {sorted(self.schemas)}")
        for key, table in live.items():
            schema = self.schemas[key]
            phys: dict[Any, dict[str, Any]] = {}
            for i in range(len(table.shards)):
                for pk, row in cl.phys(table, i).rows.items():
                    phys[pk] = logical_row(schema, row)
            if phys != self.state[key]:
                raise AssertionError(f"simulator bug: final state of {key} differs from its history")

    def dn_writes(self, node: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every rows event of a DN in binlog order (file, pos, op, rows as value lists in physical
        column order), and the physical table versions they refer to ("schema": index)."""
        versions: list[dict[str, Any]] = []
        index: dict[tuple[str, str, int], int] = {}
        out = []
        enc = self.enc
        for name, pos, db, table, table_id, kind, schema, rows in node.writes or ():
            key = (db, table, table_id)
            v = index.get(key)
            if v is None:
                v = index[key] = len(versions)
                versions.append({"db": db, "table": table, "table_id": table_id,
                                 "columns": [{"name": c.name, "type": c.type.text}
                                             for c in schema.columns]})
            if kind == "update":
                images = [[enc.values(schema, b), enc.values(schema, a)] for b, a in rows]
            else:
                images = [enc.values(schema, r) for r in rows]
            out.append({"file": name, "pos": pos, "db": db, "table": table, "schema": v, "op": kind,
                        "rows": images})
        return versions, out


def describe_columns(schema: TableSchema) -> list[dict[str, Any]]:
    return [{"name": c.name, "type": c.type.text, "nullable": c.nullable,
             "default": encode_value(c.default, c.type.family == "json") if c.default is not None
             else None} for c in schema.columns]


def stats(cl: Any) -> dict[str, Any]:
    per_dn = {}
    for n in cl.dns:
        s = dict(n.stats)
        s["out_of_order_share"] = round(s["out_of_order"] / s["tso_commits"], 4) if s["tso_commits"] else 0.0
        s["hole_share"] = round(s["holes"] / s["tso_commits"], 4) if s["tso_commits"] else 0.0
        s["events"] = n.log.events_written
        per_dn[n.id] = s
    return {"per_dn": per_dn, "events": sum(n.log.events_written for n in cl.dns),
            "txns": cl.committed, "rollbacks": cl.rolled_back}


def write_truth(path: Any, truth: dict[str, Any]) -> None:
    """One JSON document; top-level lists hold one item per line so diffs stay readable."""
    def dump(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    parts = []
    for key, value in truth.items():
        if isinstance(value, list) and value:
            body = "[\n" + ",\n".join(dump(v) for v in value) + "\n]"
        elif isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
            body = "{\n" + ",\n".join(
                dump(k) + ":" + ("[\n" + ",\n".join(dump(x) for x in v) + "\n]" if v else "[]")
                for k, v in value.items()) + "\n}"
        else:
            body = dump(value)
        parts.append(dump(key) + ":" + body)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("{\n" + ",\n".join(parts) + "\n}\n")
