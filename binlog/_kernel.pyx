# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled byte loops of the hot path (``binlog.kernel`` picks this or ``binlog.kernel_py``).

Both modules define the same functions with the same results, byte for byte; the tests run both.
See ``binlog/kernel_py.py`` for what each function does (the pure-Python reference).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeLatin1, PyUnicode_DecodeUTF8
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_Compare


cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    int PyUnicode_1BYTE_KIND
from libc.stdio cimport snprintf
from libc.string cimport memchr, memcmp, memcpy

from binlog.kernel_py import plain_tuple_class
from time import monotonic

cimport cython

tuple_new = tuple.__new__


cdef extern from "gb_crc32.h":
    void gb_crc_init()
    int gb_clmul
    unsigned long crc32 "gb_crc32"(unsigned long crc, const unsigned char *buf, unsigned int length) nogil



gb_crc_init()


def crc32_of(const unsigned char[::1] data, unsigned long crc=0):
    """The kernel's CRC-32 of ``data`` continuing ``crc`` (= ``zlib.crc32``; for the tests)."""
    cdef const unsigned char *empty = b""
    return crc32(crc, &data[0] if data.shape[0] else empty, <unsigned int>data.shape[0])


def crc32_folds() -> bool:
    """Whether the kernel's CRC-32 folds by carry-less multiplication (x86 PCLMULQDQ) here."""
    return gb_clmul != 0


cdef enum:
    HEADER_LEN = 19
    MAX_EVENT_SIZE = 1 << 30
    FDE = 15
    # kinds and statement classes: the same numbers as binlog.kernel_py
    K_ROWS = 1
    K_QUERY = 2
    K_GCN = 3
    K_TABLE_MAP = 4
    K_ROWS_QUERY = 5
    K_XA_PREPARE = 6
    K_BRANCH = 40
    K_TSO_COMMIT = 41
    K_TXN = 42
    K_LOCAL = 43
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
    cdef _Walk w = walker(buf, checksum, kinds, query_phl, 0)
    cdef const unsigned char *p
    cdef Py_ssize_t at
    cdef list out = []
    cdef Py_ssize_t count = 0
    new_event = make_event.__new__
    unset = _unset_of(make_event)
    while count < max_records:
        at = w.next_record(off)
        if at < 0:
            return out, w.stop, w.status, w.walked
        p = w.base + at
        # Event(pos, h, raw, ctx) without the Python __init__ call: its slots set from here
        ev = new_event(make_event)
        ev.pos = at
        ev._h = (u32(p), p[4], u32(p + 5), w.size, u32(p + 13), p[17] | (p[18] << 8))
        ev.raw = PyBytes_FromStringAndSize(<const char *>p, w.size)
        ev.ctx = ctx
        ev._body = unset
        out.append((w.k, ev, w.q))
        count += 1
        off = at + w.size
    return out, off, ST_MORE, w.walked


cdef object _unset_of(cls):
    import sys

    return getattr(sys.modules[cls.__module__], "_UNSET")


# -- scan_txns: scan, with the common XA shapes handed over whole ----------------------------------
# A branch ``XA START xid, {[ROWS_QUERY hint] TABLE_MAP rows*}*, XA_PREPARE(one_phase=0)`` becomes
# one record (K_BRANCH) and a ``GCN(flags & 4), XA COMMIT xid`` pair another (K_TSO_COMMIT), so the
# assembler handles a branch in two calls — one (K_TXN) when the pair follows the branch at once; a
# branch ending ``XA_PREPARE(one_phase=1)`` (committed there, a local transaction) is one K_LOCAL. Only the exact forms the DN writes are grouped (xid
# ``X'<hex>',X'<hex>',1|3``, hints in the CN's canonical form, no lizard GCN status variable, no
# bad or FDE event inside); anything else comes as scan gives it. Each group carries how many plain
# records it stands for, so the assembler can ask for them again (``scan`` from its first offset)
# when its own state rules the fast path out.

cdef inline bint py_space(unsigned char c) noexcept nogil:
    """``chr(c).isspace()`` for a latin-1 byte (what ``str.strip`` and the regex ``\\s`` strip)."""
    return (9 <= c <= 13) or (28 <= c <= 32) or c == 133 or c == 160


cdef signed char HEX[256]


cdef void _fill_hex() noexcept:
    cdef int c
    for c in range(256):
        HEX[c] = -1
    for c in range(10):
        HEX[48 + c] = c
    for c in range(6):
        HEX[97 + c] = 10 + c
        HEX[65 + c] = 10 + c


_fill_hex()


cdef inline int hexval(unsigned char c) noexcept nogil:
    return HEX[c]


@cython.final
cdef class _Walk:
    """The one header walk of ``scan`` and ``scan_txns`` (and of their groups' look-aheads): where it
    is, how many events it stepped over, what the last record is, and why it stopped."""
    cdef const unsigned char *base
    cdef Py_ssize_t n
    cdef bint checksum
    cdef const unsigned char *kinds
    cdef int query_phl
    cdef Py_ssize_t walked
    cdef int k, tid_len
    cdef Py_ssize_t q, size
    # where next_record stopped (the event it did not step over, or the first byte not whole) and why
    cdef Py_ssize_t stop
    cdef int status

    cdef inline Py_ssize_t halt(self, Py_ssize_t off, int status) noexcept:
        self.stop, self.status = off, status
        return -1

    cdef inline Py_ssize_t next_record(self, Py_ssize_t off) noexcept:
        """The offset of the next record from ``off`` (kind in ``k``, statement start in ``q``, size in
        ``size``), stepping over what scan skips (``walked`` counts every event stepped over or
        returned); -1 at the end of the whole events (``status`` ST_MORE) or at an FDE, an impossible
        size, a bad CRC32 (``status`` says which, ``stop`` where)."""
        cdef const unsigned char *p
        cdef Py_ssize_t size, end
        cdef unsigned int t
        cdef int k
        while off + HEADER_LEN <= self.n:
            p = self.base + off
            size = u32(p + 9)
            if size < HEADER_LEN or size > MAX_EVENT_SIZE:
                return self.halt(off, ST_BAD_SIZE)
            end = off + size
            if end > self.n:
                break
            t = p[4]
            if t == FDE:
                return self.halt(off, ST_FDE)
            if self.checksum and crc32(0, p, <unsigned int>size) != CRC_RESIDUE:
                return self.halt(off, ST_BAD_CRC)
            self.walked += 1
            k = self.kinds[t]
            if k == 0:
                off = end
                continue
            self.q = 0
            if k == K_GCN:
                if size > HEADER_LEN and not (p[HEADER_LEN] & 0x04):
                    off = end
                    continue
            elif k == K_QUERY:
                k = classify_query(p, size, self.query_phl, &self.q)
                if k == 0:
                    off = end
                    continue
            self.k = k
            self.size = size
            return off
        return self.halt(off, ST_MORE)


cdef _Walk walker(const unsigned char[::1] buf, bint checksum, const unsigned char[::1] kinds, int query_phl,
                  int tid_len):
    cdef _Walk w = _Walk.__new__(_Walk)
    w.n = buf.shape[0]
    w.base = &buf[0] if w.n else NULL
    w.checksum, w.kinds, w.query_phl, w.tid_len = checksum, &kinds[0], query_phl, tid_len
    return w


cdef object start_xid(const unsigned char *p, Py_ssize_t a, Py_ssize_t b):
    """``(xid, txn_id, bqual hex, archive)`` of an ``XA START`` whose xid text is ``p[a:b]``, when it
    has the DN's form and ``extractor.xid.parse`` decodes it the same way; else None."""
    cdef Py_ssize_t g_end, b_end, i, glen, at, s, e
    cdef const unsigned char *q
    cdef unsigned char gtrid[128]
    cdef int hi, lo
    cdef unsigned long long txn_id = 0
    while a < b and py_space(p[a]):
        a += 1
    while b > a and py_space(p[b - 1]):
        b -= 1
    if b - a < 8 or p[a] != 88 or p[a + 1] != 39 or p[b - 2] != 44 or (p[b - 1] != 49 and p[b - 1] != 51):
        return None
    q = <const unsigned char *>memchr(p + a + 2, 39, b - a - 2)     # the quote closing the gtrid
    g_end = b if q == NULL else q - p
    if g_end + 4 > b or p[g_end + 1] != 44 or p[g_end + 2] != 88 or p[g_end + 3] != 39:
        return None
    q = <const unsigned char *>memchr(p + g_end + 4, 39, b - g_end - 4)   # the bqual's
    if q == NULL:
        return None
    b_end = q - p
    glen = (g_end - a - 2) // 2
    if (g_end - a - 2) % 2 or glen > 128:
        return None
    at = -1
    for i in range(glen):
        hi = hexval(p[a + 2 + 2 * i])
        lo = hexval(p[a + 3 + 2 * i])
        if hi < 0 or lo < 0 or hi >= 8:  # a non-hex digit, or a non-ASCII gtrid byte: the general way
            return None
        gtrid[i] = <unsigned char>(hi * 16 + lo)
        if at < 0 and gtrid[i] == 64:
            at = i
    s, e = 5, (at if at >= 0 else glen)
    if e - s < 1 or e - s > 16:
        return None
    for i in range(s, e):
        hi = hexval(gtrid[i])
        if hi < 0:
            return None
        txn_id = txn_id * 16 + hi
    if txn_id >= (1ULL << 63):
        return None
    return (PyUnicode_DecodeLatin1(<const char *>p + a, b - a, NULL), txn_id,
            PyBytes_FromStringAndSize(<const char *>p + g_end + 4, b_end - g_end - 4), p[b - 1] == 51)


cdef inline Py_ssize_t digits(const unsigned char *p, Py_ssize_t i, Py_ssize_t e) noexcept nogil:
    while i < e and 48 <= p[i] <= 57:
        i += 1
    return i


cdef object canonical_hint(const unsigned char *p, Py_ssize_t e):
    """``(trace id, server id, reduced hint)`` of a ROWS_QUERY event ``p[:e]`` (CRC cut) whose text
    is in the CN's canonical form (``extractor.trace._CANONICAL``); else None."""
    cdef Py_ssize_t b = HEADER_LEN + 1, i, j, seq_a, seq_b, sub_a, sub_b, srv_a, srv_b, h_end
    cdef char buf[64]
    cdef Py_ssize_t n
    cdef long long server = 0
    if e - b < 8 or memcmp(p + b, b"/*DRDS /", 8) != 0:
        return None
    i = b + 8
    while i < e and p[i] != 47:
        i += 1
    i += 1
    j = i
    while j < e and p[j] != 47 and p[j] != 45 and not py_space(p[j]):
        if p[j] >= 128:
            return None
        j += 1
    if j == i or j >= e or p[j] != 45:
        return None
    seq_a = j + 1
    seq_b = digits(p, seq_a, e)
    if seq_b == seq_a or seq_b >= e or p[seq_b] != 47:
        return None
    sub_a = seq_b + 1
    sub_b = digits(p, sub_a, e)
    if sub_b >= e or p[sub_b] != 47:
        return None
    srv_a = sub_b + 1
    srv_b = digits(p, srv_a, e)
    if srv_b + 4 > e:
        return None
    if p[srv_b] != 47 or p[srv_b + 1] != 32 or p[srv_b + 2] != 42 or p[srv_b + 3] != 47:
        return None
    if seq_b - seq_a > 30 or sub_b - sub_a > 30 or srv_b - srv_a > 18:
        return None
    # seq.rjust(10, "0") + (sub or "0").rjust(10, "0")
    n = 0
    for i in range(10 - (seq_b - seq_a)):
        buf[n] = 48
        n += 1
    for i in range(seq_a, seq_b):
        buf[n] = p[i]
        n += 1
    if sub_b == sub_a:
        for i in range(9):
            buf[n] = 48
            n += 1
        buf[n] = 48
        n += 1
    else:
        for i in range(10 - (sub_b - sub_a)):
            buf[n] = 48
            n += 1
        for i in range(sub_a, sub_b):
            buf[n] = p[i]
            n += 1
    for i in range(srv_a, srv_b):
        server = server * 10 + (p[i] - 48)
    # reduce_hint: the whole text when it ends with "*/", else up to the first "*/" after "/*DRDS"
    if p[e - 2] == 42 and p[e - 1] == 47:
        h_end = e
    else:
        h_end = b + 6
        while not (p[h_end] == 42 and p[h_end + 1] == 47):
            h_end += 1
        h_end += 2
    return (PyUnicode_DecodeLatin1(buf, n, NULL), server if srv_b > srv_a else None,
            PyUnicode_DecodeUTF8(<const char *>p + b, h_end - b, "surrogateescape"))


# -- objects made without their Python __init__: slots written at their offsets ---------------------
cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems)


cdef class _Slots:
    """Makes instances of a ``__slots__`` class (``binlog.Event``, the extractor's dataclasses) with
    every slot set, as its ``__init__`` sets them, without the call (a few times cheaper)."""
    cdef object cls
    cdef Py_ssize_t off[24]
    cdef Py_ssize_t n

    def __init__(self, cls, names):
        if cls.__new__ is not object.__new__ or len(names) > 24:
            raise TypeError(f"{cls!r} cannot be made by slot offsets")
        self.cls, self.n = cls, len(names)
        for i, name in enumerate(names):
            d = cls.__dict__.get(name)
            if type(d).__name__ != "member_descriptor":
                raise TypeError(f"{cls.__name__}.{name} is not a slot")
            self.off[i] = (<PyMemberDescrObject *>d).d_member.offset

    cdef object make(self, tuple values):
        cdef object obj = PyType_GenericAlloc(<PyTypeObject *>self.cls, 0)
        cdef Py_ssize_t i
        cdef PyObject *v
        for i in range(self.n):
            v = <PyObject *>values[i]
            Py_INCREF(<object>v)
            (<PyObject **>((<char *><PyObject *>obj) + self.off[i]))[0] = v
        return obj

    cdef inline object make5(self, object a, object b, object c, object d, object e):
        """``make((a, b, c, d, e))`` without the tuple (one per event the scan makes)."""
        cdef object obj = PyType_GenericAlloc(<PyTypeObject *>self.cls, 0)
        cdef char *o = <char *><PyObject *>obj
        Py_INCREF(a)
        Py_INCREF(b)
        Py_INCREF(c)
        Py_INCREF(d)
        Py_INCREF(e)
        (<PyObject **>(o + self.off[0]))[0] = <PyObject *>a
        (<PyObject **>(o + self.off[1]))[0] = <PyObject *>b
        (<PyObject **>(o + self.off[2]))[0] = <PyObject *>c
        (<PyObject **>(o + self.off[3]))[0] = <PyObject *>d
        (<PyObject **>(o + self.off[4]))[0] = <PyObject *>e
        return obj


# the slots each made object gets, by name (every slot of the class: checked when a Maker is made)
EVENT_SLOTS = ("pos", "_h", "raw", "ctx", "_body")
BLOCK_SLOTS = ("trace_id", "db", "table", "events", "hint", "rows_query")
TXN_SLOTS = ("kind", "dn", "txn_id", "branch", "start", "xid", "vtso", "end", "tso", "blocks", "server_id", "archive",
             "query", "db", "sql", "opened_at", "restart")


cdef _Slots slots_of(cls, tuple names):
    if set(names) != set(cls.__slots__):
        raise TypeError(f"{cls.__name__}'s slots are {cls.__slots__}, the kernel sets {names}")
    return _Slots(cls, names)


cdef extern from "Python.h":
    void PyTuple_SET_ITEM(object p, Py_ssize_t pos, object o)


cdef inline object pos_of(type cls, object file, object offset):
    """``tuple.__new__(cls, (file, offset))`` (``cls``: a NamedTuple, checked by Maker) without the
    Python call (~0.9k instructions: one or two per branch)."""
    cdef object t = PyType_GenericAlloc(<PyTypeObject *>cls, 2)
    Py_INCREF(file)
    PyTuple_SET_ITEM(t, 0, file)
    Py_INCREF(offset)
    PyTuple_SET_ITEM(t, 1, offset)
    return t


cdef class Maker:
    """How ``scan_txns`` makes what the assembler would for a branch of file ``file`` of DN ``dn``:
    ``Event``s, ``Block``s and the prepared ``DnTxn`` (kind ``dml``, or ``heartbeat`` for a heartbeat
    branch — None: those are not grouped —; branch key from ``bquals``, the assembler's bqual hex →
    branch map; no txn when the bqual is not there yet)."""
    cdef _Slots event, block, txn
    cdef object unset, pos_cls, file, dn, dml, ctx
    cdef dict bquals
    cdef object last_bqual, last_branch  # the last bqual found in bquals and its branch key
    cdef double now
    # the heartbeat kind: a heartbeat branch is grouped too; None: it is not
    cdef readonly object heartbeat
    # the file offset of the scanned buffer's first byte (scan_txns' ``file_offset``: live runs)
    cdef Py_ssize_t base
    # user-table names by table id, per file as the assembler's (a DN never maps one id to two
    # tables while a file lasts): 64 slots by the id's low bits
    cdef unsigned long long tids[64]
    cdef list names

    def __init__(self, event_cls, block_cls, txn_cls, pos_cls, str file, str dn, dml, dict bquals, heartbeat=None):
        self.event = slots_of(event_cls, EVENT_SLOTS)
        self.block = slots_of(block_cls, BLOCK_SLOTS)
        self.txn = slots_of(txn_cls, TXN_SLOTS)
        self.unset = _unset_of(event_cls)
        if not plain_tuple_class(pos_cls):
            raise TypeError(f"{pos_cls!r} is not a NamedTuple: the kernel cannot make positions of it")
        self.pos_cls, self.file, self.dn, self.dml, self.bquals = pos_cls, file, dn, dml, bquals
        self.heartbeat = heartbeat
        self.names = [None] * 64

    cdef inline object ev(self, const unsigned char *p, Py_ssize_t off, Py_ssize_t size):
        # the header tuple (Event.h) is left to be made on first read: these mostly pass through
        return self.event.make5(self.base + off, None, PyBytes_FromStringAndSize(<const char *>p, size), self.ctx,
                                self.unset)

    cdef inline object table_names(self, const unsigned char *p, Py_ssize_t e, int tid_len):
        """``table_names`` through the per-file cache (keyed by the 6 bytes after the header)."""
        cdef unsigned long long tid = <unsigned long long>u32(p + HEADER_LEN) | (
            <unsigned long long>(p[HEADER_LEN + 4] | (p[HEADER_LEN + 5] << 8)) << 32)
        cdef Py_ssize_t i = tid & 63
        if self.tids[i] == tid and self.names[i] is not None:
            return self.names[i]
        names = table_names(p, e, tid_len)
        if names is not None:
            self.tids[i] = tid
            self.names[i] = names
        return names


cdef inline bint ascii_ieq(const unsigned char *p, Py_ssize_t n, const char *lit, Py_ssize_t m) noexcept nogil:
    """``p[:n].lower() == lit`` for ASCII ``p`` (``lit`` lower-case)."""
    cdef Py_ssize_t i
    cdef unsigned char c
    if n != m:
        return False
    for i in range(n):
        c = p[i]
        if 65 <= c <= 90:
            c += 32
        if c != <unsigned char>lit[i]:
            return False
    return True


cdef object table_names(const unsigned char *p, Py_ssize_t e, int tid_len):
    """``(db, table)`` of a TABLE_MAP ``p[:e]`` (CRC cut) of a user table (not a ``__cdc__*`` schema,
    not one of the tables the assembler drops); None for those, for non-ASCII names, for a short event."""
    cdef Py_ssize_t i = HEADER_LEN + tid_len + 2, db_len, t_len, db_at, t_at
    if i >= e:
        return None
    db_len = p[i]
    db_at = i + 1
    i += db_len + 2
    if i >= e:
        return None
    t_len = p[i]
    t_at = i + 1
    if t_at + t_len > e:
        return None
    for i in range(db_at, db_at + db_len):
        if p[i] >= 128:
            return None
    for i in range(t_at, t_at + t_len):
        if p[i] >= 128:
            return None
    if db_len >= 7 and ascii_ieq(p + db_at, 7, b"__cdc__", 7):
        return None
    if (ascii_ieq(p + t_at, t_len, b"__drds_redo_log", 15) or ascii_ieq(p + t_at, t_len, b"polarx_global_trx_log", 21)
            or ascii_ieq(p + t_at, t_len, b"__drds_global_tx_log", 20)):
        return None
    return (PyUnicode_DecodeLatin1(<const char *>p + db_at, db_len, NULL),
            PyUnicode_DecodeLatin1(<const char *>p + t_at, t_len, NULL))


cdef bint heartbeat_map(const unsigned char *p, Py_ssize_t e, int tid_len) noexcept:
    """Whether a TABLE_MAP ``p[:e]`` (CRC cut) maps the heartbeat table as the assembler's
    ``_system_table`` sees it: ``__cdc_heartbeat__`` of a ``__cdc__*`` schema not ending ``_single``
    (ASCII names only; anything else goes event by event)."""
    cdef Py_ssize_t i = HEADER_LEN + tid_len + 2, db_len, t_len, db_at, t_at
    if i >= e:
        return False
    db_len = p[i]
    db_at = i + 1
    i += db_len + 2
    if i >= e:
        return False
    t_len = p[i]
    t_at = i + 1
    if t_at + t_len > e:
        return False
    for i in range(db_at, db_at + db_len):
        if p[i] >= 128:
            return False
    return (db_len >= 7 and ascii_ieq(p + db_at, 7, b"__cdc__", 7)
            and not ascii_ieq(p + db_at + db_len - 7, 7, b"_single", 7)
            and ascii_ieq(p + t_at, t_len, b"__cdc_heartbeat__", 17))


cdef object fake_trace(Py_ssize_t count):
    """``extractor.trace.fake_trace_id(count)``: the count left-padded to 10 digits, then 10 zeros."""
    cdef char buf[48]
    cdef int n = snprintf(buf, sizeof(buf), "%010zd0000000000", count)
    return PyUnicode_DecodeLatin1(buf, n, NULL)


cdef object try_branch(_Walk w, Py_ssize_t off, Py_ssize_t size, Py_ssize_t q, int crc, Maker m,
                       Py_ssize_t *end_out, Py_ssize_t *nrec_out, bint *one_phase_out):
    """The K_BRANCH payload ``(start offset, xid, prepared DnTxn or None, last trace id)`` of the
    branch whose XA START is at ``off``, made as the assembler makes it (blocks, trace ids, server id;
    no DnTxn when the bqual's branch key is not in ``m.bquals`` yet, or is "": an ignored group); None
    when the branch is not in the exact common form (user tables only, traces not going back).
    ``one_phase_out``: its XA_PREPARE is one_phase=1 (it commits there)."""
    cdef const unsigned char *p = w.base + off
    cdef Py_ssize_t at, nrec = 1, count = 0
    cdef object hint = None, last = None, server = None, trace, names
    cdef list blocks = []
    cdef list evs = None
    cdef bint hb = False                 # a heartbeat branch: its table's rows are dropped
    cdef const unsigned char *hb_tid = NULL
    xid = start_xid(p, q + 8, size - crc)
    if xid is None:
        return None
    rq = None
    at = off + size
    while True:
        at = w.next_record(at)
        if at < 0:
            return None
        p = w.base + at
        nrec += 1
        if w.k == K_ROWS and hb:
            if rq is not None or w.size < HEADER_LEN + 6 or memcmp(p + HEADER_LEN, hb_tid, 6) != 0:
                return None
        elif w.k == K_ROWS:
            if evs is None or rq is not None:
                return None
            evs.append(m.ev(p, at, w.size))
            count += 1
        elif w.k == K_TABLE_MAP and hb:
            return None
        elif w.k == K_TABLE_MAP and not blocks and m.heartbeat is not None and w.tid_len == 6 \
                and heartbeat_map(p, w.size - crc, w.tid_len):
            # the assembler's _system_table: the kind is HEARTBEAT, no blocks; a hint's server id stays
            hb = True
            hb_tid = p + HEADER_LEN
            if rq is not None and hint[1] is not None:
                server = hint[1]
            rq = None
        elif w.k == K_TABLE_MAP:
            names = m.table_names(p, w.size - crc, w.tid_len)
            if names is None:
                return None
            # the trace id: the hint's, else the previous table map's, else a fake one
            if rq is not None:
                trace = hint[0]
                if last is not None and PyUnicode_Compare(trace, last) < 0:
                    return None
                if hint[1] is not None:
                    server = hint[1]
            elif last is not None:
                trace = last
            else:
                trace = fake_trace(count)
            last = trace
            evs = [m.ev(p, at, w.size)]
            count += 1
            blocks.append(m.block.make((trace, names[0], names[1], evs, hint[2] if rq is not None else None, rq)))
            rq = None
        elif w.k == K_ROWS_QUERY:
            if rq is not None or w.size < HEADER_LEN + 1 + crc:
                return None
            hint = canonical_hint(p, w.size - crc)
            if hint is None:
                return None
            rq = m.ev(p, at, w.size)
        elif w.k == K_XA_PREPARE:
            if rq is not None or w.size <= HEADER_LEN or p[HEADER_LEN] > 1:
                return None
            one_phase_out[0] = p[HEADER_LEN] == 1
            end_out[0] = at + w.size
            nrec_out[0] = nrec
            # the group's branch key: most branches of a DN are of the group before them (no hash then)
            if m.last_bqual is not None and m.last_bqual == xid[2]:
                branch = m.last_branch
            else:
                branch = m.bquals.get(xid[2])
                if branch:  # a key, once filed, never changes (the assembler's _start)
                    m.last_bqual, m.last_branch = xid[2], branch
            if not branch:  # a group not seen yet, or ignored (""): the event-by-event rules decide
                return (m.base + off, xid[0], None, last)
            # DnTxn(kind, dn, txn_id, branch, start, xid, vtso, end, tso, blocks, server_id, archive, query,
            # db, sql, opened_at, restart)
            return (m.base + off, xid[0], m.txn.make((m.heartbeat if hb else m.dml, m.dn, xid[1], branch, pos_of(m.pos_cls, m.file, m.base + off), xid[0],
                                            "", None, None, blocks, server, xid[3], None, None, None, m.now,
                                            None)), last)
        else:
            return None
        at += w.size


cdef struct Commit:
    # a GCN carrying a commit TSO and the XA COMMIT right after it, as ``tso_commit_at`` reads them
    unsigned long long tso
    Py_ssize_t xid_at, xid_end      # the xid text (spaces stripped), offsets in the buffer
    Py_ssize_t end                  # after the XA COMMIT


cdef bint tso_commit_at(_Walk w, Py_ssize_t off, Py_ssize_t size, int crc, Commit *out) noexcept:
    """Whether the GCN at ``off`` (a commit TSO) is followed by an XA COMMIT (no Q_LIZARD_COMMIT_GCN)
    right away; ``out`` says where its parts are."""
    cdef const unsigned char *p = w.base + off
    cdef const unsigned char *c
    cdef Py_ssize_t at, a, b
    if size - crc - HEADER_LEN < 9:
        return False
    at = w.next_record(off + size)
    if at < 0 or w.k != Q_XA_COMMIT:
        return False
    c = w.base + at
    if memchr(c + HEADER_LEN, 200, w.q - HEADER_LEN) != NULL:
        return False
    a, b = w.q + 9, w.size - crc
    if b < a:
        return False
    while a < b and py_space(c[a]):
        a += 1
    while b > a and py_space(c[b - 1]):
        b -= 1
    out.tso = <unsigned long long>u32(p + HEADER_LEN + 1) | (<unsigned long long>u32(p + HEADER_LEN + 5) << 32)
    out.xid_at, out.xid_end, out.end = at + a, at + b, at + w.size
    return True


cdef object try_tso_commit(_Walk w, Py_ssize_t off, Py_ssize_t size, int crc, Maker m, Py_ssize_t *end_out):
    """The K_TSO_COMMIT payload ``(GCN offset, commit TSO, Pos after the XA COMMIT, xid)`` of the GCN
    at ``off`` and the XA COMMIT right after it (no Q_LIZARD_COMMIT_GCN); else None."""
    cdef Commit c
    if not tso_commit_at(w, off, size, crc, &c):
        return None
    end_out[0] = c.end
    return (m.base + off, c.tso, pos_of(m.pos_cls, m.file, m.base + c.end),
            PyUnicode_DecodeLatin1(<const char *>w.base + c.xid_at, c.xid_end - c.xid_at, NULL))


cdef extern from "gb_find.h":
    const unsigned char *gb_find(const unsigned char *s, size_t n, const unsigned char *needle, size_t k) nogil
    int gb_avx2


def find_is_avx2() -> bool:
    """Whether ``find`` takes the AVX2 path on this machine (for the tests)."""
    gb_find(<const unsigned char *>b"ab", 2, <const unsigned char *>b"ab", 2)   # it detects the CPU on first use
    return gb_avx2 == 1


def find(data, bytes needle, Py_ssize_t start=0, end=None):
    """``data.find(needle, start, end)`` (``start``, ``end`` >= 0) by ``gb_find`` (gb_find.h: AVX2, else
    the C library's ``memmem``): many times faster than ``bytes.find`` on a whole binlog file (the
    cluster check's byte search)."""
    cdef const unsigned char[::1] buf = data
    cdef Py_ssize_t n = buf.shape[0], stop = n if end is None else min(<Py_ssize_t>end, n)
    cdef const unsigned char *at
    if start < 0 or stop < 0:
        raise ValueError("find takes offsets >= 0")
    if stop - start < PyBytes_GET_SIZE(needle):
        return -1
    at = gb_find(&buf[start], stop - start, <const unsigned char *>PyBytes_AS_STRING(needle), PyBytes_GET_SIZE(needle))
    return -1 if at == NULL else at - &buf[0]


def hint_of(const unsigned char[::1] raw, int crc):
    """``canonical_hint`` of one ROWS_QUERY event (for the tests)."""
    return canonical_hint(&raw[0], raw.shape[0] - crc) if raw.shape[0] >= HEADER_LEN + 1 + crc else None


def xid_of(const unsigned char[::1] raw, Py_ssize_t q, int crc):
    """``start_xid`` of one XA START event whose statement starts at ``q`` (for the tests)."""
    return start_xid(&raw[0], q + 8, raw.shape[0] - crc)


def scan_txns(data, Py_ssize_t off, bint checksum, const unsigned char[::1] kinds, int query_phl, make_event, ctx,
              Py_ssize_t max_records, int table_id_len, Maker maker, Py_ssize_t file_offset=0):
    """``scan`` with the common XA shapes grouped (see above): records ``(K_BRANCH, payload, n)``,
    ``(K_TSO_COMMIT, payload, n)``, ``(K_TXN, payload, n)`` and ``(K_LOCAL, K_BRANCH payload + (Pos
    after the XA_PREPARE,), n)`` besides scan's, ``n`` = the plain
    records a group stands for; ``table_id_len`` is the TABLE_MAP's table id size (4 or 6), ``maker``
    makes the objects. ``file_offset``: the file offset of ``data``'s first byte (a live run received
    mid-file): every position made (events, ``Pos``, a group's first offset) is ``file_offset`` + the
    offset in ``data``; ``off`` and the offset returned stay offsets in ``data``. A group cut by the
    end of ``data`` is not one: its events come as plain records."""
    cdef const unsigned char[::1] buf = data
    cdef _Walk w = walker(buf, checksum, kinds, query_phl, table_id_len)
    cdef Py_ssize_t at, at2, size, q, g_end, walked
    cdef int k
    cdef int crc = 4 if checksum else 0
    cdef list out = []
    cdef Py_ssize_t count = 0
    maker.ctx, maker.now, maker.base = ctx, monotonic(), file_offset
    while count < max_records:
        at = w.next_record(off)
        if at < 0:
            return out, w.stop, w.status, w.walked
        k, q, size = w.k, w.q, w.size
        off = at + size
        # a look-ahead that makes no group leaves the walk's count as it was: its events come again
        walked = w.walked
        if k == K_GCN:
            group = try_tso_commit(w, at, size, crc, maker, &g_end)
            if group is None and size - crc - HEADER_LEN >= 9:
                # a commit TSO followed by a branch, whose XA START makes it void: one record with the
                # branch's (replayed from the GCN: a commit TSO already pending raises there)
                w.walked = walked
                at2 = w.next_record(off)
                if at2 >= 0 and w.k == Q_XA_START:
                    group = branch_record(w, at2, w.size, w.q, crc, maker, &g_end)
                    if group is not None:
                        out.append(((<tuple>group)[0], (maker.base + at,) + (<tuple>(<tuple>group)[1])[1:],
                                    (<tuple>group)[2] + 1))
                        count += 1
                        off = g_end
                        continue
            elif group is not None:
                out.append((K_TSO_COMMIT, group, 2))
                count += 1
                off = g_end
                continue
            w.walked = walked
        elif k == Q_XA_START:
            group = branch_record(w, at, size, q, crc, maker, &g_end)
            if group is not None:
                out.append(group)
                count += 1
                off = g_end
                continue
            w.walked = walked
        out.append((k, maker.ev(w.base + at, at, size), q))
        count += 1
    return out, off, ST_MORE, w.walked


cdef object branch_record(_Walk w, Py_ssize_t at, Py_ssize_t size, Py_ssize_t q, int crc, Maker maker,
                          Py_ssize_t *end_out):
    """The group record ``(kind, payload, n)`` of the branch whose XA START is at ``at``: K_LOCAL
    (one-phase), K_TXN (its commit right after it), K_BRANCH; None when it is not in the common form.
    ``end_out``: where the records it stands for end."""
    cdef Py_ssize_t nrec, walked, branch_end
    cdef bint one_phase
    group = try_branch(w, at, size, q, crc, maker, &branch_end, &nrec, &one_phase)
    if group is None:
        return None
    end_out[0] = branch_end
    if one_phase:  # and the Pos after its XA_PREPARE, where it commits
        return (K_LOCAL, <tuple>group + (pos_of(maker.pos_cls, maker.file, maker.base + branch_end),), nrec)
    if (<tuple>group)[2] is not None:
        walked = w.walked
        whole = try_commit_after(w, branch_end, <tuple>group, crc, maker, end_out)
        if whole is not None:
            return (K_TXN, whole, nrec + 2)
        w.walked = walked
        end_out[0] = branch_end
    return (K_BRANCH, group, nrec)


cdef object try_commit_after(_Walk w, Py_ssize_t off, tuple branch, int crc, Maker m, Py_ssize_t *end_out):
    """The K_TXN payload ``(start offset, xid, prepared DnTxn, last trace id, GCN offset, commit TSO,
    Pos after the XA COMMIT)``: a K_BRANCH payload ``branch`` ending at ``off`` whose next records are
    its own K_TSO_COMMIT with a TSO > 0 (the branch committed before anything else happened on the
    DN); else None."""
    cdef Commit c
    cdef Py_ssize_t at = w.next_record(off)
    cdef str xid = branch[1]
    if at < 0 or w.k != K_GCN or not tso_commit_at(w, at, w.size, crc, &c) or c.tso == 0:
        return None
    # the same xid: the XA START's text was decoded as latin-1, one byte a character
    if PyUnicode_KIND(xid) != PyUnicode_1BYTE_KIND or PyUnicode_GET_LENGTH(xid) != c.xid_end - c.xid_at \
            or memcmp(PyUnicode_DATA(xid), w.base + c.xid_at, c.xid_end - c.xid_at) != 0:
        return None
    end_out[0] = c.end
    return (branch[0], xid, branch[2], branch[3], m.base + at, c.tso, pos_of(m.pos_cls, m.file, m.base + c.end))


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


cdef inline bint rows_event_passes(bytes raw, const char *src_id) except -1:
    """A v2 rows event of table ``src_id`` (6 bytes) with no extra data: it passes as it is."""
    cdef const unsigned char *p
    if raw is None or PyBytes_GET_SIZE(raw) < 29:
        return False
    p = <const unsigned char *>PyBytes_AS_STRING(raw)
    return not (p[4] < ROWS_V2_FIRST or p[4] > ROWS_V2_LAST or memcmp(p + HEADER_LEN, src_id, 6) != 0
                or p[27] != 2 or p[28] != 0)


def rows_pass(list events, bytes src_id):
    cdef const char *s
    cdef Py_ssize_t i
    if src_id is None or PyBytes_GET_SIZE(src_id) != 6:
        return False
    s = PyBytes_AS_STRING(src_id)
    for i in range(1, len(events)):
        if not rows_event_passes(events[i].raw, s):
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


# -- reading a slot by its offset (the hot path reads a few slots of many objects) ------------------------
cdef class _Member:
    """Reads attribute ``name`` of an object: for the first class seen whose ``name`` is a slot, by the
    slot's offset in the object (no attribute lookup); for any other object, by ``getattr``."""
    cdef str name
    cdef type cls
    cdef Py_ssize_t off

    def __init__(self, str name):
        self.name, self.cls, self.off = name, None, 0

    cdef inline object get(self, object obj):
        cdef PyObject *v
        if type(obj) is self.cls:
            v = (<PyObject **>((<char *><PyObject *>obj) + self.off))[0]
            if v != NULL:
                return <object>v
        elif self.cls is None:
            self.learn(type(obj))
        return getattr(obj, self.name)      # other classes, an unset slot (AttributeError)

    cdef void learn(self, type cls):
        d = cls.__dict__.get(self.name)
        if type(d).__name__ == "member_descriptor" and (<PyMemberDescrObject *>d).d_member.offset > 0:
            self.off = (<PyMemberDescrObject *>d).d_member.offset
            self.cls = cls


cdef _Member M_EVENTS = _Member("events"), M_HINT = _Member("hint"), M_RAW = _Member("raw"), M_CTX = _Member("ctx")
cdef _Member M_CHECKSUM = _Member("checksum"), M_SERVER_ID = _Member("server_id"), M_ARCHIVE = _Member("archive")


# -- the shaper's pass-through blocks (schema_shaper.Shaper._dml); see binlog.kernel_py.pass_blocks ----
cdef inline bint rows_pass_c(list events, object src_id) except -1:
    """``rows_pass`` without its Python call."""
    cdef const char *s
    cdef Py_ssize_t i
    if type(src_id) is not bytes or PyBytes_GET_SIZE(src_id) != 6:
        return False
    s = PyBytes_AS_STRING(src_id)
    for i in range(1, len(events)):
        if not rows_event_passes(M_RAW.get(events[i]), s):
            return False
    return True


def pass_blocks(list blocks, dict plans, int pass_kind, block_cls):
    return pass_blocks_c(blocks, plans, pass_kind, block_cls)


cdef object pass_blocks_c(list blocks, dict plans, int pass_kind, block_cls):
    cdef list out = []
    cdef object events, tm, plan, key
    cdef bytes raw
    cdef int crc
    cdef Py_ssize_t n
    for blk in blocks:
        events = M_EVENTS.get(blk)
        if type(events) is not list or not events:
            return None
        tm = (<list>events)[0]
        raw = M_RAW.get(tm)
        crc = 4 if M_CHECKSUM.get(M_CTX.get(tm)) else 0
        n = PyBytes_GET_SIZE(raw) - HEADER_LEN - crc
        if n < 0:
            return None
        plan = plans.get(plan_key(PyBytes_AS_STRING(raw) + HEADER_LEN, n))
        if plan is None or P_KIND.get(plan) != pass_kind or not rows_pass_c(<list>events, P_SRC_ID.get(plan)):
            return None
        passed = (P_DB.get(plan), P_TABLE.get(plan), P_TABLE_MAP.get(plan), M_HINT.get(blk), events,
                  P_ID_BYTES.get(plan), crc)
        out.append(passed if block_cls is tuple else tuple_new(block_cls, passed))
    return out


# the fields of a shaper plan (schema_shaper.rows.TablePlan) pass_blocks reads, by their slots
cdef _Member P_KIND = _Member("kind"), P_SRC_ID = _Member("src_id"), P_DB = _Member("db"), P_TABLE = _Member("table")
cdef _Member P_TABLE_MAP = _Member("table_map"), P_ID_BYTES = _Member("id_bytes")
# the plan cache's keys made before, by the table id's low bits: a block of a table seen before
# looks its plan up with the same bytes object (hash kept), not a new one hashed again
cdef list _plan_keys = [None] * 64


cdef object plan_key(const char *body, Py_ssize_t n):
    """The plan cache's key for a TABLE_MAP body ``body[:n]`` (header and CRC cut): its bytes."""
    cdef Py_ssize_t slot = (<unsigned char>body[0] if n > 0 else 0) & 63
    cdef object cached = _plan_keys[slot]
    if cached is not None and PyBytes_GET_SIZE(cached) == n and memcmp(PyBytes_AS_STRING(cached), body, n) == 0:
        return cached
    key = PyBytes_FromStringAndSize(body, n)
    _plan_keys[slot] = key
    return key


# -- a DML transaction of the global binlog from its vtso; see binlog.kernel_py.frame_dml_txn ----------
cdef extern from "zlib.h":
    unsigned long adler32(unsigned long adler, const unsigned char *buf, unsigned int length) nogil

cdef enum:
    XID = 16


def frame_dml_txn(bytearray out, Py_ssize_t pos, unsigned int timestamp, unsigned int server_id, list head,
                  list blocks, str vtso, bint archive):
    return frame_dml_txn_c(out, pos, timestamp, server_id, head, blocks, vtso, archive)


cdef object frame_dml_txn_c(bytearray out, Py_ssize_t pos, unsigned int timestamp, unsigned int server_id, list head,
                            list blocks, str vtso, bint archive):
    # kernel_py's xid_of / cts_marker / cts_line, inline: the vtso's ASCII bytes are read once
    cdef bytes v = vtso.encode("ascii")
    cdef const unsigned char *p = <const unsigned char *>PyBytes_AS_STRING(v)
    cdef unsigned int n = <unsigned int>PyBytes_GET_SIZE(v)
    cdef unsigned long long xid = ((<unsigned long long>crc32(0, p, n)) << 31) ^ adler32(1, p, n)
    cdef bytes xid_payload = PyBytes_FromStringAndSize(NULL, 8)
    cdef unsigned char *x = <unsigned char *>PyBytes_AS_STRING(xid_payload)
    cdef int i
    for i in range(8):
        x[i] = (xid >> (8 * i)) & 0xFF
    return frame_dml(out, pos, timestamp, server_id, head, blocks,
                     (b"\n# CTS::" + v + b"::ARCHIVE") if archive else (b"\n# CTS::" + v),
                     [(XID, xid_payload), (ROWS_QUERY, b"\x01CTS::" + v, IGNORABLE)])


# -- a pass-through global transaction shaped and framed in one call; see binlog.kernel_py.frame_pass_txn
def frame_pass_txn(bytearray out, Py_ssize_t pos, unsigned int timestamp, unsigned int server_id, list head,
                   list blocks, list branches, str vtso, dict plans, int pass_kind):
    cdef object passed = pass_blocks_c(blocks, plans, pass_kind, tuple)
    cdef object sid = None
    cdef bint archive = False
    if not passed:
        return -1
    for b in branches:
        if sid is None:
            sid = M_SERVER_ID.get(b)
        if M_ARCHIVE.get(b):
            archive = True
    return frame_dml_txn_c(out, pos, timestamp, server_id if sid is None else sid, head, passed, vtso, archive)


# -- a pass-through transaction routed to a stream group's streams; see binlog.kernel_py.route_pass_txn
def route_pass_txn(list blocks, list branches, dict plans, int pass_kind, dict known, bint by_db):
    cdef object passed = pass_blocks_c(blocks, plans, pass_kind, tuple)
    cdef object sid = None
    cdef bint archive = False
    cdef bint split = False
    cdef list each = []
    cdef object k, first = None
    cdef tuple blk
    if not passed:
        return None
    for b in <list>passed:
        blk = <tuple>b
        k = known.get((blk[0], "") if by_db else (blk[0], blk[1]))
        if k is None:
            each = None
            break
        if first is None:
            first = k
        elif k != first:
            split = True
        each.append(k)
    for br in branches:
        if sid is None:
            sid = M_SERVER_ID.get(br)
        if M_ARCHIVE.get(br):
            archive = True
    return passed, (None if each is None else (each if split else first)), sid, archive


# -- the trace merge's sort (merger.trace_merge.merge_by_trace); see binlog.kernel_py.by_trace ---------
from cpython.object cimport PyObject_RichCompareBool, Py_LT, Py_EQ
from operator import attrgetter

_trace_key = attrgetter("trace_id")


def by_trace(branches):
    cdef list merged = []
    cdef list keys = []
    cdef Py_ssize_t n, i, j
    cdef object key, blk
    cdef bint repeated = False
    for b in branches:
        merged.extend(b.blocks)
    n = len(merged)
    if n > 16 and len(branches) > 1:   # a big transaction: Timsort (merges the branches' runs)
        merged.sort(key=_trace_key)
    for i in range(n):
        keys.append(merged[i].trace_id)
    if n <= 16 and len(branches) > 1:   # insertion sort: stable, few blocks
        for i in range(1, n):
            key, blk = keys[i], merged[i]
            j = i - 1
            while j >= 0 and PyObject_RichCompareBool(key, keys[j], Py_LT):
                keys[j + 1], merged[j + 1] = keys[j], merged[j]
                j -= 1
            keys[j + 1], merged[j + 1] = key, blk
    for i in range(1, n):
        if PyObject_RichCompareBool(keys[i], keys[i - 1], Py_EQ):
            repeated = True
            break
    return merged, repeated
