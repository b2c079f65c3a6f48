# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The Spark engine's byte loops, compiled (``gbinlog.spark_engine.xkernel`` picks this or the
pure-Python twins, which give the same bytes; the tests run both):

* ``place``: a range file's transactions moved to their offset in a final file, a GTID event put
  before each (``dumper.gtid.insert_gtids``) or only relocated (``binlog.writer.relocate``);
* ``event_marks``: event starts about every ``step`` bytes (a walk over the headers).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.bytes cimport PyBytes_AS_STRING
from libc.string cimport memcmp, memcpy


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
