"""The dump's byte loop: file bytes go out as many protocol packets per
write, framed by a compiled kernel or its pure-Python fallback. Both give the same bytes for any
buffer, and a real client (`mariadb-binlog --raw`) fetching through either gets the files byte for
byte, across files, chunk boundaries and a > 16 MiB event split into continuation packets."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlog import read_all
from dumper.server import ServerConfig, dump, start_in_thread
from dumper.server.framing import SPLIT_AT, frame_events_c, frame_events_py
from tests.mariadb import _binary
from tests.test_server_support import PASSWORD, USER, USERS, write_sample_binlog

KERNELS = {"compiled": frame_events_c, "python": frame_events_py}


def test_the_compiled_kernel_is_built():
    # The fast path is what the other tests exercise: a missing build must fail, not fall back.
    if os.environ.get("GBINLOG_PURE_PYTHON", "") in ("", "0"):
        assert frame_events_c is not None, "dumper/server/_framing.c was not built (pip install -e .)"
        assert dump.frame_events is frame_events_c


def _event(size: int, fill: int) -> bytes:
    """An event-shaped run of ``size`` bytes: header with event_size at offset 9."""
    body = bytes([fill]) * max(0, size - 13)
    return (bytes(9) + struct.pack("<I", size) + body)[:max(size, 13)]


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
       cut=st.integers(min_value=0, max_value=50), start=st.integers(min_value=0, max_value=3),
       seq=st.integers(min_value=0, max_value=255))
def test_compiled_and_python_kernels_frame_any_buffer_identically(sizes, cut, start, seq):
    assert frame_events_c is not None, "dumper/server/_framing.c was not built (pip install -e .)"
    buf = b"".join(_event(s, i) for i, s in enumerate(sizes))
    buf = buf[:max(0, len(buf) - cut)]
    start = min(start, len(buf))
    got_c = frame_events_c(buf, start, seq)
    got_py = frame_events_py(buf, start, seq)
    assert bytes(got_c[0]) == bytes(got_py[0])
    assert got_c[1:] == got_py[1:]
    # The packets themselves: 3-byte length = event size + 1, the sequence ids counting on mod 256.
    packets, off, nseq, count = got_py
    at, n = 0, 0
    while at < len(packets):
        length, s = int.from_bytes(packets[at:at + 3], "little"), packets[at + 3]
        assert s == (seq + n) & 0xFF and packets[at + 4] == 0
        at += 4 + length
        n += 1
    assert n == count and nseq == (seq + count) & 0xFF
    assert len(packets) == off - start + 5 * count


def test_kernels_stop_before_an_event_too_big_for_one_packet():
    small = _event(40, 1)
    big_head = bytes(9) + struct.pack("<I", SPLIT_AT) + bytes(6)
    buf = small + big_head + bytes(100)
    for kernel in KERNELS.values():
        if kernel is None:
            continue
        packets, off, seq, count = kernel(buf, 0, 7)
        assert (off, seq, count) == (40, 8, 1) and bytes(packets) == b"\x29\x00\x00\x07\x00" + small


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["compiled", "python"])
@pytest.mark.parametrize("read_chunk", [1 << 20, 4096])
def test_mariadb_binlog_raw_gets_every_file_byte_for_byte(tmp_path, monkeypatch, kernel, read_chunk):
    if KERNELS[kernel] is None:
        pytest.fail("compiled kernel not built")
    monkeypatch.setattr(dump, "frame_events", KERNELS[kernel])
    src = tmp_path / "src"
    src.mkdir()
    sample = write_sample_binlog(src, txns=40, files=3, big_event=17 << 20)
    sizes = [e.h[3] for f in sample.files for e in read_all(src / f)]
    assert max(sizes) > 0xFFFFFF and len(sizes) > 150
    out = tmp_path / "raw"
    out.mkdir()
    with start_in_thread(ServerConfig(dir=src, users=USERS, server_id=1, read_chunk=read_chunk)) as h:
        subprocess.run([_binary("mariadb-binlog"), "--no-defaults", "--read-from-remote-server",
                        "-h127.0.0.1", f"-P{h.port}", f"-u{USER}", f"-p{PASSWORD}", "--raw", "--to-last-log",
                        f"--result-file={out}/", sample.files[0]], check=True, capture_output=True, timeout=60)
    for name in sample.files:
        assert (out / name).read_bytes() == (src / name).read_bytes(), name
