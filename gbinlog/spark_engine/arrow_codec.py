"""``DnTxn`` ⇄ Arrow: one row per DN transaction, exact round trip (no JVM needed).

Columns that Spark sorts, filters or partitions on are plain Arrow columns (vtso, kind, DN, range,
positions: ``extractor.txn_codec.txn_fields``); everything the later stages need byte for byte
travels in one ``body`` binary column, the shared transaction frame (``extractor.txn_codec``, also
used by the extraction worker pipe).

``opened_at`` (a process-local monotonic clock used only for "prepare held" warnings) is not
carried; decoded transactions have 0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from extractor.model import DnTxn
from extractor.txn_codec import BodyDecoder, CodecError, encode_body, txn_fields, txn_from_fields

__all__ = ["FIELDS", "SCHEMA", "SPARK_DDL", "BodyDecoder", "CodecError", "decode_batch", "encode_batch",
           "encode_body", "iter_encoded"]

# (name, Arrow type, Spark DDL type). One declaration, both schemas derived from it.
FIELDS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("vtso", pa.string(), "string"),
    ("kind", pa.string(), "string"),
    ("dn", pa.string(), "string"),
    ("dn_idx", pa.int32(), "int"),       # the DN's place in the engine's DN list (merge order)
    ("seq", pa.int64(), "long"),         # order within the DN: (input range << 32) + ordinal
    ("rng", pa.int32(), "int"),          # output range (global binlog file) of this vtso
    ("pkey", pa.int32(), "int"),         # a key whose Spark hash lands in partition ``rng``
    ("txn_id", pa.int64(), "long"),
    ("branch", pa.string(), "string"),
    ("xid", pa.string(), "string"),
    ("tso", pa.int64(), "long"),
    ("server_id", pa.int64(), "long"),
    ("archive", pa.bool_(), "boolean"),
    ("start_file", pa.string(), "string"),
    ("start_pos", pa.int64(), "long"),
    ("end_file", pa.string(), "string"),
    ("end_pos", pa.int64(), "long"),
    ("body", pa.binary(), "binary"),
    # the restart point (quiet point) this transaction carries, if any (extractor.RestartPoint)
    ("r_file", pa.string(), "string"),
    ("r_pos", pa.int64(), "long"),
    ("r_tso", pa.int64(), "long"),
    ("r_txn_id", pa.int64(), "long"),
    ("r_seq", pa.int64(), "long"),
)
SCHEMA = pa.schema([pa.field(name, typ) for name, typ, _ in FIELDS])
SPARK_DDL = ", ".join(f"{name} {ddl}" for name, _, ddl in FIELDS)

RangeOf = Callable[[str], tuple[int, int]]


def _no_range(vtso: str) -> tuple[int, int]:
    return 0, 0


def encode_batch(txns: Iterable[DnTxn], dn_idx: int, range_of: RangeOf = _no_range,
                 seq_start: int = 0) -> pa.RecordBatch:
    """One RecordBatch (``SCHEMA``) of ``txns`` of the DN at ``dn_idx``; ``range_of(vtso)`` gives
    ``(rng, pkey)``; ``seq`` counts from ``seq_start``."""
    cols: list[list] = [[] for _ in FIELDS]
    (vtso, kind, dn, dn_i, seq, rng, pkey, txn_id, branch, xid, tso, server_id, archive,
     start_file, start_pos, end_file, end_pos, body, r_file, r_pos, r_tso, r_txn_id, r_seq) = cols
    scalar_cols = (kind, dn, txn_id, branch, start_file, start_pos, xid, vtso, end_file, end_pos, tso, server_id,
                   archive, r_file, r_pos, r_tso, r_txn_id, r_seq)   # txn_fields order
    for t in txns:
        for col, value in zip(scalar_cols, txn_fields(t), strict=True):
            col.append(value)
        dn_i.append(dn_idx)
        seq.append(seq_start)
        seq_start += 1
        r, k = range_of(t.vtso)
        rng.append(r)
        pkey.append(k)
        body.append(encode_body(t))
    return pa.RecordBatch.from_arrays([pa.array(c, type=f[1]) for c, f in zip(cols, FIELDS, strict=True)],
                                      schema=SCHEMA)


def iter_encoded(txns: Iterable[DnTxn], dn_idx: int, range_of: RangeOf = _no_range, seq_start: int = 0,
                 max_rows: int = 2000, max_bytes: int = 16 << 20) -> Iterator[pa.RecordBatch]:
    """``txns`` as RecordBatches of at most ``max_rows`` rows / about ``max_bytes`` of events."""
    chunk: list[DnTxn] = []
    size = 0
    for t in txns:
        chunk.append(t)
        size += sum(len(e.raw) for b in t.blocks for e in b.events) if t.blocks else 64
        if len(chunk) >= max_rows or size >= max_bytes:
            yield encode_batch(chunk, dn_idx, range_of, seq_start)
            seq_start += len(chunk)
            chunk, size = [], 0
    if chunk:
        yield encode_batch(chunk, dn_idx, range_of, seq_start)


def decode_batch(batch: pa.RecordBatch | pa.Table, decoder: BodyDecoder | None = None) -> list[DnTxn]:
    """The transactions of a batch (any column order; large_binary/large_string accepted)."""
    decoder = decoder or BodyDecoder()
    names = ("kind", "dn", "txn_id", "branch", "start_file", "start_pos", "xid", "vtso", "end_file", "end_pos",
             "tso", "server_id", "archive", "r_file", "r_pos", "r_tso", "r_txn_id", "r_seq")  # txn_fields order
    scalars = zip(*(batch.column(name).to_pylist() for name in names), strict=True)
    bodies = batch.column("body").to_pylist()
    out: list[DnTxn] = []
    for fields, body in zip(scalars, bodies, strict=True):
        txn = txn_from_fields(fields)
        decoder.decode(body, txn)
        out.append(txn)
    return out
