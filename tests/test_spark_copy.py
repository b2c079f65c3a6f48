"""The Spark build's copy of a range file into the final files (``layout.copy_segments``), in-process:
relocated bytes, the range file's pages released behind the copy, a retried copy a no-op."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine.layout import copy_segments, release_pages
from tests.spark_support import FIXTURES, dn_dirs


@pytest.fixture(scope="module")
def events(tmp_path_factory) -> bytes:
    """Whole events: a local build's first file without its magic, FDE and ROTATE."""
    out = tmp_path_factory.mktemp("local") / "out"
    local_build(dn_dirs(FIXTURES[0]), out)
    data = (out / "binlog.000001").read_bytes()
    offsets, off = [], 4
    while off < len(data):
        offsets.append(off)
        off += struct.unpack_from("<I", data, off + 9)[0]
    assert off == len(data) and len(offsets) > 20
    return data[offsets[1]:offsets[-1]]


def _event_starts(data: bytes) -> list[int]:
    starts, off = [], 0
    while off < len(data):
        starts.append(off)
        off += struct.unpack_from("<I", data, off + 9)[0]
    return starts


def placed_at(events: bytes, start: int) -> bytes:
    """``events`` as a binlog file holds them from offset ``start``: each ``log_pos`` (header bytes
    13..16) the end of the event there, each CRC32 (the last 4 bytes) over the rest."""
    out = bytearray(events)
    for off in _event_starts(events):
        size = struct.unpack_from("<I", out, off + 9)[0]
        struct.pack_into("<I", out, off + 13, start + off + size)
        struct.pack_into("<I", out, off + size - 4, zlib.crc32(out[off:off + size - 4]))
    return bytes(out)


def test_release_pages_frees_only_the_range(tmp_path):
    path = tmp_path / "range"
    path.write_bytes(bytes(range(256)) * 4096 * 4)   # 4 MB
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
        before = os.fstat(fd).st_blocks
        assert release_pages(fd, 1000, 3 << 20)
        assert os.fstat(fd).st_blocks < before - (2 << 20) // 512   # whole blocks given back
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert len(data) == 4 << 20                                     # the size is kept
    assert data[:1000] == (bytes(range(256)) * 4)[:1000]            # bytes around the range are kept
    assert data[1000:1000 + (3 << 20)] == bytes(3 << 20)
    assert data[1000 + (3 << 20):] == (bytes(range(256)) * 4096 * 4)[1000 + (3 << 20):]


def test_copy_relocates_releases_and_a_retry_leaves_the_written_piece(events, tmp_path):
    head = b"\xfe" * 100                                  # stands for a range file's FDE
    src = tmp_path / "range-00001"
    src.write_bytes(head + placed_at(events, len(head)))   # as a range writer leaves it
    starts = _event_starts(events)
    cut = len(head) + starts[len(starts) // 2]            # two pieces, cut at an event boundary
    end = len(head) + len(events)
    final = tmp_path / "binlog.000002"
    shift = 5000
    final.write_bytes(bytes(shift + end))
    pieces = [(len(head), cut, final.name, len(head) + shift, 0, 0, None),
              (cut, end, final.name, cut + shift, 0, 0, None)]
    expected = placed_at(events, len(head) + shift)

    assert copy_segments(str(src), str(tmp_path), pieces, release=True) == len(events)
    assert final.read_bytes()[len(head) + shift:] == expected
    assert final.read_bytes()[:len(head) + shift] == bytes(len(head) + shift)
    assert src.read_bytes()[len(head):] == bytes(len(events))   # released behind the copy
    assert src.read_bytes()[:len(head)] == head

    # a retried task (its pieces released once written) writes nothing and changes nothing
    assert copy_segments(str(src), str(tmp_path), pieces, release=True) == 0
    assert final.read_bytes()[len(head) + shift:] == expected


def test_without_release_the_range_file_is_kept_and_a_retry_writes_the_same(events, tmp_path):
    src = tmp_path / "range-00001"
    src.write_bytes(placed_at(events, 0))
    final = tmp_path / "binlog.000001"
    final.write_bytes(bytes(len(events) + 4))
    piece = [(0, len(events), final.name, 4, 0, 0, None)]
    for _ in range(2):
        assert copy_segments(str(src), str(tmp_path), piece) == len(events)
        assert final.read_bytes()[4:] == placed_at(events, 4)
    assert src.read_bytes() == placed_at(events, 0)


def test_copies_release_pages_only_where_no_copy_runs_twice_at_once():
    from gbinlog.spark_engine.layout import copies_may_release

    assert copies_may_release({"spark.master": "local[2]"})
    assert not copies_may_release({"spark.master": "local[2]", "spark.speculation": "true"})
    assert not copies_may_release({"spark.master": "spark://127.0.0.1:7077"})   # retries, lost executors
    assert not copies_may_release({})


def test_a_bad_piece_is_its_own_error_on_the_pure_python_path(events, tmp_path, monkeypatch):
    """The pure-Python GTID insertion let go of the mapped range file only on success: closing the
    map then raised BufferError over the real error."""
    import gbinlog.spark_engine.xkernel as xkernel

    monkeypatch.setattr(xkernel, "place", xkernel.place_py)
    data = bytearray(placed_at(events, 0))
    struct.pack_into("<I", data, 9, len(data) + 100)          # the first event runs past the piece
    src = tmp_path / "range-00001"
    src.write_bytes(bytes(data))
    (tmp_path / "binlog.000001").write_bytes(bytes(len(data) * 2))
    with pytest.raises(ValueError, match="runs past the segment"):
        copy_segments(str(src), str(tmp_path), [(0, len(data), "binlog.000001", 4, 1, 1, b"s" * 16)])


def test_copy_of_a_short_range_file_is_an_error(events, tmp_path):
    src = tmp_path / "range-00001"
    src.write_bytes(events)
    (tmp_path / "binlog.000001").write_bytes(bytes(len(events)))
    with pytest.raises(ValueError, match="segment ends at"):
        copy_segments(str(src), str(tmp_path), [(0, len(events) + 10, "binlog.000001", 0, 0, 0, None)])
    assert Path(src).read_bytes() == events               # nothing released


def reference_plan(ranges, *, max_file_size, fde_len, gtids, placed, segment_size):
    """The layout rule walked transaction by transaction (the local writer's rotation after the
    transaction that takes a file to ``max_file_size``; a segment ends with the transaction that
    takes it to ``segment_size``), as plan_files did before it searched."""
    from dumper.global_binlog import file_name
    from dumper.gtid import GTID_EVENT_LEN, previous_gtids_len
    from gbinlog.spark_engine.layout import FilePlan, Layout, Segment, resume_layout, rotate

    files, cur, pos, gno, seq, last_mark = resume_layout(placed)
    extra = GTID_EVENT_LEN if gtids else 0

    def head():
        return fde_len + (previous_gtids_len(gno) if gtids else 0)

    cap = segment_size or 1 << 62
    for rng, sizes, stamps in ranges:
        rel, seg = fde_len, None
        for size, ts in zip(sizes, stamps, strict=True):
            if cur is None:
                cur = FilePlan(file_name(len(files) + 1), ts, gno_before=gno)
                files.append(cur)
                pos, seq = head(), 0
            if seg is None or seg.file != cur.name or seg.rel_end - seg.rel_start >= cap:
                seg = Segment(rng, rel, rel, cur.name, pos, gno + 1, seq + 1)
                cur.segments.append(seg)
            seg.rel_end += size
            rel += size
            pos += size + extra
            gno += 1
            seq += 1
            cur.end = pos
            last_mark = (cur.name, pos)
            if pos >= max_file_size:
                cur = rotate(files, cur, ts, gno, file_name)
                pos = cur.end = head()
                seq = 0
    return Layout(files, last_mark)


_sizes = st.lists(st.integers(min_value=19, max_value=3000), max_size=60)


@settings(max_examples=300, deadline=None)
@example(ranges=[[100] * 10, [100] * 7], max_file_size=520, gtids=False, segment_size=300, placed_at=None)
@example(ranges=[[100] * 10], max_file_size=1000, gtids=True, segment_size=200, placed_at=900)
@given(ranges=st.lists(_sizes, min_size=1, max_size=4), max_file_size=st.integers(min_value=200, max_value=20000),
       gtids=st.booleans(), segment_size=st.one_of(st.none(), st.integers(min_value=1, max_value=8000)),
       placed_at=st.one_of(st.none(), st.integers(min_value=150, max_value=25000)))
def test_plan_files_is_the_rule_walked_transaction_by_transaction(ranges, max_file_size, gtids, segment_size,
                                                                 placed_at):
    from array import array

    from dumper.global_binlog import file_name
    from gbinlog.spark_engine.layout import plan_files

    given_ranges = [(r + 1, array("I", sizes), array("I", range(1000 + r * 100, 1000 + r * 100 + len(sizes))))
                    for r, sizes in enumerate(ranges)]
    placed = None if placed_at is None else {"files": ["binlog.000001", "binlog.000002"], "position": placed_at,
                                             "gno": 7, "file_txns": 3, "last_marker": ["binlog.000002", placed_at]}
    kwargs = {"max_file_size": max_file_size, "fde_len": 120, "gtids": gtids, "placed": placed,
              "segment_size": segment_size}
    assert plan_files(given_ranges, file_name=file_name, **kwargs) == reference_plan(given_ranges, **kwargs)
