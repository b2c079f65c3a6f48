"""A replica's side of the replication protocol, just enough to stream a DN's binlog raw.

Connect, log in (mysql_native_password or caching_sha2_password, with the server's auth switch;
caching_sha2's full exchange over RSA with the server's public key), ask what checksum the server
logs with and say we handle it (``@master_binlog_checksum``), set the heartbeat period and
``@mariadb_slave_capability``, COM_REGISTER_SLAVE, COM_BINLOG_DUMP from a file and position — the
sequence MySQL's and MariaDB's replicas (and python-mysql-replication) use. Then ``events()``
yields the event bytes of each stream packet exactly as the server sent them: no decoding, large
socket reads, one slice per event.

Errors: ``ServerError`` (an ERR packet: code and message), ``OSError`` for the network,
``ClientProtocolError`` for bytes that are not the protocol.

TLS (``tls=`` an ``ssl.SSLContext``, see ``client_tls_context``): after the server's greeting the
client sends the short SSLRequest packet, wraps the socket, then logs in over TLS — as libmysql and
PyMySQL do; a server that does not offer TLS is refused (no silent plain-text fallback).
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path

from binlog.constants import MAX_EVENT_SIZE
from binlog.lenenc import read_packed_int
from binlog.wire import (
    MAX_PAYLOAD,
    PACKET_HEADER,
    frame,
    native_scramble,
    parse_error,
    sha2_scramble,
    unframe_run,
    xor_with_nonce,
)

CLIENT_LONG_PASSWORD = 0x1
CLIENT_LONG_FLAG = 0x4
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SSL = 0x800
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CAPABILITIES = (CLIENT_LONG_PASSWORD | CLIENT_LONG_FLAG | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                       | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH)
CHARSET_UTF8MB4 = 45
COM_QUERY, COM_BINLOG_DUMP, COM_REGISTER_SLAVE = 0x03, 0x12, 0x15
BINLOG_DUMP_NON_BLOCK = 0x01
NATIVE, SHA2 = "mysql_native_password", "caching_sha2_password"
_SHA2_FAST_OK, _SHA2_FULL = 3, 4
_RECV = 1 << 18
_unpack_word = PACKET_HEADER.unpack_from


class ServerError(Exception):
    """The server answered with an ERR packet."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code, self.message = code, message

    def __str__(self) -> str:
        return f"({self.code}) {self.message}"


class ClientProtocolError(Exception):
    """The server sent bytes that are not the protocol (or a plugin this client does not speak)."""


class ReplicationClient:
    """One connection to a binlog server. ``dump(file, pos)`` starts the stream; ``events()`` reads it."""

    def __init__(self, host: str, port: int, user: str, password: str = "", *, connect_timeout: float = 5.0,
                 read_timeout: float | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.sock: socket.socket = socket.create_connection((host, port), timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        self._off = 0
        self.seq = 0
        self.server_version = ""
        self._tls, self._host = tls, host
        try:
            self._login(user, password.encode("utf-8"))
        except BaseException:
            self.close()
            raise
        self.sock.settimeout(read_timeout)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- packets --------------------------------------------------------------------------------------
    def _fill(self, need: int) -> None:
        """Make at least ``need`` unread bytes available in the buffer."""
        parts = [self._buf[self._off:]]
        have = len(parts[0])
        while have < need:
            data = self.sock.recv(max(_RECV, need - have))
            if not data:
                raise ConnectionError("the server closed the connection")
            parts.append(data)
            have += len(data)
        self._buf = b"".join(parts)
        self._off = 0

    def read_packet(self) -> bytes:
        """One logical packet's payload (continuations joined)."""
        parts = []
        while True:
            if len(self._buf) - self._off < 4:
                self._fill(4)
            word = _unpack_word(self._buf, self._off)[0]
            n = word & 0xFFFFFF
            if len(self._buf) - self._off < 4 + n:
                self._fill(4 + n)
            start = self._off + 4
            self._off = start + n
            self.seq = ((word >> 24) + 1) & 0xFF
            parts.append(self._buf[start:self._off])
            if n < MAX_PAYLOAD:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    def write_packet(self, payload: bytes) -> None:
        data, self.seq = frame(payload, self.seq)
        self.sock.sendall(data)

    def command(self, payload: bytes) -> bytes:
        """Send a command, return the first answer packet (ERR → ``ServerError``)."""
        self.seq = 0
        self.write_packet(payload)
        answer = self.read_packet()
        if answer[:1] == b"\xff":
            raise ServerError(*parse_error(answer))
        return answer

    # -- login ----------------------------------------------------------------------------------------
    def _login(self, user: str, password: bytes) -> None:
        hello = self.read_packet()
        if hello[:1] == b"\xff":
            raise ServerError(*parse_error(hello))
        if hello[:1] != b"\x0a":
            raise ClientProtocolError(f"handshake protocol {hello[:1].hex()} is not 10")
        end = hello.index(b"\0", 1)
        self.server_version = hello[1:end].decode("ascii", "replace")
        off = end + 1 + 4
        nonce = hello[off:off + 8]
        off += 8 + 1
        caps = struct.unpack_from("<H", hello, off)[0]
        off += 2 + 1 + 2
        caps |= struct.unpack_from("<H", hello, off)[0] << 16
        data_len = hello[off + 2]
        off += 3 + 10
        if caps & CLIENT_SECURE_CONNECTION:
            rest = max(12, data_len - 9)   # then a NUL (as PyMySQL and libmysql read it)
            nonce += hello[off:off + rest]
            off += rest + 1
        plugin = NATIVE
        if caps & CLIENT_PLUGIN_AUTH and off < len(hello):
            plugin = hello[off:].split(b"\0", 1)[0].decode("ascii", "replace") or NATIVE
        if plugin not in (NATIVE, SHA2):
            plugin = NATIVE
        auth = self._scramble(plugin, password, nonce)
        flags = CLIENT_CAPABILITIES
        if self._tls is not None:
            self._start_tls(caps)
            flags |= CLIENT_SSL
        response = (struct.pack("<IIB", flags, 1 << 24, CHARSET_UTF8MB4) + bytes(23)
                    + user.encode("utf-8") + b"\0" + bytes((len(auth),)) + auth + plugin.encode() + b"\0")
        self.write_packet(response)
        self._auth_answers(plugin, password, nonce)

    def _start_tls(self, server_caps: int) -> None:
        """SSLRequest (the login packet's first 32 bytes with CLIENT_SSL), then the TLS handshake."""
        if not server_caps & CLIENT_SSL:
            raise ClientProtocolError("the server does not offer TLS (tls = true for this DN)")
        self.write_packet(struct.pack("<IIB", CLIENT_CAPABILITIES | CLIENT_SSL, 1 << 24, CHARSET_UTF8MB4) + bytes(23))
        assert self._tls is not None and len(self._buf) == self._off   # nothing unread before TLS starts
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._host)

    @staticmethod
    def _scramble(plugin: str, password: bytes, nonce: bytes) -> bytes:
        return sha2_scramble(password, nonce) if plugin == SHA2 else native_scramble(password, nonce)

    def _auth_answers(self, plugin: str, password: bytes, nonce: bytes) -> None:
        """Follow the server's answers to the login until OK (auth switch, caching_sha2 steps)."""
        while True:
            answer = self.read_packet()
            kind = answer[:1]
            if kind == b"\x00":
                return
            if kind == b"\xff":
                raise ServerError(*parse_error(answer))
            if kind == b"\xfe":  # auth switch: another plugin, a new nonce
                name, _, rest = answer[1:].partition(b"\0")
                plugin = name.decode("ascii", "replace")
                if plugin not in (NATIVE, SHA2):
                    raise ClientProtocolError(f"the server asks for auth plugin {plugin!r}")
                nonce = rest[:20]
                self.write_packet(self._scramble(plugin, password, nonce))
            elif kind == b"\x01" and plugin == SHA2 and answer[1:2] == bytes((_SHA2_FAST_OK,)):
                continue  # the OK follows
            elif kind == b"\x01" and plugin == SHA2 and answer[1:2] == bytes((_SHA2_FULL,)) and self._tls:
                self.write_packet(password + b"\0")   # over TLS the password goes as it is, as libmysql sends it
            elif kind == b"\x01" and plugin == SHA2 and answer[1:2] == bytes((_SHA2_FULL,)):
                self.write_packet(b"\x02")  # ask for the server's RSA public key
                key = self.read_packet()
                if key[:1] != b"\x01":
                    raise ClientProtocolError("caching_sha2_password: no public key from the server")
                self.write_packet(_rsa_encrypt(key[1:], xor_with_nonce(password + b"\0", nonce)))
            else:
                raise ClientProtocolError(f"unexpected answer {bytes(answer[:8]).hex()} during login")

    # -- queries and the dump ---------------------------------------------------------------------------
    def query(self, sql: str) -> list[list[bytes | None]]:
        """Run ``sql``; the rows of a text result set (none for OK)."""
        first = self.command(bytes((COM_QUERY,)) + sql.encode("utf-8"))
        if first[:1] == b"\x00":
            return []
        columns = read_packed_int(first, 0)[0]
        for _ in range(columns):
            self.read_packet()
        if not _is_eof(self.read_packet()):
            raise ClientProtocolError("result set: no EOF after the column definitions")
        rows = []
        while True:
            pkt = self.read_packet()
            if _is_eof(pkt):
                return rows
            if pkt[:1] == b"\xff":
                raise ServerError(*parse_error(pkt))
            row: list[bytes | None] = []
            off = 0
            for _ in range(columns):
                if pkt[off] == 0xFB:
                    row.append(None)
                    off += 1
                    continue
                n, off = read_packed_int(pkt, off)
                row.append(pkt[off:off + n])
                off += n
            rows.append(row)

    def prepare_dump(self, *, server_id: int, heartbeat: float) -> bool:
        """Checksum, heartbeat and capability variables, COM_REGISTER_SLAVE; True when the server
        logs with a checksum (and was told we handle it)."""
        rows = self.query("SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'")
        checksum = bool(rows) and (rows[0][1] or b"NONE").upper() != b"NONE"
        if checksum:
            self.query("SET @master_binlog_checksum = @@global.binlog_checksum")
        if heartbeat > 0:
            self.query(f"SET @master_heartbeat_period = {int(heartbeat * 1e9)}")
        self.query("SET @mariadb_slave_capability = 4")
        host = socket.gethostname().encode()[:60]
        self.command(bytes((COM_REGISTER_SLAVE,)) + struct.pack("<I", server_id) + bytes((len(host),)) + host
                     + b"\0\0" + struct.pack("<HII", 0, 0, 0))
        return checksum

    def dump(self, file: str, pos: int, *, server_id: int, blocking: bool = True) -> None:
        """COM_BINLOG_DUMP: the stream starts; read it with ``events()``."""
        self.seq = 0
        flags = 0 if blocking else BINLOG_DUMP_NON_BLOCK
        self.write_packet(bytes((COM_BINLOG_DUMP,)) + struct.pack("<IHI", pos, flags, server_id)
                          + file.encode("utf-8"))

    def batch(self) -> list[bytes]:
        """The events of every whole stream packet received so far, at least one (blocks until
        then), as sent; ``[]`` at the server's EOF packet; ERR → ``ServerError``. One slice per
        event; a packet split in continuations (an event of 16 MiB or more) comes alone."""
        buf, off = self._buf, self._off
        n = len(buf)
        out = []
        unpack = _unpack_word
        while off + 5 <= n:
            size = unpack(buf, off)[0] & 0xFFFFFF
            end = off + 4 + size
            if end > n or size >= MAX_PAYLOAD or buf[off + 4] != 0:
                break
            out.append(buf[off + 5:end])
            off = end
        if out:
            self._off = off
            return out
        return self.one()

    def one(self) -> list[bytes]:
        """The next stream packet's event alone (``[]`` at the server's EOF packet; ERR →
        ``ServerError``), as ``batch()`` gives it."""
        pkt = self.read_packet()
        kind = pkt[:1]
        if kind == b"\x00":
            return [pkt[1:]]
        if kind == b"\xff":
            raise ServerError(*parse_error(pkt))
        if _is_eof(pkt):
            return []
        raise ClientProtocolError(f"unexpected packet {bytes(pkt[:8]).hex()} in the binlog stream")

    def has_packet(self) -> bool:
        """A whole packet is received and not yet read (reading it will not wait)."""
        have = len(self._buf) - self._off
        return have >= 4 and have >= 4 + (_unpack_word(self._buf, self._off)[0] & 0xFFFFFF)

    def readable(self, timeout: float) -> bool:
        """A whole packet is buffered or the socket has bytes to read (waits up to ``timeout``)."""
        if self.has_packet():
            return True
        if self._tls is not None and self.sock.pending():   # decrypted bytes the socket no longer shows
            return True
        return bool(select.select([self.sock], [], [], timeout)[0])

    def take_run(self, pos: int, stop_types: bytes) -> tuple[bytes, int, int]:
        """The events at the head of the stream that follow one another in the file from ``pos``
        (no type flagged in the 256-byte ``stop_types``, no gap), as the file holds them:
        (bytes, events, position after). One compiled pass over what was received
        (``binlog.wire.unframe_run``), no object per event. Blocks until a whole packet is there;
        (b"", 0, pos) when the next packet is something else (``one()`` reads it)."""
        if len(self._buf) - self._off < 4:
            self._fill(4)
        need = 4 + (_unpack_word(self._buf, self._off)[0] & 0xFFFFFF)
        if len(self._buf) - self._off < need:
            self._fill(need)
        run, off, end, count, seq = unframe_run(self._buf, self._off, pos, stop_types, MAX_EVENT_SIZE)
        if count:
            self._off, self.seq = off, seq
        return run, count, end

    def events(self) -> Iterator[bytes]:
        """The events of the stream one by one, as sent, until the server's EOF packet."""
        while batch := self.batch():
            yield from batch


def _is_eof(pkt: bytes) -> bool:
    return pkt[:1] == b"\xfe" and len(pkt) < 9


def _rsa_encrypt(pem: bytes, data: bytes) -> bytes:
    """RSA-OAEP (SHA-1) with the server's public key, as libmysql and PyMySQL do."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    key = serialization.load_pem_public_key(pem)
    return key.encrypt(data, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()),  # type: ignore[union-attr]
                                          algorithm=hashes.SHA1(), label=None))


__all__ = ["ReplicationClient", "ServerError", "ClientProtocolError"]


def client_tls_context(ca: str | Path | None = None, *, verify: bool = True) -> ssl.SSLContext:
    """A TLS 1.2+ client context for a DN: its certificate checked against ``ca`` (a PEM file; None:
    the system's CAs) and its host name; ``verify=False`` encrypts without checking who answers."""
    ctx = ssl.create_default_context(cafile=str(ca) if ca is not None else None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
