# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled twins of ``extractor.sorter.Sorter`` and of the vtso text of ``extractor.vtso``: the
same rules and results (the tests run both); ``extractor.sorter`` picks one (``GBINLOG_PURE_PYTHON=1``
forces the Python ones). Built by ``pip install`` with the other kernels (setup.py)."""

from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from libc.string cimport memcpy

from heapq import heappop, heappush

from binlog.kernel_py import plain_tuple_class


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    object PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems)
    void PyTuple_SET_ITEM(object p, Py_ssize_t pos, object o)


cdef inline str ascii_text(const char *p, Py_ssize_t n):
    """``p[:n]`` as a str, ``p`` known ASCII (digits): no scan for its widest character."""
    cdef str s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), p, n)
    return s


cdef object sorter_error(str msg):
    # imported when raised: extractor.sorter and extractor.vtso import this module while loading
    from extractor.sorter import SorterError

    return SorterError(msg)

cdef object went_back(txn, vtso, below):
    from extractor.errors import tso_went_back

    return tso_went_back(txn, vtso, below)

cdef enum:
    PREWRITE = 0
    DONE = 1  # Commit or Rollback


cdef class Sorter:
    """``extractor.sorter.PySorter``'s rules with its items kept as a list and a head index."""

    cdef public set wait
    cdef public dict trans
    cdef public list heap
    cdef public object watermark
    cdef list _items
    cdef Py_ssize_t _head
    cdef Py_ssize_t _n

    def __init__(self):
        self.wait = set()
        self.trans = {}
        self.heap = []
        self.watermark = None
        self._items = []
        self._head = 0
        self._n = 0

    @property
    def items(self) -> list:
        """The sort items not released yet, oldest first (a copy)."""
        return self._items[self._head:]

    cpdef prewrite(self, key, txn):
        if key in self.trans:
            raise sorter_error(f"duplicate transaction key {key!r}")
        self.wait.add(key)
        self.trans[key] = txn
        self._items.append((PREWRITE, key))

    cpdef commit(self, key, vtso):
        txn = self.trans.get(key)
        if txn is None:
            raise sorter_error(f"commit of unknown transaction key {key!r}")
        if self.watermark is not None and vtso < self.watermark:
            raise went_back(txn, vtso, self.watermark)
        self.wait.discard(key)
        # The counter breaks vtso ties (branches of one txn on one DN) in commit order.
        self._n += 1
        heappush(self.heap, (vtso, self._n, key))
        self._items.append((DONE, vtso))

    cpdef rollback(self, key, vtso):
        if self.trans.pop(key, None) is None:
            raise sorter_error(f"rollback of unknown transaction key {key!r}")
        self.wait.discard(key)
        self._items.append((DONE, vtso))

    cpdef list release(self):
        cdef list items = self._items
        cdef Py_ssize_t head = self._head, end = len(items)
        cdef set wait = self.wait
        cdef tuple item
        w = self.watermark
        while head < end:
            item = <tuple>items[head]
            value = item[1]
            if <int>item[0] == PREWRITE:
                if value in wait:
                    break  # the oldest still-open transaction stops the scan
            elif w is None or value > w:
                w = value
            head += 1
        if head == end:
            del items[:]
            head = 0
        elif head > 256 and head * 2 > end:
            del items[:head]
            head = 0
        self._head = head
        self.watermark = w
        cdef list out = []
        cdef list heap = self.heap
        cdef dict trans = self.trans
        if w is None:
            return out
        while heap and (<tuple>heap[0])[0] <= w:
            key = (<tuple>heappop(heap))[2]
            out.append(trans.pop(key))
        return out

    cpdef list commit_tso(self, key, txn, unsigned long long tso, state):
        """A TSO commit of ``txn`` (``tso`` > 0), then ``release()``: ``PySorter.commit_tso``."""
        cdef unsigned long long txn_id = txn.txn_id
        try_set(state, tso, txn_id)
        vtso = tso_vtso(tso, txn_id)
        txn.vtso = vtso
        txn.tso = tso
        self.commit(key, vtso)
        return self.release()

    cpdef bint commit_alone(self, txn, unsigned long long tso, state):
        """``PySorter.commit_alone``: a TSO commit released at once when nothing is held."""
        if self.wait or self.heap or self._head < len(self._items):
            return False
        cdef unsigned long long txn_id = txn.txn_id
        vtso = tso_vtso(tso, txn_id)
        if self.watermark is not None and vtso < self.watermark:
            raise went_back(txn, vtso, self.watermark)
        try_set(state, tso, txn_id)
        txn.vtso = vtso
        txn.tso = tso
        self._n += 1
        if self.watermark is None or vtso > self.watermark:
            self.watermark = vtso
        return True

    def open_keys(self) -> list:
        return [v for k, v in self.items if k == PREWRITE and v in self.wait]

    def oldest_open(self):
        if self._head < len(self._items):
            kind, key = self._items[self._head]
            if kind == PREWRITE and key in self.wait:
                return self.trans[key]
        return None

    def __len__(self) -> int:
        return len(self.trans)


cdef inline void try_set(state, unsigned long long tso, unsigned long long txn_id) except *:
    """``state.try_set(tso, txn_id)`` (``extractor.vtso.VtsoState``) without the method call."""
    cdef unsigned long long now = state.tso
    if tso > now:
        state.tso, state.txn_id, state.seq = tso, txn_id, 0
    elif tso == now and txn_id > <unsigned long long>state.txn_id:
        state.txn_id, state.seq = txn_id, 0


cdef const char *TWO_DIGITS = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839" \
    b"4041424344454647484950515253545556575859606162636465666768697071727374757677787980818283848586878889" \
    b"90919293949596979899"


cdef inline int put_padded(char *o, unsigned long long v, int width) noexcept nogil:
    """``f"{v:0{width}d}"`` into ``o`` (at most 20 digits); its length. Two digits a step."""
    cdef char digits[20]
    cdef int n = 20, i, k = 0
    cdef unsigned int r
    while v >= 100:
        r = <unsigned int>(v % 100)
        v //= 100
        n -= 2
        digits[n] = TWO_DIGITS[2 * r]
        digits[n + 1] = TWO_DIGITS[2 * r + 1]
    if v >= 10:
        n -= 2
        digits[n] = TWO_DIGITS[2 * v]
        digits[n + 1] = TWO_DIGITS[2 * v + 1]
    else:
        n -= 1
        digits[n] = 48 + <char>v
    for i in range(width - (20 - n)):
        o[k] = 48
        k += 1
    memcpy(o + k, digits + n, 20 - n)
    return k + 20 - n


cpdef object vtso_timestamp(str vtso):
    """``extractor.vtso.py_vtso_timestamp``: the epoch seconds of a vtso, its 19 TSO digits read here
    (anything but 19 ASCII digits first: the Python one, with its result or error)."""
    cdef unsigned long long v = 0
    cdef Py_ssize_t i
    cdef long d
    if len(vtso) < 19:
        return (int(vtso[:19]) >> 22) // 1000
    for i in range(19):
        d = <long><Py_UCS4>vtso[i] - 48
        if d < 0 or d > 9:
            return (int(vtso[:19]) >> 22) // 1000
        v = v * 10 + <unsigned long long>d
    return (v >> 22) // 1000


cpdef str tso_vtso(unsigned long long tso, unsigned long long txn_id):
    """``f"{tso:019d}{txn_id:019d}" + 16 zeros``: a TSO transaction's vtso."""
    cdef char buf[64]
    cdef int n = put_padded(buf, tso, 19)
    cdef int i
    n += put_padded(buf + n, txn_id, 19)
    for i in range(16):
        buf[n + i] = 48
    return ascii_text(buf, n + 16)


cpdef str seq_vtso(unsigned long long tso, unsigned long long txn_id, unsigned long long seq, str storage_seq):
    """``extractor.vtso.py_seq_vtso``: ``f"{tso:019d}{txn_id:019d}{seq:010d}{storage_seq}"``."""
    cdef char buf[64]
    cdef int n = put_padded(buf, tso, 19)
    n += put_padded(buf + n, txn_id, 19)
    n += put_padded(buf + n, seq, 10)
    return ascii_text(buf, n) + storage_seq


# -- the assembler's rules for the kernel's groups -------------------------------------------------
cdef enum:
    # binlog.kernel's group records (extractor.assembler checks they are these)
    K_BRANCH = 40
    K_TSO_COMMIT = 41
    K_TXN = 42
    K_LOCAL = 43

from time import monotonic

cdef inline void set_item(object t, Py_ssize_t i, object v):
    Py_INCREF(v)
    PyTuple_SET_ITEM(t, i, v)


cdef class Groups:
    """What ``extractor.assembler.Assembler`` ``asm`` does with a record ``binlog.kernel.scan_txns``
    makes of a common XA shape, in one compiled call: ``K_BRANCH`` (a whole prepared branch: the
    XA START's rules), ``K_TSO_COMMIT`` (a GCN with a commit TSO and the XA COMMIT after it: the
    commit of a prepared branch), ``K_TXN`` (the two at once, released as it commits when the
    Sorter holds nothing) and ``K_LOCAL`` (a whole branch committed by its one-phase XA_PREPARE). Only the state these leave is set: the trace state is read only while a
    transaction is open, and the assembler's ``_start`` resets it when the next one opens. Anything
    else — a transaction open, an ignored XA, a known xid, a pending commit TSO, a group not seen yet
    — is turned down, and the assembler replays the group's events by the event-by-event rules,
    which are the reference (the tests build every fixture both ways and compare the bytes)."""

    cdef object asm, state, restart_cls, dml
    cdef Sorter sorter
    cdef dict by_xid

    def __init__(self, asm, Sorter sorter, dict by_xid, state, restart_cls, dml):
        if not plain_tuple_class(restart_cls):
            raise TypeError(f"{restart_cls!r} is not a NamedTuple: the groups cannot make restart points of it")
        self.asm, self.sorter, self.by_xid, self.state = asm, sorter, by_xid, state
        self.restart_cls, self.dml = restart_cls, dml

    cpdef object take(self, int k, tuple g):
        """What the group record ``(k, g)`` releases (None or a list of ``DnTxn``); False when it is
        turned down (nothing changed: replay all its records)."""
        asm = self.asm
        if asm.cur is not None or asm.ignoring or asm.pending_tso >= 0:
            return False  # (a pending commit TSO: the events say whether it is an error, or void)
        if k == K_TXN:
            return self.txn(g)
        if k == K_BRANCH:
            return None if self.branch(g[1], g[2]) else False
        if k == K_TSO_COMMIT:
            return self.tso_commit(g[3], g[1], g[2])
        if k == K_LOCAL:  # XA_PREPARE one_phase=1: a local commit there (the assembler's _xa_prepare)
            if not self.branch(g[1], g[2]):
                return False
            del self.by_xid[g[1]]
            return asm._commit(g[2], g[1], None, g[4])
        return False

    cdef bint branch(self, xid, txn) except -1:
        """``XA START … XA_PREPARE`` (one_phase=0): the prepared ``txn`` filed under ``xid``."""
        if txn is None or xid in self.by_xid or xid in self.sorter.trans:
            return False
        self.sorter.prewrite(xid, txn)
        self.by_xid[xid] = txn
        return True

    cdef object tso_commit(self, xid, tso, end):
        """``XA COMMIT xid`` after a GCN carrying commit TSO ``tso``; ``end``: the Pos after it."""
        txn = self.by_xid.pop(xid, None)
        if txn is None:
            return False
        if tso == 0:
            return self.asm._commit(txn, xid, None, end)
        txn.end = end
        return self.released(self.sorter.commit_tso(xid, txn, tso, self.state), end)

    cdef object txn(self, tuple g):
        xid, txn, tso, end = g[1], g[2], g[5], g[6]
        # (nothing held: no XA branch is open either, so by_xid is empty and the xid need not be hashed)
        if (not self.by_xid or xid not in self.by_xid) and self.sorter.commit_alone(txn, tso, self.state):
            # prewrite, commit and the release that gives it back at once: a quiet point after it
            txn.end = end
            state = self.state
            point = self.quiet_point(end)
            if txn.blocks or txn.kind is not self.dml:
                txn.restart = point
                self.asm.point = None
                return [txn]
            self.asm.point = point  # an empty DML branch is dropped; the point goes with the next
            return None
        if not self.branch(xid, txn):
            return False
        return self.tso_commit(xid, tso, end)   # (it finds the branch just filed: never turned down)

    cdef object quiet_point(self, end):
        """The ``RestartPoint`` at ``end`` (a Pos) with the DN's vtso state (the assembler's)."""
        # (the Pos read as the tuple it is: Cython's item read of a tuple subclass goes through a
        # Python-level __getitem__ call, ~0.8k instructions)
        if not isinstance(end, tuple):
            raise TypeError(f"a group's end is a Pos, not {type(end).__name__}")
        state = self.state
        # tuple.__new__(restart_cls, (…)) without the Python call (~0.9k instructions)
        cdef object point = PyType_GenericAlloc(<PyTypeObject *>self.restart_cls, 5)
        set_item(point, 0, (<tuple>end)[0])
        set_item(point, 1, (<tuple>end)[1])
        set_item(point, 2, state.tso)
        set_item(point, 3, state.txn_id)
        set_item(point, 4, state.seq)
        return point

    cdef object released(self, list out, end):
        """``asm._released(out, end)``, the assembler's rule compiled for the groups: a quiet point
        when nothing is open (else the held-prepare warning when due), empty DML dropped, the
        newest point carried by the last transaction released (``asm.restart_point``)."""
        asm = self.asm
        if not self.sorter.wait and not asm.ignoring:
            asm.point = self.quiet_point(end)
        elif self.sorter.wait and monotonic() - asm._last_warn >= asm.warn_interval:
            asm.warn_held()
        if not out:
            return None
        cdef list kept = [t for t in out if t.blocks or t.kind is not self.dml]
        if kept and asm.point is not None:
            kept[len(kept) - 1].restart = asm.point     # (wraparound=False: no [-1])
            asm.point = None
        return kept or None
