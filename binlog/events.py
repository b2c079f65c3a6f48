"""Event bodies, declared once with construct; ``decode_body`` / ``encode_body`` dispatch by type.

The *payload* of an event is everything between the 19-byte header and the CRC32 trailer
(post-header + body). For a FORMAT_DESCRIPTION the payload ends with the checksum-alg byte (a payload
that still carries the 4-byte CRC field after it, as ``Event.payload`` gives, is accepted too).

Every declared type has a construct declaration in ``BODIES`` (the reference parser and the
builder) and a slots dataclass that ``decode_body`` returns. ``encode_body(type, **fields)`` takes
exactly the dataclass's field names; fields marked "derived" below (lengths) are never passed. The
hot-path types (QUERY, XID, GCN, SEQUENCE, XA_PREPARE, ROWS_QUERY) are parsed and built with
precompiled ``struct.Struct``s derived from the same field tuples (``*_FIELDS``); the tests check
that both paths agree. Types without a declaration decode to ``RawBody`` (kept byte for byte, never
dropped); ``encode_body(type, data=...)`` rebuilds one.

==================  ===================================================================================
type                fields (``None`` = absent)
==================  ===================================================================================
FORMAT_DESCRIPTION  binlog_version, server_version (str), created, header_length, post_header_len
                    (bytes), checksum_alg
ROTATE              position, next_file (str)
STOP                (none)
QUERY               thread_id, exec_time, error_code, status_vars (``StatusVars``; ``bytes`` or
                    ``None`` also accepted when encoding), db (str), query (bytes; str accepted)
XID                 xid
INTVAR              intvar_type, value
RAND                seed1, seed2
USER_VAR            name (str), is_null, value_type, charset, value (bytes), flags
ROWS_QUERY          query (bytes), length_byte (the ignored first byte; default ``len & 0xff``)
HEARTBEAT           log_file (str)
GTID /              flags, sid (16 bytes), gno, lt_type (2 in 5.7.5+), last_committed,
ANONYMOUS_GTID      sequence_number, immediate_commit_timestamp, original_commit_timestamp (None when
                    not written, i.e. equal to immediate), transaction_length,
                    immediate_server_version, original_server_version (None when not written),
                    commit_group_ticket, extra (bytes after the last understood field)
PREVIOUS_GTIDS      sids: [(sid 16 bytes, [(start, end), ...]), ...]
XA_PREPARE          one_phase, format_id, gtrid (bytes), bqual (bytes)
SEQUENCE            sequence_type, number
CONSENSUS_LOG       flag, term, index, length, reserve
PREVIOUS_CONSENSUS  index
CONSENSUS_CLUSTER   info (bytes)
CONSENSUS_EMPTY     (none)
GCN                 flags, gcn, n_branch, n_local_branch
==================  ===================================================================================

Strings decode as UTF-8 with surrogateescape, so any bytes rebuild exactly. Fixed-layout bodies
must have exactly their size: extra bytes mean we misread the format, and raise ``MalformedEvent``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import construct as cs

from binlog.constants import ROWS_TYPES, EventType, GcnFlag
from binlog.errors import BinlogError, MalformedEvent
from binlog.lenenc import PackedInt
from binlog.query_status import (
    StatusVars,
    StatusVarsBlock,
    Text,
    lazy_status_vars,
)


@dataclass(frozen=True, slots=True)
class RawBody:
    """The payload of an event type we do not decode, kept byte for byte."""

    type_code: int
    data: bytes


# -- body dataclasses --------------------------------------------------------------------------------
@dataclass(slots=True)
class FormatDescriptionBody:
    binlog_version: int
    server_version: str
    created: int
    header_length: int
    post_header_len: bytes
    checksum_alg: int


@dataclass(slots=True)
class RotateBody:
    position: int
    next_file: str


@dataclass(slots=True)
class StopBody:
    pass


@dataclass(slots=True)
class QueryBody:
    thread_id: int
    exec_time: int
    error_code: int
    status_vars: StatusVars
    db: str
    query: bytes


@dataclass(slots=True)
class XidBody:
    xid: int


@dataclass(slots=True)
class IntvarBody:
    intvar_type: int  # 1 LAST_INSERT_ID, 2 INSERT_ID
    value: int


@dataclass(slots=True)
class RandBody:
    seed1: int
    seed2: int


@dataclass(slots=True)
class UserVarBody:
    name: str
    is_null: int
    value_type: int | None = None  # 0 STRING, 1 REAL, 2 INT, 4 DECIMAL
    charset: int | None = None
    value: bytes | None = None
    flags: int | None = None       # 5.6+: UNSIGNED_F; absent in older servers


@dataclass(slots=True)
class RowsQueryBody:
    query: bytes
    length_byte: int | None = None


@dataclass(slots=True)
class HeartbeatBody:
    log_file: str


@dataclass(slots=True)
class GtidBody:
    flags: int
    sid: bytes
    gno: int
    lt_type: int | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_timestamp: int | None = None
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    commit_group_ticket: int | None = None
    extra: bytes = b""

    @property
    def uuid(self) -> str:
        import uuid

        return str(uuid.UUID(bytes=self.sid))


@dataclass(slots=True)
class PreviousGtidsBody:
    sids: list[tuple[bytes, list[tuple[int, int]]]]


@dataclass(slots=True)
class XaPrepareBody:
    one_phase: int
    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(slots=True)
class SequenceBody:
    sequence_type: int  # binlog.constants.SequenceType
    number: int


@dataclass(slots=True)
class ConsensusLogBody:
    flag: int
    term: int
    index: int
    length: int
    reserve: int  # the engine stores a checksum here


@dataclass(slots=True)
class PreviousConsensusIndexBody:
    index: int


@dataclass(slots=True)
class ConsensusClusterInfoBody:
    info: bytes


@dataclass(slots=True)
class ConsensusEmptyBody:
    pass


@dataclass(slots=True)
class GcnBody:
    flags: int                       # binlog.constants.GcnFlag
    gcn: int | None = None
    n_branch: int | None = None
    n_local_branch: int | None = None


# -- construct helpers ---------------------------------------------------------------------------------
_CS_INT = {"B": cs.Int8ul, "H": cs.Int16ul, "I": cs.Int32ul, "Q": cs.Int64ul, "q": cs.Int64sl}
Int56ul = cs.BytesInteger(7, swapped=True)


def _int_fields(fields: tuple[tuple[str, str], ...],
                rebuild: dict[str, Callable[[Any], Any]] | None = None) -> list[cs.Construct]:
    rebuild = rebuild or {}
    return [name / (cs.Rebuild(_CS_INT[code], rebuild[name]) if name in rebuild else _CS_INT[code])
            for name, code in fields]


def _struct(fields: tuple[tuple[str, str], ...]) -> struct.Struct:
    return struct.Struct("<" + "".join(code for _, code in fields))


def _remaining(stream: Any) -> int:
    pos = stream.tell()
    end = stream.seek(0, 2)
    stream.seek(pos)
    return end - pos


class Trailing(cs.Subconstruct):
    """An optional field at the end of a body: parsed when at least ``min_size`` bytes remain
    (MySQL's ``can_read``), else None; built only when its value is not None."""

    def __init__(self, subcon: cs.Construct, min_size: int | None = None) -> None:
        super().__init__(subcon)
        self.min_size = subcon.sizeof() if min_size is None else min_size
        self.flagbuildnone = True

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        if _remaining(stream) < self.min_size:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            return None
        return self.subcon._build(obj, stream, context, path)


class _Bytes(cs.Adapter):
    """Bytes field that also accepts str (UTF-8) when building."""

    def _decode(self, obj: bytes, context: Any, path: str) -> bytes:
        return obj

    def _encode(self, obj: bytes | str, context: Any, path: str) -> bytes:
        return obj.encode("utf-8", "surrogateescape") if isinstance(obj, str) else bytes(obj)


class _AsTuple(cs.Adapter):
    def _decode(self, obj: Any, context: Any, path: str) -> tuple:
        return tuple(obj)

    def _encode(self, obj: Any, context: Any, path: str) -> list:
        return list(obj)


class _AsList(cs.Adapter):
    def _decode(self, obj: Any, context: Any, path: str) -> list:
        return list(obj)

    def _encode(self, obj: Any, context: Any, path: str) -> list:
        return list(obj)


def _utf8_len(value: str | bytes) -> int:
    return len(value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value)


# -- FORMAT_DESCRIPTION (15): payload = this struct + checksum_alg byte ---------------------------
FormatDescription = cs.Struct(
    "binlog_version" / cs.Int16ul,
    "server_version" / Text(cs.ExprAdapter(
        cs.Bytes(50),
        decoder=lambda obj, ctx: obj.split(b"\0", 1)[0],
        encoder=lambda obj, ctx: obj.ljust(50, b"\0"))),
    "created" / cs.Int32ul,
    "header_length" / cs.Int8ul,
    "post_header_len" / cs.GreedyBytes,
)
# Offset of the FDE's own post-header length in its payload (type 15 -> table index 14): its value is
# where the table ends, i.e. the offset of the checksum-alg byte.
_FDE_SELF_LEN_AT = 57 + EventType.FORMAT_DESCRIPTION - 1

# -- ROTATE (4) ------------------------------------------------------------------------------------
Rotate = cs.Struct(
    "position" / cs.Int64ul,
    "next_file" / Text(cs.GreedyBytes),
)

# -- STOP (3) / CONSENSUS_EMPTY (104): empty --------------------------------------------------------
Empty = cs.Struct(cs.Terminated)

# -- QUERY (2) -------------------------------------------------------------------------------------
QUERY_FIELDS = (("thread_id", "I"), ("exec_time", "I"), ("db_len", "B"), ("error_code", "H"),
                ("status_vars_len", "H"))


def _status_vars_dict(value: StatusVars | bytes | None) -> dict:
    sv = _as_status_vars(value)
    return {"vars": [{"code": c, "value": v} for c, v in sv.code_items()], "undecoded": sv.undecoded}


class _StatusVarsAdapter(cs.Adapter):
    def _decode(self, obj: Any, context: Any, path: str) -> StatusVars:
        return StatusVars([(v.code, v.value) for v in obj.vars], obj.undecoded)

    def _encode(self, obj: StatusVars | bytes | None, context: Any, path: str) -> dict:
        return _status_vars_dict(obj)


Query = cs.Struct(
    *_int_fields(QUERY_FIELDS, {
        "db_len": lambda c: _utf8_len(c.db),
        "status_vars_len": lambda c: len(StatusVarsBlock.build(_status_vars_dict(c.status_vars))),
    }),
    "status_vars" / cs.FixedSized(cs.this.status_vars_len, _StatusVarsAdapter(StatusVarsBlock)),
    "db" / Text(cs.Bytes(cs.this.db_len)),
    cs.Const(b"\0"),
    "query" / _Bytes(cs.GreedyBytes),
)


def _fixed(fields: tuple[tuple[str, str], ...]) -> cs.Struct:
    return cs.Struct(*_int_fields(fields), cs.Terminated)


# -- XID (16), INTVAR (5), RAND (13), SEQUENCE (80), consensus (101, 102) -------------------------
XID_FIELDS = (("xid", "Q"),)
INTVAR_FIELDS = (("intvar_type", "B"), ("value", "Q"))
RAND_FIELDS = (("seed1", "Q"), ("seed2", "Q"))
SEQUENCE_FIELDS = (("sequence_type", "B"), ("number", "Q"))
CONSENSUS_LOG_FIELDS = (("flag", "I"), ("term", "Q"), ("index", "Q"), ("length", "Q"), ("reserve", "Q"))
PREVIOUS_CONSENSUS_INDEX_FIELDS = (("index", "Q"),)
Xid = _fixed(XID_FIELDS)
Intvar = _fixed(INTVAR_FIELDS)
Rand = _fixed(RAND_FIELDS)
Sequence = _fixed(SEQUENCE_FIELDS)
ConsensusLog = _fixed(CONSENSUS_LOG_FIELDS)
PreviousConsensusIndex = _fixed(PREVIOUS_CONSENSUS_INDEX_FIELDS)

# -- CONSENSUS_CLUSTER_INFO (103): info_length u32 + info --------------------------------------------
ConsensusClusterInfo = cs.Struct("info" / cs.Prefixed(cs.Int32ul, cs.GreedyBytes), cs.Terminated)

# -- USER_VAR (14) -----------------------------------------------------------------------------------
UserVar = cs.Struct(
    "name" / Text(cs.Prefixed(cs.Int32ul, cs.GreedyBytes)),
    "is_null" / cs.Int8ul,
    "value_type" / cs.If(cs.this.is_null == 0, cs.Int8ul),
    "charset" / cs.If(cs.this.is_null == 0, cs.Int32ul),
    "value" / cs.If(cs.this.is_null == 0, cs.Prefixed(cs.Int32ul, cs.GreedyBytes)),
    "flags" / cs.If(cs.this.is_null == 0, Trailing(cs.Int8ul)),
    cs.Terminated,
)

# -- ROWS_QUERY (29): one length byte (ignored by readers) + the text to the end ---------------------
ROWS_QUERY_FIELDS = (("length_byte", "B"),)
RowsQuery = cs.Struct(
    *_int_fields(ROWS_QUERY_FIELDS, {
        "length_byte": lambda c: (_utf8_len(c.query) & 0xFF) if c.length_byte is None else c.length_byte}),
    "query" / _Bytes(cs.GreedyBytes),
)

# -- HEARTBEAT (27): the master's current log file name ---------------------------------------------
Heartbeat = cs.Struct("log_file" / Text(cs.GreedyBytes))

# -- XA_PREPARE (38) ---------------------------------------------------------------------------------
XA_PREPARE_FIELDS = (("one_phase", "B"), ("format_id", "I"), ("gtrid_length", "I"),
                     ("bqual_length", "I"))
XaPrepare = cs.Struct(
    *_int_fields(XA_PREPARE_FIELDS, {"gtrid_length": lambda c: len(c.gtrid),
                                     "bqual_length": lambda c: len(c.bqual)}),
    "gtrid" / cs.Bytes(cs.this.gtrid_length),
    "bqual" / cs.Bytes(cs.this.bqual_length),
    cs.Terminated,
)

# -- GCN (105): flags, gcn (if flags & 0x01, or the old engine's fixed 9-byte form), branch counts ----
GCN_FIELDS = (("flags", "B"), ("gcn", "Q"), ("n_branch", "H"), ("n_local_branch", "H"))
_GCN_BRANCH_LEN = 4


def _gcn_present(c: Any) -> bool:
    if c._building:
        return c.gcn is not None
    # The old engine always wrote flags + gcn whatever the flags; the new one only with HAVE_GCN.
    branch = _GCN_BRANCH_LEN if c.flags & GcnFlag.HAVE_BRANCH_COUNT else 0
    return bool(c.flags & GcnFlag.HAVE_GCN) or _remaining(c._io) - branch == 8


_has_branch = cs.this.flags & GcnFlag.HAVE_BRANCH_COUNT
Gcn = cs.Struct(
    "flags" / cs.Int8ul,
    "gcn" / cs.If(_gcn_present, cs.Int64ul),
    "n_branch" / cs.If(_has_branch, cs.Int16ul),
    "n_local_branch" / cs.If(_has_branch, cs.Int16ul),
    cs.Terminated,
)

# -- GTID (33) / ANONYMOUS_GTID (34) (MySQL 8.0 control_events.cpp Gtid_event) -----------------------
LOGICAL_TIMESTAMP_TYPECODE = 2
_COMMIT_TS_FLAG = 1 << 55       # in the 7-byte immediate timestamp: original timestamp follows
_SERVER_VERSION_FLAG = 1 << 31  # in the 4-byte immediate server version: original version follows


def _immediate_ts(c: Any) -> int | None:
    if c.immediate_commit_timestamp is None:
        return None
    if c.immediate_commit_timestamp >= _COMMIT_TS_FLAG:
        raise cs.ConstructError("immediate_commit_timestamp needs more than 55 bits")
    return c.immediate_commit_timestamp | (_COMMIT_TS_FLAG if c.original_commit_timestamp is not None else 0)


def _immediate_version(c: Any) -> int | None:
    if c.immediate_server_version is None:
        return None
    if c.immediate_server_version >= _SERVER_VERSION_FLAG:
        raise cs.ConstructError("immediate_server_version needs more than 31 bits")
    flag = _SERVER_VERSION_FLAG if c.original_server_version is not None else 0
    return c.immediate_server_version | flag


def _logical(c: Any) -> bool:
    return c.lt_type == LOGICAL_TIMESTAMP_TYPECODE


Gtid = cs.Struct(
    "flags" / cs.Int8ul,
    "sid" / cs.Bytes(16),
    "gno" / cs.Int64sl,
    "lt_type" / Trailing(cs.Int8ul),
    "last_committed" / cs.If(_logical, cs.Int64sl),
    "sequence_number" / cs.If(_logical, cs.Int64sl),
    "_imm_ts" / cs.Rebuild(cs.If(_logical, Trailing(Int56ul)), _immediate_ts),
    "immediate_commit_timestamp" / cs.Computed(
        lambda c: None if c._imm_ts is None else c._imm_ts & ~_COMMIT_TS_FLAG),
    "original_commit_timestamp" / cs.If(
        lambda c: c._imm_ts is not None and c._imm_ts & _COMMIT_TS_FLAG, Int56ul),
    "transaction_length" / cs.If(lambda c: c._imm_ts is not None, Trailing(PackedInt, 1)),
    "_imm_version" / cs.Rebuild(
        cs.If(lambda c: c.transaction_length is not None, Trailing(cs.Int32ul)), _immediate_version),
    "immediate_server_version" / cs.Computed(
        lambda c: None if c._imm_version is None else c._imm_version & ~_SERVER_VERSION_FLAG),
    "original_server_version" / cs.If(
        lambda c: c._imm_version is not None and c._imm_version & _SERVER_VERSION_FLAG, cs.Int32ul),
    "commit_group_ticket" / cs.If(lambda c: c._imm_version is not None, Trailing(cs.Int64ul)),
    "extra" / cs.GreedyBytes,
)

# -- PREVIOUS_GTIDS (35): n_sids, then per sid: uuid, n_intervals, [start, end) intervals ------------
PreviousGtids = cs.Struct(
    "sids" / _AsList(cs.PrefixedArray(cs.Int64ul, _AsTuple(cs.Sequence(
        cs.Bytes(16),
        _AsList(cs.PrefixedArray(cs.Int64ul, _AsTuple(cs.Sequence(cs.Int64sl, cs.Int64sl)))),
    )))),
    cs.Terminated,
)


# -- the table -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Spec:
    decl: cs.Construct
    cls: type
    names: tuple[str, ...]
    fast_parse: Callable[[Any], Any] | None = None
    fast_build: Callable[[Any], bytes] | None = None


class _Bad(ValueError):
    pass


def _spec(decl: cs.Construct, cls: type, fast_parse: Callable[[Any], Any] | None = None,
          fast_build: Callable[[Any], bytes] | None = None) -> _Spec:
    return _Spec(decl, cls, tuple(f.name for f in dataclasses.fields(cls)), fast_parse, fast_build)


def _exact(st: struct.Struct, cls: type) -> tuple[Callable[[Any], Any], Callable[[Any], bytes]]:
    """Fast parse/build of a fixed-size body made of the struct's fields only."""
    size, unpack, pack = st.size, st.unpack, st.pack
    names = tuple(f.name for f in dataclasses.fields(cls))

    def parse(p: Any) -> Any:
        if len(p) != size:
            raise _Bad(f"{cls.__name__} body is {len(p)} bytes, expected {size}")
        return cls(*unpack(p))

    def build(body: Any) -> bytes:
        return pack(*(getattr(body, n) for n in names))
    return parse, build


_QUERY = _struct(QUERY_FIELDS)
_QUERY_SIZE = _QUERY.size
_new_status_vars = lazy_status_vars


def _parse_query(p: Any) -> QueryBody:
    thread_id, exec_time, db_len, error_code, sv_len = _QUERY.unpack_from(p)
    db_at = _QUERY_SIZE + sv_len
    nul_at = db_at + db_len
    if len(p) <= nul_at:
        raise _Bad(f"QUERY body of {len(p)} bytes ends before its db (status vars {sv_len}, db {db_len})")
    if p[nul_at]:
        raise _Bad("QUERY db is not NUL-terminated")
    return QueryBody(thread_id, exec_time, error_code, _new_status_vars(p[_QUERY_SIZE:db_at]),
                     str(p[db_at:nul_at], "utf-8", "surrogateescape"), bytes(p[nul_at + 1:]))


def _build_query(b: QueryBody) -> bytes:
    sv = b.status_vars.to_bytes()
    db = b.db.encode("utf-8", "surrogateescape")
    return _QUERY.pack(b.thread_id, b.exec_time, len(db), b.error_code, len(sv)) + sv + db + b"\0" + b.query


_RQ = _struct(ROWS_QUERY_FIELDS)


def _parse_rows_query(p: Any) -> RowsQueryBody:
    return RowsQueryBody(bytes(p[1:]), p[0])


def _build_rows_query(b: RowsQueryBody) -> bytes:
    return _RQ.pack(len(b.query) & 0xFF if b.length_byte is None else b.length_byte) + b.query


_XA = _struct(XA_PREPARE_FIELDS)
_XA_SIZE = _XA.size


def _parse_xa_prepare(p: Any) -> XaPrepareBody:
    one_phase, format_id, gtrid_len, bqual_len = _XA.unpack_from(p)
    end = _XA_SIZE + gtrid_len + bqual_len
    if len(p) != end:
        raise _Bad(f"XA_PREPARE body is {len(p)} bytes, its lengths say {end}")
    mid = _XA_SIZE + gtrid_len
    return XaPrepareBody(one_phase, format_id, bytes(p[_XA_SIZE:mid]), bytes(p[mid:end]))


def _build_xa_prepare(b: XaPrepareBody) -> bytes:
    return _XA.pack(b.one_phase, b.format_id, len(b.gtrid), len(b.bqual)) + b.gtrid + b.bqual


_GCN_FLAGS = _struct(GCN_FIELDS[:1])
_GCN_VALUE = _struct(GCN_FIELDS[1:2])
_GCN_BRANCH = _struct(GCN_FIELDS[2:])
_HAVE_GCN = GcnFlag.HAVE_GCN
_HAVE_BRANCH = GcnFlag.HAVE_BRANCH_COUNT


def _parse_gcn(p: Any) -> GcnBody:
    n = len(p)
    flags = p[0]
    branch = _GCN_BRANCH.size if flags & _HAVE_BRANCH else 0
    has_gcn = flags & _HAVE_GCN or n - 1 - branch == 8
    need = 1 + (8 if has_gcn else 0) + branch
    if n != need:
        raise _Bad(f"GCN body with flags {flags:#x} is {n} bytes, expected {need}")
    gcn = _GCN_VALUE.unpack_from(p, 1)[0] if has_gcn else None
    if branch:
        n_branch, n_local = _GCN_BRANCH.unpack_from(p, need - branch)
        return GcnBody(flags, gcn, n_branch, n_local)
    return GcnBody(flags, gcn)


def _build_gcn(b: GcnBody) -> bytes:
    out = _GCN_FLAGS.pack(b.flags)
    if b.gcn is not None:
        out += _GCN_VALUE.pack(b.gcn)
    if b.flags & _HAVE_BRANCH:
        out += _GCN_BRANCH.pack(b.n_branch, b.n_local_branch)
    return out


_parse_xid, _build_xid = _exact(_struct(XID_FIELDS), XidBody)
_parse_sequence, _build_sequence = _exact(_struct(SEQUENCE_FIELDS), SequenceBody)

_SPECS: dict[int, _Spec] = {
    EventType.ROTATE: _spec(Rotate, RotateBody),
    EventType.STOP: _spec(Empty, StopBody),
    EventType.QUERY: _spec(Query, QueryBody, _parse_query, _build_query),
    EventType.XID: _spec(Xid, XidBody, _parse_xid, _build_xid),
    EventType.INTVAR: _spec(Intvar, IntvarBody),
    EventType.RAND: _spec(Rand, RandBody),
    EventType.USER_VAR: _spec(UserVar, UserVarBody),
    EventType.ROWS_QUERY: _spec(RowsQuery, RowsQueryBody, _parse_rows_query, _build_rows_query),
    EventType.HEARTBEAT: _spec(Heartbeat, HeartbeatBody),
    EventType.GTID: _spec(Gtid, GtidBody),
    EventType.ANONYMOUS_GTID: _spec(Gtid, GtidBody),
    EventType.PREVIOUS_GTIDS: _spec(PreviousGtids, PreviousGtidsBody),
    EventType.XA_PREPARE: _spec(XaPrepare, XaPrepareBody, _parse_xa_prepare, _build_xa_prepare),
    EventType.SEQUENCE: _spec(Sequence, SequenceBody, _parse_sequence, _build_sequence),
    EventType.CONSENSUS_LOG: _spec(ConsensusLog, ConsensusLogBody),
    EventType.PREVIOUS_CONSENSUS_INDEX: _spec(PreviousConsensusIndex, PreviousConsensusIndexBody),
    EventType.CONSENSUS_CLUSTER_INFO: _spec(ConsensusClusterInfo, ConsensusClusterInfoBody),
    EventType.CONSENSUS_EMPTY: _spec(Empty, ConsensusEmptyBody),
    EventType.GCN: _spec(Gcn, GcnBody, _parse_gcn, _build_gcn),
}
_FDE_SPEC = _spec(FormatDescription, FormatDescriptionBody)
_FAST_PARSE = {int(t): spec.fast_parse for t, spec in _SPECS.items() if spec.fast_parse is not None}

# The construct declaration of every decoded type (TABLE_MAP and rows events live in rows_events).
BODIES: dict[int, cs.Construct] = {
    EventType.FORMAT_DESCRIPTION: FormatDescription,
    **{t: spec.decl for t, spec in _SPECS.items()},
}
BODY_CLASSES: dict[int, type] = {
    EventType.FORMAT_DESCRIPTION: FormatDescriptionBody,
    **{t: spec.cls for t, spec in _SPECS.items()},
}

_TABLE_MAP = EventType.TABLE_MAP
_FDE = EventType.FORMAT_DESCRIPTION
_DECODE_ERRORS = (cs.ConstructError, IndexError, ValueError, struct.error, UnicodeError, KeyError)


def _type_name(type_code: int) -> str:
    try:
        return EventType(type_code).name
    except ValueError:
        return f"type {type_code}"


def _split_fde(payload: Any) -> tuple[Any, int]:
    """(payload without checksum alg, alg). Accepts the payload with or without the CRC field."""
    n = len(payload)
    if n > _FDE_SELF_LEN_AT and n == payload[_FDE_SELF_LEN_AT] + 1 + 4:
        return payload[:n - 5], payload[n - 5]
    return payload[:-1], payload[-1]


def _from_container(spec: _Spec, parsed: Any) -> Any:
    return spec.cls(*(parsed[name] for name in spec.names))


def _rows_module() -> Any:
    try:
        import binlog.rows_events as rows_events
    except ModuleNotFoundError as exc:
        if exc.name != "binlog.rows_events":
            raise
        return None
    return rows_events


class _RowsDecoders(dict):
    """type code -> decoder(payload, ctx) for TABLE_MAP and rows events, filled on first lookup so
    the hot path is one dict probe instead of an import per event."""

    loaded = False

    def get(self, key: int, default: Any = None) -> Any:
        if not self.loaded:
            self.loaded = True
            rows_events = _rows_module()
            if rows_events is not None:
                self[int(_TABLE_MAP)] = rows_events.decode_table_map
                for code in ROWS_TYPES:
                    self[int(code)] = partial(rows_events.decode_rows_event, int(code))
        return dict.get(self, key, default)


_ROWS_DECODERS = _RowsDecoders()


def decode_body(type_code: int, payload: bytes, ctx: Any = None, *, offset: int = 0) -> Any:
    """Decode one event payload into its body dataclass (``RawBody`` for types not declared).

    Raises ``MalformedEvent`` naming ``ctx.source`` and ``offset`` (the event's position)."""
    try:
        fast = _FAST_PARSE.get(type_code)
        if fast is not None:
            return fast(payload)
        with_ctx = _ROWS_DECODERS.get(type_code)
        if with_ctx is not None:
            return with_ctx(payload, ctx)
        spec = _SPECS.get(type_code)
        if spec is not None:
            return _from_container(spec, spec.decl.parse(bytes(payload)))
        if type_code == _FDE:
            return _decode_fde(payload)
        if type_code == _TABLE_MAP or type_code in ROWS_TYPES:
            rows_events = _rows_module()
            if rows_events is None:
                return RawBody(type_code, bytes(payload))
            if type_code == _TABLE_MAP:
                return rows_events.decode_table_map(payload, ctx)
            return rows_events.decode_rows_event(type_code, payload, ctx)
        return RawBody(type_code, bytes(payload))
    except BinlogError as exc:
        raise MalformedEvent(exc.message, source=getattr(ctx, "source", "<bytes>"),
                             offset=offset) from exc
    except _DECODE_ERRORS as exc:
        raise MalformedEvent(f"cannot decode {_type_name(type_code)} body of {len(payload)} bytes: "
                             f"{exc}", source=getattr(ctx, "source", "<bytes>"), offset=offset) from exc


def _decode_fde(payload: Any) -> FormatDescriptionBody:
    body, alg = _split_fde(payload)
    parsed = FormatDescription.parse(bytes(body))
    parsed.checksum_alg = alg
    return _from_container(_FDE_SPEC, parsed)


def decode_body_construct(type_code: int, payload: bytes, ctx: Any = None, *, offset: int = 0) -> Any:
    """``decode_body`` through the construct declarations only (the reference for the fast paths)."""
    spec = _SPECS.get(type_code)
    if spec is None or spec.fast_parse is None:
        return decode_body(type_code, payload, ctx, offset=offset)
    try:
        return _from_container(spec, spec.decl.parse(bytes(payload)))
    except _DECODE_ERRORS as exc:
        raise MalformedEvent(f"cannot decode {_type_name(type_code)} body of {len(payload)} bytes: "
                             f"{exc}", source=getattr(ctx, "source", "<bytes>"), offset=offset) from exc


def _as_status_vars(value: StatusVars | bytes | bytearray | memoryview | None) -> StatusVars:
    if value is None:
        return StatusVars()
    if isinstance(value, StatusVars):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return StatusVars.from_bytes(value)
    raise TypeError(f"status_vars must be StatusVars, bytes or None, not {type(value).__name__}")


def _normalize(type_code: int, fields: dict[str, Any]) -> dict[str, Any]:
    if type_code == EventType.QUERY:
        fields["status_vars"] = _as_status_vars(fields.get("status_vars"))
        if isinstance(fields.get("db"), (bytes, bytearray)):
            fields["db"] = bytes(fields["db"]).decode("utf-8", "surrogateescape")
    if type_code in (EventType.QUERY, EventType.ROWS_QUERY) and isinstance(fields.get("query"), str):
        fields["query"] = fields["query"].encode("utf-8", "surrogateescape")
    if type_code in (EventType.GTID, EventType.ANONYMOUS_GTID):
        if fields.get("lt_type") is None and fields.get("last_committed") is not None:
            fields["lt_type"] = LOGICAL_TIMESTAMP_TYPECODE
    if type_code == EventType.GCN:
        flags = fields.get("flags", 0)
        if flags & GcnFlag.HAVE_GCN and fields.get("gcn") is None:
            raise ValueError("GCN flags have HAVE_GCN (0x01) but gcn is None")
        if flags & GcnFlag.HAVE_BRANCH_COUNT and (fields.get("n_branch") is None
                                                  or fields.get("n_local_branch") is None):
            raise ValueError("GCN flags have HAVE_BRANCH_COUNT (0x20) but a branch count is None")
    return fields


def _make(cls: type, type_code: int, fields: dict[str, Any]) -> Any:
    try:
        return cls(**fields)
    except TypeError as exc:
        names = ", ".join(f.name for f in dataclasses.fields(cls))
        raise TypeError(f"{_type_name(type_code)} fields are: {names} ({exc})") from None


def encode_body(type_code: int, **fields: Any) -> bytes:
    """Build a payload from named fields (the body dataclass's field names, see the module doc).

    For undeclared types pass ``data=`` (the raw payload, as in ``RawBody``). Bad values raise
    ``ValueError``, unknown or missing field names ``TypeError``."""
    if type_code == _FDE:
        body = _make(FormatDescriptionBody, type_code, fields)
        try:
            return FormatDescription.build(
                {n: getattr(body, n) for n in _FDE_SPEC.names}) + bytes([body.checksum_alg])
        except (cs.ConstructError, ValueError, TypeError, OverflowError) as exc:
            raise ValueError(f"cannot build FORMAT_DESCRIPTION: {exc}") from exc
    spec = _SPECS.get(type_code)
    if spec is None:
        if type_code == _TABLE_MAP or type_code in ROWS_TYPES:
            rows_events = _rows_module()
            if rows_events is None:
                raise ValueError("binlog.rows_events is not available")
            if type_code == _TABLE_MAP:
                return rows_events.encode_table_map(**fields)
            return rows_events.encode_rows_event(type_code, **fields)
        if set(fields) == {"data"}:
            return bytes(fields["data"])
        raise ValueError(f"no declaration for event type {type_code}; pass data= with the raw payload")
    body = _make(spec.cls, type_code, _normalize(type_code, dict(fields)))
    return _build(type_code, spec, body)


def _build(type_code: int, spec: _Spec, body: Any) -> bytes:
    try:
        if spec.fast_build is not None:
            return spec.fast_build(body)
        return spec.decl.build({n: getattr(body, n) for n in spec.names})
    except (cs.ConstructError, struct.error, ValueError, TypeError, OverflowError, AttributeError) as exc:
        raise ValueError(f"cannot build {_type_name(type_code)}: {exc}") from exc


def encode_body_construct(type_code: int, **fields: Any) -> bytes:
    """``encode_body`` through the construct declarations only (the reference for the fast paths)."""
    spec = _SPECS[type_code]
    body = _make(spec.cls, type_code, _normalize(type_code, dict(fields)))
    try:
        return spec.decl.build({n: getattr(body, n) for n in spec.names})
    except (cs.ConstructError, ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"cannot build {_type_name(type_code)}: {exc}") from exc


def body_fields(body: Any) -> dict[str, Any]:
    """The fields of a decoded body as ``encode_body`` takes them (shallow)."""
    if isinstance(body, RawBody):
        return {"data": body.data}
    return {f.name: getattr(body, f.name) for f in dataclasses.fields(body)}


def rebuild_body(type_code: int, body: Any) -> bytes:
    """The payload of a decoded body (for an untouched body: the bytes it was decoded from)."""
    return encode_body(type_code, **body_fields(body))


__all__ = [
    "BODIES", "BODY_CLASSES", "RawBody", "decode_body", "encode_body", "decode_body_construct",
    "encode_body_construct", "body_fields", "rebuild_body", "StatusVars",
    "FormatDescriptionBody", "RotateBody", "StopBody", "QueryBody", "XidBody", "IntvarBody",
    "RandBody", "UserVarBody", "RowsQueryBody", "HeartbeatBody", "GtidBody", "PreviousGtidsBody",
    "XaPrepareBody", "SequenceBody", "ConsensusLogBody", "PreviousConsensusIndexBody",
    "ConsensusClusterInfoBody", "ConsensusEmptyBody", "GcnBody",
]
