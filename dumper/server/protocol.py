"""MySQL client/server protocol, server side: packets, handshake v10, native-password auth, OK/ERR/EOF,
text result sets.

Only what binlog clients use: no compression, no CLIENT_DEPRECATE_EOF (classic 5-byte EOF). TLS and the
auth plugins' exchanges are in ``login.py`` / ``auth.py``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from binlog.lenenc import pack_int, read_packed_int
from binlog.wire import MAX_PAYLOAD, PACKET_HEADER, error_text, frame  # noqa: F401 - the endpoint's names for them

# Commands are small: anything larger than this from a client is refused before it is buffered.
MAX_COMMAND = 1 << 20

# Capability flags (mysql_com.h).
CLIENT_LONG_PASSWORD = 0x1
CLIENT_FOUND_ROWS = 0x2
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_NO_SCHEMA = 0x10
CLIENT_ODBC = 0x40
CLIENT_IGNORE_SPACE = 0x100
CLIENT_PROTOCOL_41 = 0x200
CLIENT_INTERACTIVE = 0x400
CLIENT_SSL = 0x800
CLIENT_IGNORE_SIGPIPE = 0x1000
CLIENT_TRANSACTIONS = 0x2000
CLIENT_RESERVED = 0x4000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_STATEMENTS = 0x10000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PS_MULTI_RESULTS = 0x40000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 0x200000

# Bit 0 set as MySQL servers do (libmariadb then ignores MariaDB extended capabilities); SSL only
# when TLS is configured (handshake_v10(ssl=True)); no compression, no DEPRECATE_EOF.
SERVER_CAPABILITIES = (
    CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB
    | CLIENT_NO_SCHEMA | CLIENT_ODBC | CLIENT_IGNORE_SPACE | CLIENT_PROTOCOL_41 | CLIENT_INTERACTIVE
    | CLIENT_IGNORE_SIGPIPE | CLIENT_TRANSACTIONS | CLIENT_RESERVED | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS | CLIENT_PS_MULTI_RESULTS | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
)
SERVER_STATUS_AUTOCOMMIT = 0x0002
SERVER_MORE_RESULTS_EXISTS = 0x0008
NATIVE_PLUGIN = b"mysql_native_password"
CHARSET_UTF8 = 33      # utf8_general_ci: a *text* charset, PyMySQL decodes columns to str
CHARSET_BINARY = 63

# Column types used in result sets.
TYPE_DOUBLE = 5
TYPE_NULL = 6
TYPE_LONGLONG = 8
TYPE_DATE = 10
TYPE_TIME = 11
TYPE_DATETIME = 12
TYPE_NEWDECIMAL = 246
TYPE_VAR_STRING = 253
# (display length, decimals) of the binary-charset types, as MySQL describes such a column.
_BINARY_TYPES = {TYPE_LONGLONG: (21, 0), TYPE_DOUBLE: (23, 31), TYPE_NEWDECIMAL: (67, 30), TYPE_DATE: (10, 0),
                 TYPE_TIME: (10, 0), TYPE_DATETIME: (19, 0), TYPE_NULL: (0, 0)}

# Error codes (mysqld_error.h).
ER_ACCESS_DENIED = 1045
ER_UNKNOWN_COM = 1047
ER_PARSE = 1064
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_UNKNOWN_SYSTEM_VARIABLE = 1193
ER_MASTER_FATAL_READING_BINLOG = 1236
ER_UNKNOWN_TARGET_BINLOG = 1373
ER_LOG_IN_USE = 1378
ER_NET_PACKET_TOO_LARGE = 1153
ER_HANDSHAKE = 1043
ER_NOT_SUPPORTED = 1235

_HEADER = PACKET_HEADER


class ProtocolError(Exception):
    """The client sent something that is not the protocol; the connection is closed."""


# -- framing ---------------------------------------------------------------------------------------

async def read_packet(reader: asyncio.StreamReader, limit: int = MAX_COMMAND) -> tuple[bytes, int]:
    """One logical packet (continuations joined) and the sequence id of its last part.

    A client whose packet exceeds ``limit`` is refused before the bytes are buffered.
    """
    parts = []
    total = 0
    while True:
        header = await reader.readexactly(4)
        word = _HEADER.unpack(header)[0]
        n = word & 0xFFFFFF
        seq = word >> 24
        total += n
        if total > limit:
            raise ProtocolError(f"packet of more than {limit} bytes")
        parts.append(await reader.readexactly(n) if n else b"")
        if n < MAX_PAYLOAD:
            return b"".join(parts), seq


# -- generic packets --------------------------------------------------------------------------------

def lenenc_str(value: bytes) -> bytes:
    return pack_int(len(value)) + value


def ok_packet(*, affected_rows: int = 0, last_insert_id: int = 0, status: int = SERVER_STATUS_AUTOCOMMIT,
              warnings: int = 0) -> bytes:
    return b"\x00" + pack_int(affected_rows) + pack_int(last_insert_id) + struct.pack("<HH", status, warnings)


def err_packet(code: int, message: str, sqlstate: str = "HY000") -> bytes:
    return (b"\xff" + struct.pack("<H", code) + b"#" + sqlstate.encode("ascii")[:5]
            + message.encode("utf-8", "replace")[:1000])


def eof_packet(status: int = SERVER_STATUS_AUTOCOMMIT, warnings: int = 0) -> bytes:
    return b"\xfe" + struct.pack("<HH", warnings, status)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: int = TYPE_VAR_STRING

    def definition(self) -> bytes:
        name = self.name.encode("utf-8", "replace")
        binary = _BINARY_TYPES.get(self.type)
        if binary is None:
            charset, (length, decimals), flags = CHARSET_UTF8, (1024, 0), 0
        else:   # numbers and times: the binary charset; BINARY, and NOT_NULL for integers as MySQL marks them
            charset, (length, decimals) = CHARSET_BINARY, binary
            flags = 0x0081 if self.type == TYPE_LONGLONG else 0x0080
        return (lenenc_str(b"def") + lenenc_str(b"") + lenenc_str(b"") + lenenc_str(b"")
                + lenenc_str(name) + lenenc_str(name) + b"\x0c"
                + struct.pack("<HIBHB", charset, length, self.type, flags, decimals) + b"\0\0")


def text_value(value: object) -> bytes:
    if value is None:
        return b"\xfb"
    if isinstance(value, bytes):
        return lenenc_str(value)
    return lenenc_str(str(value).encode("utf-8", "replace"))


def result_set(columns: Sequence[Column | str], rows: Iterable[Sequence[object]],
               status: int = SERVER_STATUS_AUTOCOMMIT) -> list[bytes]:
    """The payloads of a text result set: column count, definitions, EOF, rows, EOF."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    out = [pack_int(len(cols))]
    out += [c.definition() for c in cols]
    out.append(eof_packet(status))
    out += [b"".join(text_value(v) for v in row) for row in rows]
    out.append(eof_packet(status))
    return out


# -- handshake and authentication ------------------------------------------------------------------

def handshake_v10(version: str, connection_id: int, scramble: bytes, *, ssl: bool = False) -> bytes:
    """Initial handshake packet (protocol 10) offering mysql_native_password (and TLS with ``ssl``)."""
    assert len(scramble) == 20
    caps = SERVER_CAPABILITIES | (CLIENT_SSL if ssl else 0)
    return (b"\x0a" + version.encode("ascii", "replace") + b"\0"
            + struct.pack("<I", connection_id) + scramble[:8] + b"\0"
            + struct.pack("<HBHHB", caps & 0xFFFF, CHARSET_UTF8, SERVER_STATUS_AUTOCOMMIT, caps >> 16,
                          len(scramble) + 1)
            + b"\0" * 10 + scramble[8:] + b"\0" + NATIVE_PLUGIN + b"\0")


@dataclass(slots=True)
class HandshakeResponse:
    capabilities: int
    max_packet: int
    charset: int
    user: str
    auth: bytes
    database: str | None = None
    plugin: str | None = None
    attrs: dict[str, str] = field(default_factory=dict)


def _cstring(buf: bytes, off: int) -> tuple[bytes, int]:
    end = buf.find(b"\0", off)
    if end < 0:
        raise ProtocolError("unterminated string in handshake response")
    return buf[off:end], end + 1


def _lenenc(buf: bytes, off: int) -> tuple[int, int]:
    try:
        return read_packed_int(buf, off)
    except (IndexError, ValueError) as exc:   # past the end, or a prefix that is no length
        raise ProtocolError(f"bad length-encoded integer in the handshake response at {off}: {exc}") from None


def parse_handshake_response(buf: bytes) -> HandshakeResponse:
    """HandshakeResponse41; older clients (no PROTOCOL_41) and SSL requests are refused."""
    if len(buf) < 32:
        if len(buf) >= 4 and struct.unpack_from("<I", buf)[0] & CLIENT_SSL:
            raise ProtocolError("TLS requested but not offered by this server (no tls_cert configured)")
        raise ProtocolError(f"handshake response of {len(buf)} bytes is too short")
    caps, max_packet, charset = struct.unpack_from("<IIB", buf)
    if not caps & CLIENT_PROTOCOL_41:
        raise ProtocolError("client does not speak protocol 4.1")
    off = 32
    user_b, off = _cstring(buf, off)
    if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
        n, off = _lenenc(buf, off)
        auth = buf[off:off + n]
        off += n
    elif caps & CLIENT_SECURE_CONNECTION:
        if off >= len(buf):
            raise ProtocolError("handshake response ends before the auth data")
        n = buf[off]
        auth = buf[off + 1:off + 1 + n]
        off += 1 + n
    else:
        auth, off = _cstring(buf, off)
        n = len(auth)
    if len(auth) != n:
        raise ProtocolError("auth data runs past the end of the handshake response")
    db = plugin = None
    if caps & CLIENT_CONNECT_WITH_DB and off < len(buf):
        db_b, off = _cstring(buf, off)
        db = db_b.decode("utf-8", "replace")
    if caps & CLIENT_PLUGIN_AUTH and off < len(buf):
        plugin_b, off = _cstring(buf, off)
        plugin = plugin_b.decode("ascii", "replace")
    attrs: dict[str, str] = {}
    if caps & CLIENT_CONNECT_ATTRS and off < len(buf):
        total, off = _lenenc(buf, off)
        end = min(off + total, len(buf))
        while off < end:
            kn, off = _lenenc(buf, off)
            k = buf[off:off + kn]
            off += kn
            vn, off = _lenenc(buf, off)
            v = buf[off:off + vn]
            off += vn
            attrs[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return HandshakeResponse(caps, max_packet, charset, user_b.decode("utf-8", "replace"), bytes(auth),
                             db, plugin, attrs)


def auth_switch_request(plugin: str | bytes, scramble: bytes) -> bytes:
    name = plugin.encode("ascii") if isinstance(plugin, str) else plugin
    return b"\xfe" + name + b"\0" + scramble + b"\0"


def wants_ssl(payload: bytes) -> bool:
    """An SSLRequest: the 32-byte start of a HandshakeResponse41 with CLIENT_SSL set."""
    return len(payload) >= 4 and bool(struct.unpack_from("<I", payload)[0] & CLIENT_SSL)
