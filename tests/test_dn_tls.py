"""TLS from gbinlog to a DN (``[[dn]] tls = true``, ``tls_ca``): a real MariaDB master with TLS and a
user that requires it streams its binlog to our replication client over TLS (the session says which
TLS version), byte for byte; a plain login is refused by the server, a certificate from another CA
by us. Our own endpoint with TLS as the DN: caching_sha2's full login over TLS (the password sent as
it is, no RSA) and the DN's transactions equal ``extract(dir)``; a DN that offers no TLS is refused."""

from __future__ import annotations

import shutil
import ssl
import time
from pathlib import Path

import pytest

from binlog import read_events
from dumper.server import ServerConfig, start_in_thread
from dumper.server.tls import generate_self_signed
from extractor import extract
from extractor.replication_client import (
    ClientProtocolError,
    ReplicationClient,
    ServerError,
    client_tls_context,
)
from gbinlog.config import ConfigError, from_dict
from tests.mariadb import MariaDB
from tests.test_live_source import BANK, PASSWORD, USER, Collector, fingerprint, source


@pytest.fixture
def certs(tmp_path) -> tuple[Path, Path, Path]:
    """(cert, key) of the DN, and a certificate of another CA."""
    generate_self_signed(tmp_path / "dn.pem", tmp_path / "dn.key", hosts=("127.0.0.1", "localhost"))
    generate_self_signed(tmp_path / "other.pem", tmp_path / "other.key", hosts=("127.0.0.1",))
    return tmp_path / "dn.pem", tmp_path / "dn.key", tmp_path / "other.pem"


def test_a_real_mariadb_master_streams_to_us_over_tls(tmp_path, certs):
    cert, key, other = certs
    m = MariaDB.start(tmp_path / "m", log_bin=True,
                      extra_args=(f"--ssl-cert={cert}", f"--ssl-key={key}", f"--ssl-ca={cert}"))
    try:
        m.run_sql("CREATE USER 'repl'@'%' IDENTIFIED BY 'pw' REQUIRE SSL; GRANT REPLICATION SLAVE, "
                  "REPLICATION CLIENT ON *.* TO 'repl'@'%'; CREATE DATABASE d; CREATE TABLE d.t (id INT "
                  "PRIMARY KEY, v TEXT); INSERT INTO d.t VALUES (1,'a'),(2,REPEAT('b', 40000)); FLUSH BINARY LOGS;")
        first = m.binlog_files()[0]
        c = ReplicationClient("127.0.0.1", m.port, "repl", "pw", read_timeout=10, tls=client_tls_context(cert))
        (row,) = c.query("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert row[1] in (b"TLSv1.2", b"TLSv1.3")
        c.prepare_dump(server_id=91, heartbeat=0.5)
        c.dump(first.name, 4, server_id=91, blocking=False)
        got = [e for e in c.events() if not (e[4] == 4 and e[13:17] == bytes(4))]   # minus the fake ROTATE
        c.close()
        want = [bytes(e.raw) for e in read_events(first) if e.raw[4] != 160]    # the server skips ANNOTATE_ROWS
        assert got[:len(want)] == want and len(want) > 5      # (the later files follow)
        with pytest.raises(ServerError) as denied:                      # REQUIRE SSL: no plain login
            ReplicationClient("127.0.0.1", m.port, "repl", "pw")
        assert denied.value.code == 1045
        with pytest.raises(ssl.SSLCertVerificationError):              # not the CA we trust
            ReplicationClient("127.0.0.1", m.port, "repl", "pw", tls=client_tls_context(other))
    finally:
        m.stop()


def test_our_endpoint_as_a_tls_dn_gives_the_dirs_transactions(tmp_path, certs):
    cert, key, _ = certs
    dn0 = tmp_path / "dn0"
    shutil.copytree(BANK / "dn0", dn0)
    want = fingerprint(extract(dn0))
    cfg = ServerConfig(dir=dn0, users={USER: PASSWORD}, user_plugins={USER: "caching_sha2_password"},
                       poll_interval=0.01, tls_cert=cert, tls_key=key)
    with start_in_thread(cfg) as server:
        src = source("dn0", server.port, tls=client_tls_context(cert))
        c = Collector(src)
        c.wait_for(len(want))
        time.sleep(0.3)
        c.stop()
        assert c.error is None and fingerprint(c.txns) == want and src.reconnects == 0
    with start_in_thread(ServerConfig(dir=dn0, users={USER: PASSWORD})) as plain:
        with pytest.raises(ClientProtocolError, match="does not offer TLS"):
            ReplicationClient("127.0.0.1", plain.port, USER, PASSWORD, tls=client_tls_context(cert))


def test_dn_tls_settings_are_checked(tmp_path, certs):
    base = {"output": {"dir": str(tmp_path / "out")}, "server": {"port": 0}}
    dn = {"id": "dn0", "host": "127.0.0.1", "port": 3306, "user": "u"}
    cfg = from_dict({**base, "dn": [{**dn, "tls": True, "tls_ca": str(certs[0])}]}, base=tmp_path)
    assert cfg.dn[0].tls_context().verify_mode == ssl.CERT_REQUIRED and cfg.dn[0].tls_context().check_hostname
    for bad, message in (({"tls_ca": "ca.pem"}, "need tls = true"),
                         ({"tls": True, "tls_ca": str(BANK / "truth.json")}, "not a PEM certificate"),
                         ({"tls": True, "tls_ca": "missing.pem"}, "no such file"),
                         ({"tls_verify": False}, "need tls = true")):
        with pytest.raises(ConfigError, match=message):
            from_dict({**base, "dn": [{**dn, **bad}]}, base=tmp_path)
    with pytest.raises(ConfigError, match="not a dir"):
        from_dict({**base, "dn": [{"id": "dn0", "dir": str(BANK / "dn0"), "tls": True}]}, base=tmp_path)
