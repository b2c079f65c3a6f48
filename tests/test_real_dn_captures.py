"""The two real DN binlog fragments (fixtures/real-dn/README.md) parse to exactly what is in them.

Expected values come from the README or are read from the file bytes by hand here (struct at
offsets the README names), never from our own decoder's output.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from binlog.constants import EventType, GcnFlag, SequenceType
from binlog.errors import TruncatedEvent
from binlog.events import (
    ConsensusLogBody,
    FormatDescriptionBody,
    GcnBody,
    GtidBody,
    QueryBody,
    RowsQueryBody,
    SequenceBody,
    XaPrepareBody,
    rebuild_body,
)
from binlog.reader import read_all, read_events
from tests import REAL_DN

T = EventType
DN57 = REAL_DN / "dn57_sequence.bin"
DN80 = REAL_DN / "dn80_gcn_consensus.bin"
HEADER = struct.Struct("<IBIIIH")
BODY = 19  # bodies start after the common header

# The XA branch of dn57 (README): gtrid / bqual as text, and the XID clause CN writes for them.
GTRID = b"drds-1881c1536f401000@9d11c57d194702f4"
BQUAL = b"D1_P00000_GROUP@0000"
XID_CLAUSE = b"X'" + GTRID.hex().encode() + b"',X'" + BQUAL.hex().encode() + b"',1"



def hand_walk(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, size) of each whole event, walking the headers by hand."""
    out, off = [], 4
    while off + 19 <= len(data):
        _, type_code, _, size, _, _ = HEADER.unpack_from(data, off)
        if off + size > len(data):
            break
        out.append((off, type_code, size))
        off += size
    return out


def events_until_truncation(path: Path) -> tuple[list, TruncatedEvent | None]:
    events = []
    try:
        for event in read_events(path):
            events.append(event)
    except TruncatedEvent as exc:
        return events, exc
    return events, None


# -- dn57_sequence.bin: DN 5.7, SEQUENCE events, one-phase XA --------------------------------------------
DN57_LAYOUT = [(4, T.FORMAT_DESCRIPTION), (189, T.QUERY), (404, T.ROWS_QUERY), (471, T.TABLE_MAP),
               (547, T.TABLE_MAP), (639, T.SEQUENCE), (671, T.UPDATE_ROWS), (793, T.QUERY),
               (997, T.SEQUENCE), (1029, T.XA_PREPARE), (1123, T.CONSENSUS_LOG)]


def test_dn57_event_types_and_offsets_then_stray_byte():
    data = DN57.read_bytes()
    assert [(o, t) for o, t, _ in hand_walk(data)] == DN57_LAYOUT
    events, error = events_until_truncation(DN57)
    assert [(e.pos, e.type_code) for e in events] == DN57_LAYOUT
    # One stray byte after the last event (1123 + 59 = 1182): the reader must say so, at 1182.
    assert len(data) == 1183 and events[-1].end_pos == 1182
    assert isinstance(error, TruncatedEvent) and error.offset == 1182


@pytest.fixture(scope="module")
def dn57() -> dict[int, object]:
    events, _ = events_until_truncation(DN57)
    return {e.pos: e for e in events}


def test_dn57_format_description(dn57):
    data = DN57.read_bytes()
    fde = dn57[4].body
    assert isinstance(fde, FormatDescriptionBody)
    by_hand = data[4 + BODY + 2:4 + BODY + 52].split(b"\0")[0].decode()
    assert by_hand.startswith("5.7.38-AliSQL-X-Cluster")
    assert fde.server_version == by_hand
    assert fde.binlog_version == 4 and fde.header_length == 19
    assert fde.checksum_alg == 1  # CRC32 (README)
    # The FDE announces its own post-header length: 57 + number of types.
    assert len(fde.post_header_len) == data[4 + BODY + 57 + 14] - 57


def test_dn57_queries(dn57):
    start, end = dn57[189].body, dn57[793].body
    assert isinstance(start, QueryBody) and isinstance(end, QueryBody)
    assert start.query == b"XA START " + XID_CLAUSE
    assert end.query == b"XA END " + XID_CLAUSE
    assert start.db == end.db == "d1_p00000"
    data = DN57.read_bytes()
    thread_id, exec_time, db_len, error_code, sv_len = struct.unpack_from("<IIBHH", data, 189 + BODY)
    assert (start.thread_id, start.exec_time, start.error_code) == (thread_id, exec_time, error_code)
    assert db_len == len(b"d1_p00000")
    sv_block = data[189 + BODY + 13:189 + BODY + 13 + sv_len]
    assert start.status_vars.to_bytes() == sv_block
    assert start.status_vars.undecoded == b""
    # Q_CATALOG_NZ "std" and Q_CHARSET are written in every DN query.
    assert b"\x06\x03std" in sv_block and start.status_vars.catalog_nz == "std"
    at = sv_block.index(b"\x04", sv_block.index(b"std"))
    assert start.status_vars.charset == struct.unpack_from("<HHH", sv_block, at + 1)


def test_dn57_rows_query_hint(dn57):
    body = dn57[404].body
    assert isinstance(body, RowsQueryBody)
    assert body.query == b"/*DRDS /127.0.0.1/1881c1536f401000-3/0// */"


def test_dn57_sequences(dn57):
    data = DN57.read_bytes()
    first, second = dn57[639].body, dn57[997].body
    assert isinstance(first, SequenceBody) and isinstance(second, SequenceBody)
    assert (first.sequence_type, second.sequence_type) == (SequenceType.SNAPSHOT, SequenceType.COMMIT)
    assert (first.sequence_type, first.number) == struct.unpack_from("<BQ", data, 639 + BODY)
    assert (second.sequence_type, second.number) == struct.unpack_from("<BQ", data, 997 + BODY)
    assert first.number < second.number  # snapshot before commit


def test_dn57_xa_prepare_one_phase(dn57):
    body = dn57[1029].body
    assert body == XaPrepareBody(one_phase=1, format_id=1, gtrid=GTRID, bqual=BQUAL)


def test_dn57_consensus(dn57):
    data = DN57.read_bytes()
    body = dn57[1123].body
    assert isinstance(body, ConsensusLogBody)
    flag, term, index, length, reserve = struct.unpack_from("<IQQQQ", data, 1123 + BODY)
    assert body == ConsensusLogBody(flag, term, index, length, reserve)


def test_dn57_bodies_rebuild_byte_for_byte(dn57):
    for pos, event in dn57.items():
        if event.type_code in (T.TABLE_MAP, T.UPDATE_ROWS):
            continue  # rows_events' business
        assert rebuild_body(event.type_code, event.body) == event.payload, pos


# -- dn80_gcn_consensus.bin: DN 8.0, no FDE, consensus + GCN + GTID groups -----------------------------
GROUPS = (152, 468, 784)  # each: CONSENSUS_LOG, GCN, GTID, QUERY; the last is cut after its GTID


def dn80_layout(data: bytes) -> list[tuple[int, int]]:
    layout = [(4, T.QUERY)]
    for n, start in enumerate(GROUPS):
        off = start
        kinds = (T.CONSENSUS_LOG, T.GCN, T.GTID) + ((T.QUERY,) if n < len(GROUPS) - 1 else ())
        for kind in kinds:
            layout.append((off, kind))
            off += HEADER.unpack_from(data, off)[3]
    return layout


def test_dn80_event_types_and_offsets():
    data = DN80.read_bytes()
    expected = dn80_layout(data)
    assert [(o, t) for o, t, _ in hand_walk(data)] == expected
    events = read_all(DN80)  # no FDE: read as MySQL 8.0 with CRC32
    assert [(e.pos, e.type_code) for e in events] == expected
    assert events[-1].type_code == T.GTID and events[-1].end_pos == len(data) == 952


@pytest.fixture(scope="module")
def dn80() -> list:
    return read_all(DN80)


def test_dn80_queries(dn80):
    data = DN80.read_bytes()
    queries = [e for e in dn80 if e.type_code == T.QUERY]
    assert [e.pos for e in queries] == [4, 320, 636]
    for event in queries:
        body = event.body
        assert body.db == "filestoragestatisticcrosstest_p00000"
        assert body.query.startswith(b"ANALYZE TABLE ")
        # The text runs from after the db's NUL to the CRC32.
        thread_id, _, db_len, _, sv_len = struct.unpack_from("<IIBHH", data, event.pos + BODY)
        text_at = event.pos + BODY + 13 + sv_len + db_len + 1
        assert body.query == data[text_at:event.end_pos - 4]
        assert body.thread_id == thread_id
        sv = body.status_vars
        assert sv.undecoded == b""  # every code in a real 8.0 DN query is understood
        assert sv.catalog_nz == "std"
        assert sv.opt_index_format_gpp_enabled == 1  # code 22: AliSQL 8.0
        assert sv.lizard_commit_gcn is None and sv.lizard_prepare_gcn is None
        assert rebuild_body(T.QUERY, body) == event.payload


def test_dn80_gcn(dn80):
    data = DN80.read_bytes()
    gcns = [e for e in dn80 if e.type_code == T.GCN]
    assert [e.pos for e in gcns] == [211, 527, 843]
    for event in gcns:
        flags = data[event.pos + BODY]
        (value,) = struct.unpack_from("<Q", data, event.pos + BODY + 1)
        assert flags == GcnFlag.HAVE_GCN  # README: flags 0x01, no commit seq
        assert event.body == GcnBody(flags=0x01, gcn=value)
        assert not event.body.flags & GcnFlag.HAVE_COMMITTED_SEQ
        assert event.header.flags & 0x80  # LOG_EVENT_IGNORABLE_F, so stock MySQL skips it
        assert rebuild_body(T.GCN, event.body) == event.payload


def test_dn80_consensus_and_gtid(dn80):
    data = DN80.read_bytes()
    for event in dn80:
        if event.type_code == T.CONSENSUS_LOG:
            fields = struct.unpack_from("<IQQQQ", data, event.pos + BODY)
            assert event.body == ConsensusLogBody(*fields)
            # The consensus entry's length covers the group that follows it (GCN+GTID+QUERY).
            if event.pos != GROUPS[-1]:
                group = [size for off, _, size in hand_walk(data) if event.end_pos <= off < event.end_pos + 300]
                assert event.body.length == sum(group[:3])
        if event.type_code == T.GTID:
            flags, sid, gno = struct.unpack_from("<B16sq", data, event.pos + BODY)
            lt_type, last_committed, sequence_number = struct.unpack_from("<Bqq", data,
                                                                          event.pos + BODY + 25)
            body = event.body
            assert isinstance(body, GtidBody)
            assert (body.flags, body.sid, body.gno) == (flags, sid, gno)
            assert (body.lt_type, body.last_committed, body.sequence_number) == (
                lt_type, last_committed, sequence_number)
            assert lt_type == 2 and sequence_number == last_committed + 1
            # 42: after the logical clock; 7-byte timestamp (no original: high bit clear), then a
            # one-byte transaction length, then the 4-byte server version.
            ts = int.from_bytes(data[event.pos + BODY + 42:event.pos + BODY + 49], "little")
            assert not ts >> 55 and body.immediate_commit_timestamp == ts
            assert body.transaction_length == data[event.pos + BODY + 49] < 251
            (version,) = struct.unpack_from("<I", data, event.pos + BODY + 50)
            assert body.immediate_server_version == version == 80032  # an 8.0.32 DN
            assert body.extra == b""
        if event.type_code != T.QUERY:
            assert rebuild_body(event.type_code, event.body) == event.payload
    gnos = [e.body.gno for e in dn80 if e.type_code == T.GTID]
    assert gnos == [gnos[0], gnos[0] + 1, gnos[0] + 2]
