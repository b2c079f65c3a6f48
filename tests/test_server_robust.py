"""Replication endpoint robustness: a fuzzer's malformed and truncated packets,
oversized length headers and abrupt disconnects leave the server serving; 50 replicas streaming at once
all finish equal; a stuck replica neither delays the others nor grows the server's buffers."""

from __future__ import annotations

import logging
import random
import socket
import struct
import threading
import time

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from tests.test_server_support import PASSWORD, USER, USERS, RawClient, write_sample_binlog


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_sample_binlog(tmp_path_factory.mktemp("robust"), txns=60, files=3, pad=8 << 10)


def expected_stream(sample) -> list[bytes]:
    """What a dump from the first file must deliver, minus the fake ROTATEs (checked elsewhere)."""
    out = []
    for name in sample.files:
        out += [e.raw for e in read_all(sample.dir / name)]
    return out


def full_dump(port: int, sample) -> list[bytes]:
    c = RawClient(port)
    c.query("SET @master_binlog_checksum='CRC32'")
    events = [e for e in c.dump(sample.files[0]) if not (e[4] == 4 and e[:4] == b"\0\0\0\0")]
    c.close()
    return events


def wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _packet(payload: bytes, seq: int) -> bytes:
    return struct.pack("<I", len(payload) | seq << 24) + payload


def test_fuzzer_leaves_the_server_serving(sample, caplog):
    caplog.set_level(logging.DEBUG, logger="gbinlog.serve")
    rng = random.Random(20261121)
    cfg = ServerConfig(dir=sample.dir, users=USERS, handshake_timeout=0.5)
    sent = 0
    with start_in_thread(cfg) as h:
        # A client that connects and says nothing is dropped after the handshake timeout.
        silent = socket.create_connection(("127.0.0.1", h.port))
        silent.settimeout(5)

        def connect_raw() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", h.port), timeout=5)
            s.recv(256)  # the handshake
            return s

        while sent < 1000:
            case = rng.randrange(6)
            if case == 0:  # garbage instead of a handshake response
                s = connect_raw()
                s.sendall(_packet(rng.randbytes(rng.randrange(0, 120)), 1))
                sent += 1
            elif case == 1:  # a handshake response cut anywhere, then gone
                s = connect_raw()
                good = (struct.pack("<IIB", 0x200 | 0x8000 | 0x80000, 1 << 24, 33) + b"\0" * 23
                        + USER.encode() + b"\0\x14" + rng.randbytes(20) + b"mysql_native_password\0")
                s.sendall(_packet(good, 1)[:rng.randrange(1, len(good) + 4)])
                sent += 1
            elif case == 2:  # oversized length headers: 16 MiB - 1 continuation packets
                s = connect_raw()
                try:
                    for _ in range(rng.randrange(1, 4)):
                        s.sendall(b"\xff\xff\xff\x01" + rng.randbytes(rng.randrange(0, 4096)))
                        sent += 1
                except OSError:
                    pass
            else:  # authenticated, then malformed or truncated commands, then an abrupt close
                c = RawClient(h.port)
                for _ in range(rng.randrange(1, 12)):
                    cmd = rng.choice([0x03, 0x12, 0x15, 0x1E, 0x02, 0x0E, rng.randrange(256)])
                    body = rng.randbytes(rng.randrange(0, 40))
                    if cmd == 0x03:
                        body = rng.choice([b"SET @", b"SELECT (", b"SHOW BINLOG EVENTS FROM -1", b"\xff\xfe",
                                           b"SELECT @@", b"SET @a = 'x", b"PURGE BINARY LOGS TO", b"",
                                           b"SELECT 'a' 'b' 'c'", b"SHOW VARIABLES LIKE"]) + body
                    if cmd == 0x12 and rng.random() < 0.5:  # a dump of a file that is not there
                        body = struct.pack("<IHI", rng.randrange(2**32), rng.randrange(4), 5) + body
                    pkt = _packet(bytes([cmd]) + body, 0)
                    if rng.random() < 0.15:  # truncated: the header promises more than follows
                        c.sock.sendall(pkt[:rng.randrange(1, len(pkt))])
                        sent += 1
                        break
                    c.sock.sendall(pkt)
                    sent += 1
                    c.seq = 1
                    try:
                        reply = c.read_packet()
                    except (ConnectionError, OSError, AssertionError):
                        break
                    if cmd in (0x12, 0x1E, 0x01) or reply[:1] == b"\x00" and cmd == 0x12:
                        break
                s = c.sock
            if rng.random() < 0.5:  # abrupt: RST instead of FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        assert silent.recv(256)[4:5] == b"\x0a"  # the handshake, then nothing but the close
        assert silent.recv(1024) == b""
        silent.close()
        # Still serving: queries, a full dump byte for byte, and no connection left behind.
        with pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD) as conn:
            with conn.cursor() as cur:
                cur.execute("SHOW BINARY LOGS")
                assert [r[0] for r in cur.fetchall()] == sample.files
        assert full_dump(h.port, sample) == expected_stream(sample)
        assert wait_until(lambda: not h.server.sessions())
        assert h.thread.is_alive()
    assert sent >= 1000
    # Every bad input took a handled path (ProtocolError, ERR, close), never the catch-all for bugs.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert sum("closed" in r.getMessage() for r in caplog.records) > 200


def test_fifty_replicas_at_once_all_finish_equal(sample):
    want = expected_stream(sample)
    want_rows = sum(1 for e in want if e[4] in (30, 31, 32))
    results: dict[int, object] = {}
    barrier = threading.Barrier(50)

    def raw(i: int, port: int) -> None:
        barrier.wait()
        try:
            results[i] = full_dump(port, sample) == want
        except Exception as exc:  # reported below
            results[i] = exc

    def pmr(i: int, port: int) -> None:
        barrier.wait()
        try:
            stream = BinLogStreamReader(
                connection_settings={"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD},
                server_id=1000 + i, blocking=False, log_file=sample.files[0], log_pos=4,
                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
            n = sum(1 for _ in stream)
            stream.close()
            results[i] = n == want_rows
        except Exception as exc:
            results[i] = exc

    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS)) as h:
        threads = [threading.Thread(target=pmr if i % 5 == 0 else raw, args=(i, h.port)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert wait_until(lambda: not h.server.dumps())
    assert results == {i: True for i in range(50)}


def test_a_stuck_replica_neither_delays_others_nor_grows_buffers(tmp_path):
    big = write_sample_binlog(tmp_path, txns=40, files=2, pad=1 << 20)  # ~40 MB
    limit = 256 << 10
    cfg = ServerConfig(dir=tmp_path, users=USERS, write_buffer=limit, read_chunk=128 << 10)
    with start_in_thread(cfg) as h:
        stuck = RawClient(h.port)
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        stuck.query("SET @master_binlog_checksum='CRC32'")
        stuck.command(b"\x12" + struct.pack("<IHI", 4, 0, 7) + big.files[0].encode())  # never reads
        assert wait_until(lambda: h.server.dumps())
        t0 = time.monotonic()
        assert full_dump(h.port, big) == expected_stream(big)
        elapsed = time.monotonic() - t0
        dumps = h.server.dumps()
        assert len(dumps) == 1 and dumps[0].file == big.files[0]
        stuck_dump = dumps[0]
        buffered = stuck_dump.writer.transport.get_write_buffer_size()
        # At most the high-water mark plus one read chunk or one (bigger) event: bounded, not the file.
        biggest = max(len(e) for e in expected_stream(big))
        assert buffered <= limit + max(128 << 10, biggest) + 4096, (buffered, biggest)
        size = (tmp_path / big.files[0]).stat().st_size
        assert stuck_dump.bytes_sent < size / 2, (stuck_dump.bytes_sent, size)
        assert elapsed < 10
        # An abrupt disconnect of the stuck one ends its dump.
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        stuck.close()
        assert wait_until(lambda: not h.server.dumps())
