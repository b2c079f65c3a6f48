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

_VERSION = 1
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


def _untext(b: bytes | memoryview) -> str:
    return bytes(b).decode("utf-8", "surrogateescape")


class _Ctxs:
    """Format contexts of one transaction's events, numbered in first-use order."""

    __slots__ = ("index", "parts")

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.parts: list[bytes] = []

    def of(self, ctx: FormatContext) -> int:
        i = self.index.get(id(ctx))
        if i is None:
            i = self.index[id(ctx)] = len(self.parts)
            sv, phl, src = _text(ctx.server_version), bytes(ctx.post_header_len), _text(ctx.source)
            self.parts.append(b"".join((_U8.pack(ctx.checksum), _U8.pack(ctx.binlog_version),
                                        _U16.pack(len(sv)), sv, _U16.pack(len(phl)), phl,
                                        _U16.pack(len(src)), src)))
        return i


def encode_body(txn: DnTxn) -> bytes:
    """The ``body`` frame of a transaction: contexts, flags, query, db, sql, blocks."""
    ctxs = _Ctxs()
    out: list[bytes] = []
    ev_pack = _EV.pack
    for blk in txn.blocks:
        tr, db, tb = _text(blk.trace_id), _text(blk.db), _text(blk.table)
        flags = (_F_HINT if blk.hint is not None else 0) | (_F_ROWS_QUERY if blk.rows_query is not None else 0)
        out.append(_BLOCK_HEAD.pack(len(tr), len(db), len(tb), flags, len(blk.events)))
        out += (tr, db, tb)
        if blk.hint is not None:
            h = _text(blk.hint)
            out += (_U32.pack(len(h)), h)
        if blk.rows_query is not None:
            rq = blk.rows_query
            out += (ev_pack(ctxs.of(rq.ctx), rq.pos), rq.raw)
        for ev in blk.events:
            out += (ev_pack(ctxs.of(ev.ctx), ev.pos), ev.raw)
    head: list[bytes] = []
    flags = ((_F_QUERY if txn.query is not None else 0) | (_F_DB if txn.db is not None else 0)
             | (_F_SQL if txn.sql is not None else 0))
    if txn.query is not None:
        head += (ev_pack(ctxs.of(txn.query.ctx), txn.query.pos), txn.query.raw)
    for s in (txn.db, txn.sql):
        if s is not None:
            b = _text(s)
            head += (_U32.pack(len(b)), b)
    return b"".join([_U8.pack(_VERSION), _U8.pack(len(ctxs.parts)), *ctxs.parts, _U8.pack(flags), *head,
                     _U32.pack(len(txn.blocks)), *out])


class BodyDecoder:
    """Decodes ``body`` frames; format contexts are shared between transactions decoded by the
    same decoder (as the reader shares one per file)."""

    def __init__(self) -> None:
        self._ctx_cache: dict[tuple, FormatContext] = {}

    def _ctx(self, key: tuple) -> FormatContext:
        ctx = self._ctx_cache.get(key)
        if ctx is None:
            checksum, version, sv, phl, src = key
            ctx = self._ctx_cache[key] = FormatContext(checksum=bool(checksum), server_version=sv,
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
        n_ctx = body[1]
        off = 2
        ctxs: list[FormatContext] = []
        u16, u32 = _U16.unpack_from, _U32.unpack_from
        for _ in range(n_ctx):
            checksum, version = body[off], body[off + 1]
            off += 2
            (n,) = u16(body, off)
            sv = _untext(body[off + 2:off + 2 + n])
            off += 2 + n
            (n,) = u16(body, off)
            phl = body[off + 2:off + 2 + n]
            off += 2 + n
            (n,) = u16(body, off)
            src = _untext(body[off + 2:off + 2 + n])
            off += 2 + n
            ctxs.append(self._ctx((checksum, version, sv, phl, src)))
        flags = body[off]
        off += 1
        ev_unpack, hdr = _EV.unpack_from, _HEADER.unpack_from

        def event(off: int) -> tuple[Event, int]:
            ci, pos = ev_unpack(body, off)
            off += 9
            h = hdr(body, off)
            end = off + h[3]
            if end > len(body):
                raise IndexError("event runs past the frame")
            return Event(pos, h, body[off:end], ctxs[ci]), end

        if flags & _F_QUERY:
            txn.query, off = event(off)
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
        for _ in range(n_blocks):
            lt, ld, ltb, bflags, n_ev = bh(body, off)
            off += _BLOCK_HEAD.size
            trace = _untext(body[off:off + lt])
            off += lt
            db = _untext(body[off:off + ld])
            off += ld
            table = _untext(body[off:off + ltb])
            off += ltb
            hint = None
            if bflags & _F_HINT:
                (n,) = u32(body, off)
                hint = _untext(body[off + 4:off + 4 + n])
                off += 4 + n
            rows_query = None
            if bflags & _F_ROWS_QUERY:
                rows_query, off = event(off)
            events = []
            for _ in range(n_ev):
                ev, off = event(off)
                events.append(ev)
            blocks.append(Block(trace, db, table, events, hint, rows_query))
        if off != len(body):
            raise CodecError(f"{len(body) - off} bytes left over in the frame of vtso {txn.vtso}")


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
