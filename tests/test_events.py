"""Event bodies: build -> parse round trips, byte-exact rebuilds, fast paths vs construct, errors."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog.constants import (
    CRC_LEN,
    HEADER_LEN,
    POST_HEADER_LEN_57,
    EventType,
    GcnFlag,
    post_header_table,
)
from binlog.errors import MalformedEvent
from binlog.event import FormatContext
from binlog.events import (
    BODIES,
    GcnBody,
    QueryBody,
    RawBody,
    body_fields,
    decode_body,
    decode_body_construct,
    encode_body,
    encode_body_construct,
    rebuild_body,
)
from binlog.query_status import (
    STATUS_VARS,
    StatusVars,
    build_status_vars,
    build_status_vars_construct,
    parse_status_vars,
    parse_status_vars_construct,
    status_vars,
)
from binlog.reader import read_all
from binlog.writer import BinlogWriter, build_fde

T = EventType
# Per-test settings (not a global profile: other modules keep their own).
fast_settings = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])

HOT = (T.QUERY, T.XID, T.GCN, T.SEQUENCE, T.XA_PREPARE, T.ROWS_QUERY)


# -- strategies ----------------------------------------------------------------------------------------
def uint(bits: int) -> st.SearchStrategy[int]:
    top = (1 << bits) - 1
    return st.one_of(st.sampled_from([0, 1, top, top - 1]), st.integers(0, top))


def sint64() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, -1, -(1 << 63), (1 << 63) - 1]),
                     st.integers(-(1 << 63), (1 << 63) - 1))


def text(max_bytes: int, *, nul: bool = True) -> st.SearchStrategy[str]:
    """Any bytes (not only valid UTF-8) as the str the decoder gives back for them."""
    raw = st.binary(max_size=max_bytes)
    chars = st.text(max_size=max_bytes // 4)
    if not nul:  # a NUL-terminated field cannot hold a NUL
        raw = raw.map(lambda b: b.replace(b"\0", b""))
        chars = chars.map(lambda s: s.replace("\0", ""))
    return st.one_of(raw.map(lambda b: b.decode("utf-8", "surrogateescape")), chars)


def sv_value(kind: str) -> st.SearchStrategy:
    bits = {"B": 8, "H": 16, "I": 32, "Q": 64}
    if kind in bits:
        return uint(bits[kind])
    if kind in ("HH", "HHH"):
        return st.tuples(*[uint(16)] * len(kind))
    if kind == "u24":
        return uint(24)
    if kind in ("str", "strz"):
        return text(255).filter(lambda s: len(s.encode("utf-8", "surrogateescape")) <= 255)
    if kind == "invoker":
        return st.tuples(sv_value("str"), sv_value("str"))
    assert kind == "dbnames"
    return st.one_of(st.lists(text(64, nul=False), max_size=16).map(tuple), st.integers(17, 255))


SIZED_VARS = [(code, kind) for code, _, kind in STATUS_VARS if kind is not None]
sv_item = st.sampled_from(SIZED_VARS).flatmap(lambda ck: sv_value(ck[1]).map(lambda v: (ck[0], v)))
# Any order, duplicates allowed: the block must still rebuild byte for byte.
sv_items = st.lists(sv_item, max_size=8)


@st.composite
def query_fields(draw: st.DrawFn) -> dict:
    return dict(thread_id=draw(uint(32)), exec_time=draw(uint(32)), error_code=draw(uint(16)),
                status_vars=StatusVars(draw(sv_items)),
                db=draw(text(64, nul=False).filter(lambda s: len(s.encode("utf-8", "surrogateescape")) < 256)),
                query=draw(st.binary(max_size=300)))


@st.composite
def gtid_fields(draw: st.DrawFn) -> dict:
    f = dict(flags=draw(uint(8)), sid=draw(st.binary(min_size=16, max_size=16)), gno=draw(sint64()))
    level = draw(st.integers(0, 7))
    extra_max = 0  # how many trailing bytes cannot be mistaken for the next optional field
    if level == 1:  # a 5.7.4-or-older logical clock: not understood, kept in extra
        f["lt_type"] = draw(uint(8).filter(lambda t: t != 2))
        extra_max = 40
    if level >= 2:
        f.update(lt_type=2, last_committed=draw(sint64()), sequence_number=draw(sint64()))
        extra_max = 6
    if level >= 3:
        f["immediate_commit_timestamp"] = draw(uint(55))
        f["original_commit_timestamp"] = draw(st.none() | uint(56))
        extra_max = 0
    if level >= 4:
        f["transaction_length"] = draw(st.one_of(
            st.sampled_from([0, 250, 251, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, (1 << 64) - 1]),
            uint(64)))
        extra_max = 3
    if level >= 5:
        f["immediate_server_version"] = draw(uint(31))
        f["original_server_version"] = draw(st.none() | uint(32))
        extra_max = 7
    if level >= 6:
        f["commit_group_ticket"] = draw(uint(64))
        extra_max = 40
    f["extra"] = draw(st.binary(max_size=extra_max))
    return f


@st.composite
def fde_fields(draw: st.DrawFn) -> dict:
    n_types = draw(st.integers(15, 255 - 57))
    table = bytearray(draw(st.binary(min_size=n_types, max_size=n_types)))
    table[T.FORMAT_DESCRIPTION - 1] = 57 + n_types  # what every server writes for itself
    version = draw(text(50, nul=False).filter(lambda s: len(s.encode("utf-8", "surrogateescape")) <= 50))
    return dict(binlog_version=draw(uint(16)), server_version=version, created=draw(uint(32)),
                header_length=draw(uint(8)), post_header_len=bytes(table), checksum_alg=draw(uint(8)))


def xid_part() -> st.SearchStrategy[bytes]:
    return st.binary(max_size=64)


@st.composite
def user_var_fields(draw: st.DrawFn) -> dict:
    name = draw(text(40))
    if draw(st.booleans()):
        return dict(name=name, is_null=draw(st.integers(1, 255)))
    return dict(name=name, is_null=0, value_type=draw(uint(8)), charset=draw(uint(32)),
                value=draw(st.binary(max_size=60)), flags=draw(st.none() | uint(8)))


@st.composite
def gcn_fields(draw: st.DrawFn) -> dict:
    flags = draw(uint(8))
    f = dict(flags=flags)
    # Without HAVE_GCN the old engine's 9-byte form still carries a gcn.
    if flags & GcnFlag.HAVE_GCN or draw(st.booleans()):
        f["gcn"] = draw(uint(64))
    if flags & GcnFlag.HAVE_BRANCH_COUNT:
        f.update(n_branch=draw(uint(16)), n_local_branch=draw(uint(16)))
    return f


FIELDS: dict[int, st.SearchStrategy[dict]] = {
    T.FORMAT_DESCRIPTION: fde_fields(),
    T.ROTATE: st.fixed_dictionaries({"position": uint(64), "next_file": text(200)}),
    T.STOP: st.just({}),
    T.QUERY: query_fields(),
    T.XID: st.fixed_dictionaries({"xid": uint(64)}),
    T.INTVAR: st.fixed_dictionaries({"intvar_type": uint(8), "value": uint(64)}),
    T.RAND: st.fixed_dictionaries({"seed1": uint(64), "seed2": uint(64)}),
    T.USER_VAR: user_var_fields(),
    T.ROWS_QUERY: st.fixed_dictionaries({"query": st.binary(max_size=600),
                                         "length_byte": st.none() | uint(8)}),
    T.HEARTBEAT: st.fixed_dictionaries({"log_file": text(100)}),
    T.GTID: gtid_fields(),
    T.ANONYMOUS_GTID: gtid_fields(),
    T.PREVIOUS_GTIDS: st.fixed_dictionaries({"sids": st.lists(st.tuples(
        st.binary(min_size=16, max_size=16), st.lists(st.tuples(sint64(), sint64()), max_size=4)),
        max_size=4)}),
    T.XA_PREPARE: st.fixed_dictionaries({"one_phase": uint(8), "format_id": uint(32),
                                         "gtrid": xid_part(), "bqual": xid_part()}),
    T.SEQUENCE: st.fixed_dictionaries({"sequence_type": uint(8), "number": uint(64)}),
    T.CONSENSUS_LOG: st.fixed_dictionaries({"flag": uint(32), "term": uint(64), "index": uint(64),
                                            "length": uint(64), "reserve": uint(64)}),
    T.PREVIOUS_CONSENSUS_INDEX: st.fixed_dictionaries({"index": uint(64)}),
    T.CONSENSUS_CLUSTER_INFO: st.fixed_dictionaries({"info": st.binary(max_size=300)}),
    T.CONSENSUS_EMPTY: st.just({}),
    T.GCN: gcn_fields(),
}


def expected_fields(type_code: int, fields: dict, decoded: object) -> dict:
    """The fields as decoding gives them back: defaults filled, the ROWS_QUERY length byte set."""
    out = body_fields(decoded) | fields
    if type_code == T.ROWS_QUERY and fields["length_byte"] is None:
        out["length_byte"] = len(fields["query"]) & 0xFF
    return out


def test_every_declared_type_has_a_strategy():
    assert set(BODIES) == set(FIELDS)


# -- round trips ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("type_code", sorted(FIELDS), ids=lambda t: T(t).name)
@fast_settings
@given(data=st.data())
def test_build_parse_rebuild(type_code: int, data: st.DataObject):
    fields = data.draw(FIELDS[type_code])
    payload = encode_body(type_code, **fields)
    body = decode_body(type_code, payload)
    assert body_fields(body) == expected_fields(type_code, fields, body)
    assert rebuild_body(type_code, body) == payload
    # The construct declaration reads and writes the same bytes as the fast paths.
    assert decode_body_construct(type_code, payload) == body
    if type_code != T.FORMAT_DESCRIPTION:
        assert encode_body_construct(type_code, **fields) == payload
    assert type(body) is type(decode_body(type_code, memoryview(payload)))


@pytest.mark.parametrize("type_code", HOT, ids=lambda t: T(t).name)
@fast_settings
@given(payload=st.binary(max_size=120))
def test_fast_parse_equals_construct_on_any_bytes(type_code: int, payload: bytes):
    try:
        fast = decode_body(type_code, payload)
    except MalformedEvent:
        fast = MalformedEvent
    try:
        slow = decode_body_construct(type_code, payload)
    except MalformedEvent:
        slow = MalformedEvent
    assert fast == slow
    if fast is not MalformedEvent:
        assert rebuild_body(type_code, fast) == payload


@fast_settings
@given(prefix=st.binary(max_size=20), tail=st.binary(max_size=40))
def test_query_fast_parse_equals_construct_on_structured_bytes(prefix: bytes, tail: bytes):
    # Random status-var blocks inside well-formed lengths reach the deeper parse paths.
    block = prefix
    payload = struct.pack("<IIBHH", 1, 2, 3, 4, len(block)) + block + b"abc\0" + tail
    fast = decode_body(T.QUERY, payload)
    slow = decode_body_construct(T.QUERY, payload)
    assert fast == slow
    assert fast.status_vars.code_items() == slow.status_vars.code_items()
    assert fast.status_vars.undecoded == slow.status_vars.undecoded
    assert (fast.db, fast.query) == ("abc", tail)
    assert rebuild_body(T.QUERY, fast) == payload


# -- status variables ----------------------------------------------------------------------------------
@fast_settings
@given(items=sv_items)
def test_status_vars_round_trip(items: list):
    block = build_status_vars(items)
    assert build_status_vars_construct(items) == block
    assert parse_status_vars(block) == (items, b"")
    assert parse_status_vars_construct(block) == (items, b"")
    assert StatusVars.from_bytes(block).to_bytes() == block


@fast_settings
@given(block=st.binary(max_size=80))
def test_status_vars_any_bytes_fast_equals_construct_and_rebuilds(block: bytes):
    items, undecoded = parse_status_vars(block)
    assert parse_status_vars_construct(block) == (items, undecoded)
    assert build_status_vars(items, undecoded) == block
    sv = StatusVars.from_bytes(block)
    assert sv.code_items() == items and sv.undecoded == undecoded


def test_every_status_var_by_name():
    values = {"flags2": 0x0C084000, "sql_mode": 1 << 32 | 0x40000020, "catalog": "def",
              "auto_increment": (2, 1), "charset": (45, 45, 33), "time_zone": "SYSTEM",
              "catalog_nz": "std", "lc_time_names": 3, "charset_database": 8,
              "table_map_for_update": 3, "master_data_written": 1234, "invoker": ("root", "%"),
              "updated_db_names": ("d1", "d2"), "microseconds": 999999, "commit_ts": 7,
              "explicit_defaults_for_timestamp": 1, "ddl_logged_with_xid": 77,
              "default_collation_for_utf8mb4": 255, "sql_require_primary_key": 0,
              "default_table_encryption": 1, "opt_flashback_area": 0,
              "opt_index_format_gpp_enabled": 1, "hrnow": 123456, "xid": 1 << 60,
              "lizard_commit_gcn": (1 << 64) - 1, "lizard_prepare_gcn": 1}
    assert set(values) | {"commit_ts2"} == {name for _, name, _ in STATUS_VARS}
    sv = status_vars(**values)
    assert sv.codes() == sorted(sv.codes())
    payload = encode_body(T.QUERY, thread_id=1, exec_time=0, error_code=0, status_vars=sv, db="d1",
                          query=b"COMMIT")
    got = decode_body(T.QUERY, payload).status_vars
    for name, value in values.items():
        assert getattr(got, name) == value, name
    assert got.undecoded == b""


def test_status_var_layouts_by_hand():
    # Sizes from MySQL statement_events.cpp / MariaDB log_event.cc, written out byte by byte.
    cases = {
        "flags2": (0x01020304, b"\x00\x04\x03\x02\x01"),
        "sql_mode": (1, b"\x01" + (1).to_bytes(8, "little")),
        "catalog": ("ab", b"\x02\x02ab\x00"),
        "auto_increment": ((5, 6), b"\x03\x05\x00\x06\x00"),
        "charset": ((1, 2, 3), b"\x04\x01\x00\x02\x00\x03\x00"),
        "time_zone": ("+08:00", b"\x05\x06+08:00"),
        "catalog_nz": ("std", b"\x06\x03std"),
        "lc_time_names": (258, b"\x07\x02\x01"),
        "charset_database": (33, b"\x08\x21\x00"),
        "table_map_for_update": (3, b"\x09" + (3).to_bytes(8, "little")),
        "master_data_written": (9, b"\x0a\x09\x00\x00\x00"),
        "invoker": (("u", "h"), b"\x0b\x01u\x01h"),
        "updated_db_names": (("a", "bc"), b"\x0c\x02a\x00bc\x00"),
        "microseconds": (0x010203, b"\x0d\x03\x02\x01"),
        "commit_ts": (5, b"\x0e" + (5).to_bytes(8, "little")),
        "explicit_defaults_for_timestamp": (1, b"\x10\x01"),
        "ddl_logged_with_xid": (8, b"\x11" + (8).to_bytes(8, "little")),
        "default_collation_for_utf8mb4": (255, b"\x12\xff\x00"),
        "sql_require_primary_key": (1, b"\x13\x01"),
        "default_table_encryption": (1, b"\x14\x01"),
        "opt_flashback_area": (1, b"\x15\x01"),
        "opt_index_format_gpp_enabled": (1, b"\x16\x01"),
        "hrnow": (0x0A0B0C, b"\x80\x0c\x0b\x0a"),
        "xid": (2, b"\x81" + (2).to_bytes(8, "little")),
        "lizard_commit_gcn": (7, b"\xc8" + (7).to_bytes(8, "little")),
        "lizard_prepare_gcn": (9, b"\xc9" + (9).to_bytes(8, "little")),
    }
    for name, (value, wire) in cases.items():
        assert status_vars(**{name: value}).to_bytes() == wire, name
        assert getattr(StatusVars.from_bytes(wire), name) == value, name
    assert status_vars(updated_db_names=254).to_bytes() == b"\x0c\xfe"  # OVER_MAX: no names follow
    assert StatusVars.from_bytes(b"\x0c\xfe\x06\x03std").catalog_nz == "std"
    assert StatusVars.from_bytes(b"\x02\x00").catalog == ""  # empty old catalog: no NUL


def test_status_vars_edit_keeps_order_and_unknown_tail():
    sv = StatusVars.from_bytes(b"\x00\x00\x00\x00\x00\x06\x03std\x96\x01\x02")
    assert sv.undecoded == b"\x96\x01\x02"
    sv.lizard_commit_gcn = 5
    sv.charset = (45, 45, 45)
    assert sv.codes() == [0, 4, 6, 200]
    assert sv.to_bytes().endswith(b"\x96\x01\x02")
    sv.charset = None
    assert sv.charset is None and sv.codes() == [0, 6, 200]
    # Lists are accepted where decoding gives tuples, and compare equal afterwards.
    listed = status_vars(updated_db_names=["a", "b"], charset=[1, 2, 3])
    assert listed == StatusVars.from_bytes(listed.to_bytes())
    with pytest.raises(TypeError):
        status_vars(no_such_var=1)
    with pytest.raises(ValueError):
        status_vars(commit_ts2=1)


@pytest.mark.parametrize("unknown", [b"\x0f\x01\x02\x03", b"\x17\x00", b"\x82\xff", b"\xff"])
def test_query_with_undecodable_status_var_still_gives_db_and_query(unknown: bytes):
    known = b"\x00\x00\x00\x00\x00" + b"\x06\x03std"
    block = known + unknown + b"\x04\x21\x00\x21\x00\x21\x00"
    payload = struct.pack("<IIBHH", 9, 0, 4, 0, len(block)) + block + b"mydb\x00" + b"INSERT 1"
    body = decode_body(T.QUERY, payload)
    assert (body.db, body.query, body.thread_id) == ("mydb", b"INSERT 1", 9)
    assert body.status_vars.flags2 == 0 and body.status_vars.catalog_nz == "std"
    assert body.status_vars.undecoded == unknown + b"\x04\x21\x00\x21\x00\x21\x00"
    assert body.status_vars.charset is None  # after the unknown code nothing is trusted
    assert rebuild_body(T.QUERY, body) == payload
    assert decode_body_construct(T.QUERY, payload) == body


def test_query_encode_accepts_bytes_str_and_none():
    a = encode_body(T.QUERY, thread_id=1, exec_time=2, error_code=0, status_vars=None, db="x",
                    query="BEGIN")
    b = encode_body(T.QUERY, thread_id=1, exec_time=2, error_code=0, status_vars=b"", db=b"x",
                    query=b"BEGIN")
    assert a == b == struct.pack("<IIBHH", 1, 2, 1, 0, 0) + b"x\x00BEGIN"
    body = decode_body(T.QUERY, a)
    assert isinstance(body, QueryBody) and body.query == b"BEGIN" and body.status_vars.to_bytes() == b""


# -- specific layouts ----------------------------------------------------------------------------------
def test_gcn_layouts():
    # New engine: gcn only with HAVE_GCN; branch counts with 0x20.
    assert decode_body(T.GCN, b"\x00") == GcnBody(0)
    assert decode_body(T.GCN, b"\x01" + (5).to_bytes(8, "little")) == GcnBody(1, 5)
    assert decode_body(T.GCN, b"\x20\x02\x00\x01\x00") == GcnBody(0x20, None, 2, 1)
    assert decode_body(T.GCN, b"\x29" + (5).to_bytes(8, "little") + b"\x02\x00\x01\x00") == \
        GcnBody(0x29, 5, 2, 1)
    # Old engine / CDC's generator: flags + gcn always, e.g. commit TSO with flags 0x04 only.
    assert decode_body(T.GCN, b"\x04" + (77).to_bytes(8, "little")) == GcnBody(4, 77)
    for bad in (b"", b"\x01", b"\x01" + bytes(7), b"\x01" + bytes(9), b"\x20\x01", b"\x00\x00"):
        with pytest.raises(MalformedEvent):
            decode_body(T.GCN, bad)
    with pytest.raises(ValueError):
        encode_body(T.GCN, flags=GcnFlag.HAVE_GCN)
    with pytest.raises(ValueError):
        encode_body(T.GCN, flags=GcnFlag.HAVE_BRANCH_COUNT, n_branch=1)


def test_gtid_layout_by_hand():
    sid = bytes(range(16))
    wire = (b"\x01" + sid + (42).to_bytes(8, "little") + b"\x02" + (6).to_bytes(8, "little")
            + (7).to_bytes(8, "little") + ((1 << 55) | 1000).to_bytes(7, "little")
            + (900).to_bytes(7, "little") + b"\xfc\x2c\x01"
            + ((1 << 31) | 80032).to_bytes(4, "little") + (50744).to_bytes(4, "little"))
    body = decode_body(T.GTID, wire)
    assert (body.gno, body.last_committed, body.sequence_number) == (42, 6, 7)
    assert (body.immediate_commit_timestamp, body.original_commit_timestamp) == (1000, 900)
    assert body.transaction_length == 300
    assert (body.immediate_server_version, body.original_server_version) == (80032, 50744)
    assert body.commit_group_ticket is None and body.extra == b""
    assert body.uuid == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert rebuild_body(T.GTID, body) == wire
    # 5.6: no logical clock at all; anonymous GTIDs share the layout.
    five_six = b"\x00" + bytes(16) + bytes(8)
    assert decode_body(T.ANONYMOUS_GTID, five_six).lt_type is None
    with pytest.raises(MalformedEvent):  # the original timestamp is announced but missing
        decode_body(T.GTID, wire[:42] + ((1 << 55) | 1).to_bytes(7, "little"))


def test_xa_prepare_lengths_must_match():
    good = encode_body(T.XA_PREPARE, one_phase=0, format_id=1, gtrid=b"g" * 5, bqual=b"b" * 3)
    assert good == struct.pack("<BIII", 0, 1, 5, 3) + b"gggggbbb"
    for bad in (good[:-1], good + b"x", struct.pack("<BIII", 0, 1, 9, 3) + b"gggggbbb"):
        with pytest.raises(MalformedEvent):
            decode_body(T.XA_PREPARE, bad)


def test_rows_query_length_byte_is_kept():
    assert decode_body(T.ROWS_QUERY, b"\x00abc").length_byte == 0
    assert encode_body(T.ROWS_QUERY, query=b"x" * 300) == bytes([300 & 0xFF]) + b"x" * 300
    assert rebuild_body(T.ROWS_QUERY, decode_body(T.ROWS_QUERY, b"\x07abc")) == b"\x07abc"


def test_fde_payload_with_or_without_crc_field():
    fde = build_fde(server_version="5.7.44-log", timestamp=5, server_id=3, checksum=True,
                    post_header_len=POST_HEADER_LEN_57)
    body_with_crc_field = fde[HEADER_LEN:]          # what Event.payload hands over for an FDE
    body_ending_with_alg = fde[HEADER_LEN:-CRC_LEN]  # the encode_body / writer contract
    a = decode_body(T.FORMAT_DESCRIPTION, body_with_crc_field)
    b = decode_body(T.FORMAT_DESCRIPTION, body_ending_with_alg)
    assert a == b
    assert (a.server_version, a.created, a.checksum_alg) == ("5.7.44-log", 5, 1)
    assert a.post_header_len == POST_HEADER_LEN_57
    assert rebuild_body(T.FORMAT_DESCRIPTION, a) == body_ending_with_alg
    dn_table = post_header_table(105)
    fields = dict(binlog_version=4, server_version="8.0.32-X-Cluster", created=0, header_length=19,
                  post_header_len=dn_table, checksum_alg=0)
    payload = encode_body(T.FORMAT_DESCRIPTION, **fields)
    assert decode_body(T.FORMAT_DESCRIPTION, payload + b"\0\0\0\0") == decode_body(
        T.FORMAT_DESCRIPTION, payload)
    with pytest.raises(ValueError):
        encode_body(T.FORMAT_DESCRIPTION, **(fields | {"server_version": "x" * 51}))


# -- unknown types, errors -----------------------------------------------------------------------------
@fast_settings
@given(type_code=st.integers(0, 255).filter(lambda t: t not in BODIES and t != T.TABLE_MAP
                                            and t not in range(23, 26) and t not in range(30, 33)),
       payload=st.binary(max_size=100))
def test_unknown_types_are_kept_raw(type_code: int, payload: bytes):
    body = decode_body(type_code, payload)
    assert body == RawBody(type_code, payload)
    assert rebuild_body(type_code, body) == payload
    assert encode_body(type_code, data=payload) == payload


@pytest.mark.parametrize("type_code", range(160, 166))
def test_mariadb_types_are_recognised_and_raw(type_code: int):
    assert T(type_code).name
    assert decode_body(type_code, b"\x01\x02") == RawBody(type_code, b"\x01\x02")


SAMPLES = {
    T.QUERY: dict(thread_id=1, exec_time=0, error_code=0, db="db", query=b"BEGIN",
                  status_vars=status_vars(flags2=0, catalog_nz="std", charset=(45, 45, 45))),
    T.XID: dict(xid=9),
    T.GCN: dict(flags=0x21, gcn=5, n_branch=1, n_local_branch=1),
    T.SEQUENCE: dict(sequence_type=1, number=5),
    T.XA_PREPARE: dict(one_phase=1, format_id=1, gtrid=b"gtrid", bqual=b"bq"),
    T.ROWS_QUERY: dict(query=b"/*DRDS */"),
    T.ROTATE: dict(position=4, next_file="binlog.000002"),
    T.INTVAR: dict(intvar_type=2, value=5),
    T.RAND: dict(seed1=1, seed2=2),
    T.USER_VAR: dict(name="v", is_null=0, value_type=2, charset=63, value=b"\x01" * 8, flags=0),
    T.GTID: dict(flags=1, sid=bytes(16), gno=1, last_committed=0, sequence_number=1,
                 immediate_commit_timestamp=5, transaction_length=100, immediate_server_version=1),
    T.PREVIOUS_GTIDS: dict(sids=[(bytes(16), [(1, 10)])]),
    T.CONSENSUS_LOG: dict(flag=0, term=2, index=3, length=4, reserve=5),
    T.PREVIOUS_CONSENSUS_INDEX: dict(index=7),
    T.CONSENSUS_CLUSTER_INFO: dict(info=b"127.0.0.1:1234"),
    T.FORMAT_DESCRIPTION: dict(binlog_version=4, server_version="5.7.44", created=0,
                               header_length=19, post_header_len=POST_HEADER_LEN_57, checksum_alg=1),
}
# Types for which no strict prefix of a valid body is itself a valid body.
NO_VALID_PREFIX = {T.XID, T.GCN, T.SEQUENCE, T.XA_PREPARE, T.INTVAR, T.RAND, T.PREVIOUS_GTIDS,
                   T.CONSENSUS_LOG, T.PREVIOUS_CONSENSUS_INDEX, T.CONSENSUS_CLUSTER_INFO}


@pytest.mark.parametrize("type_code", sorted(SAMPLES), ids=lambda t: T(t).name)
def test_truncated_payloads_raise_malformed_at_the_event_offset(type_code: int):
    payload = encode_body(type_code, **SAMPLES[type_code])
    ctx = FormatContext(source="dn0/mysql-bin.000007")
    failures = 0
    for cut in range(len(payload)):
        try:
            decode_body(type_code, payload[:cut], ctx, offset=123456)
        except MalformedEvent as exc:
            failures += 1
            assert (exc.source, exc.offset) == ("dn0/mysql-bin.000007", 123456)
            assert "dn0/mysql-bin.000007: offset 123456" in str(exc)
    if type_code in NO_VALID_PREFIX:
        assert failures == len(payload)
    if type_code == T.QUERY:
        # Everything up to the db's NUL is required; the query text may be any length.
        assert failures == len(payload) - len(b"BEGIN")
    assert failures > 0


def test_fixed_bodies_reject_extra_bytes():
    for type_code in (T.XID, T.SEQUENCE, T.CONSENSUS_LOG, T.STOP, T.CONSENSUS_EMPTY):
        payload = encode_body(type_code, **SAMPLES.get(type_code, {}))
        with pytest.raises(MalformedEvent):
            decode_body(type_code, payload + b"\0", offset=8)


def test_encode_errors():
    with pytest.raises(TypeError, match="xid"):
        encode_body(T.XID, xid=1, bogus=2)
    with pytest.raises(TypeError):
        encode_body(T.XID)
    with pytest.raises(ValueError):
        encode_body(T.XID, xid=-1)
    with pytest.raises(ValueError):
        encode_body(T.SEQUENCE, sequence_type=256, number=0)
    with pytest.raises(ValueError):
        encode_body(T.QUERY, thread_id=0, exec_time=0, error_code=0, status_vars=None, db="d" * 256,
                    query=b"")
    with pytest.raises(ValueError):
        encode_body(200)  # no declaration and no data


# -- through the writer and the reader -----------------------------------------------------------------
def test_bodies_survive_writer_and_reader(tmp_path):
    with BinlogWriter(tmp_path, server_version="5.7.44-log") as w:
        for type_code, fields in SAMPLES.items():
            if type_code in (T.FORMAT_DESCRIPTION, T.ROTATE):
                continue
            w.append(type_code, encode_body(type_code, **fields), timestamp=1)
        w.append(T.CONSENSUS_EMPTY, b"", timestamp=1)
        path = w.path
    events = read_all(path)
    assert events[0].type_code == T.FORMAT_DESCRIPTION
    assert events[0].body.server_version == "5.7.44-log"
    assert events[0].body.post_header_len == POST_HEADER_LEN_57
    written = [t for t in SAMPLES if t not in (T.FORMAT_DESCRIPTION, T.ROTATE)] + [T.CONSENSUS_EMPTY]
    assert [e.type_code for e in events[1:]] == written
    for event in events[1:]:
        assert rebuild_body(event.type_code, event.body) == event.payload
        raw = bytes(event.raw)
        assert zlib.crc32(raw[:-4]) == int.from_bytes(raw[-4:], "little")
