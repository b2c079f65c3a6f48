"""The Spark engine's compiled byte loops (``gbinlog.spark_engine._xkernel``) against their
pure-Python twins: the same frames, the same transactions back, the same placed bytes, the same
errors, on every fixture (no JVM needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from binlog.header import HEADER_STRUCT
from dumper.global_binlog import encode_txn
from dumper.gtid import insert_gtids
from extractor import extract, storage_sequences
from extractor.model import DnTxn
from extractor.txn_codec import BodyDecoder, CodecError, encode_body, txn_fields, txn_from_fields
from gbinlog.spark_engine import xkernel
from merger import merge
from schema_shaper import Shaper, shape
from tests.spark_support import FIXTURES, dn_dirs, dn_txn_fp


def _per_dn(fixture):
    dirs = dn_dirs(fixture)
    seqs = storage_sequences(d.name for d in dirs)
    return [list(extract(d, storage_seq=seqs[d.name])) for d in dirs]


def test_compiled_when_built():
    # dev.sh / pip install build it; a forced pure-Python run loads only the twins
    assert xkernel.COMPILED and xkernel.CODEC_COMPILED
    out = subprocess.run([sys.executable, "-c", "import gbinlog.spark_engine.xkernel as x; print(x.COMPILED)"],
                         env={**os.environ, "GBINLOG_PURE_PYTHON": "1"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_codec_same_frames_and_transactions(fixture):
    flat = [t for txns in _per_dn(fixture) for t in txns]
    assert any(t.query is not None for t in flat) and any(b.rows_query is not None for t in flat for b in t.blocks)
    assert any(b.hint is not None for t in flat for b in t.blocks)
    bodies = [encode_body(t) for t in flat]
    assert [xkernel.encode_body(t) for t in flat] == bodies
    dec = BodyDecoder()
    back = []
    for t, body in zip(flat, bodies, strict=True):
        shell = txn_from_fields(txn_fields(t))
        xkernel.decode_body(body, shell, dec)
        back.append(shell)
    assert [dn_txn_fp(t) for t in back] == [dn_txn_fp(t) for t in flat]
    events = [e for t in back for b in t.blocks for e in b.events]
    assert all(e.h == HEADER_STRUCT.unpack_from(e.raw) for e in events)
    i = next(i for i, t in enumerate(flat) if t.blocks)   # bodies still decode lazily
    assert repr(back[i].blocks[0].events[0].body) == repr(flat[i].blocks[0].events[0].body)
    # contexts are shared as the reader shares them: one object per distinct context
    assert len({id(e.ctx) for t in back for b in t.blocks for e in b.events}) == len(dec._ctx_cache)


def test_bad_frames_are_clear_errors():
    txn = next(t for t in _per_dn(FIXTURES[0])[0] if t.blocks and t.blocks[0].rows_query is not None)
    body = encode_body(txn)
    for cut in (len(body) - 1, len(body) - 30, len(body) // 2, 12, 3, 1):
        for decode in (xkernel.decode_body, lambda b, t, d: d.decode(b, t)):
            shell = DnTxn(txn.kind, txn.dn, txn.txn_id, txn.branch, txn.start, vtso=txn.vtso)
            with pytest.raises(CodecError, match=f"vtso {txn.vtso}"):
                decode(body[:cut], shell, BodyDecoder())
    shell = DnTxn(txn.kind, txn.dn, txn.txn_id, txn.branch, txn.start, vtso=txn.vtso)
    with pytest.raises(CodecError, match="version"):
        xkernel.decode_body(b"\x09" + body[1:], shell, BodyDecoder())
    with pytest.raises(CodecError, match="left over"):
        xkernel.decode_body(body + b"\0", DnTxn(txn.kind, txn.dn, 0, "", txn.start, vtso=txn.vtso), BodyDecoder())


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_place_is_insert_gtids_and_relocate(fixture):
    """Range bytes (transactions rendered without GTIDs at offset 123) placed elsewhere: with a sid
    the bytes ``dumper.gtid.insert_gtids`` makes, without one the relocated bytes."""
    shaped = list(shape(merge(_per_dn(fixture)), shaper=Shaper()))
    rel = pos = 123
    data = bytearray()
    for lt in shaped:
        b = encode_txn(lt, pos, 7)
        data += b
        pos += len(b)
    data = bytes(data)
    assert xkernel.count_events(data) == xkernel.count_events_py(data) > len(shaped) // 2
    zero = data[:9] + b"\0\0\0\0" + data[13:]        # a size of 0 must not loop for ever
    for count in (xkernel.count_events, xkernel.count_events_py):
        with pytest.raises(ValueError, match="event of 0 bytes at 0"):
            count(zero)
    sid = bytes(range(16))
    for start, gno, seq in ((123, 1, 1), (4 + 120, 1000, 17), (987_654, 5, 1)):
        got = xkernel.place(data, start, rel, gno, seq, sid)
        assert bytes(got) == bytes(insert_gtids(data, start, gno, seq, sid)) == bytes(
            xkernel.place_py(data, start, rel, gno, seq, sid))
        assert bytes(xkernel.place(data, start, rel, 0, 0, None)) == bytes(xkernel.place_py(data, start, rel, 0, 0, None))
    assert bytes(xkernel.place(data, rel, rel, 0, 0, None)) == data
    with pytest.raises(ValueError, match="runs past"):
        xkernel.place(data[:-1], 500, rel, 1, 1, sid)


def _records_back(reader, data: bytes, chunk: int) -> list:
    """Feed ``data`` in pieces of ``chunk`` bytes, as ``exchange.read_exchange`` does."""
    out, buf = [], b""
    for i in range(0, len(data), chunk):
        buf += data[i:i + chunk]
        got: list = []
        buf = buf[reader.decode(buf, 0, got):]
        out += got
    assert buf == b""
    return out


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_exchange_records_same_bytes_and_transactions(fixture):
    flat = [t for txns in _per_dn(fixture) for t in txns]
    assert any(t.restart is not None for t in flat) and any(t.xid is not None for t in flat)
    assert any(t.end is not None for t in flat) and any(t.tso is None for t in flat)
    records = [xkernel.encode_record_py(t) for t in flat]
    assert [xkernel.encode_record(t) for t in flat] == records
    assert all(r[4] == 0 for r in records)          # the packed form for every real transaction
    data = b"".join(records)
    for reader in (xkernel.RecordReader(), xkernel.RecordReaderPy()):
        for chunk in (len(data), 1000, 77):
            back = _records_back(reader, data, chunk)
            assert [dn_txn_fp(t) for t in back] == [dn_txn_fp(t) for t in flat]
            assert all(t.opened_at == 0.0 and type(t.start) is type(flat[0].start) for t in back)


def test_exchange_record_fallback_form():
    """Fields the packed form cannot hold (a txn id past 2**63) go as a pickled fields tuple."""
    flat = [t for t in _per_dn(FIXTURES[0])[0] if t.blocks][:3]
    flat[1].txn_id = 1 << 70
    records = [xkernel.encode_record(t) for t in flat]
    assert [r[4] for r in records] == [0, 1, 0]
    assert records == [xkernel.encode_record_py(t) for t in flat]
    for reader in (xkernel.RecordReader(), xkernel.RecordReaderPy()):
        back = _records_back(reader, b"".join(records), 50)
        assert [dn_txn_fp(t) for t in back] == [dn_txn_fp(t) for t in flat]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_event_marks_are_event_starts_step_bytes_apart(fixture):
    """``event_marks`` walks the headers: its marks are the reader's event positions, the first
    at or after every ``step`` bytes past the previous one; a cut-off last event is not walked into."""
    from binlog import read_events

    for path in sorted(p for d in dn_dirs(fixture) for p in d.glob("mysql-bin.0*")):
        data = path.read_bytes()
        starts = [ev.pos for ev in read_events(path)]
        for step in (1, 1000, 8192):
            want, due = [], 4
            for at in starts:
                if at >= due:
                    want.append(at)
                    due = at + step
            assert xkernel.event_marks(data, 4, step) == xkernel.event_marks_py(data, 4, step) == want, (path, step)
        cut = data[:starts[-1] + 10]
        assert xkernel.event_marks(cut, 4, 1) == xkernel.event_marks_py(cut, 4, 1) == starts[:-1]
