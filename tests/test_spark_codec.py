"""The Arrow codec of the Spark engine: DnTxn → RecordBatch → DnTxn is exact (no JVM needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from extractor import extract, storage_sequences
from gbinlog.spark_engine.arrow_codec import (
    SCHEMA,
    SPARK_DDL,
    BodyDecoder,
    CodecError,
    decode_batch,
    encode_batch,
    encode_body,
    iter_encoded,
)
from merger import merge
from tests.spark_support import FIXTURES, dn_dirs, dn_txn_fp, global_fp


def _extract_all(fixture):
    dirs = dn_dirs(fixture)
    seqs = storage_sequences(d.name for d in dirs)
    return [list(extract(d, storage_seq=seqs[d.name])) for d in dirs]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_round_trip_every_fixture(fixture):
    per_dn = _extract_all(fixture)
    decoded = []
    for i, txns in enumerate(per_dn):
        batches = list(iter_encoded(txns, i, max_rows=37))   # several batches per DN
        assert all(b.schema == SCHEMA for b in batches)
        back = [t for b in batches for t in decode_batch(b)]
        assert [dn_txn_fp(t) for t in back] == [dn_txn_fp(t) for t in txns]
        decoded.append(back)
    original = [global_fp(g) for g in merge(per_dn)]
    again = [global_fp(g) for g in merge(decoded)]
    assert len(original) > 100
    assert again == original
    # The fixture has what the codec must carry: DDL queries, hints, rows-query events, XA and local.
    flat = [t for txns in per_dn for t in txns]
    assert any(t.query is not None for t in flat)
    assert any(b.rows_query is not None for t in flat for b in t.blocks)
    assert any(t.xid is None for t in flat) and any(t.xid is not None for t in flat)
    assert any(t.restart is not None for t in flat)


def test_round_trip_through_ipc_and_large_types():
    """What Spark hands back: IPC bytes, large_binary / large_string columns, other column order."""
    per_dn = _extract_all(FIXTURES[0])
    batch = encode_batch(per_dn[0], 0, lambda v: (int(v[18]) % 3, 7))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    got = pa.ipc.open_stream(sink.getvalue()).read_all()
    large = got.cast(pa.schema([pa.field(f.name, pa.large_binary() if f.type == pa.binary() else
                                         pa.large_string() if f.type == pa.string() else f.type)
                                for f in got.schema]))
    large = large.select(list(reversed(large.column_names)))
    back = decode_batch(large)
    assert [dn_txn_fp(t) for t in back] == [dn_txn_fp(t) for t in per_dn[0]]
    assert got.column("rng").to_pylist() == [int(t.vtso[18]) % 3 for t in per_dn[0]]
    assert set(got.column("pkey").to_pylist()) == {7}


def test_spark_ddl_matches_arrow_schema():
    names = [part.split()[0] for part in SPARK_DDL.split(", ")]
    assert names == SCHEMA.names


def test_truncated_frame_is_a_clear_error():
    txn = next(t for t in _extract_all(FIXTURES[0])[0] if t.blocks)
    body = encode_body(txn)
    from extractor.model import DnTxn
    for cut in (len(body) - 1, len(body) // 2, 3):
        shell = DnTxn(txn.kind, txn.dn, txn.txn_id, txn.branch, txn.start, vtso=txn.vtso)
        with pytest.raises(CodecError, match=f"vtso {txn.vtso}"):
            BodyDecoder().decode(body[:cut], shell)
    shell = DnTxn(txn.kind, txn.dn, txn.txn_id, txn.branch, txn.start, vtso=txn.vtso)
    with pytest.raises(CodecError, match="version"):
        BodyDecoder().decode(b"\x09" + body[1:], shell)
