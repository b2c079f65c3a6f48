"""``DnTxn`` ⇄ Arrow: one row per DN transaction, exact round trip (no JVM needed).

Columns that Spark sorts, filters or partitions on are plain Arrow columns (vtso, kind, DN, range,
positions); everything the later stages need byte for byte — the events of the trace blocks, the
DDL query, hints, names, the format contexts of the events — travels in one ``body`` binary
column, framed with precompiled ``struct``s. Event bytes are copied once into the frame and come
back as ``bytes`` slices: nothing is decoded or re-encoded on the way.

``opened_at`` (a process-local monotonic clock used only for "prepare held" warnings) is not
carried; decoded transactions have 0.0.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa

from binlog.event import Event, FormatContext
from binlog.header import HEADER_STRUCT
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind

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

_VERSION = 2
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_EV = struct.Struct("<BQ")           # ctx index, position in its file; the raw event follows
_BLOCK_HEAD = struct.Struct("<HHHBI")  # len trace, len db, len table, flags, n events
_HEADER = HEADER_STRUCT
_F_HINT, _F_ROWS_QUERY, _F_QUERY, _F_DB, _F_SQL = 1, 2, 4, 8, 16
_KINDS = {k.value: k for k in TxnKind}
_tuple_new = tuple.__new__


class CodecError(ValueError):
    """A body frame that does not parse (a version mismatch or a truncated value)."""


def _text(s: str) -> bytes:
    # Names and SQL may carry surrogate escapes (non-UTF-8 bytes read from a binlog).
    return s.encode("utf-8", "surrogateescape")


def _untext(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# id(ctx) -> (ctx, encoded record): a context is encoded once per process, not once per
# transaction; the ctx is kept alive so its id is never reused for another one.
_CTX_RECORDS: dict[int, tuple[FormatContext, bytes]] = {}


def _ctx_record(ctx: FormatContext) -> bytes:
    hit = _CTX_RECORDS.get(id(ctx))
    if hit is not None and hit[0] is ctx:
        return hit[1]
    sv, phl, src = _text(ctx.server_version), bytes(ctx.post_header_len), _text(ctx.source)
    payload = b"".join((_U8.pack(ctx.checksum), _U8.pack(ctx.binlog_version), _U16.pack(len(sv)), sv,
                        _U16.pack(len(phl)), phl, _U16.pack(len(src)), src))
    rec = _U16.pack(len(payload)) + payload
    if len(_CTX_RECORDS) > 4096:
        _CTX_RECORDS.clear()
    _CTX_RECORDS[id(ctx)] = (ctx, rec)
    return rec


def encode_body(txn: DnTxn) -> bytes:
    """The ``body`` frame of a transaction: contexts, flags, query, db, sql, blocks."""
    ctx_index: dict[int, int] = {}
    records: list[bytes] = []
    out: list[bytes] = []
    append = out.append
    ev_pack = _EV.pack
    last_ctx, last_ci = None, 0

    def ctx_of(ctx: FormatContext) -> int:
        i = ctx_index.get(id(ctx))
        if i is None:
            i = ctx_index[id(ctx)] = len(records)
            records.append(_ctx_record(ctx))
        return i

    for blk in txn.blocks:
        tr, db, tb = _text(blk.trace_id), _text(blk.db), _text(blk.table)
        hint, rq = blk.hint, blk.rows_query
        events = blk.events
        append(_BLOCK_HEAD.pack(len(tr), len(db), len(tb), (_F_HINT if hint is not None else 0)
                                | (_F_ROWS_QUERY if rq is not None else 0), len(events)))
        append(tr)
        append(db)
        append(tb)
        if hint is not None:
            h = _text(hint)
            append(_U32.pack(len(h)))
            append(h)
        if rq is not None:
            append(ev_pack(ctx_of(rq.ctx), rq.pos))
            append(rq.raw)
        for ev in events:
            ctx = ev.ctx
            if ctx is not last_ctx:
                last_ctx, last_ci = ctx, ctx_of(ctx)
            append(ev_pack(last_ci, ev.pos))
            append(ev.raw)
    head: list[bytes] = []
    query = txn.query
    flags = ((_F_QUERY if query is not None else 0) | (_F_DB if txn.db is not None else 0)
             | (_F_SQL if txn.sql is not None else 0))
    if query is not None:
        head += (ev_pack(ctx_of(query.ctx), query.pos), query.raw)
    for s in (txn.db, txn.sql):
        if s is not None:
            b = _text(s)
            head += (_U32.pack(len(b)), b)
    return b"".join([_U8.pack(_VERSION), _U8.pack(len(records)), *records, _U8.pack(flags), *head,
                     _U32.pack(len(txn.blocks)), *out])


class BodyDecoder:
    """Decodes ``body`` frames; format contexts are shared between transactions decoded by the
    same decoder (as the reader shares one per file)."""

    def __init__(self) -> None:
        self._ctx_cache: dict[bytes, FormatContext] = {}

    def _ctx(self, rec: bytes) -> FormatContext:
        ctx = self._ctx_cache.get(rec)
        if ctx is None:
            checksum, version = rec[0], rec[1]
            off = 2
            (n,) = _U16.unpack_from(rec, off)
            sv = _untext(rec[off + 2:off + 2 + n])
            off += 2 + n
            (n,) = _U16.unpack_from(rec, off)
            phl = rec[off + 2:off + 2 + n]
            off += 2 + n
            (n,) = _U16.unpack_from(rec, off)
            src = _untext(rec[off + 2:off + 2 + n])
            if off + 2 + n != len(rec):
                raise IndexError("format context record length")
            ctx = self._ctx_cache[rec] = FormatContext(checksum=bool(checksum), server_version=sv,
                                                       binlog_version=version, post_header_len=phl,
                                                       source=src)
        return ctx

    def decode(self, body: bytes, txn: DnTxn) -> None:
        """Fill ``txn``'s blocks, query, db and sql from ``body``."""
        try:
            self._decode(body, txn)
        except (struct.error, IndexError, UnicodeDecodeError) as exc:
            raise CodecError(f"bad transaction frame for vtso {txn.vtso} (DN {txn.dn}): {exc}") from None

    def _decode(self, body: bytes, txn: DnTxn) -> None:
        if body[0] != _VERSION:
            raise CodecError(f"transaction frame version {body[0]}, expected {_VERSION}")
        size = len(body)
        n_ctx = body[1]
        off = 2
        u16, u32 = _U16.unpack_from, _U32.unpack_from
        ctxs: list[FormatContext] = []
        for _ in range(n_ctx):
            (n,) = u16(body, off)
            ctxs.append(self._ctx(body[off + 2:off + 2 + n]))
            off += 2 + n
        flags = body[off]
        off += 1
        ev_unpack, hdr = _EV.unpack_from, _HEADER.unpack_from
        if flags & _F_QUERY:
            ci, pos = ev_unpack(body, off)
            h = hdr(body, off + 9)
            end = off + 9 + h[3]
            if end > size:
                raise IndexError("event runs past the frame")
            txn.query = Event(pos, h, body[off + 9:end], ctxs[ci])
            off = end
        if flags & _F_DB:
            (n,) = u32(body, off)
            txn.db = _untext(body[off + 4:off + 4 + n])
            off += 4 + n
        if flags & _F_SQL:
            (n,) = u32(body, off)
            txn.sql = _untext(body[off + 4:off + 4 + n])
            off += 4 + n
        (n_blocks,) = u32(body, off)
        off += 4
        blocks = txn.blocks
        bh = _BLOCK_HEAD.unpack_from
        bh_size = _BLOCK_HEAD.size
        for _ in range(n_blocks):
            lt, ld, ltb, bflags, n_ev = bh(body, off)
            off += bh_size
            trace = body[off:off + lt].decode("utf-8", "surrogateescape")
            off += lt
            db = body[off:off + ld].decode("utf-8", "surrogateescape")
            off += ld
            table = body[off:off + ltb].decode("utf-8", "surrogateescape")
            off += ltb
            hint = None
            if bflags & _F_HINT:
                (n,) = u32(body, off)
                hint = body[off + 4:off + 4 + n].decode("utf-8", "surrogateescape")
                off += 4 + n
            rows_query = None
            if bflags & _F_ROWS_QUERY:
                ci, pos = ev_unpack(body, off)
                h = hdr(body, off + 9)
                end = off + 9 + h[3]
                if end > size:
                    raise IndexError("event runs past the frame")
                rows_query = Event(pos, h, body[off + 9:end], ctxs[ci])
                off = end
            events = []
            for _ in range(n_ev):
                ci, pos = ev_unpack(body, off)
                h = hdr(body, off + 9)
                end = off + 9 + h[3]
                if end > size:
                    raise IndexError("event runs past the frame")
                events.append(Event(pos, h, body[off + 9:end], ctxs[ci]))
                off = end
            blocks.append(Block(trace, db, table, events, hint, rows_query))
        if off != size:
            raise CodecError(f"{size - off} bytes left over in the frame of vtso {txn.vtso}")


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
    no_point = (None, None, None, None, None)
    for t in txns:
        vtso.append(t.vtso)
        kind.append(t.kind.value)
        dn.append(t.dn)
        dn_i.append(dn_idx)
        seq.append(seq_start)
        seq_start += 1
        r, k = range_of(t.vtso)
        rng.append(r)
        pkey.append(k)
        txn_id.append(t.txn_id)
        branch.append(t.branch)
        xid.append(t.xid)
        tso.append(t.tso)
        server_id.append(t.server_id)
        archive.append(t.archive)
        start_file.append(t.start.file)
        start_pos.append(t.start.offset)
        end = t.end
        end_file.append(end.file if end is not None else None)
        end_pos.append(end.offset if end is not None else None)
        body.append(encode_body(t))
        p = t.restart or no_point
        r_file.append(p[0])
        r_pos.append(p[1])
        r_tso.append(p[2])
        r_txn_id.append(p[3])
        r_seq.append(p[4])
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
    cols = {name: batch.column(name).to_pylist() for name, _, _ in FIELDS if name not in ("rng", "pkey", "dn_idx", "seq")}
    out: list[DnTxn] = []
    kinds = _KINDS
    for i in range(batch.num_rows):
        end_file = cols["end_file"][i]
        txn = DnTxn(kinds[cols["kind"][i]], cols["dn"][i], cols["txn_id"][i], cols["branch"][i],
                    Pos(cols["start_file"][i], cols["start_pos"][i]), xid=cols["xid"][i],
                    vtso=cols["vtso"][i], end=Pos(end_file, cols["end_pos"][i]) if end_file is not None else None,
                    tso=cols["tso"][i], server_id=cols["server_id"][i], archive=cols["archive"][i])
        r_file = cols["r_file"][i]
        if r_file is not None:
            txn.restart = _tuple_new(RestartPoint, (r_file, cols["r_pos"][i], cols["r_tso"][i],
                                                    cols["r_txn_id"][i], cols["r_seq"][i]))
        decoder.decode(cols["body"][i], txn)
        out.append(txn)
    return out
