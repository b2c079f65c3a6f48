"""The Spark engine's byte loops: the compiled ``_xkernel`` (built by ``pip install`` with
``binlog._kernel``) or the pure-Python twins here, which give the same bytes.

``GBINLOG_PURE_PYTHON=1`` forces the pure-Python ones (as for ``binlog.kernel``; the tests run
both). The compiled codec makes ``binlog.Event``s itself, so it is used only while ``Event`` has
the slots it sets; otherwise the pure-Python codec runs.

* ``place(src, start, rel_start, first_gno, first_seq, sid)``: range bytes (whole transactions,
  at ``rel_start`` in their range file) moved to file offset ``start``: a GTID event before each
  transaction when ``sid`` is given (``dumper.gtid.insert_gtids``), else only relocated.
* ``encode_body(txn)`` / ``decode_body(body, txn, decoder)``: ``extractor.txn_codec``'s frame.
* ``count_events(data)``: the events in a run of whole events; ``event_marks(data, off, step)``:
  event starts about every ``step`` bytes (a walk over the headers).
* ``encode_record(txn)`` / ``RecordReader``: the exchange's records, a whole ``DnTxn`` each (its
  scalar fields packed, then its body frame): no pickling, transactions made without their
  ``__init__`` when compiled.
"""

from __future__ import annotations

import dataclasses
import pickle
import struct

from binlog import event as _event
from binlog.kernel import compiled_twin
from extractor import txn_codec
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind

_X = compiled_twin("gbinlog.spark_engine._xkernel")
COMPILED = _X is not None
_EVENT_SLOTS = ("pos", "_h", "raw", "ctx", "_body")
_BLOCK_FIELDS = ("trace_id", "db", "table", "events", "hint", "rows_query")
_TXN_FIELDS = ("kind", "dn", "txn_id", "branch", "start", "xid", "vtso", "end", "tso", "blocks", "server_id",
               "archive", "query", "db", "sql", "opened_at", "restart")
CODEC_COMPILED = COMPILED and tuple(getattr(_event.Event, "__slots__", ())) == _EVENT_SLOTS \
    and hasattr(_event, "_UNSET") and tuple(f.name for f in dataclasses.fields(DnTxn)) == _TXN_FIELDS \
    and tuple(f.name for f in dataclasses.fields(Block)) == _BLOCK_FIELDS


def place_py(src, start: int, rel_start: int, first_gno: int, first_seq: int, sid: bytes | None) -> bytearray:
    from binlog.writer import relocate
    from dumper.gtid import insert_gtids

    if sid is not None:
        return insert_gtids(src, start, first_gno, first_seq, sid)
    buf = bytearray(src)
    if start != rel_start:
        relocate(buf, start - rel_start)
    return buf


def event_marks_py(data, off: int, step: int) -> list[int]:
    out: list[int] = []
    due = off
    while off + 19 <= len(data):
        size = int.from_bytes(data[off + 9:off + 13], "little")
        if size < 19 or off + size > len(data):
            break
        if off >= due:
            out.append(off)
            due = off + step
        off += size
    return out


def count_events_py(data) -> int:
    n = off = 0
    while off + 19 <= len(data):
        size = int.from_bytes(data[off + 9:off + 13], "little")
        if size < 19:
            raise ValueError(f"event of {size} bytes at {off}")
        off += size
        n += 1
    return n


def _decode_c(body: bytes, txn: DnTxn, decoder: txn_codec.BodyDecoder) -> None:
    try:
        _X.decode_body(body, txn, decoder._ctx, _event.Event, _event._UNSET, Block)
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
        raise txn_codec.CodecError(f"bad transaction frame for vtso {txn.vtso} (DN {txn.dn}): {exc}") from None


def _encode_c(txn: DnTxn) -> bytes:
    return _X.encode_body(txn, txn_codec._ctx_record)


if COMPILED:
    def place(src, start: int, rel_start: int, first_gno: int, first_seq: int, sid: bytes | None) -> bytearray:
        return _X.place(src, start, first_gno, first_seq, sid)

    # a kernel built before event_marks existed (an old in-place build) still loads
    count_events, event_marks = _X.count_events, getattr(_X, "event_marks", event_marks_py)
else:
    place = place_py
    count_events, event_marks = count_events_py, event_marks_py

encode_body = _encode_c if CODEC_COMPILED else txn_codec.encode_body
decode_body = _decode_c if CODEC_COMPILED else (lambda body, txn, decoder: decoder.decode(body, txn))

# -- exchange records (the format: _xkernel.pyx) -----------------------------------------------------------
KINDS = tuple(TxnKind)
_KIND_INDEX = {k: i for i, k in enumerate(KINDS)}
_P_XID, _P_END, _P_TSO, _P_SERVER, _P_ARCHIVE, _P_RESTART = 1, 2, 4, 8, 16, 32
_HEAD = struct.Struct("<IBBBqQ")      # length, form, kind, bits, txn_id, start_pos
_I64, _U32 = struct.Struct("<q"), struct.Struct("<I")
_PICKLED = struct.Struct("<IBI")      # length, form 1, length of the pickled fields


def _fallback_record(txn: DnTxn) -> bytes:
    fields = pickle.dumps(txn_codec.txn_fields(txn), pickle.HIGHEST_PROTOCOL)
    body = encode_body(txn)
    return _PICKLED.pack(1 + 4 + len(fields) + len(body), 1, len(fields)) + fields + body


def _text(s: str) -> bytes:
    b = s.encode("utf-8", "surrogateescape")
    return _U32.pack(len(b)) + b


def encode_record_py(txn: DnTxn) -> bytes:
    """The packed record (form 0), or the pickled-fields one (form 1) for fields it cannot hold."""
    xid, end, tso, server_id, restart = txn.xid, txn.end, txn.tso, txn.server_id, txn.restart
    bits = ((_P_XID if xid is not None else 0) | (_P_END if end is not None else 0)
            | (_P_TSO if tso is not None else 0) | (_P_SERVER if server_id is not None else 0)
            | (_P_ARCHIVE if txn.archive else 0) | (_P_RESTART if restart is not None else 0))
    try:
        parts = [b"", _text(txn.dn), _text(txn.branch), _text(txn.start[0]), _text(txn.vtso)]
        if xid is not None:
            parts.append(_text(xid))
        if end is not None:
            parts += (_text(end[0]), _I64.pack(end[1] - (1 << 64) if end[1] >= 1 << 63 else end[1]))
        if tso is not None:
            parts.append(_I64.pack(tso))
        if server_id is not None:
            parts.append(_I64.pack(server_id))
        if restart is not None:
            parts += (_text(restart[0]), struct.pack("<Qqqq", *restart[1:]))
        parts.append(encode_body(txn))
        rest = b"".join(parts)
        parts[0] = _HEAD.pack(_HEAD.size - 4 + len(rest), 0, _KIND_INDEX[txn.kind], bits, txn.txn_id, txn.start[1])
    except (struct.error, TypeError, AttributeError, KeyError):
        return _fallback_record(txn)
    return parts[0] + rest


def _decode_fallback(fields: bytes, body: bytes, decoder: txn_codec.BodyDecoder) -> DnTxn:
    t = txn_codec.txn_from_fields(pickle.loads(fields))
    decode_body(body, t, decoder)
    return t


class RecordReaderPy:
    """Exchange records → ``DnTxn``s (``decode(buf, off, out)``: whole records of ``buf`` from
    ``off`` appended to ``out``; returns the offset after the last whole one)."""

    def __init__(self) -> None:
        self.decoder = txn_codec.BodyDecoder()

    def decode(self, buf, off: int, out: list) -> int:
        n = len(buf)
        u32, i64 = _U32.unpack_from, _I64.unpack_from
        while off + 4 <= n:
            (size,) = u32(buf, off)
            end = off + 4 + size
            if end > n:
                break
            if buf[off + 4] == 1:
                (k,) = u32(buf, off + 5)
                out.append(_decode_fallback(bytes(buf[off + 9:off + 9 + k]), bytes(buf[off + 9 + k:end]), self.decoder))
                off = end
                continue
            if buf[off + 4] != 0:
                raise ValueError(f"exchange record form {buf[off + 4]}")
            _, _, kind, bits, txn_id, start_pos = _HEAD.unpack_from(buf, off)
            at = off + _HEAD.size
            texts = []
            for _ in range(4 + (1 if bits & _P_XID else 0)):
                (k,) = u32(buf, at)
                texts.append(bytes(buf[at + 4:at + 4 + k]).decode("utf-8", "surrogateescape"))
                at += 4 + k
            dn, branch, start_file, vtso = texts[:4]
            xid = texts[4] if bits & _P_XID else None
            t = DnTxn(KINDS[kind], dn, txn_id, branch, Pos(start_file, start_pos), xid, vtso)
            if bits & _P_END:
                (k,) = u32(buf, at)
                f = bytes(buf[at + 4:at + 4 + k]).decode("utf-8", "surrogateescape")
                (p,) = struct.unpack_from("<Q", buf, at + 4 + k)
                t.end = Pos(f, p)
                at += 12 + k
            if bits & _P_TSO:
                (t.tso,) = i64(buf, at)
                at += 8
            if bits & _P_SERVER:
                (t.server_id,) = i64(buf, at)
                at += 8
            t.archive = bool(bits & _P_ARCHIVE)
            if bits & _P_RESTART:
                (k,) = u32(buf, at)
                f = bytes(buf[at + 4:at + 4 + k]).decode("utf-8", "surrogateescape")
                t.restart = RestartPoint(f, *struct.unpack_from("<Qqqq", buf, at + 4 + k))
                at += 36 + k
            decode_body(bytes(buf[at:end]), t, self.decoder)
            out.append(t)
            off = end
        return off


def _encode_record_c(txn: DnTxn) -> bytes:
    try:
        return _X.encode_record(txn, txn_codec._ctx_record, _KIND_INDEX)
    except (OverflowError, TypeError, KeyError):
        return _fallback_record(txn)


def _record_reader_c():
    decoder = txn_codec.BodyDecoder()
    return _X.RecordDecoder(DnTxn, Pos, RestartPoint, KINDS, decoder._ctx, _event.Event, _event._UNSET, Block,
                            lambda fields, body: _decode_fallback(fields, body, decoder))


encode_record = _encode_record_c if CODEC_COMPILED else encode_record_py
RecordReader = _record_reader_c if CODEC_COMPILED else RecordReaderPy

__all__ = ["RecordReader", "encode_record", "CODEC_COMPILED", "COMPILED", "count_events", "decode_body", "event_marks", "encode_body", "place"]
