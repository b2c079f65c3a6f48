"""TLS and modern auth on the endpoint.

Real peers: PyMySQL (its own caching_sha2_password client: scramble, RSA key request, TLS) and a
MariaDB replica with MASTER_SSL=1. What the network carries is checked on the bytes themselves,
recorded by a forwarding proxy between client and server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pymysql
import pytest

from dumper.server import ConfigError, ServerConfig, start_in_thread
from dumper.server.auth import Credential, caching_sha2_hash, native_hash, sha256_crypt
from gbinlog.local_engine import Settings, build
from tests.mariadb import MariaDB
from tests.test_server_support import (
    PASSWORD,
    USER,
    USERS,
    RawClient,
    ServerError,
    replica_checksums,
    slave_status,
    truth_checksums,
    wait_caught_up,
    write_sample_binlog,
)

ROOT = Path(__file__).resolve().parents[1]
SHA2_USER, SHA2_PASSWORD = "modern", "Sha2-pass/word!"  # ASCII: PyMySQL sends passwords as latin-1


# -- the hashes ---------------------------------------------------------------------------------------

def test_sha256_crypt_equals_glibc_crypt():
    # Values printed by glibc's crypt(3) ("$5$" SHA-crypt, 5000 rounds), not by this code.
    assert sha256_crypt(b"Hello world!", b"saltstring") == "5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"
    assert sha256_crypt(b"secret-pw-9", b"abcdefghijklmnop") == "ufZHNzSSXyUI8AHYMHK7ZbPxh4GUci4uxvZCRxd4DJC"


def test_stored_forms_select_the_plugin_and_never_keep_the_password():
    sha2 = caching_sha2_hash("pw")
    assert sha2.startswith("$A$005$") and len(sha2) == 70
    c = Credential.from_config(sha2)
    assert (c.plugin, c.check_full(b"pw"), c.check_full(b"pW")) == ("caching_sha2_password", True, False)
    n = Credential.from_config(native_hash("pw"))
    assert n.plugin == "mysql_native_password"
    assert n.native == hashlib.sha1(hashlib.sha1(b"pw").digest()).digest()
    # a password with a "-": the crypt alphabet ([./0-9A-Za-z]) cannot spell it by chance (the
    # salt is random; "pw" once turned up inside the stored hash)
    plain = Credential.from_config("secret-pw", "caching_sha2_password")
    assert "secret-pw" not in repr(plain) and plain.check_full(b"secret-pw")
    for bad in ("$A$005$short", "$A$zz$" + "x" * 63, "*" + "g" * 40):
        with pytest.raises(ValueError):
            Credential.from_config(bad)
    with pytest.raises(ConfigError, match="unknown auth plugin"):
        ServerConfig(users={"u": "p"}, user_plugins={"u": "sha256_password"}).validate()


# -- a recording proxy --------------------------------------------------------------------------------

class Recorder:
    """Forwards 127.0.0.1:<port> to the server and records every byte in both directions."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.up = bytearray()      # client -> server
        self.down = bytearray()    # server -> client
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for a, b, buf in ((client, server, self.up), (server, client, self.down)):
                threading.Thread(target=self._pump, args=(a, b, buf), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        try:
            while data := src.recv(65536):
                buf += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def nonce(self) -> bytes:
        """The 20-byte nonce of the server's (plain-text) handshake packet."""
        hs = bytes(self.down[4:])
        off = hs.index(b"\0", 1) + 1 + 4
        return hs[off:off + 8] + hs[off + 8 + 1 + 18:off + 8 + 1 + 18 + 12]

    def close(self) -> None:
        self.sock.close()


def replayable_forms(password: str, nonce: bytes) -> dict[str, bytes]:
    """Everything a capture could be replayed or cracked from, for either plugin."""
    pw = password.encode()
    s1 = hashlib.sha1(pw).digest()
    native = bytes(a ^ b for a, b in zip(s1, hashlib.sha1(nonce + hashlib.sha1(s1).digest()).digest(),
                                         strict=True))
    m1 = hashlib.sha256(pw).digest()
    m2 = hashlib.sha256(hashlib.sha256(m1).digest() + nonce).digest()
    sha2 = bytes(a ^ b for a, b in zip(m1, m2, strict=True))
    return {"password": pw, "sha1(pw)": s1, "sha256(pw)": m1, "native scramble": native,
            "caching_sha2 scramble": sha2}


# -- TLS + caching_sha2 with PyMySQL -----------------------------------------------------------------

@pytest.fixture()
def tls_server(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    users = {**USERS, SHA2_USER: caching_sha2_hash(SHA2_PASSWORD)}
    cfg = ServerConfig(dir=sample.dir, users=users, tls_cert=tmp_path / "tls" / "cert.pem",
                       tls_key=tmp_path / "tls" / "key.pem", tls_generate=True)
    with start_in_thread(cfg) as h:
        yield h, tmp_path / "tls" / "cert.pem"


def auth_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gbinlog.session" and "login" in r.getMessage()]


def test_pymysql_tls_caching_sha2_full_auth_then_fast_auth(tls_server, caplog):
    h, cert = tls_server
    assert cert.exists() and oct(cert.with_name("key.pem").stat().st_mode & 0o777) == "0o600"
    caplog.set_level(logging.INFO, logger="gbinlog.session")
    for _ in range(2):
        with pymysql.connect(host="127.0.0.1", port=h.port, user=SHA2_USER, password=SHA2_PASSWORD,
                             ssl={"ca": str(cert)}) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@server_id")
            assert cur.fetchone() == (1,) or cur.fetchone() is None
            assert conn._sock.version() in ("TLSv1.2", "TLSv1.3")   # the session really is TLS
    lines = auth_lines(caplog)
    assert len(lines) == 2 and "auth=full" in lines[0] and "auth=fast" in lines[1], lines
    assert all("tls=yes" in line and "plugin=caching_sha2_password" in line for line in lines)
    # A wrong password: refused, fast path or not.
    with pytest.raises(pymysql.err.OperationalError) as exc:
        pymysql.connect(host="127.0.0.1", port=h.port, user=SHA2_USER, password="wrong", ssl={"ca": str(cert)})
    assert exc.value.args[0] == 1045
    # The certificate is checked by the client against the generated CA: a strict client accepts it.
    ctx = ssl.create_default_context(cafile=str(cert))
    with pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD, ssl=ctx) as conn:
        assert conn.get_server_info().startswith("5.7")


def test_caching_sha2_without_tls_uses_the_rsa_key_exchange(tmp_path, caplog):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    caplog.set_level(logging.INFO, logger="gbinlog.session")
    with start_in_thread(ServerConfig(dir=sample.dir, users={SHA2_USER: SHA2_PASSWORD},
                                      user_plugins={SHA2_USER: "caching_sha2_password"})) as h:
        rec = Recorder(h.port)
        try:
            for _ in range(2):
                pymysql.connect(host="127.0.0.1", port=rec.port, user=SHA2_USER, password=SHA2_PASSWORD).close()
            with pytest.raises(pymysql.err.OperationalError):
                pymysql.connect(host="127.0.0.1", port=rec.port, user=SHA2_USER, password="nope")
        finally:
            rec.close()
    lines = auth_lines(caplog)
    assert "auth=full" in lines[0] and "auth=fast" in lines[1] and "denied" in lines[2], lines
    down = bytes(rec.down)
    assert b"-----BEGIN PUBLIC KEY-----" in down          # the key went out, the password did not
    assert SHA2_PASSWORD.encode() not in bytes(rec.up)


def test_capture_of_a_tls_login_holds_no_password_and_no_replayable_scramble(tls_server):
    h, cert = tls_server
    for user, password in ((SHA2_USER, SHA2_PASSWORD), (USER, PASSWORD)):
        rec = Recorder(h.port)
        try:
            with pymysql.connect(host="127.0.0.1", port=rec.port, user=user, password=password,
                                 ssl={"ca": str(cert)}) as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
            time.sleep(0.1)
        finally:
            rec.close()
        up = bytes(rec.up)
        # SSLRequest (32 bytes + header), then only TLS records (type 0x16 handshake first).
        assert len(up) > 36 and up[36:38] == b"\x16\x03", up[:40]
        wire = up + bytes(rec.down)
        for what, value in replayable_forms(password, rec.nonce()).items():
            assert value not in wire, f"{what} of {user} is in the capture"
    # The check can fail: without TLS the native scramble is on the wire (and replayable for that nonce).
    rec = Recorder(h.port)
    try:
        pymysql.connect(host="127.0.0.1", port=rec.port, user=USER, password=PASSWORD, ssl_disabled=True).close()
        time.sleep(0.1)
    finally:
        rec.close()
    assert replayable_forms(PASSWORD, rec.nonce())["native scramble"] in bytes(rec.up)


def test_garbage_instead_of_a_tls_handshake_drops_that_client_only(tls_server, caplog):
    h, cert = tls_server
    caplog.set_level(logging.DEBUG, logger="gbinlog.serve")
    for junk in (b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.0\r\n\r\n", b""):
        s = socket.create_connection(("127.0.0.1", h.port), timeout=10)
        s.recv(4096)                                          # the handshake
        ssl_request = struct.pack("<IIB", 0x200 | 0x8000 | 0x800 | 0x80000, 1 << 24, 33) + b"\0" * 23
        s.sendall(struct.pack("<I", 32 | (1 << 24)) + ssl_request + junk)
        if not junk:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except (ConnectionError, TimeoutError):
            pass
        s.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]   # no traceback logged
    pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD, ssl={"ca": str(cert)}).close()


def test_plain_connection_refused_when_secure_transport_is_required(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    with pytest.raises(ConfigError, match="require_secure_transport needs tls_cert"):
        ServerConfig(dir=sample.dir, users=USERS, require_secure_transport=True).validate()
    cfg = ServerConfig(dir=sample.dir, users=USERS, tls_cert=tmp_path / "c.pem", tls_key=tmp_path / "k.pem",
                       tls_generate=True, require_secure_transport=True)
    with start_in_thread(cfg) as h:
        with pytest.raises(ServerError) as exc:
            RawClient(h.port)
        assert exc.value.code == 3159 and "insecure transport" in exc.value.message
        with pytest.raises(pymysql.err.OperationalError) as exc2:
            pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD, ssl_disabled=True)
        assert exc2.value.args[0] == 3159
        pymysql.connect(host="127.0.0.1", port=h.port, user=USER, password=PASSWORD,
                        ssl={"ca": str(tmp_path / "c.pem")}).close()


def test_hash_password_output_is_a_working_stored_form(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "gbinlog")
    stored = {}
    for plugin in ("caching_sha2_password", "mysql_native_password"):
        out = subprocess.run([exe, "hash-password", "--plugin", plugin, "--password", SHA2_PASSWORD],
                             capture_output=True, text=True, check=True)
        stored[plugin] = out.stdout.strip()
    assert stored["mysql_native_password"] == native_hash(SHA2_PASSWORD)
    assert re.fullmatch(r"\$A\$005\$[./0-9A-Za-z]{63}", stored["caching_sha2_password"])
    sample = write_sample_binlog(tmp_path / "bl", txns=3, files=1)
    users = {"a": stored["caching_sha2_password"], "b": stored["mysql_native_password"]}
    with start_in_thread(ServerConfig(dir=sample.dir, users=users)) as h:
        for user in users:
            pymysql.connect(host="127.0.0.1", port=h.port, user=user, password=SHA2_PASSWORD).close()
    assert SHA2_PASSWORD not in repr(ServerConfig(users=users).credentials())


def test_missing_certificate_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="tls_cert .*no such file"):
        start_in_thread(ServerConfig(dir=tmp_path, users=USERS, tls_cert=tmp_path / "c.pem",
                                     tls_key=tmp_path / "k.pem"))


# -- a MariaDB replica over TLS ------------------------------------------------------------------------

@pytest.mark.slow
def test_mariadb_replica_with_master_ssl_replicates_a_fixture_to_the_truth(tmp_path):
    name = "bank-4dn"
    truth = json.loads((ROOT / "fixtures" / name / "truth.json").read_text())
    out = tmp_path / "global"
    build(sorted(p for p in (ROOT / "fixtures" / name).iterdir() if p.is_dir()), out,
          settings=Settings(max_file_size=64 << 10))
    cert = tmp_path / "tls" / "cert.pem"
    cfg = ServerConfig(dir=out, users=USERS, server_id=100, tls_cert=cert, tls_key=tmp_path / "tls" / "key.pem",
                       tls_generate=True, require_secure_transport=True)
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    try:
        with start_in_thread(cfg) as h:
            replica.query(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={h.port}, "
                          f"MASTER_USER='{USER}', MASTER_PASSWORD='{PASSWORD}', MASTER_LOG_FILE='binlog.000001', "
                          f"MASTER_LOG_POS=4, MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1, MASTER_SSL=1, "
                          f"MASTER_SSL_CA='{cert}', MASTER_SSL_VERIFY_SERVER_CERT=1")
            replica.query("START SLAVE")
            files = [ln.strip().rsplit("/", 1)[-1] for ln in (out / "binlog.index").read_text().splitlines()]
            st = wait_caught_up(replica, files[-1], (out / files[-1]).stat().st_size, timeout=90)
            assert (st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Master_SSL_Allowed"]) == ("Yes", "Yes", "Yes")
            assert [c.secure for c in h.server._conns.values() if c.dump is not None] == [True]
            assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
            replica.query("STOP SLAVE")
        assert slave_status(replica)["Last_IO_Error"] == ""
    finally:
        replica.stop()
