"""The Spark engine's byte loops: the compiled ``_xkernel`` (built by ``pip install`` with
``binlog._kernel``) or the pure-Python twins here, which give the same bytes.

``GBINLOG_PURE_PYTHON=1`` forces the pure-Python ones (as for ``binlog.kernel``; the tests run
both). The compiled codec makes ``binlog.Event``s itself, so it is used only while ``Event`` has
the slots it sets; otherwise the pure-Python codec runs.

* ``place(src, start, rel_start, first_gno, first_seq, sid)``: range bytes (whole transactions,
  at ``rel_start`` in their range file) moved to file offset ``start``: a GTID event before each
  transaction when ``sid`` is given (``dumper.gtid.insert_gtids``), else only relocated.
* ``encode_body(txn)`` / ``decode_body(body, txn, decoder)``: ``extractor.txn_codec``'s frame.
* ``count_events(data)``: the events in a run of whole events.
"""

from __future__ import annotations

import os
import struct

from binlog import event as _event
from extractor import txn_codec
from extractor.model import Block, DnTxn


def _load():
    if os.environ.get("GBINLOG_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from gbinlog.spark_engine import _xkernel
    except ImportError:
        return None
    return _xkernel


_X = _load()
COMPILED = _X is not None
_EVENT_SLOTS = ("pos", "h", "raw", "ctx", "_body")
CODEC_COMPILED = COMPILED and tuple(getattr(_event.Event, "__slots__", ())) == _EVENT_SLOTS \
    and hasattr(_event, "_UNSET")


def place_py(src, start: int, rel_start: int, first_gno: int, first_seq: int, sid: bytes | None) -> bytearray:
    from binlog.writer import relocate
    from dumper.gtid import insert_gtids

    if sid is not None:
        return insert_gtids(src, start, first_gno, first_seq, sid)
    buf = bytearray(src)
    if start != rel_start:
        relocate(buf, start - rel_start)
    return buf


def count_events_py(data) -> int:
    n = off = 0
    while off + 19 <= len(data):
        off += int.from_bytes(data[off + 9:off + 13], "little")
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

    count_events = _X.count_events
else:
    place = place_py
    count_events = count_events_py

encode_body = _encode_c if CODEC_COMPILED else txn_codec.encode_body
decode_body = _decode_c if CODEC_COMPILED else (lambda body, txn, decoder: decoder.decode(body, txn))

__all__ = ["CODEC_COMPILED", "COMPILED", "count_events", "decode_body", "encode_body", "place"]
