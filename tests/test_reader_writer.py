"""Reader sources, start positions, follow mode; writer log_pos, CRC, rotation and index."""

import io
import struct
import threading
import time
import zlib

import pytest

from binlog import BinlogWriter, EventType, MalformedEvent, read_all, read_events
from binlog.constants import POST_HEADER_LEN_57


def xid(n: int) -> bytes:
    return struct.pack("<Q", n)


def test_fde_bytes_match_mysql_57_layout(tmp_path):
    w = BinlogWriter(tmp_path, server_version="5.7.44-gbinlog", server_id=3, timestamp=1234)
    w.close()
    data = (tmp_path / "binlog.000001").read_bytes()
    assert data[:4] == b"\xfebin"
    ts, typ, sid, size, log_pos, flags = struct.unpack_from("<IBIIIH", data, 4)
    assert (ts, typ, sid, size, log_pos, flags) == (1234, 15, 3, 119, 123, 0)
    body = data[23:4 + size]
    assert struct.unpack_from("<H", body, 0)[0] == 4
    assert body[2:52].rstrip(b"\0") == b"5.7.44-gbinlog"
    assert struct.unpack_from("<I", body, 52)[0] == 1234
    assert body[56] == 19
    assert body[57:57 + 38] == POST_HEADER_LEN_57
    assert body[95] == 1  # CRC32
    assert struct.unpack("<I", body[96:100])[0] == zlib.crc32(data[4:4 + size - 4])


def test_log_pos_and_crc_of_appended_events(tmp_path):
    w = BinlogWriter(tmp_path)
    starts = [w.append(EventType.XID, xid(i), timestamp=100 + i, server_id=9) for i in range(5)]
    w.close()
    events = read_all(tmp_path / "binlog.000001")[1:]
    assert [e.pos for e in events] == starts
    for i, e in enumerate(events):
        assert e.header.log_pos == e.pos + e.header.event_size
        assert e.header.server_id == 9 and e.header.timestamp == 100 + i
        assert e.payload == xid(i)
        assert zlib.crc32(e.raw[:-4]) == struct.unpack("<I", e.raw[-4:])[0]


def test_sources_bytes_stream_path_agree(tmp_path):
    w = BinlogWriter(tmp_path)
    for i in range(100):
        w.append(EventType.XID, xid(i), timestamp=i)
    w.close()
    path = tmp_path / "binlog.000001"
    data = path.read_bytes()
    a = [(e.pos, e.raw) for e in read_events(path)]
    b = [(e.pos, e.raw) for e in read_events(data)]
    c = [(e.pos, e.raw) for e in read_events(io.BytesIO(data))]
    assert a == b == c and len(a) == 101


def test_start_position(tmp_path):
    w = BinlogWriter(tmp_path)
    starts = [w.append(EventType.XID, xid(i), timestamp=i) for i in range(10)]
    w.close()
    path = tmp_path / "binlog.000001"
    got = read_all(path, start=starts[6])
    assert [e.pos for e in got] == starts[6:]
    assert got[0].payload == xid(6)
    with pytest.raises(MalformedEvent):
        read_all(path, start=starts[6] + 1)


def test_rotation_and_index(tmp_path):
    w = BinlogWriter(tmp_path, max_file_size=300)
    for i in range(20):
        w.append(EventType.XID, xid(i), timestamp=i)
        w.rotate_if_full(timestamp=i)
    w.close()
    index = (tmp_path / "binlog.index").read_text().split()
    assert len(index) > 2
    seen = []
    for n, name in enumerate(index):
        events = read_all(tmp_path / name.removeprefix("./"))
        assert events[0].type_code == EventType.FORMAT_DESCRIPTION
        if n < len(index) - 1:
            assert events[-1].type_code == EventType.ROTATE
            assert events[-1].body.next_file == index[n + 1].removeprefix("./")
            assert events[-1].body.position == 4
            events = events[:-1]
        seen += [struct.unpack("<Q", e.payload)[0] for e in events[1:]]
    assert seen == list(range(20))


def test_append_raw_rewrites_log_pos_and_crc(tmp_path):
    src = BinlogWriter(tmp_path / "a")
    src.append(EventType.XID, xid(5), timestamp=77, server_id=4)
    src.close()
    ev = read_all(tmp_path / "a" / "binlog.000001")[1]
    dst = BinlogWriter(tmp_path / "b", server_version="5.7.44-log")
    dst.append(EventType.XID, xid(1), timestamp=1)
    pos = dst.append_raw(ev.raw)
    dst.close()
    out = read_all(tmp_path / "b" / "binlog.000001")[-1]
    assert out.pos == pos and out.header.log_pos == pos + len(ev.raw)
    assert out.raw[:13] == ev.raw[:13] and out.payload == ev.payload


def test_follow_a_growing_file(tmp_path):
    w = BinlogWriter(tmp_path)
    w.flush()
    done = threading.Event()

    def produce():
        for i in range(50):
            w.append(EventType.XID, xid(i), timestamp=i)
            w.flush()
            time.sleep(0.002)
        w.close()
        done.set()

    got = []
    t = threading.Thread(target=produce)
    t.start()
    for ev in read_events(tmp_path / "binlog.000001", follow=True, poll_interval=0.01,
                          should_stop=done.is_set):
        got.append(ev)
    t.join()
    assert [struct.unpack("<Q", e.payload)[0] for e in got[1:]] == list(range(50))


def test_follow_stops_after_rotate(tmp_path):
    w = BinlogWriter(tmp_path)
    w.append(EventType.XID, xid(1), timestamp=1)
    w.rotate()
    w.close()
    got = list(read_events(tmp_path / "binlog.000001", follow=True, should_stop=lambda: False))
    assert got[-1].type_code == EventType.ROTATE
