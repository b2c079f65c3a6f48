"""The endpoint under abuse: max_connections with ERR 1040,
max_allowed_packet with ERR 1153, a half packet closed at net_read_timeout, an idle session at
wait_timeout, and 20 clients sending 1 MB queries in a loop while a dump client's heartbeats and
other clients' logins are timed."""

from __future__ import annotations

import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pymysql
import pytest

from dumper.server import ServerConfig, start_in_thread
from tests.test_server_support import PASSWORD, USER, USERS, RawClient, header, write_sample_binlog

ROOT = Path(__file__).resolve().parents[1]


def first_packet(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    n = int.from_bytes(head[:3], "little")
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    return body


def closed_within(sock: socket.socket, timeout: float) -> float | None:
    """Seconds until the server closes ``sock`` (None if still open after ``timeout``)."""
    start = time.monotonic()
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionError:
        pass
    return time.monotonic() - start


def test_two_thousand_connections_are_capped_with_err_1040(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    cfg = ServerConfig(dir=sample.dir, users=USERS, max_connections=100, handshake_timeout=120)
    socks = []
    with start_in_thread(cfg) as h:
        try:
            firsts = []
            for _ in range(2000):
                s = socket.create_connection(("127.0.0.1", h.port), timeout=30)
                socks.append(s)
                firsts.append(first_packet(s))
            greeted = [f for f in firsts if f[:1] == b"\x0a"]
            refused = [f for f in firsts if f[:1] == b"\xff"]
            assert (len(greeted), len(refused)) == (100, 1900)
            assert {(struct.unpack_from("<H", f, 1)[0], f[3:9], f[9:]) for f in refused} == \
                {(1040, b"#08004", b"Too many connections")}
            with pytest.raises(pymysql.err.OperationalError) as exc:
                pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD)
            assert exc.value.args[0] == 1040
        finally:
            for s in socks:
                s.close()
        # Once the held connections are gone, logins work again.
        deadline = time.monotonic() + 20
        while True:
            try:
                RawClient(h.port).close()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@pytest.mark.slow
def test_half_a_packet_after_login_is_closed_at_net_read_timeout(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, net_read_timeout=0.5, wait_timeout=60)) as h:
        c = RawClient(h.port)
        c.sock.sendall(struct.pack("<I", 100) + b"\x03SELECT 1")   # promises 100 bytes, sends 9
        took = closed_within(c.sock, 10)
        assert took is not None and 0.4 <= took < 3, took
        # An idle session (no packet started) is not closed at net_read_timeout.
        c = RawClient(h.port)
        time.sleep(1.2)
        assert c.query("SELECT 1") == [[b"1"]]
        c.close()


@pytest.mark.slow
def test_idle_session_closed_at_wait_timeout_but_a_dump_is_not(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, wait_timeout=0.5)) as h:
        idle = RawClient(h.port)
        took = closed_within(idle.sock, 10)
        assert took is not None and 0.4 <= took < 3, took
        dump = RawClient(h.port)
        dump.query("SET @master_heartbeat_period = 100000000")
        dump.query("SET @master_binlog_checksum = 'CRC32'")
        events = dump.dump(sample.files[-1], 4, flags=0)
        t0 = time.monotonic()
        types = [header(next(events))[1] for _ in range(30)]
        assert time.monotonic() - t0 > 1.0 and types.count(27) >= 8   # heartbeats past wait_timeout
        dump.close()


def test_a_query_over_max_allowed_packet_gets_err_1153(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, max_allowed_packet=64 << 10)) as h:
        conn = pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD)
        with pytest.raises(pymysql.err.OperationalError) as exc, conn.cursor() as cur:
            cur.execute("SELECT '" + "x" * (100 << 10) + "'")
        assert exc.value.args[:2] == (1153, "Got a packet bigger than 'max_allowed_packet' bytes")
        with pytest.raises(pymysql.err.OperationalError):   # closed after ERR 1153, as MySQL does
            conn.ping(reconnect=False)
        conn = pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD)
        with conn.cursor() as cur:   # just under the limit is fine
            cur.execute("SELECT '" + "x" * (60 << 10) + "'")
            assert len(cur.fetchone()[0]) == 60 << 10


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else values[0]


@pytest.mark.slow
def test_twenty_clients_with_1mb_queries_stall_neither_a_dump_nor_logins(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    exe = os.path.join(os.path.dirname(sys.executable), "gbinlog")
    server = subprocess.Popen([exe, "serve", "--dir", str(sample.dir), "--port", "0", "--user", f"{USER}:{PASSWORD}"],
                              stderr=subprocess.PIPE, text=True)
    abusers = None
    try:
        line = server.stderr.readline()
        port = int(line.rsplit(":", 1)[1])
        dump = RawClient(port)
        dump.query("SET @master_heartbeat_period = 50000000")   # 50 ms
        dump.query("SET @master_binlog_checksum = 'CRC32'")
        events = dump.dump(sample.files[-1], 4, flags=0)
        for _ in range(3):
            next(events)
        seconds = 8.0
        abusers = subprocess.Popen([sys.executable, "-m", "tests.abuse_clients", str(port), "20", str(seconds)],
                                   cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert abusers.stdout.readline().strip() == "ready"
        time.sleep(1.0)   # every abuser logged in and busy
        beats: list[float] = []
        logins: list[float] = []
        stop = time.monotonic() + seconds - 2.0

        def login_loop() -> None:
            while time.monotonic() < stop:
                t = time.monotonic()
                RawClient(port).close()
                logins.append(time.monotonic() - t)
                time.sleep(0.03)

        t = threading.Thread(target=login_loop)
        t.start()
        while time.monotonic() < stop:
            ev = next(events)
            if header(ev)[1] == 27:
                beats.append(time.monotonic())
        t.join()
        answered = int(abusers.stdout.readline())
        gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
        print(f"\n1 MB queries answered: {answered}; heartbeat gaps max {max(gaps) * 1000:.0f} ms "
              f"(n={len(gaps)}); logins p99 {p99(logins) * 1000:.1f} ms max {max(logins) * 1000:.1f} ms "
              f"(n={len(logins)})")
        assert answered >= 1                      # the abusers were really answered (ERR 1235: over 64 KB)
        # a stalled loop shows seconds here (before the fix: 2.5 s gaps, logins over 8 s); the bounds
        # leave room for a 2-core box shared with other work (a quiet run: gaps ≤ 132 ms, p99 ≤ 72 ms;
        # one CI-like run under load: gaps 180 ms, p99 101 ms)
        assert max(gaps) < 0.400, gaps
        assert p99(logins) < 0.250, sorted(logins)[-5:]
        dump.close()
    finally:
        if abusers is not None and abusers.poll() is None:
            abusers.kill()
            abusers.wait(10)
        server.terminate()
        server.wait(10)
