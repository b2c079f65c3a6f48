"""MySQL's length-encoded ("packed") integers: < 251 in one byte, else 0xfc + 2, 0xfd + 3 or 0xfe + 8 bytes.

``PackedInt`` declares the field for construct layouts; ``read_packed_int`` is the hot-path reader.
"""

from __future__ import annotations

import construct as cs


def pack_int(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"packed integers are unsigned, got {value}")
    if value < 251:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


_WIDTH_OF_PREFIX = {0xFC: 2, 0xFD: 3, 0xFE: 8}


def read_packed_int(buf: bytes, off: int) -> tuple[int, int]:
    """→ (value, offset after it). 0xfb (the protocol's NULL) and 0xff cannot occur in binlog bodies."""
    first = buf[off]
    if first < 251:
        return first, off + 1
    width = _WIDTH_OF_PREFIX.get(first)
    if width is None:
        raise ValueError(f"invalid packed integer prefix {first:#x}")
    end = off + 1 + width
    if end > len(buf):
        raise ValueError("packed integer runs past the end of the buffer")
    return int.from_bytes(buf[off + 1:end], "little"), end


class _PackedInt(cs.Construct):
    def _parse(self, stream, context, path):  # type: ignore[no-untyped-def]
        first = cs.stream_read(stream, 1, path)[0]
        if first < 251:
            return first
        width = _WIDTH_OF_PREFIX.get(first)
        if width is None:
            raise cs.ExplicitError(f"invalid packed integer prefix {first:#x}", path=path)
        return int.from_bytes(cs.stream_read(stream, width, path), "little")

    def _build(self, obj, stream, context, path):  # type: ignore[no-untyped-def]
        data = pack_int(obj)
        cs.stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context, path):  # type: ignore[no-untyped-def]
        raise cs.SizeofError("a packed integer has a variable size", path=path)


PackedInt = _PackedInt()

# The 6-byte little-endian table id of TABLE_MAP and rows events (construct has no Int48ul).
TableId6 = cs.BytesInteger(6, swapped=True)
