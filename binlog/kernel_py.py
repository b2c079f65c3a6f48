"""The hot path's byte loops in pure Python: the reference the compiled ``binlog._kernel`` matches
byte for byte (``binlog.kernel`` picks one; ``GBINLOG_PURE_PYTHON=1`` forces this one).

``scan`` walks the events of a buffer, checks sizes and CRC32s, and hands back only the events a
caller asked for (``kinds``: a 256-byte table, type code → kind, 0 = skip), each as ``(kind,
Event, q)``: a GCN (kind ``K_GCN``) only when it carries a commit sequence (flags & 0x04; one with
no body too, for the caller to report), a QUERY
(kind ``K_QUERY``) refined to its statement class by the statement's first bytes (``Q_*``; ``XA
END`` dropped; ``q`` is where the statement starts). It stops before an FDE (the caller reads it
and goes on with the new format), at a bad event (the caller raises the typed error), after
``max_records`` records, or at the first event that is not whole.

``frame`` appends whole events — header with a new ``log_pos``, payload, CRC32 — for a list of
``(type_code, payload[, flags])`` (flags 0 when left out), all with one timestamp and server id: a
transaction in one call.
"""

from __future__ import annotations

import struct
from operator import eq
from typing import NamedTuple
from zlib import adler32, crc32

from binlog.writer import put_event

HEADER_LEN = 19
CRC_RESIDUE = 0x2144DF1C
MAX_EVENT_SIZE = 1 << 30
FDE = 15
K_ROWS, K_QUERY, K_GCN, K_TABLE_MAP, K_ROWS_QUERY, K_XA_PREPARE = 1, 2, 3, 4, 5, 6
K_BRANCH, K_TSO_COMMIT, K_TXN, K_LOCAL = 40, 41, 42, 43  # the groups only the compiled scan_txns makes
Q_OTHER, Q_XA_START, Q_XA_COMMIT, Q_XA_ROLLBACK, Q_BEGIN, Q_COMMIT = 2, 20, 21, 22, 23, 24
ST_MORE, ST_FDE, ST_BAD_SIZE, ST_BAD_CRC = 0, 1, 2, 3

_header = struct.Struct("<IBIIIH")
_unpack_header = _header.unpack_from
_db_status = struct.Struct("<B2xH").unpack_from


def classify_query(raw: bytes, query_phl: int) -> tuple[int, int]:
    """(statement class, where the statement starts) of a QUERY event; class 0 = ``XA END``."""
    if len(raw) < HEADER_LEN + 13:
        return Q_OTHER, 0
    db_len, status_len = _db_status(raw, HEADER_LEN + 8)
    q = HEADER_LEN + query_phl + status_len + db_len + 1
    if q >= len(raw):
        return Q_OTHER, q
    c = raw[q]
    if c == 88:  # 'X'
        if raw.startswith(b"XA START", q):
            return Q_XA_START, q
        if raw.startswith(b"XA END", q):
            return 0, q
        if raw.startswith(b"XA COMMIT", q):
            return Q_XA_COMMIT, q
        if raw.startswith(b"XA ROLLBACK", q):
            return Q_XA_ROLLBACK, q
    elif c == 66 and raw.startswith(b"BEGIN", q):
        return Q_BEGIN, q
    elif c == 67 and raw.startswith(b"COMMIT", q):
        return Q_COMMIT, q
    return Q_OTHER, q


def scan(data, off: int, checksum: bool, kinds: bytes, query_phl: int, make_event, ctx,
         max_records: int) -> tuple[list, int, int, int]:
    """``(records, offset reached, ST_*, events walked)``; see the module doc."""
    n = len(data)
    out: list = []
    append = out.append
    walked = 0
    while off + HEADER_LEN <= n and len(out) < max_records:
        h = _unpack_header(data, off)
        size = h[3]
        if size < HEADER_LEN or size > MAX_EVENT_SIZE:
            return out, off, ST_BAD_SIZE, walked
        end = off + size
        if end > n:
            break
        t = h[1]
        if t == FDE:
            return out, off, ST_FDE, walked
        raw = data[off:end]
        if checksum and crc32(raw) != CRC_RESIDUE:
            return out, off, ST_BAD_CRC, walked
        k = kinds[t]
        if not k:
            off = end
            walked += 1
            continue
        q = 0
        if k == K_GCN:
            if size > HEADER_LEN and not raw[HEADER_LEN] & 0x04:
                off = end
                walked += 1
                continue
        elif k == K_QUERY:
            k, q = classify_query(raw, query_phl)
            if not k:
                off = end
                walked += 1
                continue
        append((k, make_event(off, h, bytes(raw), ctx), q))
        walked += 1
        off = end
    return out, off, ST_MORE, walked


def scan_txns(data, off: int, checksum: bool, kinds: bytes, query_phl: int, make_event, ctx,
              max_records: int, table_id_len: int, maker, file_offset: int = 0) -> tuple[list, int, int, int]:
    """``scan``. The compiled ``scan_txns`` also hands the common XA shapes over whole (``K_BRANCH``,
    ``K_TSO_COMMIT``, ``K_TXN``, ``K_LOCAL`` records, see ``binlog/_kernel.pyx``); here every event comes alone and the
    assembler's general path handles it, with the same result. ``file_offset``: the file offset of
    ``data``'s first byte (the events' positions are ``file_offset`` + their offset in ``data``)."""
    out = scan(data, off, checksum, kinds, query_phl, make_event, ctx, max_records)
    if file_offset:
        for rec in out[0]:
            rec[1].pos += file_offset
    return out


def find(data, needle: bytes, start: int = 0, end: int | None = None) -> int:
    """``data.find(needle, start, end)`` (``start``, ``end`` >= 0; the compiled one is ``memmem``)."""
    if start < 0 or (end is not None and end < 0):
        raise ValueError("find takes offsets >= 0")
    return data.find(needle, start, len(data) if end is None else end)


def frame(out: bytearray, pos: int, timestamp: int, server_id: int, items: list) -> int:
    """Append the events ``items`` (``(type_code, payload[, flags])``) starting at file offset ``pos``;
    returns the end offset (``binlog.writer.put_event`` per item)."""
    for item in items:
        pos = put_event(out, pos, timestamp, item[0], server_id, item[1], item[2] if len(item) > 2 else 0)
    return pos


# -- a whole DML transaction (dumper.global_binlog) ----------------------------------------------------
ROWS_QUERY, TABLE_MAP, IGNORABLE = 29, 19, 0x80
_V2_ROWS = (30, 31, 32)


def passed_rows(events: list, id_bytes: bytes, crc: int) -> list[tuple[int, bytes]]:
    """The rows events ``events[1:]`` (after their TABLE_MAP) as ``(type_code, payload)`` with the
    first 6 body bytes (the table id) replaced by ``id_bytes``; ``crc``: 4 when the events end with a
    CRC32 (dropped), else 0."""
    out = []
    for i in range(1, len(events)):
        raw = events[i].raw
        if len(raw) < HEADER_LEN + 6 + crc:
            raise ValueError(f"rows event of {len(raw)} bytes has no table id")
        out.append((raw[4], id_bytes + raw[HEADER_LEN + 6:len(raw) - crc]))
    return out


def rows_pass(events: list, src_id: bytes) -> bool:
    """Whether every rows event ``events[1:]`` passes with only its table id replaced: a v2 rows
    event (types 30–32) with the 6-byte table id ``src_id`` and no extra data (extra-data length 2)."""
    if len(src_id) != 6:
        return False
    for i in range(1, len(events)):
        raw = events[i].raw
        if raw[4] not in _V2_ROWS or not raw.startswith(src_id, HEADER_LEN) or raw[27:29] != b"\x02\x00":
            return False
    return True


class _TupleBlock(NamedTuple):
    db: str
    table: str
    table_map: bytes
    hint: str | None
    events: list
    id_bytes: bytes
    crc: int


def frame_dml(out: bytearray, pos: int, timestamp: int, server_id: int, head: list, blocks: list,
              cts_line: bytes, tail: list) -> int:
    """Append a DML transaction: the events ``head`` (as ``frame``'s items), per block a ROWS_QUERY
    (flags IGNORABLE) with its hint — the first block's with ``cts_line`` after it, or ``cts_line``
    without its first byte when the first block has no hint; a later block's only when it has a
    hint —, its TABLE_MAP and its rows events (``blk.rows``, or when ``blk.events`` is not None the
    source events passed through, ``passed_rows(blk.events, blk.id_bytes, blk.crc)``), then ``tail``.
    A block that is a tuple is ``(db, table, table_map, hint, events, id_bytes, crc)``.
    Returns the number of events appended."""
    items = list(head)
    first = True
    for blk in blocks:
        if isinstance(blk, tuple):
            blk = _TupleBlock(*blk)
        hint = blk.hint
        if first:
            first = False
            items.append((ROWS_QUERY, b"\x01" + (hint.encode("utf-8") + cts_line if hint else cts_line[1:]),
                          IGNORABLE))
        elif hint:
            items.append((ROWS_QUERY, b"\x01" + hint.encode("utf-8"), IGNORABLE))
        items.append((TABLE_MAP, blk.table_map))
        events = blk.events
        items += blk.rows if events is None else passed_rows(events, blk.id_bytes, blk.crc)
    items += tail
    frame(out, pos, timestamp, server_id, items)
    return len(items)


# -- the shaper's pass-through blocks (schema_shaper.Shaper._dml) --------------------------------------
def pass_blocks(blocks: list, plans: dict, pass_kind: int, block_cls) -> list | None:
    """The blocks of a transaction whose every table passes through, each as ``block_cls((db, table,
    table_map, hint, events, id_bytes, crc))`` (``frame_dml``'s tuple block) from the plan cached
    under its TABLE_MAP body (header and CRC cut; ``plans``: body → plan with ``kind``, ``db``,
    ``table``, ``table_map``, ``id_bytes``, ``src_id``), or None when one block has no cached plan
    of kind ``pass_kind`` or a rows event that ``rows_pass`` refuses: the caller's general path
    then does the whole transaction."""
    out = []
    for blk in blocks:
        events = blk.events
        if not events:
            return None
        tm = events[0]
        raw = tm.raw
        crc = 4 if tm.ctx.checksum else 0
        plan = plans.get(raw[HEADER_LEN:len(raw) - crc])
        if plan is None or plan.kind != pass_kind or not rows_pass(events, plan.src_id):
            return None
        out.append(block_cls((plan.db, plan.table, plan.table_map, blk.hint, events, plan.id_bytes, crc)))
    return out


def route_pass_txn(blocks: list, branches: list, plans: dict, pass_kind: int, known: dict,
                   by_db: bool) -> tuple | None:
    """A pass-through transaction routed to the streams of a stream group (``dumper.stream_group``):
    ``(passed, streams, server_id, archive)`` where ``passed`` is ``pass_blocks``' tuple blocks,
    ``streams`` the one stream they all go to (an int), or a list with each block's, or None when a
    block's table is not in ``known`` yet (``known``: ``(db, table)`` → stream; ``(db, "")`` with
    ``by_db``); ``server_id``/``archive`` are the branches' (``GlobalTxn.server_id``/``.archive``).
    None when the transaction does not pass through (``pass_blocks``)."""
    passed = pass_blocks(blocks, plans, pass_kind, tuple)
    if not passed:
        return None
    each = []
    for blk in passed:
        k = known.get((blk[0], "") if by_db else (blk[0], blk[1]))
        if k is None:
            each = None
            break
        each.append(k)
    sid, archive = branches_server_id_archive(branches)
    streams = each if each is None or each.count(each[0]) != len(each) else each[0]
    return passed, streams, sid, archive


def branches_server_id_archive(branches: list) -> tuple[int | None, bool]:
    """A transaction's server id (its first branch's that has one) and whether a branch is an
    archive one: ``GlobalTxn.server_id`` / ``.archive`` in one pass."""
    sid = None
    archive = False
    for b in branches:
        if sid is None:
            sid = b.server_id
        if b.archive:
            archive = True
    return sid, archive


# -- a DML transaction of the global binlog from its vtso (dumper.global_binlog) ----------------------
XID = 16
CTS_PREFIX = b"CTS::"
_pack_u64 = struct.Struct("<Q").pack


def xid_of(vtso: str) -> int:
    """The XID event's value: a 63-bit hash of the vtso (CRC32 and Adler-32 of its digits), never a
    counter, so a restart and a Spark range task write the same bytes; replicas only use it to
    commit."""
    b = vtso.encode("ascii")
    return (crc32(b) << 31) ^ adler32(b)


def cts_marker(vtso: str) -> bytes:
    """The ROWS_QUERY payload of the commit marker written after a transaction: ``\\x01CTS::<vtso>``."""
    return b"\x01" + CTS_PREFIX + vtso.encode("ascii")


def cts_line(vtso: str, archive: bool) -> bytes:
    """The line a DML transaction's first hint ends with: ``\\n# CTS::<vtso>[::ARCHIVE]``."""
    return ("\n# CTS::" + vtso + ("::ARCHIVE" if archive else "")).encode("ascii")


def frame_dml_txn(out: bytearray, pos: int, timestamp: int, server_id: int, head: list, blocks: list, vtso: str,
                  archive: bool) -> int:
    """``frame_dml`` of the DML transaction ``vtso``: its ``cts_line``, then after the blocks the XID
    (``xid_of``) and the commit marker (``cts_marker``). Returns the number of events appended."""
    return frame_dml(out, pos, timestamp, server_id, head, blocks, cts_line(vtso, archive),
                     [(XID, _pack_u64(xid_of(vtso))), (ROWS_QUERY, cts_marker(vtso), IGNORABLE)])


# -- a pass-through global transaction shaped and framed in one call (dumper.global_binlog) -------------
def frame_pass_txn(out: bytearray, pos: int, timestamp: int, server_id: int, head: list, blocks: list,
                   branches: list, vtso: str, plans: dict, pass_kind: int) -> int:
    """What ``schema_shaper.Shaper.shape_txn`` and ``frame_dml_txn`` do for a DML transaction
    (``blocks``, ``branches`` and ``vtso`` of a ``merger.GlobalTxn``) whose every block passes
    through with a cached plan (``pass_blocks``), in one call: the server id is the first branch's
    that has one (else ``server_id``), the transaction is an archive one when a branch is. Returns
    the number of events appended, or -1 with nothing appended when ``pass_blocks`` gives None or no
    block (the caller shapes the transaction the general way)."""
    passed = pass_blocks(blocks, plans, pass_kind, tuple)
    if not passed:
        return -1
    sid, archive = branches_server_id_archive(branches)
    return frame_dml_txn(out, pos, timestamp, server_id if sid is None else sid, head, passed, vtso, archive)


# -- the trace merge's sort (merger.trace_merge.merge_by_trace) ------------------------------------------
def _trace_id(block):
    return block.trace_id


def by_trace(branches: list) -> tuple[list, bool]:
    """The ``blocks`` of every branch in one new list, stably sorted by ``trace_id`` (each branch's
    list is non-decreasing: the stable k-way merge, earlier branches first on ties), and whether two
    neighbours in it share a trace id."""
    if len(branches) == 1:
        merged = list(branches[0].blocks)
    else:
        merged = [blk for b in branches for blk in b.blocks]
        merged.sort(key=_trace_id)
    keys = list(map(_trace_id, merged))
    return merged, any(map(eq, keys, keys[1:]))


def plain_tuple_class(cls) -> bool:
    """A tuple subclass whose objects hold nothing but the items (a NamedTuple): the compiled
    kernels make its objects by allocating a tuple of its type and setting the items."""
    return (isinstance(cls, type) and issubclass(cls, tuple) and cls.__basicsize__ == tuple.__basicsize__
            and cls.__dictoffset__ == 0 and cls.__weakrefoffset__ == 0)
