"""Deterministic MySQL GTIDs for the global binlog.

Every written transaction (DML, DDL, a written heartbeat) is preceded by a GTID event (type 33,
MySQL 5.7 layout: flags, sid, gno, logical timestamps) and every file starts, after its FDE, with a
PREVIOUS_GTIDS event holding everything before it. Nothing here reads a clock or a counter of the
process: ``gno`` is the transaction's 1-based ordinal among the written transactions of the global
binlog, the sid is ``gtid_uuid(identity)`` — a UUIDv5 of the cluster identity (the TSO + txnId of the
first written transaction, the same for every build of the same DN binlogs) unless configured — and
the logical clock restarts in every file as MySQL's does (``sequence_number`` = ordinal in the file,
``last_committed`` = the one before: transactions are applied in order, which is what the global
order means). So the local engine, a resumed run and the Spark engine write the same bytes, and a GTID
names the same transaction everywhere.

Also here: GTID sets (text ``uuid:1-5:7``, the binary form of COM_BINLOG_DUMP_GTID), reading the GTID
position of files (``file_gtids``), and finding the first transaction a client lacks by binary search
over the files' PREVIOUS_GTIDS (``locate_gno``).
"""

from __future__ import annotations

import os
import re
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from binlog.constants import HEADER_LEN, EventType
from binlog.header import HEADER_STRUCT
from binlog.writer import put_event

GTID = int(EventType.GTID)
PREVIOUS_GTIDS = int(EventType.PREVIOUS_GTIDS)
NAMESPACE = uuid.UUID("6a1c9f7e-2b0e-5d51-9c1e-67b1f0a5e015")   # gbinlog's UUIDv5 namespace
LOGICAL_TIMESTAMP = 2
FLAG_MAY_HAVE_SBR = 1           # a DDL (statement); row transactions are "rbr_only"
_GTID_BODY = struct.Struct("<B16sqBqq")
GTID_EVENT_LEN = HEADER_LEN + _GTID_BODY.size + 4          # 65 bytes, every GTID event
_PREV_EMPTY = struct.pack("<Q", 0)


def cluster_identity(first_vtso: str) -> str:
    """The cluster identity GTIDs are named by: TSO + txnId of the first written transaction."""
    return first_vtso[:38]


def gtid_uuid(identity: str) -> str:
    """The server uuid of a cluster's GTIDs: UUIDv5 of its identity."""
    return str(uuid.uuid5(NAMESPACE, f"gbinlog-cluster:{identity}"))


def sid_of(text: str) -> bytes:
    return uuid.UUID(text).bytes


def uuid_of(sid: bytes) -> str:
    return str(uuid.UUID(bytes=bytes(sid)))


def gtid_payload(sid: bytes, gno: int, sequence_number: int, *, ddl: bool) -> bytes:
    """A GTID event body: ``last_committed`` = ``sequence_number - 1`` (in order)."""
    return _GTID_BODY.pack(FLAG_MAY_HAVE_SBR if ddl else 0, sid, gno, LOGICAL_TIMESTAMP, sequence_number - 1,
                           sequence_number)


def previous_gtids_payload(sid: bytes | None, gno_before: int) -> bytes:
    """PREVIOUS_GTIDS: ``sid:1-gno_before``, or the empty set."""
    if not gno_before or sid is None:
        return _PREV_EMPTY
    return struct.pack("<Q16sQqq", 1, sid, 1, 1, gno_before + 1)


def put_gtid(out: bytearray, pos: int, ts: int, server_id: int, sid: bytes, gno: int, sequence_number: int,
             ddl: bool) -> int:
    return put_event(out, pos, ts, GTID, server_id, gtid_payload(sid, gno, sequence_number, ddl=ddl), 0)


def previous_gtids_len(gno_before: int) -> int:
    """Bytes of the PREVIOUS_GTIDS event of a file with ``gno_before`` transactions before it."""
    return HEADER_LEN + (8 if not gno_before else 48) + 4


def previous_gtids_event(pos: int, ts: int, server_id: int, sid: bytes | None, gno_before: int) -> bytes:
    out = bytearray()
    put_event(out, pos, ts, PREVIOUS_GTIDS, server_id, previous_gtids_payload(sid, gno_before), 0)
    return bytes(out)


# -- GTID sets ---------------------------------------------------------------------------------------------
GtidSet = dict[str, list[tuple[int, int]]]      # uuid (lower case) → sorted inclusive intervals


class GtidError(ValueError):
    pass


_UUID_RE = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)


def parse_gtid_set(text: str) -> GtidSet:
    """``uuid:1-5:7,uuid2:3`` (MySQL's text form; whitespace and newlines allowed)."""
    out: GtidSet = {}
    for part in re.sub(r"\s+", "", text or "").split(","):
        if not part:
            continue
        name, *ranges = part.split(":")
        if not _UUID_RE.match(name) or not ranges:
            raise GtidError(f"malformed GTID set specification '{text}'")
        key = str(uuid.UUID(name))
        for r in ranges:
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise GtidError(f"malformed GTID set specification '{text}'")
            start, end = int(lo), int(hi or lo)
            if start < 1 or end < start:
                raise GtidError(f"malformed GTID set specification '{text}'")
            out.setdefault(key, []).append((start, end))
    return {k: normalise(v) for k, v in out.items()}


def normalise(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def format_gtid_set(gset: GtidSet) -> str:
    parts = []
    for key in sorted(gset):
        ranges = ":".join(f"{a}" if a == b else f"{a}-{b}" for a, b in gset[key])
        if ranges:
            parts.append(f"{key}:{ranges}")
    return ",".join(parts)


def subtract(a: GtidSet, b: GtidSet) -> GtidSet:
    out: GtidSet = {}
    for key, intervals in a.items():
        remove = b.get(key, [])
        left = []
        for start, end in intervals:
            pieces = [(start, end)]
            for rs, re_ in remove:
                pieces = [p for s, e in pieces for p in ((s, min(e, rs - 1)), (max(s, re_ + 1), e)) if p[0] <= p[1]]
            left += pieces
        if left:
            out[key] = normalise(left)
    return out


def is_subset(a: GtidSet, b: GtidSet) -> bool:
    return not subtract(a, b)


def decode_sid_block(data: bytes) -> GtidSet:
    """The binary GTID set of COM_BINLOG_DUMP_GTID: n_sids, then per sid: uuid, n_intervals,
    ``[start, end)`` pairs."""
    try:
        (n_sids,) = struct.unpack_from("<Q", data, 0)
        off = 8
        out: GtidSet = {}
        if n_sids > len(data) // 24:
            raise GtidError("the GTID set names more sids than it holds")
        for _ in range(n_sids):
            sid = data[off:off + 16]
            (n,) = struct.unpack_from("<Q", data, off + 16)
            off += 24
            if n > (len(data) - off) // 16:
                raise GtidError("the GTID set names more intervals than it holds")
            intervals = []
            for _ in range(n):
                start, end = struct.unpack_from("<qq", data, off)
                off += 16
                if start < 1 or end <= start:
                    raise GtidError(f"bad GTID interval [{start}, {end})")
                intervals.append((start, end - 1))
            key = uuid_of(sid)
            out[key] = normalise(out.get(key, []) + intervals)
        return out
    except struct.error:
        raise GtidError("the GTID set ends early") from None


# -- GTIDs of files ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FileGtids:
    """A file's PREVIOUS_GTIDS (sid, gno before it) and its own GTID events (count, last gno)."""

    sid: bytes | None
    gno_before: int
    count: int
    last_gno: int
    has_previous: bool

    @property
    def gno_after(self) -> int:
        return self.last_gno if self.count else self.gno_before


def _events(fh, start: int, end: int):
    """(pos, type, size) of the events in ``[start, end)`` (header walk, no CRC check)."""
    pos = start
    while pos + HEADER_LEN <= end:
        fh.seek(pos)
        head = fh.read(HEADER_LEN)
        if len(head) < HEADER_LEN:
            return
        _ts, type_code, _sid, size, _lp, _fl = HEADER_STRUCT.unpack(head)
        if size < HEADER_LEN or pos + size > end:
            return
        yield pos, type_code, size
        pos += size


def previous_gtids_end(path: Path, fde_end: int) -> int:
    """The end of a whole PREVIOUS_GTIDS event at ``fde_end``, else ``fde_end``."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        for pos, type_code, ev_size in _events(fh, fde_end, size):
            return pos + ev_size if type_code == PREVIOUS_GTIDS else fde_end
    return fde_end


def previous_gtids_of(path: Path) -> tuple[bytes | None, int, bool]:
    """(sid, gno before the file, has a PREVIOUS_GTIDS) from the event after the FDE."""
    with open(path, "rb") as fh:
        fh.seek(4)
        head = fh.read(HEADER_LEN)
        if len(head) < HEADER_LEN:
            return None, 0, False
        fde_size = HEADER_STRUCT.unpack(head)[3]
        fh.seek(4 + fde_size)
        head = fh.read(HEADER_LEN)
        if len(head) < HEADER_LEN or head[4] != PREVIOUS_GTIDS:
            return None, 0, False
        size = HEADER_STRUCT.unpack(head)[3]
        body = fh.read(size - HEADER_LEN - 4)
    (n_sids,) = struct.unpack_from("<Q", body, 0)
    if n_sids == 0:
        return None, 0, True
    sid = body[8:24]
    (n,) = struct.unpack_from("<Q", body, 24)
    end = struct.unpack_from("<q", body, 24 + 8 + 16 * (n - 1) + 8)[0] if n else 1
    return sid, end - 1, True


def file_gtids(path: Path, end: int | None = None) -> FileGtids:
    """The GTID facts of one file (up to ``end``)."""
    sid, before, has_prev = previous_gtids_of(path)
    count = last = 0
    size = os.path.getsize(path) if end is None else end
    with open(path, "rb") as fh:
        for pos, type_code, _size in _events(fh, 4, size):
            if type_code == GTID:
                fh.seek(pos + HEADER_LEN + 1)
                body = fh.read(24)
                sid = body[:16]
                last = struct.unpack_from("<q", body, 16)[0]
                count += 1
    return FileGtids(sid, before, count, last, has_prev)


def tail_gtids(path: Path, size: int, tail: int = 1 << 20) -> tuple[bytes, int, int] | None:
    """(sid, gno, end of its transaction's CTS marker) of the last whole transaction whose GTID event
    lies in the last ``tail`` bytes — found without walking the file: a GTID event is recognised by
    its header (type 33, 65 bytes, log_pos = its own end), the CTS marker likewise. None when the
    tail holds no whole transaction (a huge one, or none)."""
    start = max(0, size - tail)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(size - start)
    best = None
    for m in re.finditer(rb"\x01CTS::\d{54}", data):
        at = m.start() - HEADER_LEN
        if at < 0:
            continue
        _ts, type_code, _sid, ev_size, log_pos, _fl = HEADER_STRUCT.unpack_from(data, at)
        if type_code == 29 and log_pos == start + at + ev_size and at + ev_size <= len(data):
            best = start + at + ev_size
    if best is None:
        return None
    found = None
    for m in re.finditer(rb"\x21", data[:best - start]):
        at = m.start() - 4
        if at < 0 or at + GTID_EVENT_LEN > best - start:
            continue
        _ts, type_code, _sid, ev_size, log_pos, _fl = HEADER_STRUCT.unpack_from(data, at)
        if type_code == GTID and ev_size == GTID_EVENT_LEN and log_pos == start + at + ev_size:
            found = (bytes(data[at + HEADER_LEN + 1:at + HEADER_LEN + 17]),
                     struct.unpack_from("<q", data, at + HEADER_LEN + 17)[0])
    return (found[0], found[1], best) if found else None


def gtid_position_in(path: Path, gno: int) -> int | None:
    """Offset of the GTID event of ``gno`` in the file, or None."""
    with open(path, "rb") as fh:
        for pos, type_code, _size in _events(fh, 4, os.path.getsize(path)):
            if type_code == GTID:
                fh.seek(pos + HEADER_LEN + 17)
                if struct.unpack("<q", fh.read(8))[0] == gno:
                    return pos
    return None


def locate_gno(directory: Path, files: list[str], gno: int) -> tuple[str, int] | None:
    """(file, offset of its GTID event) of transaction ``gno``: a binary search over the files'
    PREVIOUS_GTIDS (one small read per probe), then a scan of the one file that holds it. None when no
    file holds it (purged, or not written yet)."""
    lo, hi = 0, len(files) - 1
    if not files:
        return None
    while lo < hi:              # the last file whose gno_before < gno
        mid = (lo + hi + 1) // 2
        if previous_gtids_of(directory / files[mid])[1] < gno:
            lo = mid
        else:
            hi = mid - 1
    if previous_gtids_of(directory / files[lo])[1] >= gno:
        return None
    pos = gtid_position_in(directory / files[lo], gno)
    return (files[lo], pos) if pos is not None else None


# -- the Spark layout: GTIDs put into range bytes rendered without them ----------------------------------
_BEGIN_PAYLOAD = struct.pack("<IIBHH", 0, 0, 0, 0, 0) + b"\0BEGIN"   # dumper.global_binlog.BEGIN_PAYLOAD
_CTS_MARK = b"\x01CTS::"
_ROWS_QUERY = int(EventType.ROWS_QUERY)
_QUERY = int(EventType.QUERY)


def insert_gtids(buf: bytes | bytearray, start: int, first_gno: int, first_seq: int, sid: bytes) -> bytearray:
    """Whole transactions rendered without GTIDs (each ends with its CTS marker) → the same events
    at file offset ``start`` with a GTID event before each transaction, exactly as ``GlobalBinlog``
    writes them: header timestamp and server id of the transaction's first event, flags by kind."""
    out = bytearray()
    view = memoryview(buf)
    try:
        off, n = 0, len(buf)
        pos = start
        gno, seq = first_gno, first_seq
        idle = True
        while off < n:
            ts, type_code, server_id, size, _lp, flags = HEADER_STRUCT.unpack_from(view, off)
            if size < HEADER_LEN + 4 or off + size > n:
                raise ValueError(f"event of {size} bytes at {off} runs past the segment ({n} bytes)")
            payload = bytes(view[off + HEADER_LEN:off + size - 4])
            if idle:
                ddl = type_code == _QUERY and payload != _BEGIN_PAYLOAD
                pos = put_gtid(out, pos, ts, server_id, sid, gno, seq, ddl)
                gno += 1
                seq += 1
                idle = False
            pos = put_event(out, pos, ts, type_code, server_id, payload, flags)
            if type_code == _ROWS_QUERY and payload.startswith(_CTS_MARK):
                idle = True
            off += size
    finally:
        view.release()   # also on an error: a caller's mapped file can then be closed
    return out

