# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled byte loops of the hot path (``binlog.kernel`` picks this or ``binlog.kernel_py``).

Both modules define the same functions with the same results, byte for byte; the tests run both.
See ``binlog/kernel_py.py`` for what each function does (the pure-Python reference).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcmp, memcpy


cdef extern from "zlib.h":
    unsigned long crc32(unsigned long crc, const unsigned char *buf, unsigned int length) nogil


cdef enum:
    HEADER_LEN = 19
    MAX_EVENT_SIZE = 1 << 30
    FDE = 15
    # kinds and statement classes: the same numbers as binlog.kernel_py
    K_QUERY = 2
    K_GCN = 3
    Q_OTHER = 2
    Q_XA_START = 20
    Q_XA_COMMIT = 21
    Q_XA_ROLLBACK = 22
    Q_BEGIN = 23
    Q_COMMIT = 24
    # scan's stop reasons
    ST_MORE = 0
    ST_FDE = 1
    ST_BAD_SIZE = 2
    ST_BAD_CRC = 3

cdef unsigned long CRC_RESIDUE = 0x2144DF1C


cdef inline unsigned int u32(const unsigned char *p) noexcept nogil:
    return p[0] | (p[1] << 8) | (p[2] << 16) | (<unsigned int>p[3] << 24)


cdef inline bint starts(const unsigned char *p, Py_ssize_t at, Py_ssize_t size, const char *lit,
                        Py_ssize_t n) noexcept nogil:
    return at + n <= size and memcmp(p + at, lit, n) == 0


cdef int classify_query(const unsigned char *p, Py_ssize_t size, int query_phl, Py_ssize_t *q_out) noexcept nogil:
    """The statement class of a QUERY event by its first bytes (0: XA END, dropped)."""
    if size < HEADER_LEN + 13:
        return Q_OTHER
    cdef Py_ssize_t db_len = p[HEADER_LEN + 8]
    cdef Py_ssize_t status_len = p[HEADER_LEN + 11] | (p[HEADER_LEN + 12] << 8)
    cdef Py_ssize_t q = HEADER_LEN + query_phl + status_len + db_len + 1
    q_out[0] = q
    if q >= size:
        return Q_OTHER
    cdef unsigned char c = p[q]
    if c == 88:  # 'X'
        if starts(p, q, size, b"XA START", 8):
            return Q_XA_START
        if starts(p, q, size, b"XA END", 6):
            return 0
        if starts(p, q, size, b"XA COMMIT", 9):
            return Q_XA_COMMIT
        if starts(p, q, size, b"XA ROLLBACK", 11):
            return Q_XA_ROLLBACK
    elif c == 66:
        if starts(p, q, size, b"BEGIN", 5):
            return Q_BEGIN
    elif c == 67:
        if starts(p, q, size, b"COMMIT", 6):
            return Q_COMMIT
    return Q_OTHER


def scan(data, Py_ssize_t off, bint checksum, const unsigned char[::1] kinds, int query_phl, make_event, ctx,
         Py_ssize_t max_records):
    cdef const unsigned char[::1] buf = data
    cdef Py_ssize_t n = buf.shape[0]
    cdef const unsigned char *base = &buf[0] if n else NULL
    cdef const unsigned char *p
    cdef Py_ssize_t size, end, q
    cdef unsigned int t
    cdef int k
    cdef list out = []
    cdef Py_ssize_t count = 0, walked = 0
    new_event = make_event.__new__
    unset = _unset_of(make_event)
    while off + HEADER_LEN <= n and count < max_records:
        p = base + off
        size = u32(p + 9)
        if size < HEADER_LEN or size > MAX_EVENT_SIZE:
            return out, off, ST_BAD_SIZE, walked
        end = off + size
        if end > n:
            break
        t = p[4]
        if t == FDE:
            return out, off, ST_FDE, walked
        if checksum and crc32(0, p, <unsigned int>size) != CRC_RESIDUE:
            return out, off, ST_BAD_CRC, walked
        k = kinds[t]
        if k == 0:
            off = end
            walked += 1
            continue
        q = 0
        if k == K_GCN:
            if size > HEADER_LEN and not (p[HEADER_LEN] & 0x04):
                off = end
                walked += 1
                continue
        elif k == K_QUERY:
            k = classify_query(p, size, query_phl, &q)
            if k == 0:
                off = end
                walked += 1
                continue
        # Event(pos, h, raw, ctx) without the Python __init__ call: its slots set from here
        ev = new_event(make_event)
        ev.pos = off
        ev.h = (u32(p), t, u32(p + 5), size, u32(p + 13), p[17] | (p[18] << 8))
        ev.raw = PyBytes_FromStringAndSize(<const char *>p, size)
        ev.ctx = ctx
        ev._body = unset
        out.append((k, ev, q))
        count += 1
        walked += 1
        off = end
    return out, off, ST_MORE, walked


cdef object _unset_of(cls):
    import sys

    return getattr(sys.modules[cls.__module__], "_UNSET")


def frame(bytearray out, Py_ssize_t pos, unsigned int timestamp, unsigned int server_id, list items):
    cdef Py_ssize_t total = 0, i, plen, size, at
    cdef object item, payload
    cdef unsigned char *o
    cdef const unsigned char *src
    cdef unsigned int type_code, flags, crc
    cdef list payloads = []
    for item in items:
        payload = (<tuple>item)[1]
        if type(payload) is not bytes:
            payload = bytes(payload)
        payloads.append(payload)
        total += HEADER_LEN + 4 + PyBytes_GET_SIZE(payload)
    at = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, at + total)
    o = <unsigned char *>PyByteArray_AS_STRING(out) + at
    for i in range(len(items)):
        item = items[i]
        type_code = (<tuple>item)[0]
        payload = payloads[i]
        flags = (<tuple>item)[2] if len(<tuple>item) > 2 else 0
        plen = PyBytes_GET_SIZE(payload)
        src = <const unsigned char *>PyBytes_AS_STRING(payload)
        size = HEADER_LEN + 4 + plen
        pos += size
        put32(o, timestamp)
        o[4] = <unsigned char>type_code
        put32(o + 5, server_id)
        put32(o + 9, <unsigned int>size)
        put32(o + 13, <unsigned int>pos)
        o[17] = flags & 0xFF
        o[18] = (flags >> 8) & 0xFF
        memcpy(o + HEADER_LEN, src, plen)
        crc = crc32(0, o, <unsigned int>(HEADER_LEN + plen))
        put32(o + HEADER_LEN + plen, crc)
        o += size
    return pos


cdef inline void put32(unsigned char *o, unsigned int v) noexcept nogil:
    o[0] = v & 0xFF
    o[1] = (v >> 8) & 0xFF
    o[2] = (v >> 16) & 0xFF
    o[3] = (v >> 24) & 0xFF


# -- a whole DML transaction (dumper.global_binlog); see binlog.kernel_py.frame_dml ---------------------
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_GET_LENGTH

cdef enum:
    ROWS_QUERY = 29
    TABLE_MAP = 19
    IGNORABLE = 0x80
    ROWS_V2_FIRST = 30
    ROWS_V2_LAST = 32

cdef const char *ONE = b"\x01"

from cpython.mem cimport PyMem_Free, PyMem_Realloc


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc


cdef struct Part:
    # one event of a transaction: its type, flags and payload = a + b + c (pointers into objects
    # the caller's arguments keep alive, or into ``keep``)
    unsigned int type_code
    unsigned int flags
    const char *a
    Py_ssize_t na
    const char *b
    Py_ssize_t nb
    const char *c
    Py_ssize_t nc


cdef class _Parts:
    """The events of one transaction, gathered before one resize of the output and one write pass."""
    cdef Part *p
    cdef Py_ssize_t n, cap, total
    cdef list keep

    def __cinit__(self):
        self.p = NULL
        self.n = self.cap = self.total = 0
        self.keep = []

    def __dealloc__(self):
        PyMem_Free(self.p)

    cdef int add(self, unsigned int type_code, unsigned int flags, const char *a, Py_ssize_t na,
                 const char *b, Py_ssize_t nb, const char *c, Py_ssize_t nc) except -1:
        cdef Part *grown
        if self.n == self.cap:
            self.cap = self.cap * 2 if self.cap else 32
            grown = <Part *>PyMem_Realloc(self.p, self.cap * sizeof(Part))
            if grown == NULL:
                raise MemoryError()
            self.p = grown
        self.p[self.n] = Part(type_code, flags, a, na, b, nb, c, nc)
        self.n += 1
        self.total += HEADER_LEN + na + nb + nc + 4
        return 0

    cdef int add_items(self, items) except -1:
        """``frame``'s ``(type_code, payload[, flags])`` items."""
        cdef tuple item
        cdef object payload
        for item in items:
            payload = item[1]
            if type(payload) is not bytes:
                payload = bytes(payload)
                self.keep.append(payload)
            self.add(item[0], item[2] if len(item) > 2 else 0, PyBytes_AS_STRING(payload),
                     PyBytes_GET_SIZE(payload), NULL, 0, NULL, 0)
        return 0

    cdef Py_ssize_t write(self, bytearray out, Py_ssize_t pos, unsigned int timestamp,
                          unsigned int server_id) except -1:
        cdef Py_ssize_t at = PyByteArray_GET_SIZE(out), i, plen, size
        cdef unsigned char *o
        cdef Part *e
        cdef Py_ssize_t alloc = (<PyByteArrayObject *>out).ob_alloc
        if at + self.total >= alloc:
            # Grow the buffer by doubling (then set its size back: a shrink to at least half keeps
            # the allocation): bytearray alone grows by an eighth, so a writer's buffer filled one
            # transaction at a time was copied about nine times over.
            if PyByteArray_Resize(out, max(at + self.total, 2 * alloc)) < 0:
                return -1
        if PyByteArray_Resize(out, at + self.total) < 0:
            return -1
        o = <unsigned char *>PyByteArray_AS_STRING(out) + at
        for i in range(self.n):
            e = &self.p[i]
            plen = e.na + e.nb + e.nc
            size = HEADER_LEN + plen + 4
            pos += size
            put32(o, timestamp)
            o[4] = <unsigned char>e.type_code
            put32(o + 5, server_id)
            put32(o + 9, <unsigned int>size)
            put32(o + 13, <unsigned int>pos)
            o[17] = e.flags & 0xFF
            o[18] = (e.flags >> 8) & 0xFF
            if e.na:
                memcpy(o + HEADER_LEN, e.a, e.na)
            if e.nb:
                memcpy(o + HEADER_LEN + e.na, e.b, e.nb)
            if e.nc:
                memcpy(o + HEADER_LEN + e.na + e.nb, e.c, e.nc)
            put32(o + HEADER_LEN + plen, crc32(0, o, <unsigned int>(HEADER_LEN + plen)))
            o += size
        return pos


def passed_rows(list events, bytes id_bytes, int crc):
    cdef list out = []
    cdef bytes raw
    cdef Py_ssize_t i
    for i in range(1, len(events)):
        raw = events[i].raw
        if raw is None or PyBytes_GET_SIZE(raw) < HEADER_LEN + 6 + crc:
            raise ValueError(f"rows event of {len(raw) if raw is not None else 0} bytes has no table id")
        out.append(((<const unsigned char *>PyBytes_AS_STRING(raw))[4],
                    id_bytes + raw[HEADER_LEN + 6:PyBytes_GET_SIZE(raw) - crc]))
    return out


def rows_pass(list events, bytes src_id):
    cdef bytes raw
    cdef const unsigned char *p
    cdef const char *s
    cdef Py_ssize_t i
    if src_id is None or PyBytes_GET_SIZE(src_id) != 6:
        return False
    s = PyBytes_AS_STRING(src_id)
    for i in range(1, len(events)):
        raw = events[i].raw
        if raw is None or PyBytes_GET_SIZE(raw) < 29:
            return False
        p = <const unsigned char *>PyBytes_AS_STRING(raw)
        if p[4] < ROWS_V2_FIRST or p[4] > ROWS_V2_LAST or memcmp(p + HEADER_LEN, s, 6) != 0 \
                or p[27] != 2 or p[28] != 0:
            return False
    return True


def frame_dml(bytearray out, Py_ssize_t pos, unsigned int timestamp, unsigned int server_id, list head,
              list blocks, bytes cts_line, list tail):
    cdef _Parts parts = _Parts()
    cdef Py_ssize_t nh, i, size
    cdef int crc
    cdef const char *h
    cdef bint first = True
    cdef object hint, events, table_map
    cdef bytes raw, ids
    cdef const char *p
    cdef Py_ssize_t nc = PyBytes_GET_SIZE(cts_line)
    cdef const char *c = PyBytes_AS_STRING(cts_line)
    parts.add_items(head)
    for blk in blocks:
        if isinstance(blk, tuple):
            # (db, table, table_map, hint, events, id_bytes, crc): a pass-through block
            if len(<tuple>blk) != 7:
                raise ValueError(f"a block tuple has {len(<tuple>blk)} fields, not 7")
            hint = (<tuple>blk)[3]
            table_map = (<tuple>blk)[2]
            events = (<tuple>blk)[4]
        else:
            hint = blk.hint
            table_map = blk.table_map
            events = blk.events
        if hint is not None and type(hint) is not str:
            raise TypeError(f"a block's hint is {type(hint).__name__}, not str")
        if hint is not None and PyUnicode_GET_LENGTH(hint) > 0:
            h = PyUnicode_AsUTF8AndSize(hint, &nh)
            if first:
                parts.add(ROWS_QUERY, IGNORABLE, ONE, 1, h, nh, c, nc)
            else:
                parts.add(ROWS_QUERY, IGNORABLE, ONE, 1, h, nh, NULL, 0)
        elif first:
            if nc < 1:
                raise ValueError("cts_line is empty")
            parts.add(ROWS_QUERY, IGNORABLE, ONE, 1, c + 1, nc - 1, NULL, 0)
        first = False
        if type(table_map) is not bytes:
            table_map = bytes(table_map)
            parts.keep.append(table_map)
        parts.add(TABLE_MAP, 0, PyBytes_AS_STRING(table_map), PyBytes_GET_SIZE(table_map), NULL, 0, NULL, 0)
        if events is None:
            parts.add_items(blk.rows)
            continue
        if type(events) is not list:
            events = list(events)
        if isinstance(blk, tuple):
            ids = (<tuple>blk)[5]
            crc = (<tuple>blk)[6]
        else:
            ids = blk.id_bytes
            crc = blk.crc
        if ids is None:
            raise TypeError("a passed-through block has no id_bytes")
        for i in range(1, len(<list>events)):
            raw = (<list>events)[i].raw
            if raw is None or PyBytes_GET_SIZE(raw) < HEADER_LEN + 6 + crc:
                raise ValueError(f"rows event of {len(raw) if raw is not None else 0} bytes has no table id")
            p = PyBytes_AS_STRING(raw)
            size = PyBytes_GET_SIZE(raw)
            parts.add((<const unsigned char *>p)[4], 0, PyBytes_AS_STRING(ids), PyBytes_GET_SIZE(ids),
                      p + HEADER_LEN + 6, size - HEADER_LEN - 6 - crc, NULL, 0)
    parts.add_items(tail)
    parts.write(out, pos, timestamp, server_id)
    return parts.n
