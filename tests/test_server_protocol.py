"""Replication endpoint, command level: authentication, the canned replica queries, SHOW/PURGE, the
dump stream's framing (fake ROTATE, FDE patching, ERR 1236, EOF, heartbeats, >16 MiB splitting) as
seen by a raw protocol client and by PyMySQL."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib

import pymysql
import pytest

from binlog import read_all
from dumper.server import ConfigError, ServerConfig, start_in_thread
from gbinlog.config import ConfigError as GbConfigError
from gbinlog.endpoint_config import endpoint_config, load_serve_file
from tests.test_server_support import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    USERS,
    RawClient,
    ServerError,
    header,
    write_sample_binlog,
)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_sample_binlog(tmp_path_factory.mktemp("sample"), txns=40, files=3)


@pytest.fixture(scope="module")
def server(sample):
    handle = start_in_thread(ServerConfig(dir=sample.dir, users=USERS, admins={ADMIN}, server_id=77))
    yield handle
    handle.stop()


def connect(server, user=USER, password=PASSWORD, **kw):
    return pymysql.connect(host="127.0.0.1", port=server.port, user=user, password=password, **kw)


def fetch(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return tuple(cur.fetchall())


# -- authentication ------------------------------------------------------------------------------------

@pytest.mark.parametrize("user,password,using", [
    (USER, "wrong", "YES"), ("nobody", PASSWORD, "YES"), (USER, "", "NO"), ("", "", "NO")])
def test_bad_credentials_are_refused_with_1045(server, user, password, using):
    with pytest.raises(pymysql.err.OperationalError) as exc:
        connect(server, user, password)
    assert exc.value.args[0] == 1045
    assert f"(using password: {using})" in exc.value.args[1]
    # The raw client sees the ERR with SQLSTATE 28000 right after its handshake response.
    with pytest.raises(ServerError) as raw:
        RawClient(server.port, user, password)
    assert raw.value.code == 1045


def test_no_users_means_no_server(tmp_path):
    with pytest.raises(ConfigError, match="no users"):
        start_in_thread(ServerConfig(dir=tmp_path))
    with pytest.raises(ConfigError, match="must start with"):
        start_in_thread(ServerConfig(dir=tmp_path, users=USERS, version="8.0.36"))


def test_handshake_is_v10_mysql_native_with_configured_version(sample):
    with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, version="5.7.99-custom")) as h:
        c = RawClient(h.port)
        assert c.server_version == "5.7.99-custom"
        assert c.server_caps & 0x1          # CLIENT_LONG_PASSWORD, as MySQL servers set it
        assert not c.server_caps & 0x800    # no SSL offered
        assert not c.server_caps & 0x1000000  # no DEPRECATE_EOF: classic EOF packets
        assert c.status == 0x0002
        assert c.query("SELECT VERSION()") == [[b"5.7.99-custom"]]
        c.close()


def test_auth_switch_for_a_client_that_starts_with_another_plugin(server):
    # PyMySQL follows an AuthSwitchRequest: pretend to start with caching_sha2_password.
    conn = connect(server, auth_plugin_map={})
    conn.close()
    c = RawClient.__new__(RawClient)
    import socket
    c.sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    c.seq = 0
    hs = c.read_packet()
    resp = (struct.pack("<IIB", 0x200 | 0x8000 | 0x80000, 1 << 24, 33) + b"\0" * 23 + USER.encode() + b"\0"
            + bytes([32]) + b"\x01" * 32 + b"caching_sha2_password\0")
    c.write_packet(resp)
    switch = c.read_packet()
    assert switch[0] == 0xFE and switch[1:].startswith(b"mysql_native_password\0")
    scramble = switch[len(b"\xfemysql_native_password\0"):-1]
    assert scramble == hs[hs.index(b"\0", 1) + 5:][:8] + hs[hs.index(b"\0", 1) + 5 + 8 + 1 + 18:][:12]
    import hashlib
    h1 = hashlib.sha1(PASSWORD.encode()).digest()
    mask = hashlib.sha1(scramble + hashlib.sha1(h1).digest()).digest()
    c.write_packet(bytes(a ^ b for a, b in zip(h1, mask, strict=True)))
    assert c.read_packet()[0] == 0
    c.close()


# -- queries -------------------------------------------------------------------------------------------

def test_canned_replica_queries(server, sample):
    with connect(server) as conn:
        now = int(time.time())
        ts = fetch(conn, "SELECT UNIX_TIMESTAMP()")[0][0]
        assert isinstance(ts, int) and abs(ts - now) <= 2
        assert fetch(conn, "SHOW VARIABLES LIKE 'SERVER_ID'") == (("server_id", "77"),)
        assert fetch(conn, "SELECT @@GLOBAL.SERVER_ID") == ((77,),)
        assert fetch(conn, "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'") == (("binlog_checksum", "CRC32"),)
        assert fetch(conn, "SHOW VARIABLES LIKE 'BINLOG_ROW_METADATA';") == (("binlog_row_metadata", "FULL"),)
        assert fetch(conn, "SHOW VARIABLES LIKE 'rpl_semi_sync_master_enabled'") == ()
        assert fetch(conn, "SELECT @master_binlog_checksum") == ((None,),)
        assert fetch(conn, "SET @master_binlog_checksum= @@global.binlog_checksum") == ()
        assert fetch(conn, "SELECT @master_binlog_checksum") == (("CRC32",),)
        fetch(conn, "SET @master_heartbeat_period= 30000001024")
        fetch(conn, "SET @master_binlog_checksum = @@global.binlog_checksum, "
                    "@source_binlog_checksum = @@global.binlog_checksum")
        assert fetch(conn, "SELECT @source_binlog_checksum, @master_heartbeat_period") == (("CRC32", 30000001024),)
        fetch(conn, "SET @mariadb_slave_capability=4")
        fetch(conn, "SET @slave_uuid = 'u-1', @replica_uuid = 'u-1'")
        assert fetch(conn, "SELECT binlog_gtid_pos('binlog.000001',4)") == ((None,),)
        assert fetch(conn, "SELECT @@GLOBAL.GTID_MODE") == (("OFF",),)
        assert fetch(conn, "SELECT @@GLOBAL.SERVER_UUID")[0][0].endswith("00000000004d")
        assert fetch(conn, "select @@version_comment limit 1")[0][0]
        fetch(conn, "SET NAMES utf8mb4")
        fetch(conn, "SET AUTOCOMMIT = 0")
        assert fetch(conn, "SELECT @@autocommit") == ((0,),)
        fetch(conn, "SET skip_replication=1")
        # Unknown SQL and unknown variables are refused with MySQL's codes.
        # (Reading a table: 1146; a statement that changes data: 1290, read-only.)
        for sql, code in [("SELECT * FROM mysql.user", 1146), ("DROP TABLE x", 1290), ("FROB x", 1064),
                          ("SELECT @@no_such_var", 1193), ("SELECT no_such_fn()", 1305)]:
            with pytest.raises(pymysql.err.MySQLError) as exc:
                fetch(conn, sql)
            assert exc.value.args[0] == code, sql
    # User variables belong to their connection.
    with connect(server) as a, connect(server) as b:
        fetch(a, "SET @x = 'left'")
        fetch(b, "SET @x = 'right'")
        assert fetch(a, "SELECT @x") == (("left",),)
        assert fetch(b, "SELECT @x") == (("right",),)


def test_show_master_status_binary_logs_and_binlog_events(server, sample):
    files = sample.files
    sizes = [os.path.getsize(sample.dir / f) for f in files]
    with connect(server) as conn:
        assert fetch(conn, "SHOW MASTER STATUS") == ((files[-1], sizes[-1], "", "", ""),)
        assert fetch(conn, "SHOW BINARY LOGS") == tuple(zip(files, sizes, strict=True))
        events = read_all(sample.dir / files[1])
        rows = fetch(conn, f"SHOW BINLOG EVENTS IN '{files[1]}'")
        assert [(r[1], r[3], r[4]) for r in rows] == [(e.pos, e.h[2], e.h[4]) for e in events]
        assert rows[0][2] == "Format_desc" and rows[0][5] == "Server ver: 5.7.44-log, Binlog ver: 4"
        assert rows[-1][2] == "Rotate" and rows[-1][5] == f"{files[2]};pos=4"
        assert {r[2] for r in rows} >= {"Query", "Table_map", "Xid"}
        assert any(r[2] == "Query" and r[5] == "use `sample`; BEGIN" for r in rows)
        assert fetch(conn, f"SHOW BINLOG EVENTS IN '{files[1]}' FROM {events[3].pos} LIMIT 1, 2") == rows[4:6]
        first = fetch(conn, "SHOW BINLOG EVENTS LIMIT 2")
        assert [r[0] for r in first] == [files[0]] * 2 and first[1][5] == "CREATE DATABASE sample"
        with pytest.raises(pymysql.err.MySQLError) as exc:
            fetch(conn, f"SHOW BINLOG EVENTS IN '{files[1]}' FROM {events[3].pos + 1}")
        assert exc.value.args[0] == 1220
        with pytest.raises(pymysql.err.MySQLError) as exc:
            fetch(conn, "SHOW BINLOG EVENTS IN 'binlog.999999'")
        assert exc.value.args[0] == 1220


def test_show_slave_hosts_lists_registered_replicas(server, sample):
    c = RawClient(server.port)
    body = struct.pack("<I", 4242) + b"\x05rhost" + b"\x00" + b"\x00" + struct.pack("<HII", 3310, 0, 0)
    c.command(b"\x15" + body)
    assert c.read_packet()[0] == 0
    with connect(server) as conn:
        assert fetch(conn, "SHOW SLAVE HOSTS") == ((4242, "rhost", 3310, 77, ""),)
    c.close()
    deadline = time.monotonic() + 5
    with connect(server) as conn:
        while fetch(conn, "SHOW SLAVE HOSTS") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fetch(conn, "SHOW SLAVE HOSTS") == ()


def test_ping_init_db_quit_and_unknown_command(server):
    c = RawClient(server.port)
    c.command(b"\x0e")
    assert c.read_packet()[0] == 0
    c.command(b"\x02information_schema")
    assert c.read_packet()[0] == 0
    c.command(b"\x02somedb")  # a database the served binlog's schema does not have
    err = c.read_packet()
    assert err[0] == 0xFF and struct.unpack_from("<H", err, 1)[0] == 1049
    c.command(b"\x63")
    err = c.read_packet()
    assert err[0] == 0xFF and struct.unpack_from("<H", err, 1)[0] == 1047
    c.command(b"\x01")
    assert c.sock.recv(1) == b""  # COM_QUIT: the server closes
    c.close()


# -- the dump stream -----------------------------------------------------------------------------------

def dump_all(port, file, pos=4, checksum="CRC32", **kw):
    c = RawClient(port)
    if checksum:
        c.query(f"SET @master_binlog_checksum='{checksum}'")
    try:
        return list(c.dump(file, pos, **kw))
    finally:
        c.close()


def test_dump_from_start_is_fake_rotate_fde_then_file_bytes_across_files(server, sample):
    got = dump_all(server.port, sample.files[0])
    i = 0
    for n, name in enumerate(sample.files):
        data = (sample.dir / name).read_bytes()
        fake = got[i]
        ts, t, sid, size, log_pos, flags = header(fake)
        assert (ts, t, sid, log_pos, flags) == (0, 4, 77, 0, 0x20)
        assert fake[19:27] == struct.pack("<Q", 4) and fake[27:-4] == name.encode()
        assert zlib.crc32(fake[:-4]).to_bytes(4, "little") == fake[-4:]
        events = read_all(data)
        fde = got[i + 1]
        assert fde == events[0].raw  # in-use flag already clear in a closed file; log_pos kept at pos 4
        assert [e for e in got[i + 2:i + 1 + len(events)]] == [e.raw for e in events[1:]], name
        i += 1 + len(events)
        assert n < len(sample.files) - 1 or i == len(got)


def test_dump_mid_file_patches_the_fde(server, sample):
    name = sample.files[1]
    events = read_all(sample.dir / name)
    start = events[5].pos
    got = dump_all(server.port, name, start)
    assert header(got[0])[1] == 4 and got[0][19:27] == struct.pack("<Q", start)
    fde = got[1]
    h = header(fde)
    assert h[1] == 15 and h[4] == 0  # log_pos 0: not counted by the replica
    assert fde[19 + 2 + 50:19 + 2 + 54] == b"\0\0\0\0"  # created = 0: no temp-table cleanup
    assert zlib.crc32(fde[:-4]).to_bytes(4, "little") == fde[-4:]
    assert fde[:13] == events[0].raw[:13] and fde[19:71] == events[0].raw[19:71]
    assert got[2:2 + len(events) - 5] == [e.raw for e in events[5:]]


def test_first_fake_rotate_follows_the_clients_checksum_choice(server, sample):
    got = dump_all(server.port, sample.files[0], checksum="NONE")
    assert header(got[0])[3] == 19 + 8 + len(sample.files[0])  # no CRC: mariadb-binlog's choice
    # The fake ROTATE at the next file switch follows the FDE (CRC32).
    fakes = [e for e in got if header(e)[1] == 4 and header(e)[0] == 0]
    assert [header(e)[3] for e in fakes[1:]] == [19 + 8 + len(f) + 4 for f in sample.files[1:]]


@pytest.mark.parametrize("file,pos,checksum,message", [
    ("binlog.000009", 4, "CRC32", "Could not find first log file name"),
    ("binlog.000001", 2, "CRC32", "position < 4"),
    ("binlog.000001", 10**8, "CRC32", "position > file size"),
    ("binlog.000001", 4 + 19 + 40, "CRC32", "inside the FORMAT_DESCRIPTION"),
    ("binlog.000001", 200, "CRC32", "not an event start"),
    ("binlog.000001", 4, None, "checksum"),
])
def test_bad_dump_requests_get_err_1236(server, file, pos, checksum, message):
    with pytest.raises(ServerError) as exc:
        dump_all(server.port, file, pos, checksum=checksum)
    assert exc.value.code == 1236 and message in exc.value.message


def test_dump_gtid_is_refused_clearly(server):
    c = RawClient(server.port)
    c.command(b"\x1e" + struct.pack("<HII", 4, 99, 3) + b"\0\0\0" + struct.pack("<QI", 4, 8) + b"\0" * 8)
    err = c.read_packet()
    assert err[0] == 0xFF and struct.unpack_from("<H", err, 1)[0] == 1236 and b"GTID" in err
    c.close()


def test_blocking_dump_waits_sends_heartbeats_and_follows_growth(tmp_path):
    sample = write_sample_binlog(tmp_path, txns=6, files=1)
    name = sample.files[0]
    size = os.path.getsize(tmp_path / name)
    with start_in_thread(ServerConfig(dir=tmp_path, users=USERS, server_id=5, poll_interval=0.02)) as h:
        c = RawClient(h.port)
        c.query("SET @master_binlog_checksum='CRC32'")
        c.query("SET @master_heartbeat_period=100000000")  # 0.1 s
        stream = c.dump(name, 4, flags=0, server_id=3)
        events = read_all(tmp_path / name)
        for want in [None, *(e.raw for e in events)]:
            got = next(stream)
            assert want is None or got == want
        t0 = time.monotonic()
        beats = [next(stream) for _ in range(3)]
        assert 0.15 < time.monotonic() - t0 < 2
        for hb in beats:
            ts, t, sid, sz, log_pos, flags = header(hb)
            assert (ts, t, sid, log_pos, flags) == (0, 27, 5, size, 0)
            assert hb[19:-4] == name.encode() and zlib.crc32(hb[:-4]).to_bytes(4, "little") == hb[-4:]
        # Growth: append a copy of a whole txn (BEGIN..XID) half at a time; only whole events arrive.
        txn = b"".join(e.raw for e in events[3:7])
        with open(tmp_path / name, "ab") as fh:
            fh.write(txn[:30])
            fh.flush()
            time.sleep(0.15)
            fh.write(txn[30:])
        got = next(stream)
        while header(got)[1] == 27:
            got = next(stream)
        assert got == events[3].raw
        assert [next(stream) for _ in range(3)] == [e.raw for e in events[4:7]]
        c.close()


def test_events_over_16_mib_are_split_into_continuation_packets(tmp_path):
    sample = write_sample_binlog(tmp_path, txns=4, files=1, big_event=17 << 20)
    events = read_all(tmp_path / sample.files[0])
    big = max(events, key=lambda e: e.h[3])
    assert big.h[3] > 0xFFFFFF
    with start_in_thread(ServerConfig(dir=tmp_path, users=USERS)) as h:
        got = dump_all(h.port, sample.files[0])  # RawClient joins continuations and checks seq ids
    assert got[2:] == [e.raw for e in events[1:]]


# -- PURGE ---------------------------------------------------------------------------------------------

def test_purge_needs_admin_and_never_removes_a_file_in_use(tmp_path):
    # File 1 is ~12 MB: a client that does not read keeps its dump inside file 1 (bounded buffers).
    sample = write_sample_binlog(tmp_path, txns=24, files=3, pad=1 << 20)
    files = sample.files
    cfg = ServerConfig(dir=tmp_path, users=USERS, admins={ADMIN}, write_buffer=64 << 10, read_chunk=64 << 10)
    with start_in_thread(cfg) as h:
        with connect(h) as conn, pytest.raises(pymysql.err.MySQLError) as exc:
            fetch(conn, f"PURGE BINARY LOGS TO '{files[2]}'")
        assert exc.value.args[0] == 1227
        stuck = RawClient(h.port)
        stuck.query("SET @master_binlog_checksum='CRC32'")
        stuck.command(b"\x12" + struct.pack("<IHI", 4, 0, 98) + files[0].encode())
        deadline = time.monotonic() + 5
        while not h.server.dumps() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        assert [d.file for d in h.server.dumps()] == [files[0]]
        with connect(h, ADMIN, ADMIN_PASSWORD) as admin:
            with pytest.raises(pymysql.err.MySQLError) as exc:
                fetch(admin, f"PURGE BINARY LOGS TO '{files[2]}'")
            assert exc.value.args[0] == 1378 and files[0] in exc.value.args[1]
            assert all((tmp_path / f).exists() for f in files)
            with pytest.raises(pymysql.err.MySQLError) as exc:
                fetch(admin, "PURGE BINARY LOGS TO 'binlog.000042'")
            assert exc.value.args[0] == 1373
            stuck.close()
            deadline = time.monotonic() + 5
            while h.server.dumps() and time.monotonic() < deadline:
                time.sleep(0.01)
            fetch(admin, f"PURGE BINARY LOGS TO '{files[1]}'")
            assert fetch(admin, "SHOW BINARY LOGS") == tuple((f, os.path.getsize(tmp_path / f)) for f in files[1:])
            assert not (tmp_path / files[0]).exists()
            assert (tmp_path / "binlog.index").read_text() == "".join(f"./{f}\n" for f in files[1:])
            # BEFORE a date: never the newest file.
            fetch(admin, "PURGE BINARY LOGS BEFORE '2999-01-01 00:00:00'")
            assert fetch(admin, "SHOW BINARY LOGS") == ((files[2], os.path.getsize(tmp_path / files[2])),)


# -- config and CLI ------------------------------------------------------------------------------------

def test_config_file_and_cli(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    cfg_file = tmp_path / "serve.toml"
    cfg_file.write_text(f'[serve]\ndir = "{sample.dir}"\nport = 0\nserver_id = 9\nadmin = ["{ADMIN}"]\n'
                        f'[serve.users]\n{USER} = "{PASSWORD}"\n{ADMIN} = "{ADMIN_PASSWORD}"\n')
    # The old serve dialect ([serve] / top-level keys) is read through the [server] schema.
    cfg = endpoint_config(*load_serve_file(cfg_file)[:2])
    assert (cfg.server_id, cfg.users, cfg.admins) == (9, USERS, frozenset({ADMIN}))
    with pytest.raises(GbConfigError, match="prot: unknown key"):
        bad = tmp_path / "bad.toml"
        bad.write_text('prot = 1\n')
        load_serve_file(bad)
    exe = os.path.join(os.path.dirname(sys.executable), "gbinlog")
    proc = subprocess.Popen([exe, "serve", "--config", str(cfg_file), "--user", "extra:pw"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert "listening on 127.0.0.1:" in line, line
        port = int(line.rsplit(":", 1)[1])
        c = RawClient(port, "extra", "pw")
        assert c.query("SELECT @@server_id") == [[b"9"]]
        c.close()
    finally:
        proc.terminate()
        proc.wait(10)
    out = subprocess.run([exe, "serve", "--dir", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and "no users configured" in out.stderr


def test_stop_closes_idle_and_streaming_connections(tmp_path):
    sample = write_sample_binlog(tmp_path, txns=3, files=1)
    h = start_in_thread(ServerConfig(dir=tmp_path, users=USERS))
    idle = RawClient(h.port)
    streaming = RawClient(h.port)
    streaming.query("SET @master_binlog_checksum='CRC32'")
    stream = streaming.dump(sample.files[0], 4, flags=0)
    next(stream)
    t = threading.Thread(target=h.stop)
    t.start()
    t.join(10)
    assert not h.thread.is_alive()
    for c in (idle, streaming):
        c.sock.settimeout(5)
        with pytest.raises((ConnectionError, OSError)):
            while True:
                if not c.sock.recv(65536):
                    raise ConnectionError
    shutil.rmtree(tmp_path)


def test_show_binlog_events_of_a_half_written_file_shows_the_whole_events(tmp_path):
    sample = write_sample_binlog(tmp_path, txns=5, files=1)
    path = tmp_path / sample.files[0]
    events = read_all(path)
    with open(path, "ab") as fh:
        fh.write(events[3].raw[:25])  # a writer in the middle of an event
    with start_in_thread(ServerConfig(dir=tmp_path, users=USERS)) as h, connect(h) as conn:
        rows = fetch(conn, "SHOW BINLOG EVENTS")
        assert [r[1] for r in rows] == [e.pos for e in events]
        assert fetch(conn, "SHOW MASTER STATUS")[0][:2] == (sample.files[0], events[-1].end_pos + 25)
