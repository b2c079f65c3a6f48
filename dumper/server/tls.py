"""TLS for the endpoint: the server's ``ssl.SSLContext`` and a self-signed pair made on first start.

The MySQL protocol upgrades in place: the server offers ``CLIENT_SSL`` in its
handshake, the client answers with a 32-byte SSLRequest, both run the TLS handshake on the same
socket, and the client's real HandshakeResponse (user, auth data) then travels encrypted.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import ssl
from asyncio import sslproto
from pathlib import Path


class TlsError(ValueError):
    """A certificate/key pair that cannot be loaded or made (one line, names the file)."""


def generate_self_signed(cert_path: Path, key_path: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                         days: int = 3650) -> None:
    """Write a self-signed certificate (its own CA, SANs ``hosts``) and its key (mode 0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gbinlog endpoint")])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption())
    key_path.parent.mkdir(parents=True, exist_ok=True)
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_bytes)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def server_context(cert: Path, key: Path, *, generate: bool = False, hosts: tuple[str, ...] = ()) -> ssl.SSLContext:
    """A TLS 1.2+ server context for ``cert``/``key``; with ``generate`` a missing pair is made first."""
    if generate and not cert.exists() and not key.exists():
        try:
            generate_self_signed(cert, key, tuple(dict.fromkeys(("localhost", "127.0.0.1", *hosts))))
        except OSError as exc:
            raise TlsError(f"tls_cert {cert}: cannot write a self-signed pair: {exc.strerror or exc}") from None
    for what, path in (("tls_cert", cert), ("tls_key", key)):
        if not path.is_file():
            raise TlsError(f"{what} {path}: no such file (set tls_generate = true to make a self-signed pair)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"tls_cert {cert} / tls_key {key}: cannot load: {exc}") from None
    return ctx


async def upgrade(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ctx: ssl.SSLContext,
                  timeout: float = 10.0) -> None:
    """Run the server side of the TLS handshake on an open stream, in place.

    Not ``StreamWriter.start_tls``: a MySQL client sends its SSLRequest and its TLS ClientHello
    back to back, so the ClientHello is often already in the reader's buffer when the SSLRequest has
    been read, and ``start_tls`` would never see it (the handshake then fails at random). This is
    ``loop.start_tls`` with those buffered bytes handed to the TLS protocol first.
    """
    loop = asyncio.get_running_loop()
    transport = writer.transport
    app_protocol = writer._protocol  # type: ignore[attr-defined]
    leftover = bytes(reader._buffer)  # type: ignore[attr-defined]
    reader._buffer.clear()  # type: ignore[attr-defined]
    waiter = loop.create_future()
    tls_protocol = sslproto.SSLProtocol(loop, app_protocol, ctx, waiter, server_side=True,
                                        ssl_handshake_timeout=timeout, call_connection_made=False)
    transport.pause_reading()
    transport.set_protocol(tls_protocol)
    tls_protocol.connection_made(transport)
    while leftover:
        buf = tls_protocol.get_buffer(len(leftover))
        n = min(len(buf), len(leftover))
        buf[:n] = leftover[:n]
        tls_protocol.buffer_updated(n)
        leftover = leftover[n:]
    transport.resume_reading()
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    writer._transport = tls_protocol._app_transport  # type: ignore[attr-defined]
    app_protocol._replace_writer(writer)
