# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled twin of ``merger.kway_merge._Merge.iterate`` (the merge loop): the same rules, line for
line, with typed locals, the DN transactions' slots read by their offsets and each ``GlobalTxn``
made by its slots, without a Python ``__init__`` call. ``merger.kway_merge`` picks it
(``GBINLOG_PURE_PYTHON=1``, or a missing build, keeps the Python loop; the tests build every
fixture both ways and compare the bytes, and run the merger's tests on both). The rare paths —
membership, a stream that idles or ends, errors — call back into the ``_Merge`` object, so each of
those rules stays written once, in Python."""

import sys

from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.object cimport Py_LT, PyObject_RichCompareBool
from cpython.unicode cimport PyUnicode_Compare
from libc.string cimport memcmp

from binlog.kernel import by_trace
from extractor.model import DnTxn, TxnKind
from extractor.vtso import ZERO_SEQ
from merger.model import GlobalTxn
from merger.trace_merge import _drop_repeated_hints


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyType_GenericAlloc(PyTypeObject *tp, Py_ssize_t nitems)
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)


cdef Py_ssize_t slot_offset(type cls, str name) except -1:
    d = cls.__dict__.get(name)
    if type(d).__name__ != "member_descriptor":
        raise TypeError(f"{cls.__name__}.{name} is not a slot: the compiled merge cannot read it")
    return (<PyMemberDescrObject *>d).d_member.offset


# DnTxn's slots the loop reads (``txn.kind`` …), and GlobalTxn's, which it sets
cdef Py_ssize_t KIND = slot_offset(DnTxn, "kind"), XID = slot_offset(DnTxn, "xid")
cdef Py_ssize_t VTSO = slot_offset(DnTxn, "vtso"), DN = slot_offset(DnTxn, "dn"), BLOCKS = slot_offset(DnTxn, "blocks")
if set(GlobalTxn.__slots__) != {"vtso", "kind", "blocks", "branches"} or GlobalTxn.__new__ is not object.__new__:
    raise TypeError(f"GlobalTxn's slots are {GlobalTxn.__slots__}: the compiled merge sets vtso, kind, blocks, branches")
cdef Py_ssize_t G_VTSO = slot_offset(GlobalTxn, "vtso"), G_KIND = slot_offset(GlobalTxn, "kind")
cdef Py_ssize_t G_BLOCKS = slot_offset(GlobalTxn, "blocks"), G_BRANCHES = slot_offset(GlobalTxn, "branches")

cdef object DML = TxnKind.DML, HEARTBEAT = TxnKind.HEARTBEAT, INSTRUCTION = TxnKind.INSTRUCTION
cdef tuple BROADCAST = (TxnKind.HEARTBEAT, TxnKind.DDL_MARK, TxnKind.INSTRUCTION)
cdef object END = object()
cdef str ZEROS = ZERO_SEQ
cdef bytes ZEROS_BYTES = ZERO_SEQ.encode()
cdef const char *ZEROS_ASCII = ZEROS_BYTES
assert len(ZEROS) == 10


# -- the heap of DN heads ``(vtso, rank, txn)``: heapq's algorithm (the same layout, so the Python
# methods' heapq.heappush on the same list keeps it a heap), items compared by vtso then rank — a
# rank is in the heap once, so the txns are never compared, as in heapq's tuple comparison
cdef inline bint item_lt(tuple a, tuple b) except -1:
    cdef int c = PyUnicode_Compare(a[0], b[0])
    if c != 0:
        return c < 0
    return PyObject_RichCompareBool(a[1], b[1], Py_LT)


cdef void sift_down(list heap, Py_ssize_t startpos, Py_ssize_t pos) except *:
    cdef tuple newitem = heap[pos], parent
    cdef Py_ssize_t parentpos
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        if item_lt(newitem, parent):
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = newitem


cdef void sift_up(list heap, Py_ssize_t pos) except *:
    cdef Py_ssize_t endpos = len(heap), startpos = pos, childpos = 2 * pos + 1, rightpos
    cdef tuple newitem = heap[pos]
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not item_lt(heap[childpos], heap[rightpos]):
            childpos = rightpos
        heap[pos] = heap[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    heap[pos] = newitem
    sift_down(heap, startpos, pos)


cdef tuple heappop(list heap):
    cdef tuple last = heap.pop(), top
    if heap:
        top = heap[0]
        heap[0] = last
        sift_up(heap, 0)
        return top
    return last


cdef void heappush(list heap, tuple item) except *:
    heap.append(item)
    sift_down(heap, 0, len(heap) - 1)


cdef inline object slot(object txn, Py_ssize_t off):
    """``txn``'s slot at ``off`` (``txn`` a DnTxn: checked where it enters the heap)."""
    cdef PyObject *v = (<PyObject **>((<char *><PyObject *>txn) + off))[0]
    if v == NULL:
        raise AttributeError("a DnTxn slot is unset")
    return <object>v


cdef inline object dn_txn(object txn):
    if type(txn) is not DnTxn:
        raise TypeError(f"a DN stream gave {type(txn).__name__}, not a DnTxn")
    return txn


cdef inline void set_slot(object obj, Py_ssize_t off, object value):
    Py_INCREF(value)
    (<PyObject **>((<char *><PyObject *>obj) + off))[0] = <PyObject *>value


cdef object global_txn(str vtso, object kind, object blocks, list branches):
    """``GlobalTxn(vtso, kind, blocks, branches)`` by its slots."""
    cdef object g = PyType_GenericAlloc(<PyTypeObject *>GlobalTxn, 0)
    set_slot(g, G_VTSO, vtso)
    set_slot(g, G_KIND, kind)
    set_slot(g, G_BLOCKS, blocks)
    set_slot(g, G_BRANCHES, branches)
    return g


cdef inline bint is_tso(str vtso):
    """``extractor.vtso.vtso_is_tso``: the seq part (characters 38-48) is ``ZERO_SEQ``."""
    cdef Py_ssize_t i
    if len(vtso) < 48:
        return False
    if PyUnicode_KIND(vtso) == 1:   # (always: a vtso is digits)
        return memcmp(<const char *>PyUnicode_DATA(vtso) + 38, ZEROS_ASCII, 10) == 0
    for i in range(10):
        if <Py_UCS4>vtso[38 + i] != <Py_UCS4>ZEROS[i]:
            return False
    return True


cdef object merged_blocks(list branches):
    """``merger.trace_merge.merge_by_trace(branches)``."""
    merged, repeated = by_trace(branches)
    if repeated:
        _drop_repeated_hints(merged)
    return merged


cdef object one(object txn):
    """``merger.kway_merge._one``: a transaction that joins nothing."""
    kind = slot(txn, KIND)
    cdef list branches = [txn]
    return global_txn(slot(txn, VTSO), kind, merged_blocks(branches) if kind is DML else slot(txn, BLOCKS), branches)


cdef object join(list branches):
    """``merger.kway_merge._join``: the transaction of a group of branches."""
    first = branches[0]
    kind = slot(first, KIND)
    if kind is DML:
        blocks = merged_blocks(branches)
    elif kind is HEARTBEAT:
        blocks = []
    else:
        blocks = slot(first, BLOCKS)
    return global_txn(slot(first, VTSO), kind, blocks, branches)


def merge_loop(m):
    """``m.iterate()`` (``m``: a ``merger.kway_merge._Merge``), compiled."""
    py = sys.modules["merger.kway_merge"]
    if m.idle_start:
        return
    cdef list heap = m.heap
    cdef dict its = m.its, dn_of = m.dn_of
    cdef set leaving = m.leaving
    should_stop = m.should_stop
    cdef object last = None, txn, kind, rank, it, held_rank = -1, nxt, IDLE = py.IDLE
    cdef str last_vtso = "", vtso
    cdef list held = []
    cdef tuple item
    cdef bint got
    cdef int c
    while heap:
        item = heappop(heap)
        vtso, rank, txn = item[0], item[1], dn_txn(item[2])
        c = PyUnicode_Compare(vtso, last_vtso)
        if c <= 0 and not (held and c == 0):
            raise py._non_monotonic(txn, last)
        if PyUnicode_Compare(vtso, m.horizon) > 0:
            m._hold(vtso, rank, txn)     # the emission rule: an ended DN has not passed it
            return
        last, last_vtso = txn, vtso
        kind = slot(txn, KIND)
        if kind is INSTRUCTION and not held:
            m._membership(txn)
        # (a txn popped while a group is held has the group's vtso, a TSO one)
        if slot(txn, XID) is None or (not held and not is_tso(vtso)):
            yield one(txn)
            if (should_stop is not None and should_stop()) or not m._refill(rank, None, txn):
                return
            continue
        if held and (kind is not slot(held[0], KIND) or rank == held_rank):
            py._check_join(held, txn)
        held.append(txn)
        held_rank = rank
        # the DN's next transaction: ``_refill``'s common case inline
        it = its.get(rank)
        if it is None or rank in leaving:
            got = m._refill(rank)
        else:
            nxt = next(it, END)
            got = nxt is not IDLE
            if nxt is END:
                m._ended(rank, txn)
            elif got:
                dn_of[rank] = slot(dn_txn(nxt), DN)
                heappush(heap, (slot(nxt, VTSO), rank, nxt))
        if not got:
            if kind in BROADCAST:
                # one branch per DN: the others' branches of this group are in the heap
                while heap and (<tuple>heap[0])[0] == vtso:
                    held.append(dn_txn(heappop(heap)[2]))
                m._one_tso(held)
                yield join(held)
                return
            m._wait(rank, None, txn)     # not provably whole: wait for the DN after all
        if not heap or PyUnicode_Compare((<tuple>heap[0])[0], vtso) != 0:
            m._one_tso(held)
            yield join(held)
            held = []
            if should_stop is not None and should_stop():
                return
