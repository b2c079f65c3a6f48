# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled twins of ``extractor.sorter.Sorter`` and of the vtso text of ``extractor.vtso``: the
same rules and results (the tests run both); ``extractor.sorter`` picks one (``GBINLOG_PURE_PYTHON=1``
forces the Python ones). Built by ``pip install`` with the other kernels (setup.py)."""

from cpython.unicode cimport PyUnicode_DecodeLatin1
from heapq import heappop, heappush


cdef object sorter_error(str msg):
    # imported when raised: extractor.sorter and extractor.vtso import this module while loading
    from extractor.sorter import SorterError

    return SorterError(msg)

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
        if self.trans.get(key) is None:
            raise sorter_error(f"commit of unknown transaction key {key!r}")
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
        txn_id = txn.txn_id
        state.try_set(tso, txn_id)
        vtso = tso_vtso(tso, txn_id)
        txn.vtso = vtso
        txn.tso = tso
        self.commit(key, vtso)
        return self.release()

    cpdef bint commit_alone(self, txn, unsigned long long tso, state):
        """``PySorter.commit_alone``: a TSO commit released at once when nothing is held."""
        if self.wait or self.heap or self._head < len(self._items):
            return False
        txn_id = txn.txn_id
        state.try_set(tso, txn_id)
        vtso = tso_vtso(tso, txn_id)
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


cdef inline int put_padded(char *o, unsigned long long v, int width) noexcept nogil:
    """``f"{v:0{width}d}"`` into ``o`` (at most 20 digits); its length."""
    cdef char digits[20]
    cdef int n = 0, i, k = 0
    while True:
        digits[n] = 48 + <char>(v % 10)
        n += 1
        v //= 10
        if v == 0:
            break
    for i in range(width - n):
        o[k] = 48
        k += 1
    for i in range(n - 1, -1, -1):
        o[k] = digits[i]
        k += 1
    return k


cpdef str tso_vtso(unsigned long long tso, unsigned long long txn_id):
    """``f"{tso:019d}{txn_id:019d}" + 16 zeros``: a TSO transaction's vtso."""
    cdef char buf[64]
    cdef int n = put_padded(buf, tso, 19)
    cdef int i
    n += put_padded(buf + n, txn_id, 19)
    for i in range(16):
        buf[n + i] = 48
    return PyUnicode_DecodeLatin1(buf, n + 16, NULL)
