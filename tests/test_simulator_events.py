"""Simulator building blocks: the DN event payloads decode with the binlog library to the values put
in, XID / trace-hint / storage-seq formats match the real captures and the Java rules, the TSO
oracle is strictly increasing, and truth values survive a JSON round trip."""

import datetime as dt
import json
from decimal import Decimal

import pytest

from binlog.constants import EventType, GcnFlag
from binlog.events import decode_body, encode_body
from binlog.rows_events import decode_rows_event, encode_rows_event
from binlog.table_map import decode_table_map
from simulator import dn_events as ev
from simulator.naming import bqual, gtrid, storage_seq, trace_hint, vtso, xid_sql
from simulator.node import unique_storage_seq
from simulator.schema import TableSchema, col
from simulator.state import PhysTable
from simulator.tso import TsoOracle
from simulator.values import decode_value, encode_value
from tests import REAL_DN


def test_gcn_payload_per_flags():
    commit = decode_body(EventType.GCN, ev.gcn_payload(ev.GCN_COMMIT, 7202458828804194305))
    assert (commit.flags, commit.gcn) == (0x0D, 7202458828804194305)
    assert commit.flags & GcnFlag.HAVE_COMMITTED_SEQ
    prepare = decode_body(EventType.GCN, ev.gcn_payload(ev.GCN_PREPARE, 12345))
    assert (prepare.flags, prepare.gcn) == (0x03, 12345)
    assert not prepare.flags & GcnFlag.HAVE_COMMITTED_SEQ
    assert ev.GCN_ONE_PHASE == 0x0F and ev.GCN_LOCAL == 0x01
    # Without HAVE_GCN the new engine writes the flags byte alone.
    assert ev.gcn_payload(GcnFlag.HAVE_SNAPSHOT_SEQ, 99) == b"\x02"
    assert ev.gcn_payload(ev.GCN_COMMIT, 5) == encode_body(EventType.GCN, flags=0x0D, gcn=5)


@pytest.mark.parametrize("length", [100, 250, 251, 70_000, 20_000_000])
def test_gtid_payload(length):
    sid = bytes(range(16))
    body = decode_body(EventType.GTID, ev.gtid_payload(sid, 42, 6, 7, 1717200000123456, length))
    assert (body.flags, body.sid, body.gno, body.lt_type) == (1, sid, 42, 2)
    assert (body.last_committed, body.sequence_number) == (6, 7)
    assert body.immediate_commit_timestamp == 1717200000123456
    assert body.original_commit_timestamp is None
    assert body.transaction_length == length
    assert body.immediate_server_version == 80032


def test_query_payload_status_vars():
    payload = ev.query_prefix(2001, "bank_p00001") + b"XA END X'61',X'62',1"
    body = decode_body(EventType.QUERY, payload)
    assert (body.thread_id, body.exec_time, body.error_code) == (2001, 0, 0)
    assert body.db == "bank_p00001" and body.query == b"XA END X'61',X'62',1"
    sv = body.status_vars
    assert sv.flags2 == 0 and sv.sql_mode == 0x40200000 and sv.catalog_nz == "std"
    assert sv.charset == (45, 45, 33) and sv.default_collation_for_utf8mb4 == 255


def test_xa_prepare_rows_query_xid_consensus_previous_gtids():
    body = decode_body(EventType.XA_PREPARE, ev.xa_prepare_payload(b"drds-1@2", b"G@0001", True))
    assert (body.one_phase, body.format_id, body.gtrid, body.bqual) == (1, 1, b"drds-1@2", b"G@0001")
    rq = decode_body(EventType.ROWS_QUERY, ev.rows_query_payload(b"/*DRDS /a/b-1/1// */"))
    assert rq.query == b"/*DRDS /a/b-1/1// */" and rq.length_byte == 20
    assert ev.rows_query_payload(b"x" * 300)[0] == 255
    assert decode_body(EventType.XID, ev.xid_payload(77)).xid == 77
    cons = decode_body(EventType.CONSENSUS_LOG, ev.consensus_log_payload(540933, 257))
    assert (cons.flag, cons.term, cons.index, cons.length, cons.reserve) == (0, 2, 540933, 257, 0)
    assert decode_body(EventType.PREVIOUS_CONSENSUS_INDEX, ev.previous_consensus_index_payload(9)).index == 9
    sid = b"\x11" * 16
    assert decode_body(EventType.PREVIOUS_GTIDS, ev.previous_gtids_payload(sid, 5)).sids == [(sid, [(1, 6)])]
    assert decode_body(EventType.PREVIOUS_GTIDS, ev.previous_gtids_payload(sid, 0)).sids == []


def test_consensus_layout_matches_real_dn80_capture():
    """The real DN 8.0 capture's consensus event at 152: flag 0, term 2, index 0x84105, length = the
    bytes of GCN + GTID + QUERY after it; our builder gives the same body for the same fields."""
    data = (REAL_DN / "dn80_gcn_consensus.bin").read_bytes()
    real_body = data[152 + 19:152 + 59 - 4]
    assert ev.consensus_log_payload(0x84105, 32 + 77 + 148) == real_body


def test_rows_events_match_the_library_encoder():
    schema = TableSchema([col("id", "bigint", nullable=False), col("name", "varchar(20)"),
                          col("amount", "decimal(10,2)"), col("when", "datetime(3)")], pk="id")
    pt = PhysTable("db_p00000", "t_abcd", schema, 101)
    rows = [{"id": 1, "name": b"a\xc3\xa9", "amount": Decimal("12.50"), "when": dt.datetime(2024, 1, 2, 3, 4, 5, 6000)},
            {"id": 2, "name": None, "amount": None, "when": None}]
    columns = list(schema.binlog_columns())
    for type_code, flags in ((EventType.WRITE_ROWS, 1), (EventType.DELETE_ROWS, 0)):
        ours = pt.rows_prefix(type_code, flags) + b"".join(pt.image(r) for r in rows)
        lib = encode_rows_event(type_code, table_id=101, columns=columns,
                                rows=[[r[n] for n in schema.names] for r in rows], flags=flags)
        assert ours == lib
    ours = pt.rows_prefix(EventType.UPDATE_ROWS, 1) + pt.image(rows[0]) + pt.image(rows[1])
    body = decode_rows_event(EventType.UPDATE_ROWS, ours)
    tm = decode_table_map(pt.table_map)
    assert (tm.db, tm.table, tm.table_id) == ("db_p00000", "t_abcd", 101)
    [(before, after)] = body.rows(tm)
    assert before == [1, b"a\xc3\xa9", Decimal("12.50"), dt.datetime(2024, 1, 2, 3, 4, 5, 6000)]
    assert after == [2, None, None, None]


def test_xid_text_reproduces_the_real_capture():
    """dn57_sequence.bin's XA START (offset 189) is exactly what xid_sql prints for its gtrid/bqual."""
    data = (REAL_DN / "dn57_sequence.bin").read_bytes()
    body = decode_body(EventType.QUERY, data[189 + 19:189 + 215 - 4])
    g, b = "drds-1881c1536f401000@9d11c57d194702f4", "D1_P00000_GROUP@0000"
    assert body.query.decode() == xid_sql("START", g, b)
    assert gtrid(0x1881C1536F401000, "D1_P00000_GROUP").startswith("drds-1881c1536f401000@")
    assert bqual("D1_P00000_GROUP", 0) == b
    prep = decode_body(EventType.XA_PREPARE, data[1029 + 19:1029 + 94 - 4])
    assert (prep.gtrid.decode(), prep.bqual.decode()) == (g, b)


def test_trace_hint_reproduces_the_real_capture():
    data = (REAL_DN / "dn57_sequence.bin").read_bytes()
    real = decode_body(EventType.ROWS_QUERY, data[404 + 19:404 + 67 - 4]).query.decode()
    assert trace_hint(0x1881C1536F401000, 3, 0, ip="127.0.0.1") == real


def test_storage_seq_is_javas_objects_hash():
    # "dn0".hashCode() = 100*31^2 + 110*31 + 48 = 99558; Objects.hash adds 31 → 99589.
    assert storage_seq("dn0") == "099589"
    assert storage_seq("dn1") == "099590"
    # dn10 and dn11 hash to 3086404.. / 3086405..: the same first 6 digits; the second takes the next.
    assert storage_seq("dn10")[:6] == storage_seq("dn11")[:6]
    taken: set[str] = set()
    seqs = [unique_storage_seq(f"dn{i}", taken) for i in range(12)]
    assert len(set(seqs)) == 12 and seqs[10] == storage_seq("dn10") and seqs[11] != seqs[10]
    assert vtso(5, 7) == "0" * 18 + "5" + "0" * 18 + "7" + "0" * 16
    assert len(vtso(2 ** 62, 2 ** 62, 3, "099589")) == 54


def test_tso_oracle_strictly_increasing_and_follows_the_clock():
    o = TsoOracle()
    a = o.next(1_000_000)        # 1000 ms
    b = o.next(1_000_100)        # same ms: logical + 1
    c = o.next(1_005_000)        # 1005 ms
    d = o.next(1_004_000)        # a clock that lags still gets a larger TSO
    assert a == 1000 << 22 and b == (1000 << 22) + 1 and c == 1005 << 22 and d == c + 1


@pytest.mark.parametrize("value", [
    None, 0, -(2 ** 63), 2 ** 64 - 1, 1.5, -0.125, b"plain", "中文é".encode(), b"\x00\xff\x80",
    Decimal("-12.500000"), dt.date(1969, 12, 31), dt.datetime(2024, 6, 1, 10, 0, 0, 120000),
    dt.datetime(2024, 6, 1, 10, 0, 0), dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
    dt.timedelta(hours=-838, minutes=-59, seconds=-59), dt.timedelta(seconds=1, microseconds=500),
])
def test_truth_values_round_trip(value):
    encoded = json.loads(json.dumps(encode_value(value)))
    back = decode_value(encoded)
    assert back == value and type(back) is type(value)
    if isinstance(value, dt.datetime):
        assert (back.tzinfo is None) == (value.tzinfo is None)


def test_truth_value_forms():
    assert encode_value(Decimal("1.50")) == {"$dec": "1.50"}
    assert encode_value(dt.timedelta(hours=-1, seconds=-3)) == {"$time": "-01:00:03"}
    assert encode_value(b"\xff") == {"$hex": "ff"}
    assert encode_value({"a": [1, None]}, json_column=True) == {"$json": {"a": [1, None]}}
    assert decode_value({"$json": {"a": 1}}) == {"a": 1}
