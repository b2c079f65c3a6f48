"""One transaction codec: ``DnTxn`` ⇄ bytes, shared by the extraction worker pipe
(``gbinlog.dn_worker``) and the Spark engine's Arrow rows (``gbinlog.spark_engine.arrow_codec``).

``encode_body``/``BodyDecoder`` frame what later stages need byte for byte — the events of the trace
blocks, the DDL query, hints, names, the format contexts of the events — with precompiled
``struct``s; event bytes are copied once into the frame and come back as ``bytes`` slices, nothing
is decoded or re-encoded. ``txn_fields``/``txn_from_fields`` carry the scalar fields (kind, ids,
positions, vtso, restart point) as a flat tuple: the Arrow codec spreads it over columns, the pipe
pickles it as is. ``opened_at`` (a process-local monotonic clock) is not carried.
"""

from __future__ import annotations

import struct

from binlog.event import Event, FormatContext
from binlog.header import HEADER_STRUCT
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind

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



_NO_POINT = (None, None, None, None, None)


def txn_fields(t: DnTxn) -> tuple:
    """The scalar fields of a transaction, flat: ``(kind, dn, txn_id, branch, start_file, start_pos,
    xid, vtso, end_file, end_pos, tso, server_id, archive, r_file, r_pos, r_tso, r_txn_id, r_seq)``."""
    end = t.end
    return (t.kind.value, t.dn, t.txn_id, t.branch, t.start[0], t.start[1], t.xid, t.vtso,
            None if end is None else end[0], None if end is None else end[1], t.tso, t.server_id, t.archive,
            *(t.restart or _NO_POINT))


def txn_from_fields(fields: tuple | list) -> DnTxn:
    """``txn_fields`` back to a ``DnTxn`` (blocks, query, db, sql come from ``BodyDecoder.decode``)."""
    (kind, dn, txn_id, branch, start_file, start_pos, xid, vtso, end_file, end_pos, tso, server_id, archive,
     r_file, r_pos, r_tso, r_txn_id, r_seq) = fields
    txn = DnTxn(_KINDS[kind], dn, txn_id, branch, _tuple_new(Pos, (start_file, start_pos)), xid, vtso,
                None if end_file is None else _tuple_new(Pos, (end_file, end_pos)), tso, [], server_id, archive)
    if r_file is not None:
        txn.restart = _tuple_new(RestartPoint, (r_file, r_pos, r_tso, r_txn_id, r_seq))
    return txn


def encode_txn(t: DnTxn) -> tuple[tuple, bytes]:
    """A whole transaction: its scalar fields and its body frame."""
    return txn_fields(t), encode_body(t)
