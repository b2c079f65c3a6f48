# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The Spark engine's byte loops, compiled (``gbinlog.spark_engine.xkernel`` picks this or the
pure-Python twins, which give the same bytes; the tests run both):

* ``place``: a range file's transactions moved to their offset in a final file, a GTID event put
  before each (``dumper.gtid.insert_gtids``) or only relocated (``binlog.writer.relocate``);
* ``encode_body`` / ``decode_body``: the exchange's transaction frame, the format of
  ``extractor.txn_codec`` (``encode_body`` / ``BodyDecoder.decode``), events made in C.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcmp, memcpy


cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    void *PyUnicode_DATA(object o)


cdef extern from "gb_crc32.h":   # binlog/gb_crc32.h: PCLMULQDQ CRC-32, zlib's without it
    void gb_crc_init()
    unsigned long crc32 "gb_crc32"(unsigned long crc, const unsigned char *buf, unsigned int length) nogil


gb_crc_init()


cdef enum:
    HEADER_LEN = 19
    CRC_LEN = 4
    QUERY = 2
    ROWS_QUERY = 29
    GTID = 33
    GTID_LEN = 65              # header + <B16sqBqq> body + CRC
    LOGICAL_TIMESTAMP = 2
    F_HINT = 1
    F_ROWS_QUERY = 2
    F_QUERY = 4
    F_DB = 8
    F_SQL = 16
    VERSION = 2

# dumper.global_binlog's BEGIN payload (a QUERY "BEGIN": a DML's first event) and the CTS marker
cdef bytes BEGIN_PAYLOAD = b"\0" * 13 + b"\0BEGIN"
cdef bytes CTS_MARK = b"\x01CTS::"


cdef inline unsigned int u32(const unsigned char *p) noexcept nogil:
    return p[0] | (p[1] << 8) | (p[2] << 16) | (<unsigned int>p[3] << 24)


cdef inline void put32(unsigned char *o, unsigned int v) noexcept nogil:
    o[0] = v & 0xFF
    o[1] = (v >> 8) & 0xFF
    o[2] = (v >> 16) & 0xFF
    o[3] = (v >> 24) & 0xFF


cdef inline void put64(unsigned char *o, unsigned long long v) noexcept nogil:
    cdef int i
    for i in range(8):
        o[i] = (v >> (8 * i)) & 0xFF


cdef inline unsigned long long u64(const unsigned char *p) noexcept nogil:
    cdef unsigned long long v = 0
    cdef int i
    for i in range(8):
        v |= (<unsigned long long>p[i]) << (8 * i)
    return v


def place(const unsigned char[::1] src, Py_ssize_t start, long long first_gno, long long first_seq, sid):
    """Whole events ``src`` (transactions rendered without GTIDs, each ending with its CTS marker)
    at file offset ``start``: with ``sid`` (16 bytes) a GTID event before each transaction, as
    ``dumper.gtid.insert_gtids``; with ``sid`` None only ``log_pos`` and CRC32 rewritten (relocated)."""
    cdef Py_ssize_t n = src.shape[0], off = 0, size, txns = 0, at = 0, plen
    cdef const unsigned char *s = &src[0] if n else NULL
    cdef const unsigned char *p
    cdef const unsigned char *sid_p = NULL
    cdef const unsigned char *begin_p = <const unsigned char *>PyBytes_AS_STRING(BEGIN_PAYLOAD)
    cdef const unsigned char *cts_p = <const unsigned char *>PyBytes_AS_STRING(CTS_MARK)
    cdef bint gtids = sid is not None, idle = True, ddl
    cdef unsigned int t, pos = <unsigned int>start
    cdef long long gno = first_gno, seq = first_seq
    cdef unsigned char *o
    if gtids:
        if len(sid) != 16:
            raise ValueError("a GTID sid is 16 bytes")
        sid_p = <const unsigned char *>PyBytes_AS_STRING(sid)
    while off < n:   # checks and the number of transactions
        if off + HEADER_LEN > n:
            raise ValueError(f"event of {n - off} bytes at {off} runs past the segment ({n} bytes)")
        p = s + off
        size = u32(p + 9)
        if size < HEADER_LEN + CRC_LEN or off + size > n:
            raise ValueError(f"event of {size} bytes at {off} runs past the segment ({n} bytes)")
        if idle:
            txns += 1
            idle = False
        t = p[4]
        if t == ROWS_QUERY and size - HEADER_LEN - CRC_LEN >= 6 and memcmp(p + HEADER_LEN, cts_p, 6) == 0:
            idle = True
        off += size
    cdef Py_ssize_t out_len = n + (txns * GTID_LEN if gtids else 0)
    out = PyByteArray_FromStringAndSize(NULL, out_len)
    o = <unsigned char *>PyByteArray_AS_STRING(out)
    off = 0
    idle = True
    while off < n:
        p = s + off
        size = u32(p + 9)
        # checked again: ``src`` may be a mapped file, and what the first pass read sized ``out``
        if size < HEADER_LEN + CRC_LEN or off + size > n or at + size + (GTID_LEN if gtids and idle else 0) > out_len:
            raise ValueError(f"the events at {off} changed while they were placed")
        t = p[4]
        plen = size - HEADER_LEN - CRC_LEN
        if gtids and idle:
            ddl = t == QUERY and not (plen == 19 and memcmp(p + HEADER_LEN, begin_p, 19) == 0)
            pos += GTID_LEN
            memcpy(o + at, p, 4)                   # the transaction's first event's timestamp
            o[at + 4] = GTID
            memcpy(o + at + 5, p + 5, 4)           # … and server id
            put32(o + at + 9, GTID_LEN)
            put32(o + at + 13, pos)
            o[at + 17] = 0
            o[at + 18] = 0
            o[at + 19] = 1 if ddl else 0
            memcpy(o + at + 20, sid_p, 16)
            put64(o + at + 36, <unsigned long long>gno)
            o[at + 44] = LOGICAL_TIMESTAMP
            put64(o + at + 45, <unsigned long long>(seq - 1))
            put64(o + at + 53, <unsigned long long>seq)
            put32(o + at + 61, crc32(0, o + at, GTID_LEN - CRC_LEN))
            at += GTID_LEN
            gno += 1
            seq += 1
        idle = False
        pos += <unsigned int>size
        memcpy(o + at, p, size - CRC_LEN)
        put32(o + at + 13, pos)
        put32(o + at + size - CRC_LEN, crc32(0, o + at, <unsigned int>(size - CRC_LEN)))
        if t == ROWS_QUERY and plen >= 6 and memcmp(p + HEADER_LEN, cts_p, 6) == 0:
            idle = True
        at += size
        off += size
    return out


def count_events(const unsigned char[::1] data):
    """The number of whole events in ``data`` (a run of events)."""
    cdef Py_ssize_t n = data.shape[0], off = 0, count = 0, size
    while off + HEADER_LEN <= n:
        size = u32(&data[off] + 9)
        if size < HEADER_LEN:
            raise ValueError(f"event of {size} bytes at {off}")
        off += size
        count += 1
    return count


def event_marks(const unsigned char[::1] data, Py_ssize_t off, Py_ssize_t step):
    """Event starts in ``data`` from ``off`` (an event start, the first mark): the first event
    start at or after every ``step`` bytes past the previous mark, up to the last whole event."""
    cdef Py_ssize_t n = data.shape[0], size, due = off
    cdef list out = []
    while off + HEADER_LEN <= n:
        size = u32(&data[off] + 9)
        if size < HEADER_LEN or off + size > n:
            break
        if off >= due:
            out.append(off)
            due = off + step
        off += size
    return out


# -- the exchange frame (extractor.txn_codec's version 2) ----------------------------------------------

cdef class _Buf:
    cdef bytearray data
    cdef Py_ssize_t n

    def __cinit__(self):
        self.data = bytearray(4096)
        self.n = 0

    cdef unsigned char *reserve(self, Py_ssize_t k) except NULL:
        cdef Py_ssize_t cap = len(self.data)
        if self.n + k > cap:
            self.data.extend(bytes(max(cap, self.n + k - cap)))   # grows by doubling; kept between calls
        return <unsigned char *>PyByteArray_AS_STRING(self.data) + self.n

    cdef int put(self, bytes b) except -1:
        cdef Py_ssize_t k = PyBytes_GET_SIZE(b)
        memcpy(self.reserve(k), PyBytes_AS_STRING(b), k)
        self.n += k
        return 0

    cdef int put_event(self, unsigned int ci, unsigned long long pos, bytes raw) except -1:
        cdef Py_ssize_t k = PyBytes_GET_SIZE(raw)
        cdef unsigned char *o = self.reserve(9 + k)
        o[0] = ci & 0xFF
        put64(o + 1, pos)
        memcpy(o + 9, PyBytes_AS_STRING(raw), k)
        self.n += 9 + k
        return 0

    cdef int put_u32_text(self, bytes b) except -1:
        put32(self.reserve(4), <unsigned int>PyBytes_GET_SIZE(b))
        self.n += 4
        return self.put(b)


cdef inline bytes _text(s):
    return s.encode("utf-8", "surrogateescape")


cdef Py_ssize_t _put_raw(_Buf b, str s) except -1:
    """A text's UTF-8 (an ASCII str's own bytes, no copy in between); returns its length."""
    cdef Py_ssize_t k
    cdef bytes enc
    if PyUnicode_IS_COMPACT_ASCII(s):
        k = PyUnicode_GET_LENGTH(s)
        memcpy(b.reserve(k), PyUnicode_DATA(s), k)
        b.n += k
        return k
    enc = _text(s)
    b.put(enc)
    return PyBytes_GET_SIZE(enc)


cdef int _put_u32_str(_Buf b, str s) except -1:
    """A text with its u32 length in front."""
    cdef Py_ssize_t at = b.n
    b.reserve(4)
    b.n += 4
    cdef Py_ssize_t k = _put_raw(b, s)
    put32(<unsigned char *>PyByteArray_AS_STRING(b.data) + at, <unsigned int>k)
    return 0


cdef object _ctx_obj = None      # the last context encoded and its record (a 1-entry cache in front of
cdef bytes _ctx_rec = None       # txn_codec._ctx_record: a DN's transactions share one context)


cdef Py_ssize_t _ctx_index(ctx, dict index, list records, ctx_record) except -1:
    global _ctx_obj, _ctx_rec
    k = id(ctx)
    j = index.get(k)
    if j is not None:
        return j
    if ctx is not _ctx_obj:
        _ctx_obj, _ctx_rec = ctx, ctx_record(ctx)
    index[k] = len(records)
    records.append(_ctx_rec)
    return len(records) - 1


cdef _Buf _BLOCKS = _Buf()
cdef _Buf _HEAD = _Buf()


def encode_body(txn, ctx_record):
    """``extractor.txn_codec.encode_body`` (``ctx_record``: its per-process context records)."""
    cdef dict ctx_index = {}
    cdef list records = []
    cdef _Buf b = _BLOCKS, head = _HEAD
    cdef unsigned char *o
    cdef unsigned int last_ci = 0, flags
    cdef object last_ctx = None, ctx
    cdef bytes r
    cdef list blocks = txn.blocks
    cdef Py_ssize_t total, at, lt, ld, ltb

    b.n = head.n = 0
    for blk in blocks:
        hint, rq = blk.hint, blk.rows_query
        events = blk.events
        at = b.n
        b.reserve(11)
        b.n += 11
        lt = _put_raw(b, blk.trace_id)
        ld = _put_raw(b, blk.db)
        ltb = _put_raw(b, blk.table)
        if lt > 0xFFFF or ld > 0xFFFF or ltb > 0xFFFF:
            raise OverflowError("a trace id, database or table name over 65535 bytes")
        o = <unsigned char *>PyByteArray_AS_STRING(b.data) + at
        o[0] = lt & 0xFF
        o[1] = lt >> 8
        o[2] = ld & 0xFF
        o[3] = ld >> 8
        o[4] = ltb & 0xFF
        o[5] = ltb >> 8
        o[6] = (F_HINT if hint is not None else 0) | (F_ROWS_QUERY if rq is not None else 0)
        put32(o + 7, <unsigned int>len(events))
        if hint is not None:
            _put_u32_str(b, hint)
        if rq is not None:
            b.put_event(_ctx_index(rq.ctx, ctx_index, records, ctx_record), rq.pos, rq.raw)
        for ev in events:
            ctx = ev.ctx
            if ctx is not last_ctx:
                last_ctx, last_ci = ctx, _ctx_index(ctx, ctx_index, records, ctx_record)
            b.put_event(last_ci, ev.pos, ev.raw)
    query = txn.query
    flags = ((F_QUERY if query is not None else 0) | (F_DB if txn.db is not None else 0)
             | (F_SQL if txn.sql is not None else 0))
    if query is not None:
        head.put_event(_ctx_index(query.ctx, ctx_index, records, ctx_record), query.pos, query.raw)
    for s in (txn.db, txn.sql):
        if s is not None:
            _put_u32_str(head, s)
    total = 2 + 1 + head.n + 4 + b.n
    for r in records:
        total += PyBytes_GET_SIZE(r)
    out = PyBytes_FromStringAndSize(NULL, total)
    o = <unsigned char *>PyBytes_AS_STRING(out)
    o[0] = VERSION
    o[1] = len(records)
    at = 2
    for r in records:
        memcpy(o + at, PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r))
        at += PyBytes_GET_SIZE(r)
    o[at] = flags
    at += 1
    memcpy(o + at, PyByteArray_AS_STRING(head.data), head.n)
    at += head.n
    put32(o + at, <unsigned int>len(blocks))
    at += 4
    memcpy(o + at, PyByteArray_AS_STRING(b.data), b.n)
    return out


cdef inline object pos_part(object pos, Py_ssize_t i):
    """``pos[i]`` of a Pos read as the tuple it is (Cython's item read of a tuple subclass goes
    through a Python-level ``__getitem__`` call)."""
    if not isinstance(pos, tuple):
        raise TypeError(f"a position is a Pos, not {type(pos).__name__}")
    return (<tuple>pos)[i]


cdef object _event(object new_event, type cls, object unset, const unsigned char *p, Py_ssize_t off,
                   Py_ssize_t size, object ctxs):
    """An ``Event`` from the frame at ``off`` (ctx index, position, raw event)."""
    cdef unsigned int ci = p[off]
    ev = new_event(cls)
    ev.pos = u64(p + off + 1)
    cdef const unsigned char *e = p + off + 9
    ev._h = None    # Event.h: made on first read (most pass through)
    ev.raw = PyBytes_FromStringAndSize(<const char *>e, u32(e + 9))
    ev.ctx = ctxs[ci]
    ev._body = unset
    return ev


cdef inline Py_ssize_t _event_end(const unsigned char *p, Py_ssize_t off, Py_ssize_t size) except -1:
    if off + 9 + HEADER_LEN > size:
        raise IndexError("event runs past the frame")
    cdef Py_ssize_t end = off + 9 + u32(p + off + 9 + 9)
    if end > size or end < off + 9 + HEADER_LEN:
        raise IndexError("event runs past the frame")
    return end


cdef inline Py_ssize_t _need(Py_ssize_t off, Py_ssize_t k, Py_ssize_t size) except -1:
    if off + k > size:
        raise IndexError("frame ends early")
    return 0


cdef str _u32_text(bytes body, const unsigned char *p, Py_ssize_t *off, Py_ssize_t size):
    """A text with a u32 length at ``off[0]``; moves ``off`` past it."""
    cdef Py_ssize_t at = off[0], n
    _need(at, 4, size)
    n = u32(p + at)
    _need(at + 4, n, size)
    off[0] = at + 4 + n
    return body[at + 4:at + 4 + n].decode("utf-8", "surrogateescape")


cdef object _dec_owner = None    # the last context record decoded, by whom, and its context: a
cdef bytes _dec_rec = None       # 1-entry cache in front of ``ctx_of_record`` (no slice, no call)
cdef object _dec_ctx = None


cdef object _ctx_of(ctx_of_record, const unsigned char *rec, Py_ssize_t n, bytes body, Py_ssize_t at):
    global _dec_owner, _dec_rec, _dec_ctx
    if ctx_of_record is _dec_owner and PyBytes_GET_SIZE(_dec_rec) == n \
            and memcmp(PyBytes_AS_STRING(_dec_rec), rec, n) == 0:
        return _dec_ctx
    _dec_rec = body[at:at + n]
    _dec_ctx = ctx_of_record(_dec_rec)
    _dec_owner = ctx_of_record
    return _dec_ctx


def decode_body(bytes body, txn, ctx_of_record, type event_cls, unset, block_cls):
    """``extractor.txn_codec.BodyDecoder._decode``: fills ``txn``; ``ctx_of_record`` maps a context
    record to its (shared) ``FormatContext``. Raises IndexError/ValueError on a bad frame."""
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(body)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(body), off, end, n, k
    cdef unsigned int n_ctx, flags, n_blocks, bflags, n_ev, lt, ld, ltb
    cdef list ctxs = [], events, blocks
    new_event = event_cls.__new__
    new_block = block_cls.__new__
    _need(0, 2, size)
    if p[0] != VERSION:
        raise ValueError(f"transaction frame version {p[0]}, expected {VERSION}")
    n_ctx = p[1]
    off = 2
    for k in range(n_ctx):
        _need(off, 2, size)
        n = p[off] | (p[off + 1] << 8)
        _need(off + 2, n, size)
        ctxs.append(_ctx_of(ctx_of_record, p + off + 2, n, body, off + 2))
        off += 2 + n
    _need(off, 1, size)
    flags = p[off]
    off += 1
    if flags & F_QUERY:
        end = _event_end(p, off, size)
        txn.query = _event(new_event, event_cls, unset, p, off, size, ctxs)
        off = end
    if flags & F_DB:
        txn.db = _u32_text(body, p, &off, size)
    if flags & F_SQL:
        txn.sql = _u32_text(body, p, &off, size)
    _need(off, 4, size)
    n_blocks = u32(p + off)
    off += 4
    blocks = txn.blocks
    for k in range(n_blocks):
        _need(off, 11, size)
        lt = p[off] | (p[off + 1] << 8)
        ld = p[off + 2] | (p[off + 3] << 8)
        ltb = p[off + 4] | (p[off + 5] << 8)
        bflags = p[off + 6]
        n_ev = u32(p + off + 7)
        off += 11
        _need(off, lt + ld + ltb, size)
        trace = body[off:off + lt].decode("utf-8", "surrogateescape")
        off += lt
        db = body[off:off + ld].decode("utf-8", "surrogateescape")
        off += ld
        table = body[off:off + ltb].decode("utf-8", "surrogateescape")
        off += ltb
        hint = None
        if bflags & F_HINT:
            hint = _u32_text(body, p, &off, size)
        rows_query = None
        if bflags & F_ROWS_QUERY:
            end = _event_end(p, off, size)
            rows_query = _event(new_event, event_cls, unset, p, off, size, ctxs)
            off = end
        events = []
        for _ in range(n_ev):
            end = _event_end(p, off, size)
            events.append(_event(new_event, event_cls, unset, p, off, size, ctxs))
            off = end
        blk = new_block(block_cls)       # a slotted dataclass: every slot set here
        blk.trace_id = trace
        blk.db = db
        blk.table = table
        blk.events = events
        blk.hint = hint
        blk.rows_query = rows_query
        blocks.append(blk)
    if off != size:
        raise ValueError(f"{size - off} bytes left over in the frame of vtso {txn.vtso}")


# -- exchange records: a whole DnTxn (scalar fields + body frame) per record ----------------------------
# record: u32 length of the rest, u8 form (0: packed fields, 1: pickled ``txn_fields`` tuple), fields, body.
# packed fields: u8 kind index, u8 presence bits, i64 txn_id, u64 start_pos, then texts (u32 length +
# UTF-8): dn, branch, start_file, vtso, [xid], [end_file + u64 end_pos], [i64 tso], [i64 server_id],
# [restart: file text + u64 offset + i64 tso + i64 txn_id + i64 seq].
cdef enum:
    P_XID = 1
    P_END = 2
    P_TSO = 4
    P_SERVER = 8
    P_ARCHIVE = 16
    P_RESTART = 32

cdef _Buf _REC = _Buf()


cdef inline int _put_i64(_Buf b, long long v) except -1:
    put64(b.reserve(8), <unsigned long long>v)
    b.n += 8
    return 0


cdef inline int _put_text(_Buf b, s) except -1:
    return _put_u32_str(b, s)


def encode_record(txn, ctx_record, dict kind_index):
    """One exchange record of ``txn`` (form 0). Raises OverflowError/TypeError for fields the packed
    form cannot hold (the caller writes form 1 then)."""
    cdef _Buf b = _REC
    cdef unsigned int bits = 0
    cdef unsigned char *o
    xid, end, tso, server_id, restart = txn.xid, txn.end, txn.tso, txn.server_id, txn.restart
    if xid is not None:
        bits |= P_XID
    if end is not None:
        bits |= P_END
    if tso is not None:
        bits |= P_TSO
    if server_id is not None:
        bits |= P_SERVER
    if txn.archive:
        bits |= P_ARCHIVE
    if restart is not None:
        bits |= P_RESTART
    start = txn.start
    cdef long long txn_id = txn.txn_id
    cdef unsigned long long start_pos = start[1]
    body = encode_body(txn, ctx_record)
    b.n = 0
    o = b.reserve(5 + 2)
    o[4] = 0
    o[5] = <unsigned char>kind_index[txn.kind]
    o[6] = bits
    b.n = 7
    _put_i64(b, txn_id)
    _put_i64(b, <long long>start_pos)
    _put_text(b, txn.dn)
    _put_text(b, txn.branch)
    _put_text(b, pos_part(start, 0))
    _put_text(b, txn.vtso)
    if bits & P_XID:
        _put_text(b, xid)
    if bits & P_END:
        _put_text(b, pos_part(end, 0))
        _put_i64(b, <long long><unsigned long long>pos_part(end, 1))
    if bits & P_TSO:
        _put_i64(b, <long long>tso)
    if bits & P_SERVER:
        _put_i64(b, <long long>server_id)
    if bits & P_RESTART:
        _put_text(b, restart[0])
        _put_i64(b, <long long><unsigned long long>restart[1])
        _put_i64(b, <long long>restart[2])
        _put_i64(b, <long long>restart[3])
        _put_i64(b, <long long>restart[4])
    b.put(body)
    o = <unsigned char *>PyByteArray_AS_STRING(b.data)
    put32(o, <unsigned int>(b.n - 4))
    return PyBytes_FromStringAndSize(<const char *>o, b.n)


cdef inline long long _i64(const unsigned char *p, Py_ssize_t *off, Py_ssize_t end) except? -1:
    _need(off[0], 8, end)
    cdef long long v = <long long>u64(p + off[0])
    off[0] += 8
    return v


cdef class RecordDecoder:
    """Decodes exchange records into ``DnTxn``s (made without their ``__init__``: every slot set
    here). ``fallback(fields_pickle, body)`` decodes a form-1 record."""

    cdef object txn_cls, new_txn, pos_new, pos_cls, point_cls, kinds, ctx_of_record, event_cls, unset
    cdef object block_cls, fallback

    def __init__(self, txn_cls, pos_cls, point_cls, kinds, ctx_of_record, event_cls, unset, block_cls,
                 fallback):
        self.txn_cls, self.new_txn = txn_cls, txn_cls.__new__
        self.pos_cls, self.point_cls, self.pos_new = pos_cls, point_cls, tuple.__new__
        self.kinds = tuple(kinds)
        self.ctx_of_record, self.event_cls, self.unset, self.block_cls = ctx_of_record, event_cls, unset, block_cls
        self.fallback = fallback

    def decode(self, const unsigned char[::1] buf, Py_ssize_t off, list out):
        """Whole records of ``buf`` from ``off`` appended to ``out``; returns the offset after the
        last whole one."""
        cdef Py_ssize_t n = buf.shape[0], end, at
        cdef const unsigned char *p = &buf[0] if n else NULL
        cdef unsigned int form, bits
        while off + 4 <= n:
            end = off + 4 + u32(p + off)
            if end > n:
                break
            at = off + 5
            _need(at - 1, 1, end)
            form = p[off + 4]
            body_bytes = None
            if form == 1:
                _need(at, 4, end)
                k = u32(p + at)
                _need(at + 4, k, end)
                out.append(self.fallback(bytes(buf[at + 4:at + 4 + k]), bytes(buf[at + 4 + k:end])))
            elif form == 0:
                out.append(self._packed(p, at, end, buf))
            else:
                raise ValueError(f"exchange record form {form}")
            off = end
        return off

    cdef object _packed(self, const unsigned char *p, Py_ssize_t at, Py_ssize_t end, const unsigned char[::1] buf):
        cdef unsigned int bits
        _need(at, 2, end)
        kind = self.kinds[p[at]]
        bits = p[at + 1]
        at += 2
        txn_id = _i64(p, &at, end)
        start_pos = <unsigned long long>_i64(p, &at, end)
        t = self.new_txn(self.txn_cls)
        t.kind = kind
        t.txn_id = txn_id
        t.dn = _u32_text_v(p, &at, end)
        t.branch = _u32_text_v(p, &at, end)
        t.start = self.pos_new(self.pos_cls, (_u32_text_v(p, &at, end), start_pos))
        t.vtso = _u32_text_v(p, &at, end)
        t.xid = _u32_text_v(p, &at, end) if bits & P_XID else None
        if bits & P_END:
            f = _u32_text_v(p, &at, end)
            t.end = self.pos_new(self.pos_cls, (f, <unsigned long long>_i64(p, &at, end)))
        else:
            t.end = None
        t.tso = _i64(p, &at, end) if bits & P_TSO else None
        t.server_id = _i64(p, &at, end) if bits & P_SERVER else None
        t.archive = bool(bits & P_ARCHIVE)
        if bits & P_RESTART:
            f = _u32_text_v(p, &at, end)
            r_pos = <unsigned long long>_i64(p, &at, end)
            r_tso = _i64(p, &at, end)
            r_id = _i64(p, &at, end)
            r_seq = _i64(p, &at, end)
            t.restart = self.pos_new(self.point_cls, (f, r_pos, r_tso, r_id, r_seq))
        else:
            t.restart = None
        t.blocks = []
        t.query = t.db = t.sql = None
        t.opened_at = 0.0
        decode_body(PyBytes_FromStringAndSize(<const char *>p + at, end - at), t, self.ctx_of_record,
                    self.event_cls, self.unset, self.block_cls)
        return t


cdef str _u32_text_v(const unsigned char *p, Py_ssize_t *off, Py_ssize_t end):
    cdef Py_ssize_t at = off[0], n
    _need(at, 4, end)
    n = u32(p + at)
    _need(at + 4, n, end)
    off[0] = at + 4 + n
    return (<const char *>p)[at + 4:at + 4 + n].decode("utf-8", "surrogateescape")
