"""The real DN captures through the extractor: expected values from their README and the bytes."""

from __future__ import annotations

from binlog.constants import EventType as E
from extractor import BytesSource, TxnKind, extract
from extractor.vtso import storage_sequence
from extractor.xid import java_string_hash
from tests import REAL_DN

LAST_EVENT_END_57 = 1182  # the fragment carries one stray byte after its last event (README: CONSENSUS at 1123)


def test_dn57_sequence_one_local_txn_with_trace_seq_3_and_two_table_map_blocks():
    data = (REAL_DN / "dn57_sequence.bin").read_bytes()[:LAST_EVENT_END_57]
    out = list(extract(BytesSource("dn57", {"mysql_bin.1": data})))
    assert len(out) == 1
    (t,) = out
    # XA … one_phase=1: a local, non-TSO transaction even though a SEQUENCE commit (997) precedes it.
    assert t.kind is TxnKind.DML and not t.is_tso and t.tso is None
    assert t.vtso == "0" * 38 + "0000000001" + storage_sequence("dn57")
    assert t.txn_id == 0x1881C1536F401000
    assert t.branch == f"{java_string_hash('dn57')}_D1_P00000_GROUP@0000"
    assert (t.start.offset, t.end.offset) == (189, 1123)  # XA START … end of XA_PREPARE
    # ROWS_QUERY at 404 then TABLE_MAPs at 471 and 547: two blocks sharing trace seq 3
    assert [(b.trace_id, b.table, [e.pos for e in b.events]) for b in t.blocks] == [
        ("00000000030000000000", "t_jg_tag_ynub", [471]),
        ("00000000030000000000", "t_user_jg_tag_ubv7", [547, 671]),
    ]
    assert t.blocks[0].hint == "/*DRDS /127.0.0.1/1881c1536f401000-3/0// */"
    assert t.blocks[0].rows_query.pos == 404 and t.blocks[1].hint is None
    assert t.blocks[1].events[1].type_code == E.UPDATE_ROWS
    # the original bytes, untouched
    assert t.blocks[1].events[1].raw == data[671:671 + 122]


def test_dn80_gcn_consensus_only_physical_ddl_pseudo_txns():
    data = (REAL_DN / "dn80_gcn_consensus.bin").read_bytes()
    out = list(extract(BytesSource("dn80", {"mysql-bin.000001": data})))
    assert [t.kind for t in out] == [TxnKind.PHYSICAL_DDL] * 3
    assert not any(t.is_tso for t in out)
    assert [t.start.offset for t in out] == [4, 320, 636]
    assert [t.vtso[38:48] for t in out] == ["0000000001", "0000000002", "0000000003"]
    assert all(t.db == "filestoragestatisticcrosstest_p00000" and t.sql.startswith("ANALYZE TABLE")
               for t in out)
