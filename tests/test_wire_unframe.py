"""The live DN client's byte loop: runs of events come out of the
replication stream's packets in one pass, compiled (``binlog/_wire.c``) or by its pure-Python twin.
Both give the same result for any buffer; framed by the endpoint's own framer (the inverse), a run
comes back byte for byte; the loop stops exactly at what the checked path must see (a stream-only
type, a gap in log_pos, an incomplete or non-event packet). End to end: tests/test_live_source.py."""

from __future__ import annotations

import os
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from binlog.wire import unframe_run_c, unframe_run_py
from dumper.server.framing import frame_events_py

HEADER = struct.Struct("<IBIIIH")
STOP = bytes(1 if t in (4, 15, 27) else 0 for t in range(256))   # ROTATE, FDE, HEARTBEAT
MAX = 1 << 30


def events(spec: list[tuple[int, int]], pos: int) -> tuple[bytes, list[int]]:
    """Events of (type, body size) laid out from file position ``pos``; their end positions."""
    out, ends = [], []
    for type_code, body in spec:
        size = HEADER.size + body
        pos += size
        out.append(HEADER.pack(0, type_code, 1, size, pos, 0) + bytes([type_code]) * body)
        ends.append(pos)
    return b"".join(out), ends


def test_the_compiled_loop_is_built():
    if os.environ.get("GBINLOG_PURE_PYTHON", "") in ("", "0"):
        assert unframe_run_c is not None, "binlog/_wire.c was not built (pip install -e .)"


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from([2, 4, 15, 16, 19, 27, 30, 33]), st.integers(0, 300)), max_size=25),
       pos=st.integers(4, 5000), seq=st.integers(0, 255), cut=st.integers(0, 40),
       flip=st.integers(-1, 2000), skew=st.integers(-3, 3))
def test_compiled_and_python_loops_agree_on_any_buffer(spec, pos, seq, cut, flip, skew):
    assert unframe_run_c is not None, "binlog/_wire.c was not built (pip install -e .)"
    raw, _ = events(spec, pos)
    packets = bytearray(frame_events_py(raw, 0, seq)[0])
    if 0 <= flip < len(packets):
        packets[flip] ^= 0x5A                      # a damaged length, OK byte, header or body
    buf = bytes(packets[:max(0, len(packets) - cut)])
    got_c = unframe_run_c(buf, 0, pos + skew, STOP, MAX)
    got_py = unframe_run_py(buf, 0, pos + skew, STOP, MAX)
    assert got_c == got_py


@settings(max_examples=200, deadline=None)
@given(spec=st.lists(st.tuples(st.sampled_from([2, 16, 19, 30, 33]), st.integers(0, 300)), min_size=1, max_size=25),
       pos=st.integers(4, 1 << 31), seq=st.integers(0, 255))
def test_a_framed_run_comes_back_byte_for_byte(spec, pos, seq):
    raw, ends = events(spec, pos)   # log_pos is a u32: positions up to 2 GiB and a little more
    packets = frame_events_py(raw, 0, seq)[0]
    for loop in (unframe_run_c, unframe_run_py):
        assert loop(packets, 0, pos, STOP, MAX) == (raw, len(packets), ends[-1], len(spec), (seq + len(spec)) & 0xFF)


def test_it_stops_where_the_checked_path_must_look():
    raw, ends = events([(30, 10), (30, 20), (27, 5), (30, 7)], 100)   # a HEARTBEAT third
    packets = frame_events_py(raw, 0, 9)[0]
    for loop in (unframe_run_c, unframe_run_py):
        run, off, end, count, seq = loop(packets, 0, 100, STOP, MAX)
        assert (run, end, count, seq) == (raw[:ends[1] - 100], ends[1], 2, 11)
        assert off == 2 * 5 + ends[1] - 100                    # at the heartbeat's packet
        assert loop(packets, 0, 99, STOP, MAX) == (b"", 0, 99, 0, -1)   # a gap: log_pos ≠ pos + size
        assert loop(packets[:-1], off + 5 + ends[2] - ends[1], ends[2], STOP, MAX)[3] == 0   # incomplete
        assert loop(b"\x05\x00\x00\x01\xfe\x00\x00\x02\x00", 0, 100, STOP, MAX)[3] == 0       # EOF packet
