"""QUERY event status variables: one declaration, a construct codec, a fast codec, ``StatusVars``.

``STATUS_VARS`` is the single declaration (code, name, kind). Layouts follow MySQL 8.0
``statement_events.cpp`` (reader) and ``log_event.cc`` (writer), MariaDB ``log_event.cc`` for 128/129,
and the PolarDB-X DN for 21/22/200/201 (polardbx-cdc ``QueryLogEvent.java``).

A status variable is one code byte and a value whose length only its code tells. A code we cannot
size (not declared, or declared without a known layout such as Q_COMMIT_TS2) ends decoding, exactly as
MySQL's reader stops there: that variable and everything after it are kept verbatim in
``StatusVars.undecoded``, so the block always rebuilds byte for byte and the rest of the event (db,
query) still decodes. A known code whose value does not fit in the block ends decoding the same way.

Value types by kind: integers for the fixed kinds; ``str`` for strings (UTF-8 with surrogateescape, so
any byte string survives a round trip); tuples for ``auto_increment`` (increment, offset),
``charset`` (client, connection, server) and ``invoker`` (user, host); ``updated_db_names`` is a
tuple of names, or the int count when it exceeds 16 (MySQL writes 254, OVER_MAX_DBS_IN_EVENT_MTS,
and no names).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

import construct as cs

# (code, name, kind). Kinds: a struct code sequence ("B", "H", "I", "Q", "HH", "HHH"), "u24",
# "str" (u8 length + bytes), "strz" (u8 length + bytes + NUL when length > 0), "invoker" (two
# "str"), "dbnames" (u8 count + NUL-terminated names), or None (length unknown: undecodable).
STATUS_VARS: tuple[tuple[int, str, str | None], ...] = (
    (0, "flags2", "I"),
    (1, "sql_mode", "Q"),
    (2, "catalog", "strz"),                     # MySQL 5.0.0-5.0.3 only; kept for old masters
    (3, "auto_increment", "HH"),                # (increment, offset)
    (4, "charset", "HHH"),                      # (client, connection, server)
    (5, "time_zone", "str"),
    (6, "catalog_nz", "str"),
    (7, "lc_time_names", "H"),
    (8, "charset_database", "H"),
    (9, "table_map_for_update", "Q"),
    (10, "master_data_written", "I"),
    (11, "invoker", "invoker"),                 # (user, host)
    (12, "updated_db_names", "dbnames"),
    (13, "microseconds", "u24"),
    (14, "commit_ts", "Q"),                     # 5.7 milestone builds: commit_seq_no (COMMIT_SEQ_LEN 8)
    # Q_COMMIT_TS2: no released reader or writer defines its length (MySQL 8.0 stops parsing here).
    (15, "commit_ts2", None),
    (16, "explicit_defaults_for_timestamp", "B"),
    (17, "ddl_logged_with_xid", "Q"),
    (18, "default_collation_for_utf8mb4", "H"),
    (19, "sql_require_primary_key", "B"),
    (20, "default_table_encryption", "B"),
    # AliSQL / PolarDB-X DN 8.0 (seen in real DN QUERY events, e.g. code 22 in every ANALYZE).
    (21, "opt_flashback_area", "B"),
    (22, "opt_index_format_gpp_enabled", "B"),
    # MariaDB
    (128, "hrnow", "u24"),
    (129, "xid", "Q"),
    # PolarDB-X DN 8.0 V1 TSO recording (docs/formats.md)
    (200, "lizard_commit_gcn", "Q"),
    (201, "lizard_prepare_gcn", "Q"),
)

CODE_OF: dict[str, int] = {name: code for code, name, _ in STATUS_VARS}
NAME_OF: dict[int, str] = {code: name for code, name, _ in STATUS_VARS}
KIND_OF: dict[int, str | None] = {code: kind for code, _, kind in STATUS_VARS}

Q_FLAGS2 = 0
Q_SQL_MODE = 1
Q_CHARSET = 4
Q_CATALOG_NZ = 6
Q_UPDATED_DB_NAMES = 12
Q_LIZARD_COMMIT_GCN = 200
Q_LIZARD_PREPARE_GCN = 201

MAX_DBS_IN_EVENT_MTS = 16
OVER_MAX_DBS_IN_EVENT_MTS = 254

# FLAGS2 bits that MySQL writes (OPTIONS_WRITTEN_TO_BIN_LOG).
OPTION_AUTO_IS_NULL = 1 << 14
OPTION_NOT_AUTOCOMMIT = 1 << 19
OPTION_NO_FOREIGN_KEY_CHECKS = 1 << 26
OPTION_RELAXED_UNIQUE_CHECKS = 1 << 27


def _text(data: bytes | memoryview) -> str:
    return str(data, "utf-8", "surrogateescape")


def _bytes(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")


# -- construct declaration --------------------------------------------------------------------------
class Text(cs.Adapter):
    """Bytes <-> str, UTF-8 with surrogateescape: never fails, always rebuilds the same bytes."""

    def _decode(self, obj: bytes, context: Any, path: str) -> str:
        return _text(obj)

    def _encode(self, obj: str | bytes, context: Any, path: str) -> bytes:
        return _bytes(obj)


class _AsTuple(cs.Adapter):
    def _decode(self, obj: Any, context: Any, path: str) -> tuple:
        return tuple(obj)

    def _encode(self, obj: Any, context: Any, path: str) -> list:
        return list(obj)


class _Unsized(cs.Construct):
    """A code whose value length is unknown: fails (a plain ConstructError), so GreedyRange stops
    before the code byte and the rest of the block lands in ``undecoded``."""

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        raise cs.ConstructError("status variable of unknown length", path=path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        raise cs.ConstructError("status variable of unknown length cannot be built", path=path)


class _CString(cs.Construct):
    """NUL-terminated name; fails (stopping the block) when the NUL is missing."""

    def _parse(self, stream: Any, context: Any, path: str) -> str:
        out = bytearray()
        while True:
            b = cs.stream_read(stream, 1, path)
            if b == b"\0":
                return _text(bytes(out))
            out += b

    def _build(self, obj: str | bytes, stream: Any, context: Any, path: str) -> Any:
        data = _bytes(obj)
        if b"\0" in data:
            raise cs.ConstructError("NUL inside a NUL-terminated name", path=path)
        cs.stream_write(stream, data + b"\0", len(data) + 1, path)
        return obj


class _DbNames(cs.Construct):
    """Q_UPDATED_DB_NAMES: count, then that many NUL-terminated names unless count > 16."""

    def _parse(self, stream: Any, context: Any, path: str) -> tuple[str, ...] | int:
        count = cs.stream_read(stream, 1, path)[0]
        if count > MAX_DBS_IN_EVENT_MTS:
            return count
        return tuple(_CString()._parsereport(stream, context, path) for _ in range(count))

    def _build(self, obj: Iterable[str] | int, stream: Any, context: Any, path: str) -> Any:
        if isinstance(obj, int):
            if not MAX_DBS_IN_EVENT_MTS < obj <= 255:
                raise cs.ConstructError(f"db count {obj} is not an over-the-limit marker", path=path)
            cs.stream_write(stream, bytes([obj]), 1, path)
            return obj
        names = list(obj)
        if len(names) > MAX_DBS_IN_EVENT_MTS:
            raise cs.ConstructError(f"{len(names)} names; MySQL writes at most 16", path=path)
        cs.stream_write(stream, bytes([len(names)]), 1, path)
        for name in names:
            _CString()._build(name, stream, context, path)
        return obj


_Str = Text(cs.Prefixed(cs.Int8ul, cs.GreedyBytes))
_StrZ = Text(cs.FocusedSeq(
    "s",
    "n" / cs.Rebuild(cs.Int8ul, lambda c: len(_bytes(c.s))),
    "s" / cs.Bytes(cs.this.n),
    cs.If(cs.this.n > 0, cs.Const(b"\0")),
))
_INT = {"B": cs.Int8ul, "H": cs.Int16ul, "I": cs.Int32ul, "Q": cs.Int64ul}


def _construct_of(kind: str | None) -> cs.Construct:
    if kind is None:
        return _Unsized()
    if kind in _INT:
        return _INT[kind]
    if kind == "u24":
        return cs.Int24ul
    if kind == "str":
        return _Str
    if kind == "strz":
        return _StrZ
    if kind == "invoker":
        return _AsTuple(cs.Sequence(_Str, _Str))
    if kind == "dbnames":
        return _DbNames()
    return _AsTuple(cs.Array(len(kind), _INT[kind[0]]))


StatusVar = cs.Struct(
    "code" / cs.Int8ul,
    "value" / cs.Switch(cs.this.code, {code: _construct_of(kind) for code, _, kind in STATUS_VARS},
                        default=_Unsized()),
)
# The whole block: every variable up to the first undecodable one, then the rest verbatim.
StatusVarsBlock = cs.Struct(
    "vars" / cs.GreedyRange(StatusVar),
    "undecoded" / cs.GreedyBytes,
)


def parse_status_vars_construct(block: bytes) -> tuple[list[tuple[int, Any]], bytes]:
    """The reference parse (construct): ``([(code, value), ...], undecoded)``."""
    parsed = StatusVarsBlock.parse(bytes(block))
    return [(v.code, v.value) for v in parsed.vars], parsed.undecoded


def build_status_vars_construct(items: Iterable[tuple[int, Any]], undecoded: bytes = b"") -> bytes:
    return StatusVarsBlock.build({"vars": [{"code": c, "value": v} for c, v in items],
                                  "undecoded": undecoded})


# -- fast codec (hot path), derived from the same table ---------------------------------------------
# A reader takes (block, pos after the code byte, block end) and returns (value, next pos), or None
# when the value does not fit / is malformed (decoding stops there, as in the construct parse).
Reader = Callable[[Any, int, int], "tuple[Any, int] | None"]


def _fixed_reader(fmt: str) -> Reader:
    st = struct.Struct("<" + fmt)
    size, unpack, single = st.size, st.unpack_from, len(fmt) == 1

    def read(b: Any, p: int, n: int) -> tuple[Any, int] | None:
        e = p + size
        if e > n:
            return None
        v = unpack(b, p)
        return (v[0] if single else v), e
    return read


def _read_u24(b: Any, p: int, n: int) -> tuple[int, int] | None:
    if p + 3 > n:
        return None
    return b[p] | b[p + 1] << 8 | b[p + 2] << 16, p + 3


def _read_str(b: Any, p: int, n: int) -> tuple[str, int] | None:
    if p >= n:
        return None
    e = p + 1 + b[p]
    if e > n:
        return None
    return _text(b[p + 1:e]), e


def _read_strz(b: Any, p: int, n: int) -> tuple[str, int] | None:
    if p >= n:
        return None
    length = b[p]
    e = p + 1 + length
    if length:
        if e >= n or b[e] != 0:
            return None
        return _text(b[p + 1:e]), e + 1
    return "", e


def _read_invoker(b: Any, p: int, n: int) -> tuple[tuple[str, str], int] | None:
    user = _read_str(b, p, n)
    if user is None:
        return None
    host = _read_str(b, user[1], n)
    if host is None:
        return None
    return (user[0], host[0]), host[1]


def _read_dbnames(b: Any, p: int, n: int) -> tuple[tuple[str, ...] | int, int] | None:
    if p >= n:
        return None
    count = b[p]
    p += 1
    if count > MAX_DBS_IN_EVENT_MTS:
        return count, p
    names = []
    for _ in range(count):
        e = bytes(b[p:n]).find(b"\0")
        if e < 0:
            return None
        names.append(_text(b[p:p + e]))
        p += e + 1
    return tuple(names), p


def _reader_of(kind: str | None) -> Reader | None:
    if kind is None:
        return None
    special = {"u24": _read_u24, "str": _read_str, "strz": _read_strz, "invoker": _read_invoker,
               "dbnames": _read_dbnames}
    return special.get(kind) or _fixed_reader(kind)


_READERS: dict[int, Reader] = {
    code: r for code, _, kind in STATUS_VARS if (r := _reader_of(kind)) is not None}


def parse_status_vars(block: bytes | memoryview) -> tuple[list[tuple[int, Any]], bytes]:
    """Fast parse of a status-var block: ``([(code, value), ...], undecoded)``."""
    items: list[tuple[int, Any]] = []
    pos, n = 0, len(block)
    readers = _READERS
    while pos < n:
        reader = readers.get(block[pos])
        if reader is None:
            break
        got = reader(block, pos + 1, n)
        if got is None:
            break
        items.append((block[pos], got[0]))
        pos = got[1]
    return items, bytes(block[pos:])


def _str_bytes(value: str | bytes) -> bytes:
    data = _bytes(value)
    if len(data) > 255:
        raise ValueError(f"status variable string of {len(data)} bytes (max 255)")
    return bytes([len(data)]) + data


def _writer_of(kind: str | None) -> Callable[[Any], bytes] | None:
    if kind is None:
        return None
    if kind == "u24":
        return lambda v: v.to_bytes(3, "little")
    if kind == "str":
        return _str_bytes
    if kind == "strz":
        return lambda v: _str_bytes(v) + (b"\0" if _bytes(v) else b"")
    if kind == "invoker":
        return lambda v: _str_bytes(v[0]) + _str_bytes(v[1])
    if kind == "dbnames":
        return lambda v: _DbNames().build(v)
    st = struct.Struct("<" + kind)
    if len(kind) == 1:
        return lambda v, pack=st.pack: pack(v)
    return lambda v, pack=st.pack: pack(*v)


_WRITERS: dict[int, Callable[[Any], bytes]] = {
    code: w for code, _, kind in STATUS_VARS if (w := _writer_of(kind)) is not None}


def build_status_vars(items: Iterable[tuple[int, Any]], undecoded: bytes = b"") -> bytes:
    """Fast build of a status-var block (same bytes as ``build_status_vars_construct``)."""
    out = bytearray()
    for code, value in items:
        writer = _WRITERS.get(code)
        if writer is None:
            raise ValueError(f"status variable code {code} has no known layout; pass it in undecoded")
        try:
            out.append(code)
            out += writer(value)
        except (struct.error, OverflowError, TypeError, IndexError, cs.ConstructError) as exc:
            raise ValueError(f"bad value {value!r} for status variable {NAME_OF[code]}: {exc}") from exc
    out += undecoded
    return bytes(out)


# -- the typed, ordered, byte-exact holder ----------------------------------------------------------
class StatusVars:
    """The status variables of one QUERY event, in the order they were written.

    Read and assign variables as attributes named as in ``STATUS_VARS`` (``sv.flags2``,
    ``sv.charset``, ``sv.lizard_commit_gcn``; ``None`` = absent; assigning ``None`` removes it).
    A new variable is inserted in ascending code order, as MySQL writes them. ``undecoded`` holds the
    bytes from the first undecodable variable on. Built from bytes, the block is parsed only when a
    variable is first read, and ``to_bytes()`` returns the original bytes until something changes.
    """

    __slots__ = ("_raw", "_items", "_undecoded")

    def __init__(self, items: Iterable[tuple[int, Any]] = (), undecoded: bytes = b"") -> None:
        self._raw: bytes | None = None
        self._items: list[tuple[int, Any]] | None = list(items)
        self._undecoded = bytes(undecoded)

    @classmethod
    def from_bytes(cls, block: bytes | memoryview) -> StatusVars:
        return lazy_status_vars(block)

    def _parsed(self) -> list[tuple[int, Any]]:
        items = self._items
        if items is None:
            items, self._undecoded = parse_status_vars(self._raw)
            self._items = items
        return items

    def to_bytes(self) -> bytes:
        if self._raw is None:
            self._raw = build_status_vars(self._items, self._undecoded)
        return self._raw

    @property
    def undecoded(self) -> bytes:
        self._parsed()
        return self._undecoded

    @undecoded.setter
    def undecoded(self, value: bytes) -> None:
        self._parsed()
        self._undecoded = bytes(value)
        self._raw = None

    def codes(self) -> list[int]:
        return [c for c, _ in self._parsed()]

    def code_items(self) -> list[tuple[int, Any]]:
        """``[(code, value), ...]`` in written order (a copy)."""
        return list(self._parsed())

    def items(self) -> list[tuple[str, Any]]:
        """``[(name, value), ...]`` in written order (``undecoded`` not included)."""
        return [(NAME_OF[c], v) for c, v in self._parsed()]

    def get(self, code: int) -> Any:
        value = None
        for c, v in self._parsed():
            if c == code:
                value = v  # MySQL applies them in order: the last one wins
        return value

    def set(self, code: int, value: Any) -> None:
        if code not in _WRITERS:
            raise ValueError(f"status variable code {code} has no known layout")
        value = _normalized(code, value)
        items = self._parsed()
        self._raw = None
        kept = [(c, v) for c, v in items if c != code]
        if value is not None:
            at = next((i for i, (c, _) in enumerate(kept) if c > code), len(kept))
            kept.insert(at, (code, value))
        items[:] = kept

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StatusVars):
            return NotImplemented
        return self._parsed() == other._parsed() and self._undecoded == other._undecoded

    def __repr__(self) -> str:
        parts = [f"{name}={value!r}" for name, value in self.items()]
        if self.undecoded:
            parts.append(f"undecoded={self.undecoded!r}")
        return f"StatusVars({', '.join(parts)})"


_new_object = object.__new__
_TUPLE_KINDS = {"HH", "HHH", "invoker", "dbnames"}


def _normalized(code: int, value: Any) -> Any:
    """Lists given for tuple-valued variables become tuples, as decoding returns them."""
    if KIND_OF[code] in _TUPLE_KINDS and isinstance(value, list):
        return tuple(value)
    return value


def lazy_status_vars(block: bytes | memoryview) -> StatusVars:
    """``StatusVars.from_bytes`` without the classmethod call (the QUERY hot path)."""
    sv = _new_object(StatusVars)
    sv._raw = block if type(block) is bytes else bytes(block)
    sv._items = None
    sv._undecoded = b""
    return sv


def _property(code: int, name: str) -> property:
    def fget(self: StatusVars) -> Any:
        return self.get(code)

    def fset(self: StatusVars, value: Any) -> None:
        self.set(code, value)
    return property(fget, fset, doc=f"Status variable {name} (code {code}); None when absent.")


for _code, _name, _ in STATUS_VARS:
    setattr(StatusVars, _name, _property(_code, _name))
del _code, _name


def status_vars(**values: Any) -> StatusVars:
    """Build a status-var block from names, written in ascending code order, e.g.
    ``status_vars(flags2=0, sql_mode=0, catalog_nz="std", charset=(45, 45, 45))``.
    ``None`` values are left out."""
    items = []
    for name, value in values.items():
        if name not in CODE_OF:
            raise TypeError(f"unknown status variable {name!r}")
        if value is not None:
            if CODE_OF[name] not in _WRITERS:
                raise ValueError(f"status variable {name} has no known layout")
            items.append((CODE_OF[name], _normalized(CODE_OF[name], value)))
    items.sort(key=lambda item: item[0])
    return StatusVars(items)


__all__ = [
    "STATUS_VARS", "CODE_OF", "NAME_OF", "StatusVars", "StatusVar", "StatusVarsBlock", "status_vars",
    "parse_status_vars", "parse_status_vars_construct", "build_status_vars",
    "build_status_vars_construct", "Text", "OVER_MAX_DBS_IN_EVENT_MTS", "MAX_DBS_IN_EVENT_MTS",
]
