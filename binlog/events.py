"""Event bodies, declared once with construct; ``decode_body`` / ``encode_body`` dispatch by type.

The *payload* of an event is everything between the 19-byte header and the CRC32 trailer
(post-header + body). For a FORMAT_DESCRIPTION the payload ends with the checksum-alg byte.
Types without a declaration decode to ``RawBody`` (kept, never dropped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import construct as cs

from binlog.constants import EventType
from binlog.errors import MalformedEvent


@dataclass(frozen=True, slots=True)
class RawBody:
    """The payload of an event type we do not decode, kept byte for byte."""

    type_code: int
    data: bytes


# -- FORMAT_DESCRIPTION (15): payload = this struct + checksum_alg byte ---------------------------
FormatDescription = cs.Struct(
    "binlog_version" / cs.Int16ul,
    "server_version" / cs.PaddedString(50, "ascii"),
    "created" / cs.Int32ul,
    "header_length" / cs.Int8ul,
    "post_header_len" / cs.GreedyBytes,
)

# -- ROTATE (4) ------------------------------------------------------------------------------------
Rotate = cs.Struct(
    "position" / cs.Int64ul,
    "next_file" / cs.GreedyString("ascii"),
)

BODIES: dict[int, cs.Construct] = {
    EventType.ROTATE: Rotate,
}


def decode_body(type_code: int, payload: bytes, ctx: Any = None, *, offset: int = 0) -> Any:
    """Decode one event payload. Raises ``MalformedEvent`` naming ``ctx.source`` and ``offset``."""
    source = getattr(ctx, "source", "<bytes>")
    try:
        if type_code == EventType.FORMAT_DESCRIPTION:
            body = FormatDescription.parse(payload[:-1])
            body.checksum_alg = payload[-1]
            return body
        declared = BODIES.get(type_code)
        if declared is None:
            return RawBody(type_code, bytes(payload))
        return declared.parse(payload)
    except (cs.ConstructError, IndexError, ValueError, UnicodeDecodeError) as exc:
        raise MalformedEvent(f"cannot decode event type {type_code}: {exc}", source=source,
                             offset=offset) from exc


def encode_body(type_code: int, **fields: Any) -> bytes:
    """Build a payload from named fields (the construct declaration's field names)."""
    if type_code == EventType.FORMAT_DESCRIPTION:
        alg = fields.pop("checksum_alg")
        return FormatDescription.build(fields) + bytes([alg])
    declared = BODIES.get(type_code)
    if declared is None:
        raise ValueError(f"no declaration for event type {type_code}")
    return declared.build(fields)
