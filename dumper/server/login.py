"""The connection phase: handshake v10, the optional TLS upgrade, the auth plugin exchange.

``await login(server, conn, reader)`` returns True when the client is in (OK sent), False when it was
refused (ERR sent). MySQL's order (``sql/auth/sql_authentication.cc``): handshake → [SSLRequest +
TLS] → HandshakeResponse → [AuthSwitchRequest when the user's plugin differs from the client's] →
the plugin's exchange → OK/ERR.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING

from dumper.server import auth
from dumper.server import protocol as p
from dumper.server.logtext import session_log
from dumper.server.tls import upgrade

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer, _Connection


ER_SECURE_TRANSPORT_REQUIRED = 3159
_SCRAMBLE_CHARS = bytes(range(33, 127))
_SSL_REQUEST_LEN = 32


def new_nonce() -> bytes:
    return bytes(secrets.choice(_SCRAMBLE_CHARS) for _ in range(20))


async def _read(server: BinlogServer, conn: _Connection, reader: asyncio.StreamReader,
                limit: int = 64 << 10) -> bytes:
    payload, seq = await p.read_packet(reader, limit=limit)
    conn.seq = (seq + 1) & 0xFF
    return payload


async def _send(conn: _Connection, payload: bytes) -> None:
    conn.send([payload])
    await conn.writer.drain()


async def login(server: BinlogServer, conn: _Connection, reader: asyncio.StreamReader) -> bool:
    nonce = new_nonce()
    tls = server.tls_context
    conn.send([p.handshake_v10(server.config.version, conn.session.conn_id, nonce, ssl=tls is not None)])
    payload = await _read(server, conn, reader)
    if tls is not None and len(payload) == _SSL_REQUEST_LEN and p.wants_ssl(payload):
        await conn.writer.drain()
        await upgrade(reader, conn.writer, tls)
        conn.secure = True
        payload = await _read(server, conn, reader)
    resp = p.parse_handshake_response(payload)
    session = conn.session
    session.user = resp.user
    if server.config.require_secure_transport and not conn.secure:
        await _send(conn, p.err_packet(ER_SECURE_TRANSPORT_REQUIRED, "Connections using insecure transport "
                                       "are prohibited while --require_secure_transport=ON."))
        session_log.info("login denied user=%s from=%s reason=insecure-transport", resp.user, session.host)
        return False
    cred = server.credentials.get(resp.user) if resp.user else None
    plugin = cred.plugin if cred is not None else auth.NATIVE
    data = resp.auth
    # Past a few failures of this user from this host, the check waits its turn and a delay first.
    async with server.login_throttle.attempt(resp.user, session.host, conn.handshake) as attempt:
        if (resp.plugin or auth.NATIVE) != plugin:
            # e.g. a MySQL 8 client opening with caching_sha2_password for a native user, or the reverse.
            await _send(conn, p.auth_switch_request(plugin, nonce))
            data = await _read(server, conn, reader, limit=1024)
        how = "native"
        if cred is None:
            ok = False
        elif plugin == auth.NATIVE:
            ok = auth.check_native_scramble(cred.native, nonce, data)
        else:
            how = await _caching_sha2(server, conn, reader, resp.user, cred, nonce, data)
            ok = how is not None
        attempt.ok = ok
    if not ok:
        using = "YES" if data else "NO"
        await _send(conn, p.err_packet(p.ER_ACCESS_DENIED, f"Access denied for user '{resp.user}'@'"
                                       f"{session.host}' (using password: {using})", "28000"))
        session_log.info("login denied user=%s from=%s:%s plugin=%s tls=%s", resp.user, session.host,
                         conn.peer_port, plugin, "yes" if conn.secure else "no")
        return False
    session.admin = resp.user in server.config.admins
    session.db = resp.database or None  # CLIENT_CONNECT_WITH_DB
    session.multi_statements = bool(resp.capabilities & p.CLIENT_MULTI_STATEMENTS)
    await _send(conn, p.ok_packet(status=session.status))
    session_log.info("login ok user=%s from=%s:%s conn=%d plugin=%s auth=%s tls=%s", resp.user, session.host,
                     conn.peer_port, session.conn_id, plugin, how, "yes" if conn.secure else "no")
    return True


async def _caching_sha2(server: BinlogServer, conn: _Connection, reader: asyncio.StreamReader, user: str,
                        cred: auth.Credential, nonce: bytes, data: bytes) -> str | None:
    """The caching_sha2_password exchange after the scramble: "fast", "full" or None (denied)."""
    if cred.is_empty:
        return "empty" if data in (b"", b"\0") else None
    if data in (b"", b"\0"):
        return None
    cached = server.sha2_cache.get(user)
    if cached is not None and auth.check_sha2_scramble(cached, nonce, data):
        conn.send([auth.FAST_AUTH_SUCCESS])
        return "fast"
    await _send(conn, auth.PERFORM_FULL_AUTH)
    pkt = await _read(server, conn, reader, limit=4096)
    if conn.secure:
        password = pkt[:-1] if pkt.endswith(b"\0") else pkt
    else:
        keys = server.rsa_keys()
        if pkt == auth.REQUEST_PUBLIC_KEY:
            await _send(conn, b"\x01" + keys.public_pem)
            pkt = await _read(server, conn, reader, limit=4096)
        if len(pkt) != keys.size:
            return None  # a clear-text password on a plain connection is never accepted
        password = await asyncio.to_thread(keys.decrypt_password, pkt, nonce)
        if password is None:
            return None
    # 5000 rounds of SHA-256 crypt: off the event loop.
    if not await asyncio.to_thread(cred.check_full, password):
        return None
    server.sha2_cache[user] = auth.sha2_fast_digest(password)
    return "full"
