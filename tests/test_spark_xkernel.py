"""The Spark engine's compiled byte loops (``gbinlog.spark_engine._xkernel``) against their
pure-Python twins: the same frames, the same transactions back, the same placed bytes, the same
errors, on every fixture (no JVM needed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dumper.global_binlog import encode_txn
from dumper.gtid import insert_gtids
from extractor import extract, storage_sequences
from gbinlog.spark_engine import xkernel
from merger import merge
from schema_shaper import Shaper, shape
from tests.spark_support import FIXTURES, dn_dirs


def _per_dn(fixture):
    dirs = dn_dirs(fixture)
    seqs = storage_sequences(d.name for d in dirs)
    return [list(extract(d, storage_seq=seqs[d.name])) for d in dirs]


def test_compiled_when_built():
    # dev.sh / pip install build it; a forced pure-Python run loads only the twins
    assert xkernel.COMPILED
    out = subprocess.run([sys.executable, "-c", "import gbinlog.spark_engine.xkernel as x; print(x.COMPILED)"],
                         env={**os.environ, "GBINLOG_PURE_PYTHON": "1"}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


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
    assert len(shaped) > 100
    sid = bytes(range(16))
    for start, gno, seq in ((123, 1, 1), (4 + 120, 1000, 17), (987_654, 5, 1)):
        got = xkernel.place(data, start, rel, gno, seq, sid)
        assert bytes(got) == bytes(insert_gtids(data, start, gno, seq, sid)) == bytes(
            xkernel.place_py(data, start, rel, gno, seq, sid))
        assert bytes(xkernel.place(data, start, rel, 0, 0, None)) == bytes(xkernel.place_py(data, start, rel, 0, 0, None))
    assert bytes(xkernel.place(data, rel, rel, 0, 0, None)) == data
    with pytest.raises(ValueError, match="runs past"):
        xkernel.place(data[:-1], 500, rel, 1, 1, sid)


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
