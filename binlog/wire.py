"""The MySQL client/server protocol's packet layer, shared by the endpoint (``dumper.server``) and
the live DN client (``extractor.replication_client``): framing, the ERR packet, the client's
auth scrambles. Reference: /work/shared/reference/replication-protocol.md §0-§1.
"""

from __future__ import annotations

import hashlib
import struct

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


__all__ = ["MAX_PAYLOAD", "PACKET_HEADER", "frame", "parse_error", "error_text", "native_scramble",
           "sha2_scramble", "xor_with_nonce"]
