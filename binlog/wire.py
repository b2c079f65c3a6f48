"""The MySQL client/server protocol's packet layer, shared by the endpoint (``dumper.server``) and
the live DN client (``extractor.replication_client``): framing, the ERR packet, the client's
auth scrambles.
"""

from __future__ import annotations

import hashlib
import struct

from binlog.kernel import compiled_twin

MAX_PAYLOAD = 0xFFFFFF  # one protocol packet; longer payloads continue in the next packet(s)
PACKET_HEADER = struct.Struct("<I")   # 3-byte length | sequence id << 24


def frame(payload: bytes | bytearray | memoryview, seq: int) -> tuple[bytes, int]:
    """Wire bytes of one logical packet (split at 16 MiB - 1) and the next sequence id."""
    n = len(payload)
    if n < MAX_PAYLOAD:
        return PACKET_HEADER.pack(n | (seq << 24)) + bytes(payload), (seq + 1) & 0xFF
    parts = []
    off = 0
    while True:
        chunk = payload[off:off + MAX_PAYLOAD]
        parts.append(PACKET_HEADER.pack(len(chunk) | (seq << 24)))
        parts.append(bytes(chunk))
        seq = (seq + 1) & 0xFF
        off += MAX_PAYLOAD
        # A payload that is an exact multiple of MAX_PAYLOAD ends with an empty packet.
        if len(chunk) < MAX_PAYLOAD:
            break
    return b"".join(parts), seq


def parse_error(payload: bytes) -> tuple[int, str]:
    """(code, message) of an ERR payload (``0xff``, code u16, optional ``#`` + 5-char SQL state)."""
    if payload[:1] != b"\xff" or len(payload) < 3:
        return 0, "?"
    code = struct.unpack_from("<H", payload, 1)[0]
    msg = payload[9:] if payload[3:4] == b"#" else payload[3:]
    return code, bytes(msg).decode("utf-8", "replace")


def error_text(payload: bytes) -> str:
    """``ERROR <code>: <message>`` of an ERR payload (for logs)."""
    if payload[:1] != b"\xff" or len(payload) < 3:
        return "?"
    code, msg = parse_error(payload)
    return f"ERROR {code}: {msg}"


def native_scramble(password: bytes, nonce: bytes) -> bytes:
    """mysql_native_password's answer: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))); empty for no password."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password).digest()
    mask = hashlib.sha1(nonce + hashlib.sha1(stage1).digest()).digest()
    return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))


def sha2_scramble(password: bytes, nonce: bytes) -> bytes:
    """caching_sha2_password's fast answer: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce)."""
    if not password:
        return b""
    stage1 = hashlib.sha256(password).digest()
    mask = hashlib.sha256(hashlib.sha256(stage1).digest() + nonce).digest()
    return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))


def xor_with_nonce(data: bytes, nonce: bytes) -> bytes:
    """``data`` XOR the nonce repeated (caching_sha2's full exchange over RSA)."""
    return bytes(b ^ nonce[i % len(nonce)] for i, b in enumerate(data))


# -- the live DN client's byte loop ---------------------------------------------------------------------
_TYPE_SIZE_END = struct.Struct("<4xB4xII")   # type_code, event_size, log_pos of an event header
UnframeResult = tuple[bytes, int, int, int, int]


def unframe_run_py(buf: bytes | bytearray | memoryview, off: int, pos: int, stop_types: bytes,
                   max_size: int) -> UnframeResult:
    """The events at ``off`` in a buffer of replication stream packets that follow one another in
    the file from position ``pos`` (size = the packet's, log_pos = ``pos`` + size, type not flagged
    in the 256-byte ``stop_types``, size <= ``max_size``), joined as the file holds them: (bytes,
    offset reached, position after, events, next sequence id or -1 when none). Stops at the first
    packet that is incomplete, a continuation, not an event, or not such an event."""
    unpack_word, unpack = PACKET_HEADER.unpack_from, _TYPE_SIZE_END.unpack_from
    n = len(buf)
    parts = []
    seq = -1
    while off + 5 + 19 <= n:
        word = unpack_word(buf, off)[0]
        plen = word & 0xFFFFFF
        end = off + 4 + plen
        if plen >= MAX_PAYLOAD or end > n or plen < 20 or buf[off + 4] != 0:
            break
        type_code, size, log_pos = unpack(buf, off + 5)
        if size != plen - 1 or log_pos != pos + size or stop_types[type_code] or size > max_size:
            break
        parts.append(buf[off + 5:end])
        pos += size
        off = end
        seq = word >> 24
    return b"".join(parts), off, pos, len(parts), (seq + 1) & 0xFF if seq >= 0 else -1


unframe_run_c = compiled_twin("binlog._wire", "unframe_run")
unframe_run = unframe_run_c or unframe_run_py


__all__ = ["MAX_PAYLOAD", "PACKET_HEADER", "frame", "parse_error", "error_text", "native_scramble",
           "sha2_scramble", "xor_with_nonce", "unframe_run", "unframe_run_py", "unframe_run_c"]
