"""Per-DN transaction assembly feeding the Sorter (docs/architecture.md).

The state machine follows the CDC's ``TransactionBufferEventFilter`` + ``Transaction``:

* ``XA START`` / ``BEGIN`` open a transaction (a PreWrite sort item); a new start while one is open
  is an error. ``XA END`` does nothing. ``XA_PREPARE`` one_phase=0 leaves it prepared;
  one_phase=1 commits it at once as a local, non-TSO transaction.
* A commit TSO is remembered from a GCN with ``flags & 0x04``, a SEQUENCE of type COMMIT or the
  ``Q_LIZARD_COMMIT_GCN`` status variable of the ``XA COMMIT``; it applies to the next XA COMMIT
  and is reset by every XA START / BEGIN and after each commit / rollback.
* ``XA COMMIT xid`` commits the prepared branch (a TSO transaction iff a commit TSO is pending),
  ``XID`` / ``COMMIT`` the open local one, ``XA ROLLBACK xid`` rolls it back (it still takes a vtso
  and moves the Sorter's watermark). A QUERY outside any transaction is a physical-DDL pseudo
  transaction. GTID, consensus and other events are skipped.
* Trace ids per table-map block; rows on ``__cdc__*`` system tables make heartbeat, DDL-mark
  and instruction transactions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from itertools import chain

from binlog import Event, kernel
from binlog.constants import EventType, GcnFlag, SequenceType
from extractor import decode
from extractor.errors import (
    BadXid,
    CommitWithoutPrepare,
    DuplicateTransaction,
    OpenAtEnd,
    OrderingError,
    OrphanCommitTso,
    TraceIdRegression,
    UnexpectedEvent,
    UnfinishedTransaction,
)
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind
from extractor.sorter import PySorter, Sorter, SorterError
from extractor.trace import fake_trace_id, parse_hint, reduce_hint
from extractor.vtso import NO_STORAGE_SEQ, VtsoState, storage_sequence, vtso_for_commit
from extractor.xid import bqual_hex, branch_key, is_cdc_single, is_valid, parse, storage_hash

log = logging.getLogger(__name__)

ROWS_TYPES = frozenset({23, 24, 25, 30, 31, 32})
Q_LIZARD_BYTE = bytes([decode.Q_LIZARD_COMMIT_GCN])
_QUERY_DB_STATUS = decode.QUERY_DB_STATUS.unpack_from
_WRITE_ROWS = (23, 30)
_QUERY, _XID, _TABLE_MAP, _ROWS_QUERY = 2, 16, 19, 29
_XA_PREPARE, _SEQUENCE, _GCN = 38, 80, 105
# Row events we cannot pass through: dropping them would lose data silently.
_UNSUPPORTED = {int(EventType.PARTIAL_UPDATE_ROWS): "PARTIAL_UPDATE_ROWS (binlog_row_value_options)",
                int(EventType.TRANSACTION_PAYLOAD): "TRANSACTION_PAYLOAD (binlog_transaction_compression)"}
# Tables whose rows never reach the output (docs/formats.md). __drds_global_tx_log (legacy
# non-lizard TSO) is dropped too: this project reads lizard DNs only.
_DROPPED_TABLES = frozenset({"__drds_redo_log", "polarx_global_trx_log", "__drds_global_tx_log"})
_SYS_SCHEMA_PREFIX = "__cdc__"
_HEARTBEAT_TABLE = "__cdc_heartbeat__"
_MARK_TABLES = {"__cdc_ddl_record__": TxnKind.DDL_MARK, "__cdc_instruction__": TxnKind.INSTRUCTION}
WARN_INTERVAL = 10.0

# What the event loop does per type code: one list lookup, 0 = not in the accept set (skipped).
_K_ROWS, _K_QUERY, _K_GCN, _K_TABLE_MAP, _K_ROWS_QUERY, _K_XA_PREPARE, _K_XID, _K_SEQUENCE, _K_BAD = range(1, 10)
_KIND_OF = [0] * 256
for _t in ROWS_TYPES:
    _KIND_OF[_t] = _K_ROWS
for _t, _k in ((_QUERY, _K_QUERY), (_GCN, _K_GCN), (_TABLE_MAP, _K_TABLE_MAP), (_ROWS_QUERY, _K_ROWS_QUERY),
               (_XA_PREPARE, _K_XA_PREPARE), (_XID, _K_XID), (_SEQUENCE, _K_SEQUENCE)):
    _KIND_OF[_t] = _k
for _t in _UNSUPPORTED:
    _KIND_OF[_t] = _K_BAD
_tuple_new = tuple.__new__
# The kernel's scan takes the table as bytes; its GCN/QUERY kinds must be ours.
_KINDS = bytes(_KIND_OF)
assert (_K_ROWS, _K_QUERY, _K_GCN, _K_TABLE_MAP, _K_ROWS_QUERY, _K_XA_PREPARE) == (
    kernel.K_ROWS, kernel.K_QUERY, kernel.K_GCN, kernel.K_TABLE_MAP, kernel.K_ROWS_QUERY, kernel.K_XA_PREPARE)
_K_BRANCH = kernel.K_BRANCH
# extractor/_sort.pyx's compiled rules for the kernel's group records (K_BRANCH, K_TSO_COMMIT, K_TXN);
# without it the kernel is asked for plain records only
_Groups = kernel.compiled_twin("extractor._sort", "Groups") if kernel.Maker is not None else None
assert (kernel.K_BRANCH, kernel.K_TSO_COMMIT, kernel.K_TXN, kernel.K_LOCAL) == (40, 41, 42, 43)  # _sort.pyx's numbers
_Q_XA_START, _Q_XA_COMMIT, _Q_BEGIN = kernel.Q_XA_START, kernel.Q_XA_COMMIT, kernel.Q_BEGIN


def _records_of(events: Iterable[Event]) -> Iterator[tuple[int, Event, int]]:
    """The per-event path (streams, bytes, a restart mid-file): ``(kind, event, 0)`` for the events
    in the accept set, as the kernel's scan gives them (QUERYs left unclassified)."""
    kinds = _KIND_OF
    for ev in events:
        k = kinds[ev.h[1]]
        if k:
            yield k, ev, 0


def _pos(file: str, offset: int) -> Pos:
    return _tuple_new(Pos, (file, offset))  # Pos(file, offset) without the NamedTuple __new__ cost


class Assembler:
    """Turns one DN's events into committed ``DnTxn``s, released in ascending vtso.

    ``feed(file, events)`` yields what each commit releases; ``finish()`` ends a finite input.
    ``strict=False`` downgrades "commit with no prepare" to a warning (a start mid-stream).
    """

    def __init__(self, dn_id: str, *, storage_seq: str | None = None, state: VtsoState | None = None,
                 strict: bool = True, warn_interval: float = WARN_INTERVAL) -> None:
        self.dn = dn_id
        self.dn_hash = storage_hash(dn_id)
        self.storage_seq = storage_seq or storage_sequence(dn_id)
        self.state = state or VtsoState()
        self.strict = strict
        self.sorter = Sorter()
        self.by_xid: dict[str, DnTxn] = {}      # XA branches started and not yet ended
        self.cur: DnTxn | None = None           # the transaction events are being written to
        self.ignoring = False                    # cur is an ignored XA (format id not 1/3, single group)
        self.pending_tso = -1                    # commit TSO waiting for its XA COMMIT
        self.pending_at: Pos | None = None
        self.warn_interval = warn_interval
        self._last_warn = time.monotonic()
        self._reset_trace()
        self.file = ""
        self._query_ctx = None
        self._query_phl = 13
        self._crc = 4
        self.point: RestartPoint | None = None  # newest quiet point not yet carried by a txn
        self._branches: dict[str, str] = {}     # XA group → branch key ("" = the CDC's single group)
        self._bquals: dict[bytes, str] = {}     # the same by bqual hex (the kernel's grouped branches)
        self._groups = _Groups(self, self.sorter, self.by_xid, self.state, RestartPoint, TxnKind.DML) \
            if _Groups is not None and not isinstance(self.sorter, PySorter) else None

    # -- trace state of the current transaction (Transaction.processEvent_0) ----------------------
    def _reset_trace(self) -> None:
        self.block: Block | None = None          # where the next rows event goes (fast path)
        self.route: dict[int, tuple[Block, TxnKind | None] | None] | None = None
        self.sys = False                         # a __cdc__ table was touched: user rows dropped
        self.next_trace: str | None = None
        self.last_trace: str | None = None
        self.hint_text: str | None = None
        self.hint_event: Event | None = None

    def _error(self, cls: type[OrderingError], msg: str, offset: int | None, file: str | None = None):
        return cls(msg, dn=self.dn, file=file or self.file, offset=offset)

    # -- the event loop ---------------------------------------------------------------------------
    def feed(self, file: str, events: Iterable[Event]) -> Iterator[DnTxn]:
        """Assemble ``events`` of ``file``: an iterator of the transactions each commit releases.

        A source offering ``grouped_records`` (a whole ``binlog.reader.BinlogFile``, a live DN file)
        is read by the kernel's ``scan_txns``: the byte loop skips the events not in the accept set
        and the XA ENDs, classifies QUERYs by their statement, and hands a common XA branch over in
        one or two records (``extractor._sort.Groups``); anything else goes event by event.
        """
        self.file = file
        self._tables: dict[bytes, tuple[int, str, str, str, str]] = {}
        maker = self._maker(file) if getattr(events, "grouped_records", False) else None
        if maker is not None:
            # 16 groups (≈ 130 events) a batch: the merge takes from every DN in turn, so every DN's batch
            # in flight is in the working set. With 128, extract + merge of 1 M events cost 1.03-1.10 s
            # CPU at 32 DNs against 0.83 at 4 DNs (cache misses); with 16, 0.70-0.79 against 0.65-0.76
            records = chain.from_iterable(events.records(_KINDS, 16, grouped=maker))
        elif getattr(events, "scannable", False):
            records = chain.from_iterable(events.records(_KINDS))
        else:
            records = _records_of(events)
        # the assembler's own generator, not one more around it: a level less for every branch
        return self._assemble(records, events)

    def _maker(self, file: str):
        """What the compiled ``scan_txns`` makes this DN's branches of ``file`` with; None without the
        compiled kernel and ``Groups``, or when the model's slots are not the ones it sets (every event
        then goes alone; ``tests/test_kernel.py`` fails on that)."""
        if self._groups is None:
            return None
        try:
            return kernel.Maker(Event, Block, DnTxn, Pos, file, self.dn, TxnKind.DML, self._bquals, TxnKind.HEARTBEAT)
        except TypeError:
            return None

    def _assemble(self, records: Iterable[tuple], source) -> Iterator[DnTxn]:
        """The event loop over ``records``; a group the fast path turns down is replayed event by
        event from ``source`` (its plain records, ``BinlogFile.replay``), so the state is the same."""
        take = self._groups.take if self._groups is not None else None
        for k, ev, q in records:
            if k >= _K_BRANCH:  # one of the kernel's groups (made only when the compiled Groups is there)
                released = take(k, ev)
                if released is None:
                    continue
                if released is False:  # turned down: all of its events by the event-by-event rules
                    released = self._assemble(source.replay(ev[0], q), source)
                yield from released
                continue
            if k == _K_ROWS:
                blk = self.block
                if blk is not None and self.route is None:
                    blk.events.append(ev)
                else:
                    self._rows_slow(ev, ev.h[1])
                continue
            if k == _Q_XA_START:
                raw = ev.raw
                self._start(ev, raw[q + 8:len(raw) - ev.ctx.crc_len].decode("latin-1").strip())
                continue
            if k == _K_TABLE_MAP:
                self._table_map(ev)
                continue
            if k == _Q_XA_COMMIT:
                raw = ev.raw
                if raw.find(Q_LIZARD_BYTE, 19, q) < 0:
                    # no Q_LIZARD_COMMIT_GCN code byte anywhere before the statement: no lizard TSO
                    released = self._commit_xa(ev, raw[q + 9:len(raw) - ev.ctx.crc_len].decode("latin-1").strip())
                else:
                    released = self._query(ev)
                if released:
                    yield from released
                continue
            if k == _K_ROWS_QUERY:
                self._rows_query(ev)
                continue
            if k == _K_GCN:
                # flags & 0x04: the commit TSO of the next XA COMMIT; other GCNs are skipped.
                if ev.raw[19] & GcnFlag.HAVE_COMMITTED_SEQ:
                    flags, value = decode.gcn(ev.raw, ev.ctx.crc_len)
                    if value is None:
                        raise self._error(UnexpectedEvent, f"GCN with flags {flags:#x} carries no gcn", ev.pos)
                    self._commit_tso(value, ev)
                continue
            if k == _K_SEQUENCE:
                seq_type, value = decode.sequence(ev.raw, ev.ctx.crc_len)
                if seq_type == SequenceType.COMMIT:
                    self._commit_tso(value, ev)
                continue
            if k == _K_XA_PREPARE:
                released = self._xa_prepare(ev)
            elif k == _K_XID:
                released = self._commit_local(ev)
            elif k == _Q_BEGIN:
                self._start(ev, None)
                continue
            elif k == _K_BAD:
                raise self._error(UnexpectedEvent, f"{_UNSUPPORTED[ev.h[1]]} cannot be passed through", ev.pos)
            else:  # _K_QUERY and the statement classes the scan found
                released = self._query(ev)
            if released:
                yield from released

    def finish(self, complete: bool = False) -> None:
        """End of a finite input: a pending commit TSO is an error; open prepares are reported —
        and are an error (``OpenAtEnd``) when the input is said to be ``complete`` (the cluster
        stopped), since a complete input has nothing left open."""
        if self.pending_tso >= 0:
            at = self.pending_at
            raise OrphanCommitTso(f"commit TSO {self.pending_tso} is followed by no XA COMMIT (end of input)",
                                  dn=self.dn, file=at.file, offset=at.offset)
        if complete:
            self._check_nothing_open()
        if self.cur is not None:
            log.warning("DN %s: transaction started at %s is unfinished at the end of the input; held",
                        self.dn, self.cur.start)
        held = self.sorter.open_keys()
        if held:
            oldest = self.sorter.trans[held[0]]
            log.warning("DN %s: %d transaction(s) prepared and never committed at the end of the input "
                        "(held, not emitted; oldest %s at %s); %d committed after it held too",
                        self.dn, len(held), oldest.xid, oldest.start, len(self.sorter.heap))

    def _check_nothing_open(self) -> None:
        open_keys = self.sorter.open_keys()
        oldest = self.sorter.trans[open_keys[0]] if open_keys else self.cur
        if oldest is None:
            return
        what = (f"{len(open_keys)} branch(es) prepared and not committed (the oldest {oldest.xid})" if open_keys
                else "a transaction begun and not ended")
        raise OpenAtEnd(f"{what} at the end of the input, which was said to be complete (the cluster "
                        "stopped): it is not; build without --cluster-stopped to write what is certain",
                        dn=self.dn, file=oldest.start.file, offset=oldest.start.offset)

    def warn_held(self) -> None:
        """Every ``warn_interval`` s while a prepare blocks release: log its XID and age."""
        now = time.monotonic()
        if now - self._last_warn < self.warn_interval:
            return
        self._last_warn = now
        oldest = self.sorter.oldest_open()
        if oldest is not None and now - oldest.opened_at >= self.warn_interval:
            log.warning("DN %s: prepare %s (at %s) not committed for %.0f s; %d committed txn(s) held behind it",
                        self.dn, oldest.xid or "(local)", oldest.start, now - oldest.opened_at,
                        len(self.sorter.heap))

    # -- commit TSO -------------------------------------------------------------------------------
    def _commit_tso(self, value: int, ev: Event) -> None:
        if self.pending_tso >= 0:
            at = self.pending_at
            raise OrphanCommitTso(f"commit TSO {self.pending_tso} is followed by no XA COMMIT "
                                  f"(another commit TSO {value} at {self.file}:{ev.pos})",
                                  dn=self.dn, file=at.file, offset=at.offset)
        self.pending_tso = value
        self.pending_at = _pos(self.file, ev.pos)

    def _take_tso(self) -> int:
        value, self.pending_tso, self.pending_at = self.pending_tso, -1, None
        return value

    # -- QUERY: XA START / BEGIN / XA END / XA COMMIT / COMMIT / XA ROLLBACK / DDL -----------------
    def _query(self, ev: Event) -> list[DnTxn] | None:
        raw = ev.raw
        ctx = ev.ctx
        if ctx is not self._query_ctx:
            self._query_ctx = ctx
            phl = ctx.post_header_len
            self._query_phl = phl[_QUERY - 1] if len(phl) >= _QUERY else 13
            self._crc = ctx.crc_len
        phl, crc = self._query_phl, self._crc
        db_len, status_len = _QUERY_DB_STATUS(raw, decode.QUERY_DB_OFF)
        q = 19 + phl + status_len + db_len + 1
        # Classify by the statement's first bytes without decoding it (the DN writes these exact forms).
        c = raw[q]
        if c == 88:  # 'X'
            if raw.startswith(b"XA START", q):
                self._start(ev, raw[q + 8:len(raw) - crc].decode("latin-1").strip())
                return None
            if raw.startswith(b"XA END", q):
                return None
            if raw.startswith(b"XA COMMIT", q):
                status = 19 + phl
                if Q_LIZARD_BYTE in raw[status:status + status_len]:
                    self._lizard(raw, crc, phl)
                return self._commit_xa(ev, raw[q + 9:len(raw) - crc].decode("latin-1").strip())
            if raw.startswith(b"XA ROLLBACK", q):
                return self._rollback(ev, raw[q + 11:len(raw) - crc].decode("latin-1").strip())
        elif c == 66 and raw.startswith(b"BEGIN", q):  # 'B'
            self._start(ev, None)
            return None
        elif c == 67 and raw.startswith(b"COMMIT", q):  # 'C'
            return self._commit_local(ev)
        if self.ignoring:
            return None
        db, sql = decode.query_text(raw, crc, phl)
        if self.cur is not None:
            if sql[:9].lower() == "savepoint":
                return None
            raise self._error(UnexpectedEvent, f"statement inside a row-format transaction: {sql[:80]!r}",
                              ev.pos)
        if self.pending_tso >= 0:
            raise self._error(OrphanCommitTso, f"commit TSO {self.pending_tso} is followed by a DDL, "
                              "not an XA COMMIT", self.pending_at.offset, self.pending_at.file)
        start = _pos(self.file, ev.pos)
        txn = DnTxn(TxnKind.PHYSICAL_DDL, self.dn, 0, self.dn_hash, start, query=ev, db=db, sql=sql,
                    opened_at=time.monotonic())
        self.sorter.prewrite(start, txn)
        return self._commit(txn, start, None, _pos(self.file, ev.pos + ev.h[3]))

    def _lizard(self, raw: bytes, crc: int, phl: int) -> None:
        """Q_LIZARD_COMMIT_GCN of an XA COMMIT (DN 8.0 V1) is its commit TSO."""
        gcn = decode.lizard_commit_gcn(raw, crc, phl)
        if gcn is None:
            return
        if self.pending_tso >= 0 and self.pending_tso != gcn:
            raise self._error(OrphanCommitTso, f"commit TSO {self.pending_tso} is followed by an XA COMMIT "
                              f"carrying another ({gcn})", self.pending_at.offset, self.pending_at.file)
        self.pending_tso = gcn

    def _start(self, ev: Event, xid: str | None) -> None:
        if self.cur is not None or self.ignoring:
            what = self.cur.start if self.cur is not None else "an ignored XA"
            raise self._error(UnfinishedTransaction, f"new transaction starts while the one at {what} "
                              "is not finished", ev.pos)
        self.pending_tso, self.pending_at = -1, None
        # _reset_trace(), inlined: this runs once per transaction
        self.block = self.route = self.next_trace = self.last_trace = self.hint_text = self.hint_event = None
        self.sys = False
        start = _pos(self.file, ev.pos)
        if xid is None:
            txn = DnTxn(TxnKind.DML, self.dn, 0, self.dn_hash, start, opened_at=time.monotonic())
            self.sorter.prewrite(start, txn)
            self.cur = txn
            return
        if not is_valid(xid):
            self.ignoring = True  # the CDC ignores format ids other than 1 / 3 entirely
            return
        try:
            x = parse(xid)
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._error(BadXid, f"cannot decode xid {xid!r}: {exc}", ev.pos) from None
        branch = self._branches.get(x.group)
        if branch is None:  # per group once: "" for the CDC's single group (ignored)
            branch = self._branches[x.group] = "" if is_cdc_single(x.group) else branch_key(self.dn_hash, x.group)
        if kernel.Maker is not None:  # the compiled scan_txns looks groups up by bqual hex
            self._bquals[bqual_hex(xid)] = branch
        if not branch:
            self.ignoring = True
            return
        if xid in self.by_xid:
            raise self._error(DuplicateTransaction, f"xid {xid} started again while open since "
                              f"{self.by_xid[xid].start}", ev.pos)
        txn = DnTxn(TxnKind.DML, self.dn, x.txn_id, branch, start, xid=xid,
                    archive=x.archive, opened_at=time.monotonic())
        try:
            self.sorter.prewrite(xid, txn)
        except SorterError as exc:
            raise self._error(DuplicateTransaction, str(exc), ev.pos) from None
        self.by_xid[xid] = txn
        self.cur = txn

    def _xa_prepare(self, ev: Event) -> list[DnTxn] | None:
        one_phase = ev.raw[19] != 0
        if self.ignoring:
            self.ignoring = False
            if one_phase:
                self.pending_tso, self.pending_at = -1, None
            return None
        txn = self.cur
        if txn is None or txn.xid is None:
            raise self._error(UnexpectedEvent, "XA_PREPARE with no XA transaction open", ev.pos)
        self.cur = self.block = None  # later rows must not land in its last block
        if not one_phase:
            return None
        # One phase: a local, non-TSO commit (the CDC avoids disorder against non-TSO txns).
        self.pending_tso, self.pending_at = -1, None
        del self.by_xid[txn.xid]
        return self._commit(txn, txn.xid, None, _pos(self.file, ev.pos + ev.h[3]))

    def _commit_xa(self, ev: Event, xid: str) -> list[DnTxn] | None:
        tso = self._take_tso()
        txn = self.by_xid.pop(xid, None)
        if txn is None:
            if not is_valid(xid):
                return None  # an ignored transaction's commit
            try:
                if is_cdc_single(parse(xid).group):
                    return None
            except (ValueError, UnicodeDecodeError):
                pass
            if self.strict:
                raise self._error(CommitWithoutPrepare, f"XA COMMIT {xid} with no prepare", ev.pos)
            log.warning("DN %s: %s:%d: XA COMMIT %s with no prepare (skipped, non-strict)",
                        self.dn, self.file, ev.pos, xid)
            return None
        if txn is self.cur:
            self.cur = self.block = None  # later rows must not land in its last block
        return self._commit(txn, xid, tso if tso > 0 else None, _pos(self.file, ev.pos + ev.h[3]))

    def _commit_local(self, ev: Event) -> list[DnTxn] | None:
        self.pending_tso, self.pending_at = -1, None  # a non-XA commit is never a TSO transaction
        txn = self.cur
        if txn is None:
            if self.ignoring:
                return None
            if self.strict:
                raise self._error(CommitWithoutPrepare, "commit (XID/COMMIT) with no open transaction", ev.pos)
            log.warning("DN %s: %s:%d: commit with no open transaction (skipped)", self.dn, self.file, ev.pos)
            return None
        self.cur = self.block = None  # later rows must not land in its last block
        key = txn.start
        if txn.xid is not None:
            self.by_xid.pop(txn.xid, None)
            key = txn.xid
        return self._commit(txn, key, None, _pos(self.file, ev.pos + ev.h[3]))

    def _rollback(self, ev: Event, xid: str) -> list[DnTxn] | None:
        self.pending_tso, self.pending_at = -1, None
        txn = self.by_xid.pop(xid, None)
        if txn is None:
            if is_valid(xid):
                log.warning("DN %s: %s:%d: XA ROLLBACK %s of no known transaction", self.dn, self.file,
                            ev.pos, xid)
            return None
        if txn is self.cur:
            self.cur = self.block = None  # later rows must not land in its last block
        txn.kind = TxnKind.ROLLBACK
        txn.blocks = []
        txn.end = _pos(self.file, ev.pos + ev.h[3])
        txn.vtso = vtso_for_commit(self.state, None, txn.txn_id, self.storage_seq)
        self.sorter.rollback(xid, txn.vtso)
        return self._released(self.sorter.release(), txn.end)

    def _commit(self, txn: DnTxn, key, commit_tso: int | None, end: Pos) -> list[DnTxn] | None:
        txn.end = end
        storage = NO_STORAGE_SEQ if txn.kind in (TxnKind.DDL_MARK, TxnKind.INSTRUCTION) else self.storage_seq
        txn.vtso = vtso_for_commit(self.state, commit_tso, txn.txn_id, storage)
        txn.tso = commit_tso
        self.sorter.commit(key, txn.vtso)
        return self._released(self.sorter.release(), txn.end)

    def _released(self, out: list[DnTxn], end: Pos) -> list[DnTxn] | None:
        """What a release at ``end`` gives (``out``, from the Sorter) and the quiet point it makes."""
        sorter = self.sorter
        if not sorter.wait and not self.ignoring:
            # A quiet point: nothing open, so the Sorter has just released everything (see
            # ``restart_point``); it replaces an older point that no transaction carried yet.
            state = self.state
            self.point = _tuple_new(RestartPoint, (end.file, end.offset, state.tso, state.txn_id, state.seq))
        elif sorter.wait and time.monotonic() - self._last_warn >= self.warn_interval:
            # (after a release items remain exactly when a prepare is open: ``wait`` says it for free)
            self.warn_held()
        if not out:
            return None
        # Empty DML transactions (only filtered or system tables) are dropped after the sort, as
        # the CDC's RebuildEventLogFilter does; they still took their vtso.
        out = [t for t in out if t.blocks or t.kind is not TxnKind.DML]
        if out and self.point is not None:
            self.restart_point(out[-1])
        return out or None

    def restart_point(self, txn: DnTxn) -> None:
        """Attach the newest quiet point not carried yet to ``txn``, the highest vtso released so far.

        Valid because every transaction begun before the point was released at or before it, in
        ascending vtso, so none sorts above ``txn``: once ``txn`` is written, re-reading from the
        point (with its ``VtsoState``) regenerates exactly the transactions after ``txn``, with the
        same vtsos (a later prepare's TSO exceeds every commit before the point, and local vtsos
        continue from the saved state). A point whose own release batch is empty or only holds
        dropped transactions (rollbacks, empty DML) moves on to the next released transaction,
        which is valid for the same reason; so no point is lost, only carried later.
        """
        txn.restart = self.point
        self.point = None

    # -- rows-query, table map, rows --------------------------------------------------------------
    def _rows_query(self, ev: Event) -> None:
        txn = self.cur
        if txn is None or self.ignoring:
            return
        text = decode.rows_query_text(ev.raw, ev.ctx.crc_len)
        parsed = parse_hint(text)
        if parsed is not None:
            self.next_trace = parsed[0]
            if parsed[1] is not None:
                txn.server_id = parsed[1]
        self.hint_text = text
        self.hint_event = ev

    def _table_map(self, ev: Event) -> None:
        if self.ignoring:
            return
        txn = self.cur
        if txn is None:
            raise self._error(UnexpectedEvent, "TABLE_MAP outside a transaction", ev.pos)
        key = ev.raw[19:25]
        named = self._tables.get(key) or self._table_names(ev, key)
        table_id, db, table, db_l, table_l = named
        if db_l.startswith(_SYS_SCHEMA_PREFIX):
            self._system_table(ev, txn, table_id, db, table, db_l, table_l)
            return
        if table_l in _DROPPED_TABLES or self.sys:
            self._drop_table(table_id)
            return
        # The trace id: the hint's, else the previous table map's, else a fake one.
        trace = self.next_trace
        if trace is None:
            trace = self.last_trace if self.last_trace is not None else fake_trace_id(
                sum(len(b.events) for b in txn.blocks))
        if self.last_trace is not None and trace < self.last_trace:
            raise self._error(TraceIdRegression, f"trace id {trace} after {self.last_trace} in branch "
                              f"{txn.xid or txn.start}", ev.pos)
        self.last_trace, self.next_trace = trace, None
        hint = self.hint_text
        block = Block(trace, db, table, [ev], reduce_hint(hint) if hint else None, self.hint_event)
        self.hint_text = self.hint_event = None
        txn.blocks.append(block)
        self.block = block
        if self.route is not None:
            self.route[table_id] = (block, None)

    def _table_names(self, ev: Event, key: bytes) -> tuple[int, str, str, str, str]:
        """(table id, db, table, both lower-cased) of a TABLE_MAP whose id bytes are ``key``: kept per
        file, as a DN never maps one id to two tables while a file lasts."""
        phl = ev.ctx.post_header_len
        tid_len = 4 if len(phl) >= _TABLE_MAP and phl[_TABLE_MAP - 1] == 6 else 6
        table_id, db, table = decode.table_map_names(ev.raw, tid_len)
        named = self._tables[key] = (table_id, db, table, db.lower(), table.lower())
        return named

    def _drop_table(self, table_id: int) -> None:
        if self.route is None:
            self.route = {}
        self.route[table_id] = None
        self.block = None

    def _system_table(self, ev: Event, txn: DnTxn, table_id: int, db: str, table: str, db_l: str,
                      table_l: str) -> None:
        """A table of a ``__cdc__*`` schema: the CDC drops the transaction's user rows from here on
        (``releaseTxnBuffer``); heartbeat rows mark a heartbeat; mark tables keep their block so the
        shaper can read the DDL record / instruction row."""
        if not self.sys:
            self.sys = True
            txn.blocks.clear()
        self.hint_text = self.hint_event = None
        if table_l == _HEARTBEAT_TABLE and not db_l.endswith("_single"):
            txn.kind = TxnKind.HEARTBEAT
            txn.blocks.clear()
        mark = _MARK_TABLES.get(table_l)
        if mark is None or txn.kind is TxnKind.HEARTBEAT:
            self._drop_table(table_id)
            return
        block = Block(fake_trace_id(0), db, table, [ev])
        txn.blocks.append(block)
        if self.route is None:
            self.route = {}
        self.route[table_id] = (block, mark)
        self.block = block

    def _rows_slow(self, ev: Event, t: int) -> None:
        if self.ignoring:
            return
        txn = self.cur
        if txn is None:
            raise self._error(UnexpectedEvent, "rows event outside a transaction", ev.pos)
        route = self.route
        if route is None:
            raise self._error(UnexpectedEvent, "rows event before any TABLE_MAP", ev.pos)
        phl = ev.ctx.post_header_len
        tid_len = 4 if len(phl) >= t and phl[t - 1] == 6 else 6
        table_id = decode.rows_table_id(ev.raw, tid_len)
        if table_id not in route:
            raise self._error(UnexpectedEvent, f"rows event for table id {table_id} with no TABLE_MAP", ev.pos)
        target = route[table_id]
        if target is None:
            return
        block, mark = target
        block.events.append(ev)
        if mark is not None and t in _WRITE_ROWS and txn.kind is not TxnKind.HEARTBEAT:
            txn.kind = mark
