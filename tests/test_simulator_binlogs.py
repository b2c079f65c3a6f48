"""The committed fixtures as DN binlogs.

1. Every DN file parses with ``binlog.read_events`` (CRC checked); ``mariadb-binlog -v`` reads every
   file, shows GCN / GTID / consensus / ROWS_QUERY events as ignorable, and the rows it prints are
   the truth's physical writes, event by event, at the same positions.
2. Group shapes follow one grammar that the real captures also follow; XIDs, trace hints, GCN
   flags, consensus and GTID lengths are right; per DN the commit order differs from TSO order for
   a measurable share of txns, yet never in a way the Sorter could not repair.
"""

import datetime as dt
import json
import math
import re
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from binlog import EventType, read_events
from binlog.constants import GcnFlag
from simulator.types import INT_BYTES, parse_type
from simulator.values import decode_value
from tests import REAL_DN
from tests.mariadb import mariadb_binlog

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SETS = sorted(p.name for p in FIXTURES.iterdir() if (p / "truth.json").is_file())
HOLEY_SETS = [s for s in SETS if s.split("-")[0] in ("bank", "drift", "mixed")]
T = EventType
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@cache
def truth(name: str) -> dict:
    return json.loads((FIXTURES / name / "truth.json").read_text())


def dn_files(name: str, dn: str) -> list[Path]:
    d = FIXTURES / name / dn
    return [d / line.strip().removeprefix("./") for line in (d / "mysql-bin.index").read_text().splitlines()
            if line.strip()]


@cache
def dn_events(name: str, dn: str) -> list:
    """[(file name, Event)] of one DN across its files."""
    return [(f.name, e) for f in dn_files(name, dn) for e in read_events(f)]


# -- the group grammar (the test's own reading of the DN dialect) ---------------------------------
def token(e) -> str:
    t = e.type_code
    if t == T.QUERY:
        q = e.body.query
        for prefix, tok in ((b"XA START ", "S"), (b"XA END ", "E"), (b"XA COMMIT ", "C"),
                            (b"XA ROLLBACK ", "R")):
            if q.startswith(prefix):
                return tok
        return "B" if q == b"BEGIN" else "D"
    if t == T.XA_PREPARE:
        return "O" if e.body.one_phase else "P"
    return {T.ROWS_QUERY: "h", T.TABLE_MAP: "t", T.WRITE_ROWS: "r", T.UPDATE_ROWS: "r",
            T.DELETE_ROWS: "r", T.XID: "X", T.SEQUENCE: "q"}.get(t, "?")


SHAPES = {  # body of a group after [CONSENSUS] GCN GTID
    "prepare": re.compile(r"S(ht+r+)+EP"),
    "one_phase": re.compile(r"S(ht+r+)+EO"),
    "commit": re.compile(r"C"),
    "rollback": re.compile(r"R"),
    "local": re.compile(r"B(ht+r+)+X"),
    "ddl": re.compile(r"D"),
}
GCN_FLAGS = {"prepare": 0x03, "one_phase": 0x0F, "commit": 0x0D, "rollback": 0x01, "local": 0x01,
             "ddl": 0x01, "ignored": 0x0F}
HINT = re.compile(r"/\*DRDS /[\d.]+/([0-9a-f]+)-(\d+)/(\d+)/(\d*)/ \*/")
XID = re.compile(r"XA [A-Z]+ X'([0-9a-f]+)',X'([0-9a-f]+)',(1|4)")
IGNORE_BINLOG = b",4"     # format id 4: a one-phase XA CDC ignores (a group move's backfill)


def shape_of(body: list) -> str:
    text = "".join(token(e) for e in body if e.type_code != T.SEQUENCE)
    for kind, pattern in SHAPES.items():
        if pattern.fullmatch(text):
            return kind
    raise AssertionError(f"group body {text!r} has no known shape")


def groups(events: list) -> list[dict]:
    """Split a DN's events into groups: {consensus, gcn, gtid, body, kind, file, pos, size}."""
    out: list[dict] = []
    cur: dict | None = None
    for fname, e in events:
        t = e.type_code
        if t in (T.FORMAT_DESCRIPTION, T.PREVIOUS_GTIDS, T.PREVIOUS_CONSENSUS_INDEX, T.ROTATE):
            assert cur is None or cur["body"], "a group cut by a file boundary"
            cur = None
            continue
        if t == T.CONSENSUS_LOG or (t == T.GCN and (cur is None or cur["gcn"] is not None)):
            cur = {"consensus": None, "gcn": None, "gtid": None, "body": [], "file": fname,
                   "pos": e.pos, "size": 0}
            out.append(cur)
        assert cur is not None, f"{fname}@{e.pos}: event outside a group"
        cur["size"] += e.header.event_size
        if t == T.CONSENSUS_LOG:
            cur["consensus"] = e
        elif t == T.GCN:
            assert cur["gtid"] is None and not cur["body"]
            cur["gcn"] = e
        elif t == T.GTID:
            assert cur["gcn"] is not None and not cur["body"], f"{fname}@{e.pos}: GTID before GCN"
            cur["gtid"] = e
        else:
            assert cur["gtid"] is not None, f"{fname}@{e.pos}: statement before the GTID"
            cur["body"].append(e)
    for g in out:
        g["kind"] = shape_of(g["body"])
        if g["kind"] == "one_phase" and g["body"][0].body.query.endswith(IGNORE_BINLOG):
            g["kind"] = "ignored"
    return out


@cache
def dn_groups(name: str, dn: str) -> list[dict]:
    return groups(dn_events(name, dn))


def xid_of(e) -> tuple[str, str]:
    m = XID.fullmatch(e.body.query.decode())
    assert m, e.body.query
    return bytes.fromhex(m.group(1)).decode(), bytes.fromhex(m.group(2)).decode()


def dns_of(name: str) -> list[str]:
    return [d["id"] for d in truth(name)["dns"]]


# -- 1: our reader ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SETS)
def test_every_dn_file_parses_with_read_events(name):
    for dn in dns_of(name):
        files = dn_files(name, dn)
        assert [f.name for f in files] == truth(name)["dns"][int(dn[2:])]["files"]
        for i, f in enumerate(files):
            evs = list(read_events(f))          # CRC32 of every event checked
            fde = evs[0]
            assert fde.type_code == T.FORMAT_DESCRIPTION
            assert fde.body.server_version.startswith("8.0.") and fde.body.checksum_alg == 1
            assert len(fde.body.post_header_len) >= T.GCN
            assert evs[1].type_code in (T.PREVIOUS_CONSENSUS_INDEX, T.PREVIOUS_GTIDS)
            if i + 1 < len(files):
                assert evs[-1].type_code == T.ROTATE and evs[-1].body.next_file == files[i + 1].name
            else:
                assert evs[-1].type_code != T.ROTATE
            assert evs[-1].end_pos == f.stat().st_size


# -- 1: mariadb-binlog ----------------------------------------------------------------------------
def unquoted_bytes(text: str) -> bytes:
    assert text[0] == "'" and text[-1] == "'", text
    return text[1:-1].encode("utf-8", "surrogateescape")


def quoted_like_mariadb(value: bytes) -> bytes:
    """mariadb-binlog's my_b_write_quoted: bytes up to 0x1F as \\xNN, all others as they are."""
    return b"".join(b"\\x%02x" % b if b <= 0x1F else bytes([b]) for b in value)


def same_value(type_text: str, printed: str, value) -> bool:
    """Does mariadb-binlog's printed text (log_event.cc log_event_print_value) show ``value``?"""
    if printed == "NULL" or value is None:
        return printed == "NULL" and value is None
    t = parse_type(type_text)
    f = t.family
    if f in INT_BYTES:
        m = re.fullmatch(r"(-?\d+)(?: \((\d+)\))?", printed)
        return value in (int(m.group(1)), int(m.group(2) or m.group(1)))
    if f == "float":
        return math.isclose(float(printed), value, rel_tol=1e-5)
    if f == "double":
        return math.isclose(float(printed), value, rel_tol=1e-12)
    if f == "decimal":
        return Decimal(printed) == value
    if f == "year":
        return int(printed) == value
    if f == "date":
        return unquoted_bytes(printed).decode() == value.strftime("%Y:%m:%d")
    if f == "time":
        neg = printed.startswith("'-")
        h, m, s = unquoted_bytes(printed).decode().lstrip("-").split(":")
        got = dt.timedelta(hours=int(h), minutes=int(m), microseconds=int(Decimal(s) * 10 ** 6))
        return (-got if neg else got) == value
    if f == "datetime":
        return dt.datetime.fromisoformat(unquoted_bytes(printed).decode()) == value
    if f == "timestamp":
        return EPOCH + dt.timedelta(microseconds=int(Decimal(printed) * 10 ** 6)) == value
    if f == "enum":
        return int(printed) == value
    if f in ("set", "bit"):
        return int(re.fullmatch(r"b'([01]+)'", printed).group(1), 2) == value
    return unquoted_bytes(printed) == quoted_like_mariadb(value)


def printed_rows(text: str) -> list[dict]:
    """Rows events as mariadb-binlog prints them: [{pos, db, table, op, rows}] in file order."""
    out: list[dict] = []
    pos = None
    image: list | None = None
    for line in text.split("\n"):
        if line.startswith("# at "):
            pos = int(line[5:])
            continue
        m = re.match(r"### (INSERT INTO|UPDATE|DELETE FROM) `(.*)`\.`(.*)`$", line)
        if m:
            op = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}[m.group(1)]
            if not out or out[-1]["pos"] != pos:
                out.append({"pos": pos, "db": m.group(2), "table": m.group(3), "op": op, "rows": []})
            out[-1]["rows"].append([])
        elif line in ("### SET", "### WHERE"):
            image = []
            out[-1]["rows"][-1].append(image)
        elif line.startswith("###   @"):
            m = re.match(r"###   @(\d+)=(.*)$", line)
            assert int(m.group(1)) == len(image) + 1
            image.append(m.group(2))
    return out


@pytest.mark.parametrize("name", SETS)
def test_mariadb_binlog_prints_the_truths_physical_writes(name):
    t = truth(name)
    for dn in dns_of(name):
        schemas = t["phys_schemas"][dn]
        writes = t["dn_writes"][dn]
        for f in dn_files(name, dn):
            text = mariadb_binlog("-v", "--base64-output=DECODE-ROWS", str(f))
            evs = [e for fname, e in dn_events(name, dn) if fname == f.name]
            counts = {code: sum(1 for e in evs if e.type_code == code) for code in (105, 33, 101, 29)}
            assert text.count("# Ignorable event type 105 (Unknown)") == counts[105] > 0
            assert text.count("# Ignorable event type 33 (MySQL Gtid)") == counts[33] == counts[105]
            assert text.count("# Ignorable event type 101 (Unknown)") == counts[101]
            assert text.count("# Ignorable event type 29 (MySQL Rows_query)") == counts[29]
            # mariadb-binlog prints a statement's rows after its last rows event (STMT_END_F):
            # join the truth's rows events of one statement and key them by that last event.
            at = {e.pos: e for e in evs}
            expected: list[dict] = []
            pending: dict | None = None
            for w in (w for w in writes if w["file"] == f.name):
                if pending is None:
                    pending = dict(w, rows=list(w["rows"]))
                else:
                    assert (pending["table"], pending["op"]) == (w["table"], w["op"])
                    pending["rows"] += w["rows"]
                pending["pos"] = w["pos"]
                if at[w["pos"]].body.statement_end:
                    expected.append(pending)
                    pending = None
            assert pending is None
            got = printed_rows(text)
            assert [(g["pos"], g["db"], g["table"], g["op"]) for g in got] == \
                [(w["pos"], w["db"], w["table"], w["op"]) for w in expected]
            for g, w in zip(got, expected, strict=True):
                columns = schemas[w["schema"]]["columns"]
                want_rows = w["rows"] if w["op"] == "update" else [[r] for r in w["rows"]]
                assert len(g["rows"]) == len(want_rows)
                for got_images, want_images in zip(g["rows"], want_rows, strict=True):
                    for got_img, want_img in zip(got_images, want_images, strict=True):
                        assert len(got_img) == len(columns)
                        for c, printed, value in zip(columns, got_img, want_img, strict=True):
                            assert same_value(c["type"], printed, decode_value(value)), \
                                (f.name, g["pos"], c, printed, value)


# -- 2: group shapes ------------------------------------------------------------------------------
def real_capture_groups(path: Path, *, skip_first: int) -> list[dict]:
    data = path.read_bytes()
    evs = []
    for e in read_events(data[:1182] if path.name.startswith("dn57") else data):
        evs.append((path.name, e))
    return evs[skip_first:]


def test_real_captures_follow_the_same_grammar():
    """dn80: CONSENSUS GCN(0x01) GTID QUERY groups = our DDL groups; dn57 (5.7, SEQUENCE events
    instead of GCN): its one-phase XA body has the shape of our one-phase groups."""
    dn80 = real_capture_groups(REAL_DN / "dn80_gcn_consensus.bin", skip_first=1)  # starts mid-group
    gs = groups(dn80[:-3])                                                       # last group is cut
    assert [g["kind"] for g in gs] == ["ddl", "ddl"]
    assert all(g["gcn"].body.flags == GCN_FLAGS["ddl"] and g["consensus"] is not None for g in gs)
    assert all(g["consensus"].body.length == g["size"] - g["consensus"].header.event_size for g in gs)
    dn57 = [e for _, e in real_capture_groups(REAL_DN / "dn57_sequence.bin", skip_first=1)]
    assert shape_of(dn57[:-1]) == "one_phase"                                    # minus the trailing consensus


@pytest.mark.parametrize("name", SETS)
def test_group_shapes_xids_hints_and_lengths(name):
    for dn in dns_of(name):
        gs = dn_groups(name, dn)
        kinds = {g["kind"] for g in gs}
        assert {"prepare", "commit", "ddl"} <= kinds
        consensus = truth(name)["params"]["consensus"]
        last_index = None
        for g in gs:
            where = f"{name}/{dn}/{g['file']}@{g['pos']}"
            assert (g["consensus"] is not None) == consensus, where
            if consensus:
                c = g["consensus"].body
                assert c.length == g["size"] - g["consensus"].header.event_size, where
                assert last_index is None or c.index == last_index + 1, where
                last_index = c.index
            gtid_bytes = g["size"] - g["gcn"].header.event_size - (
                g["consensus"].header.event_size if consensus else 0)
            assert g["gtid"].body.transaction_length == gtid_bytes, where
            assert g["gcn"].header.flags & 0x80 and g["gcn"].body.flags == GCN_FLAGS[g["kind"]], where
            body = g["body"]
            if g["kind"] in ("prepare", "one_phase", "commit", "rollback", "ignored"):
                xids = {xid_of(e) for e in body if e.type_code == T.QUERY}
                assert len(xids) == 1, where
                (gtrid, bqual), = xids
                m = re.fullmatch(r"drds-([0-9a-f]+)@[0-9a-f]{16}", gtrid)
                assert m, where
                assert bqual == body[0].body.db.upper() + "_GROUP@" + bqual[-4:] and bqual[-4:].isdigit()
                if body[-1].type_code == T.XA_PREPARE:
                    assert (body[-1].body.gtrid.decode(), body[-1].body.bqual.decode()) == (gtrid, bqual)
                txn_hex = m.group(1)
            else:
                txn_hex = None
            traces = []
            for e in body:
                if e.type_code == T.ROWS_QUERY:
                    hm = HINT.fullmatch(e.body.query.decode())
                    assert hm, where
                    assert txn_hex is None or hm.group(1) == txn_hex, where
                    traces.append((int(hm.group(2)), int(hm.group(3))))
            assert traces == sorted(traces), where        # trace ids never go back in a branch
            rows = [e for e in body if e.type_code in (T.WRITE_ROWS, T.UPDATE_ROWS, T.DELETE_ROWS)]
            for i, e in enumerate(body):
                if e.type_code == T.TABLE_MAP:
                    block = []
                    for nxt in body[i + 1:]:
                        if nxt.type_code not in (T.WRITE_ROWS, T.UPDATE_ROWS, T.DELETE_ROWS):
                            break
                        block.append(nxt)
                    assert [b.body.statement_end for b in block] == [False] * (len(block) - 1) + [True]
            assert all(e.header.event_size < 8192 + 1024 for e in rows), where


def tso_commits(name: str, dn: str) -> list[tuple[int, str, int]]:
    """(commit TSO, gtrid, group index) of each TSO commit in binlog order."""
    out = []
    for i, g in enumerate(dn_groups(name, dn)):
        if g["kind"] == "commit" and g["gcn"].body.flags & GcnFlag.HAVE_COMMITTED_SEQ:
            out.append((g["gcn"].body.gcn, xid_of(g["body"][0])[0], i))
    return out


def out_of_order(tsos: list[int]) -> int:
    """Commits whose TSO is below some earlier commit's TSO on the same DN."""
    top, n = -1, 0
    for tso in tsos:
        if tso < top:
            n += 1
        top = max(top, tso)
    return n


@pytest.mark.parametrize("name", SETS)
def test_commit_order_differs_from_tso_order(name, capsys):
    """Per DN, measured from the binlog alone; > 0 on bank/drift/mixed at the default hole rate."""
    t = truth(name)
    lines = []
    for dn in dns_of(name):
        commits = tso_commits(name, dn)
        n = out_of_order([c[0] for c in commits])
        share = n / len(commits)
        lines.append(f"{name} {dn}: {n}/{len(commits)} TSO commits out of TSO order ({share:.1%})")
        assert n == t["stats"]["per_dn"][dn]["out_of_order"]
        if name in HOLEY_SETS:
            assert len(commits) >= 30 and share > 0.02, lines[-1]
    with capsys.disabled():
        print("\n" + "\n".join(lines))


@pytest.mark.parametrize("name", SETS)
def test_commit_tso_fetched_after_every_branch_prepared(name):
    """The commit TSO's physical ms is never before any branch's prepare (GTID timestamps are the
    shared simulated clock), and every commit's TSO exceeds the TSO of every commit that precedes its
    prepare on that DN — the property the Sorter's release rule relies on (docs/architecture.md)."""
    prepared_at: dict[str, int] = {}
    commit_tso: dict[str, int] = {}
    for dn in dns_of(name):
        top = 0
        seen_top: dict[tuple[str, str], int] = {}
        for g in dn_groups(name, dn):
            if g["kind"] == "prepare":
                key = xid_of(g["body"][0])
                prepared_at[key[0]] = max(prepared_at.get(key[0], 0), g["gtid"].body.immediate_commit_timestamp)
                seen_top[key] = top
            elif g["kind"] == "commit":
                key = xid_of(g["body"][0])
                tso = g["gcn"].body.gcn
                assert tso > seen_top.pop(key), (dn, key)
                assert commit_tso.setdefault(key[0], tso) == tso        # one TSO for all branches
                top = max(top, tso)
            elif g["kind"] == "rollback":
                del seen_top[xid_of(g["body"][0])]
        assert not seen_top, f"prepared but never ended on {dn}: {sorted(seen_top)}"
    assert commit_tso
    for gtrid, tso in commit_tso.items():
        assert prepared_at[gtrid] // 1000 <= tso >> 22, gtrid


@pytest.mark.parametrize("name", SETS)
def test_binlog_transactions_are_the_truths(name):
    """Every truth txn is in the binlogs as its kind says, and nothing else is."""
    t = truth(name)
    prepares, commits, rollbacks, one_phase, local = {}, {}, set(), set(), 0
    for dn in dns_of(name):
        for g in dn_groups(name, dn):
            if g["kind"] in ("prepare", "commit", "rollback", "one_phase"):
                gtrid, bqual = xid_of(g["body"][0])
                key = f"{dn}:{bqual}"
                if g["kind"] == "prepare":
                    prepares.setdefault(gtrid, set()).add(key)
                elif g["kind"] == "commit":
                    commits.setdefault(gtrid, (g["gcn"].body.gcn, set()))[1].add(key)
                elif g["kind"] == "rollback":
                    rollbacks.add((gtrid, key))
                else:
                    one_phase.add((gtrid, key))
            local += g["kind"] == "local"
    xa = [x for x in t["txns"] if x["commit"] == "xa"]
    assert {x["xid"]: (x["tso"], set(x["branches"])) for x in xa} == commits
    assert all(prepares[x["xid"]] == set(x["branches"]) for x in xa)
    assert {(x["xid"], x["branches"][0]) for x in t["txns"] if x["commit"] == "one_phase"} == one_phase
    assert sum(x["commit"] == "local" for x in t["txns"]) == local
    assert {(r["xid"], b) for r in t["rollbacks"] for b in r["branches"]} == rollbacks
    assert {g for g in prepares} == set(commits) | {r["xid"] for r in t["rollbacks"]}
    # IGNORE_BINLOG backfills (group moves) are in no truth transaction, only in the scale set
    ignored = [g for dn in dns_of(name) for g in dn_groups(name, dn) if g["kind"] == "ignored"]
    assert not {xid_of(g["body"][0])[0] for g in ignored} & {x["xid"] for x in t["txns"]}
    assert bool(ignored) == (name == "scale-2dn")
