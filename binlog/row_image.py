"""Row images of ROWS events: bitmaps, ``decode_image`` / ``encode_image`` / ``image_length`` and the
compiled per-table codec used on the hot path.

An image is ``null bitmap`` (one bit per *present* column, LSB first, ``(n_present + 7) // 8`` bytes)
followed by the values of the present, non-NULL columns in column order. Which columns are present
comes from the event's "columns present" bitmap (two for UPDATE: before and after image); with
``binlog_row_image=FULL`` (the default) every column is present. A decoded image is a list as wide as the
table; columns absent from a minimal image hold the ``ABSENT`` sentinel (None stays SQL NULL).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from binlog.columns import Column, ColumnCodec, codec_for


class _Absent:
    """Marks a column that a (minimal) row image does not carry."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()

Present = bytes | Sequence[bool] | None


# -- bitmaps ---------------------------------------------------------------------------------------------

def bitmap_size(n_bits: int) -> int:
    return (n_bits + 7) // 8


def pack_bitmap(bits: Sequence[bool]) -> bytes:
    """LSB-first bitmap as rows events store both the present and the null bitmaps."""
    value = 0
    for i, bit in enumerate(bits):
        if bit:
            value |= 1 << i
    return value.to_bytes(bitmap_size(len(bits)), "little")


def unpack_bitmap(bitmap: bytes, n_bits: int) -> list[bool]:
    value = int.from_bytes(bitmap[:bitmap_size(n_bits)], "little")
    return [bool(value >> i & 1) for i in range(n_bits)]


def all_present(width: int) -> bytes:
    """The present bitmap of a full image, unused high bits set as MySQL's ``bitmap_set_all`` leaves
    them (MariaDB clears them; readers ignore them either way)."""
    return b"\xff" * bitmap_size(width)


def present_indexes(present: Present, width: int) -> tuple[int, ...]:
    if present is None:
        return tuple(range(width))
    if isinstance(present, bytes | bytearray | memoryview):
        if len(present) < bitmap_size(width):
            raise ValueError(f"present bitmap of {len(present)} bytes is short for {width} columns")
        value = int.from_bytes(present[:bitmap_size(width)], "little")
        return tuple(i for i in range(width) if value >> i & 1)
    if len(present) != width:
        raise ValueError(f"present flags for {len(present)} columns, table has {width}")
    return tuple(i for i, bit in enumerate(present) if bit)


# -- compiled codecs ---------------------------------------------------------------------------------------

def _value_lines(j: int, codec: ColumnCodec, target: str, indent: str, namespace: dict[str, Any]) -> list[str]:
    """Source lines decoding present column ``j`` at ``off`` into ``target`` and advancing ``off``."""
    if codec.size is not None:
        namespace[f"u{j}"] = struct.Struct("<" + codec.struct_code).unpack_from  # type: ignore[operator]
        raw = f"u{j}(buf, off)[0]"
        if codec.convert is not None:
            namespace[f"c{j}"] = codec.convert
            raw = f"c{j}({raw})"
        return [f"{indent}{target} = {raw}", f"{indent}off += {codec.size}"]
    if codec.prefix is None:
        namespace[f"d{j}"] = codec.decode
        return [f"{indent}{target}, off = d{j}(buf, off)"]
    if codec.prefix == 1:
        lines = [f"{indent}end = off + 1 + buf[off]", f"{indent}raw = buf[off + 1:end]"]
    elif codec.prefix == 2:
        lines = [f"{indent}end = off + 2 + (buf[off] | buf[off + 1] << 8)", f"{indent}raw = buf[off + 2:end]"]
    else:
        lines = [f"{indent}start = off + {codec.prefix}",
                 f"{indent}end = start + from_bytes(buf[off:start], 'little')",
                 f"{indent}raw = buf[start:end]"]
    if codec.convert is not None:
        namespace[f"c{j}"] = codec.convert
        lines.append(f"{indent}{target} = c{j}(raw)")
    else:
        lines.append(f"{indent}{target} = raw")
    lines.append(f"{indent}off = end")
    return lines


def _compile_decoder(codecs: Sequence[ColumnCodec], present: tuple[int, ...],
                     width: int) -> Callable[[bytes, int], tuple[list[Any], int]]:
    """Straight-line source for one image layout, built once per (table, present bitmap) and exec'd,
    as ``collections.namedtuple`` builds its methods: a generic per-column loop costs several times more
    than the values' own decoding. NULL-free rows read each run of fixed-width columns with one
    precompiled ``struct.Struct``; rows with NULLs test each column's null bit."""
    namespace: dict[str, Any] = {"from_bytes": int.from_bytes, "ABSENT": ABSENT}
    null_bytes = bitmap_size(len(codecs))
    has_variable = any(codec.size is None for codec in codecs)
    lines = ["def decode(buf, off):"]
    # MySQL 5.x fills the unused high bits of the last null byte with ones: mask them off.
    mask = (1 << len(codecs)) - 1
    if null_bytes == 0:
        lines.append("    nulls = 0")
    elif null_bytes == 1:
        lines.append(f"    nulls = buf[off] & {mask}")
    else:
        lines.append(f"    nulls = from_bytes(buf[off:off + {null_bytes}], 'little') & {mask}")
    lines.append(f"    off += {null_bytes}")

    # NULL-free path: runs of fixed-width columns, one struct each.
    lines.append("    if not nulls:")
    plain: list[str] = []
    run: list[int] = []

    def close_run() -> None:
        if not run:
            return
        name = f"s{run[0]}"
        layout = struct.Struct("<" + "".join(codecs[j].struct_code for j in run))  # type: ignore[misc]
        namespace[name] = layout.unpack_from
        lines.append(f"        {', '.join(f'r{j}' for j in run)}, = {name}(buf, off)")
        lines.append(f"        off += {layout.size}")
        for j in run:
            if codecs[j].convert is not None:
                namespace[f"c{j}"] = codecs[j].convert
                plain.append(f"c{j}(r{j})")
            else:
                plain.append(f"r{j}")
        run.clear()

    for j, codec in enumerate(codecs):
        if codec.size is not None:
            run.append(j)
        else:
            close_run()
            lines.extend(_value_lines(j, codec, f"v{j}", "        ", namespace))
            plain.append(f"v{j}")
    close_run()
    lines.extend(_return_lines(plain, present, width, has_variable, "        "))

    # Rows with NULLs: column by column.
    lines.append("    else:")
    for j, codec in enumerate(codecs):
        lines.append(f"        if nulls & {1 << j}:")
        lines.append(f"            v{j} = None")
        lines.append("        else:")
        lines.extend(_value_lines(j, codec, f"v{j}", "            ", namespace))
    lines.extend(_return_lines([f"v{j}" for j in range(len(codecs))], present, width, has_variable,
                               "        "))
    exec("\n".join(lines), namespace)  # noqa: S102 - the source is generated above from codec facts only
    return namespace["decode"]


def _return_lines(values: list[str], present: tuple[int, ...], width: int, check_end: bool,
                  indent: str) -> list[str]:
    wide = ["ABSENT"] * width
    for i, expression in zip(present, values, strict=True):
        wide[i] = expression
    lines = []
    if check_end:  # slices past the end come back short instead of failing
        lines += [f"{indent}if off > len(buf):",
                  f"{indent}    raise ValueError('row image runs past the end of the rows data')"]
    lines.append(f"{indent}return [{', '.join(wide)}], off")
    return lines


class ImageCodec:
    """Reads and writes the images of one table for one present bitmap; built once and cached.

    ``decode(buf, off) -> (values, offset after the image)`` is compiled; ``buf`` must be bytes."""

    __slots__ = ("width", "present", "null_bytes", "unused_null_bits", "lengths", "encoders", "nullable",
                 "columns", "fixed_size", "decode")

    def __init__(self, columns: Sequence[Column], codecs: Sequence[ColumnCodec],
                 present: tuple[int, ...]) -> None:
        self.width = len(columns)
        self.present = present
        self.null_bytes = bitmap_size(len(present))
        self.unused_null_bits = ((1 << (8 * self.null_bytes)) - 1) ^ ((1 << len(present)) - 1)
        self.columns = tuple(columns[i] for i in present)
        chosen = [codecs[i] for i in present]
        self.lengths = tuple(c.length for c in chosen)
        self.encoders = tuple(c.encode for c in chosen)
        self.nullable = tuple(col.nullable for col in self.columns)
        self.fixed_size = (sum(c.size for c in chosen)  # type: ignore[misc]
                           if all(c.size is not None for c in chosen) else None)
        self.decode = _compile_decoder(chosen, present, self.width)

    def length(self, buf: bytes, off: int) -> int:
        """Byte length of the image at ``buf[off]`` without decoding values."""
        nulls = int.from_bytes(buf[off:off + self.null_bytes], "little")
        if not nulls and self.fixed_size is not None:
            return self.null_bytes + self.fixed_size
        pos = off + self.null_bytes
        for j, length in enumerate(self.lengths):
            if not nulls >> j & 1:
                pos += length(buf, pos)
        if pos > len(buf):
            raise ValueError("row image runs past the end of the rows data")
        return pos - off

    def encode(self, values: Sequence[Any]) -> bytes:
        """A table-wide value list → image bytes (values of absent columns are ignored)."""
        if len(values) != self.width:
            raise ValueError(f"{len(values)} values for a table of {self.width} columns")
        nulls = 0
        parts = [b""]
        for j, i in enumerate(self.present):
            value = values[i]
            if value is None:
                if not self.nullable[j]:
                    name = self.columns[j].name or f"#{i}"
                    raise ValueError(f"column {name} is NOT NULL")
                nulls |= 1 << j
            elif value is ABSENT:
                raise ValueError(f"column #{i} is present in the image but its value is ABSENT")
            else:
                parts.append(self.encoders[j](value))
        # Unused high bits of the last null byte are ones, as MySQL 5.7 and MariaDB write them.
        parts[0] = (nulls | self.unused_null_bits).to_bytes(self.null_bytes, "little")
        return b"".join(parts)


class TableCodec:
    """Compiled codecs of one table (one TABLE_MAP's columns), with one ``ImageCodec`` per present bitmap."""

    __slots__ = ("columns", "codecs", "_images")

    def __init__(self, columns: Sequence[Column]) -> None:
        self.columns = tuple(columns)
        self.codecs = tuple(codec_for(col) for col in self.columns)
        self._images: dict[Any, ImageCodec] = {}

    @property
    def width(self) -> int:
        return len(self.columns)

    def image(self, present: Present = None) -> ImageCodec:
        try:
            return self._images[present]  # type: ignore[index]
        except (KeyError, TypeError):  # TypeError: an unhashable list of flags
            pass
        key = bytes(present) if isinstance(present, bytearray | memoryview) else (
            tuple(present) if isinstance(present, list) else present)
        codec = self._images.get(key)
        if codec is None:
            codec = ImageCodec(self.columns, self.codecs, present_indexes(present, self.width))
            if len(self._images) < 64:  # bitmaps of minimal images vary per statement; keep a few
                self._images[key] = codec
        return codec

    def decode_rows(self, data: bytes, present: Present = None, present_after: Present = None, *,
                    update: bool = False) -> list:
        """All images in ``data``: value lists, or (before, after) pairs when ``update``."""
        if type(data) is not bytes:
            data = bytes(data)
        end = len(data)
        before = self.image(present)
        after = self.image(present_after if present_after is not None else present) if update else before
        if end and not (before.present and after.present):
            raise ValueError("rows data for an image without columns: no row could be framed")
        decode = before.decode
        values, off = decode(data, 0) if end else (None, 0)
        if not update:
            if off == end:  # the usual single-row event
                return [values] if end else []
            rows = [values]
            while off < end:
                values, off = decode(data, off)
                rows.append(values)
            return rows
        decode_after = after.decode
        rows = []
        while off < end:
            new, off = decode_after(data, off)
            rows.append((values, new))
            if off < end:
                values, off = decode(data, off)
        return rows

    def split_rows(self, data: bytes, present: Present = None, present_after: Present = None, *,
                   update: bool = False) -> list:
        """The images' byte slices without decoding (pairs when ``update``)."""
        if type(data) is not bytes:
            data = bytes(data)
        end = len(data)
        off = 0
        rows: list = []
        before = self.image(present)
        after = self.image(present_after if present_after is not None else present) if update else None
        if end and not (before.present and (after is None or after.present)):
            raise ValueError("rows data for an image without columns: no row could be framed")
        while off < end:
            stop = off + before.length(data, off)
            if after is None:
                rows.append(data[off:stop])
            else:
                after_stop = stop + after.length(data, stop)
                rows.append((data[off:stop], data[stop:after_stop]))
                stop = after_stop
            off = stop
        if off != end:
            raise ValueError("rows data ends inside a row image")
        return rows

    def encode_rows(self, rows: Sequence, present: Present = None, present_after: Present = None, *,
                    update: bool = False) -> bytes:
        before = self.image(present)
        after = self.image(present_after if present_after is not None else present) if update else before
        if rows and not (before.present and after.present):
            raise ValueError("an image without columns takes no bytes: its rows could not be framed")
        if not update:
            return b"".join(before.encode(values) for values in rows)
        return b"".join(before.encode(old) + after.encode(new) for old, new in rows)


@lru_cache(maxsize=1024)
def table_codec(columns: tuple[Column, ...]) -> TableCodec:
    """The shared compiled codec of a column tuple."""
    return TableCodec(columns)


# -- module-level convenience (cold paths) --------------------------------------------------------------------

def decode_image(columns: Sequence[Column], buf: bytes, off: int = 0,
                 present: Present = None) -> tuple[list[Any], int]:
    """Decode one image → (values as wide as ``columns``, offset after the image)."""
    if type(buf) is not bytes:
        buf = bytes(buf)
    return table_codec(tuple(columns)).image(present).decode(buf, off)


def encode_image(columns: Sequence[Column], values: Sequence[Any], present: Present = None) -> bytes:
    return table_codec(tuple(columns)).image(present).encode(values)


def image_length(columns: Sequence[Column], buf: bytes, off: int = 0, present: Present = None) -> int:
    return table_codec(tuple(columns)).image(present).length(buf, off)
