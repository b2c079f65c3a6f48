"""The DN side of ``gbinlog run``: one feed per DN.

``DnFeed`` runs one DN's source and its ``Assembler`` and hands the released ``DnTxn``s to the
pipeline's merge. A DN over the replication protocol is read in the merge's own thread, when the
merge asks for its next transaction: the merge can release nothing before every DN has something
newer, so it would wait for that DN in any case, and bytes not read yet wait in the socket (the DN
server's send buffer) instead of as Python objects in a queue. Feeds in threads cost ~30 % more
CPU per DN event (five threads taking turns with the one GIL, objects made in one and freed in
another; ``bench/live.py --catch-up``). A followed directory (its source sleeps between polls,
with no hook before it waits) keeps a thread and a bounded queue. The feed keeps what ``gbinlog
status`` shows: connection state, position, last TSO, oldest open prepare, whether the merge is
waiting for it. Membership (a DN joining or leaving) is the merge's (``merger.merge``).

A DN's fault is the DN's alone: when its stream fails (a CRC mismatch, a connection the source
gave up on, ERR 1236, an event the assembler refuses) the feed marks the DN failed (``DnFault``,
shown by ``gbinlog status`` and ``/healthz``), waits (``backoff_initial`` doubling to
``backoff_max``) and reads the DN again from the newest restart point among the transactions it
handed the merge, with a new source and assembler. Re-reading from a restart point regenerates the
same transactions with the same vtsos, so the ones the merge already took (vtso below the last
taken, and as many of that vtso as it took) are dropped and the merge goes on as if nothing had
happened; meanwhile it waits for the DN, and the endpoint serves what was written. A byte damaged in
flight heals at the re-read; the same error at the same place ``PERSISTENT_AFTER`` times in a row
is reported persistent and retried every ``backoff_max``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dumper.cluster import BROADCAST_KINDS
from extractor.assembler import Assembler
from extractor.live_source import LiveSourceError, ReplicationSource, StopWaiting
from extractor.model import DnTxn, RestartPoint
from extractor.source import DirSource, DnSource
from extractor.vtso import VtsoState, vtso_tso
from merger import IDLE

log = logging.getLogger(__name__)
_END = object()
QUEUE_TXNS = 1_000   # a followed directory's feed thread runs at most this far ahead of the merge
IDLE_TICK_S = 0.05   # while a stop is pending: how often a waiting feed says IDLE
PERSISTENT_AFTER = 3  # the same error at the same place this many times in a row: persistent


class FeedStopped(Exception):
    """The feed was stopped (shutdown): the merge ends without emitting anything more."""


def _stop_waiting() -> None:
    raise StopWaiting


class _OwnFailure(Exception):
    """What ``before_wait`` (the pipeline writing out what it appended) raised, carried past the
    DN feed's error handling as its ``__cause__``: a full disk is not the DN's failure."""


def _own_failures(before_wait: Callable[[], None]) -> Callable[[], None]:
    def guarded() -> None:
        try:
            before_wait()
        except Exception as exc:
            raise _OwnFailure() from exc
    return guarded


@dataclass(slots=True)
class DnFault:
    """Why a DN's stream failed, and where: ``repeats`` counts the same error at the same place
    in a row (a byte damaged in flight does not repeat; a lost file does)."""

    error: str
    file: str | None
    offset: int | None
    repeats: int
    since: float                  # wall clock of the first of the repeats
    retry_in_s: float
    resume: str                   # where the DN is read again from

    @property
    def persistent(self) -> bool:
        return self.repeats >= PERSISTENT_AFTER

    def describe(self) -> str:
        """The error and what is done about it (``gbinlog status``, ``/healthz``)."""
        if self.persistent:
            return (f"{self.error} (persistent: {self.repeats} times in a row at the same place; retrying every "
                    f"{self.retry_in_s:g} s)")
        return f"{self.error} (retrying from {self.resume})"

    def as_dict(self) -> dict:
        return {"error": self.error, "file": self.file, "offset": self.offset, "repeats": self.repeats,
                "persistent": self.persistent, "since": round(self.since, 3), "retry_in_s": self.retry_in_s,
                "resume": self.resume}


def _message(dn_id: str, exc: BaseException) -> str:
    """The error as one line naming the DN once."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if text.startswith(f"DN {dn_id}") else f"DN {dn_id}: {text}"


def drain_feed(feed: object, idle_stop: Callable[[], bool] | None, *,
               end_of_input_returns: bool, before_wait: Callable[[], None] | None = None) -> Iterator[DnTxn]:
    """The items of a feed's ``queue`` until its ``_END``: blocks while the DN has nothing newer
    (calling ``before_wait()`` first, in the merge's thread: the live pipeline writes out what it
    appended then); yields ``merger.IDLE`` while ``idle_stop()`` says a shutdown is pending (the
    merge ends there when its output is at a whole transaction, else it keeps waiting);
    ``FeedStopped`` once ``stopped`` (a recorded ``error`` wins). At ``_END`` of a finite input the
    iterator ends when ``end_of_input_returns``; a feed whose input never ends (Spark's) counts it
    as stopped."""
    q = feed.queue  # type: ignore[attr-defined]
    get, get_now = q.get, q.get_nowait
    while True:
        try:
            item = get_now()
        except queue.Empty:
            if before_wait is not None:
                before_wait()
            try:
                item = get(timeout=0.05)
            except queue.Empty:
                if feed.stopped.is_set():  # type: ignore[attr-defined]
                    if feed.error is not None:  # type: ignore[attr-defined]
                        raise feed.error from None  # type: ignore[attr-defined]
                    raise FeedStopped(feed.dn_id) from None  # type: ignore[attr-defined]
                if idle_stop is not None and idle_stop():
                    yield IDLE
                continue
        if item is _END:
            if feed.error is not None:  # type: ignore[attr-defined]
                raise feed.error
            if end_of_input_returns and not feed.stopped.is_set():  # type: ignore[attr-defined]
                return
            raise FeedStopped(feed.dn_id)  # type: ignore[attr-defined]
        yield item


class DnFeed:
    """One DN: source → Assembler (vtso, Sorter) → the merge: read when the merge asks (a
    replication source) or by a thread through a queue (a followed directory). ``stream()`` is
    what the merge reads.

    ``reopen(restart)`` makes a new source reading the DN from a restart point (None: its first
    file); with it a failed stream is read again after a backoff (see the module doc), without it
    the error ends the stream. ``restart`` is where ``source`` starts."""

    def __init__(self, dn_id: str, source: DnSource, *, storage_seq: str, state: VtsoState | None = None,
                 start: str = "", restart: RestartPoint | None = None,
                 reopen: Callable[[RestartPoint | None], DnSource] | None = None,
                 backoff_initial: float = 0.1, backoff_max: float = 5.0) -> None:
        self.dn_id = dn_id
        self.source = source
        self.storage_seq = storage_seq
        if state is None and restart is not None:
            state = restart.vtso_state()
        self.asm = Assembler(dn_id, storage_seq=storage_seq, state=state)
        self.start = start
        self.pulled = isinstance(source, ReplicationSource)   # read in the merge's thread
        self.queue: queue.Queue = queue.Queue(QUEUE_TXNS)
        self.stopped = threading.Event()
        self.error: BaseException | None = None   # a fault ended the stream (no ``reopen``)
        self.txns = 0
        self._last: DnTxn | None = None           # newest released
        self.waiting = False                      # the merge waits for this DN's next transaction
        self.events = 0                           # dir sources: counted here
        self.bytes = 0
        self.file = ""
        self.pos = 0
        self.thread = threading.Thread(target=self._run, name=f"gbinlog-dn:{dn_id}", daemon=True)
        # -- faults: where to read again from, what the merge has taken, what went wrong
        self.reopen = reopen
        self.backoff_initial, self.backoff_max = backoff_initial, max(backoff_max, backoff_initial)
        self.resume_from = restart                # newest restart point among the transactions handed out
        # a start state without its restart point (tests): kept unchanged for a re-read from the first file
        self._resume_state = (VtsoState(state.tso, state.txn_id, state.seq)
                              if state is not None and restart is None else None)
        self._taken_at_last = 0                   # transactions handed out with the newest vtso
        self.fault: DnFault | None = None         # while the DN is failed (until it answers again)
        self._recent: DnFault | None = None       # the last fault, until the DN hands out a new transaction
        self.faults = 0                           # every fault so far
        self._faults_in_row = 0                   # since the DN last handed out a transaction
        self._skip: tuple[str, int] | None = None   # after a re-read: (vtso, how many of it) already taken
        self.regenerated = 0                      # transactions a re-read gave again and the feed dropped
        self._carried = (0, 0, 0)                 # events, bytes, reconnects of the sources before this one

    @property
    def last_vtso(self) -> str:
        """The newest released vtso ("" before the first)."""
        last = self._last
        return last.vtso if last is not None else ""

    @property
    def last_tso(self) -> int | None:
        """The newest released TSO (commit TSO or DN max)."""
        last = self._last
        return vtso_tso(last.vtso) if last is not None else None

    # -- what the merge took, and reading again --------------------------------------------------
    def _taken(self, txn: DnTxn) -> bool:
        """Note ``txn`` before it is handed out; False when a re-read regenerated it and the merge
        has it already (drop it)."""
        skip = self._skip
        if skip is not None:
            vtso, left = skip
            if txn.vtso < vtso:
                self.regenerated += 1
                return False
            if txn.vtso == vtso and left > 0:
                self._skip = (vtso, left - 1)
                self.regenerated += 1
                return False
            self._skip = None
        last = self._last
        self._taken_at_last = self._taken_at_last + 1 if last is not None and last.vtso == txn.vtso else 1
        if txn.restart is not None:
            self.resume_from = txn.restart
        if self.fault is not None:
            self._healed(f"it hands out transactions again after {self.fault.error}")
        self._recent = None
        self._faults_in_row = 0
        self.txns += 1
        self._last = txn
        return True

    def _fault_at(self, exc: BaseException) -> float:
        """Record the fault ``exc``; the seconds to wait before reading again."""
        message = _message(self.dn_id, exc)
        if isinstance(exc, LiveSourceError):
            file, offset = exc.file, exc.offset
        else:
            file, offset = self._position()
        before = self._recent
        same = before is not None and (before.error, before.file, before.offset) == (message, file, offset)
        repeats = before.repeats + 1 if same else 1
        self.faults += 1
        self._faults_in_row += 1
        delay = min(self.backoff_initial * 2 ** (self._faults_in_row - 1), self.backoff_max)
        if repeats >= PERSISTENT_AFTER:
            delay = self.backoff_max
        resume = str(self.resume_from) if self.resume_from is not None else "its first file"
        self.fault = self._recent = DnFault(message, file, offset, repeats, before.since if same else time.time(),
                                            delay, resume)
        if self.fault.persistent:
            log.error("%s: persistent (%d times in a row at the same place); retrying every %g s", message,
                      repeats, delay)
        else:
            log.error("%s; reading the DN again from %s in %g s", message, resume, delay)
        return delay

    def _healed(self, how: str) -> None:
        log.warning("DN %s: healed: %s", self.dn_id, how)
        self.fault = None

    def _answers(self, src: ReplicationSource) -> None:
        """The source is about to wait for the DN, connected: the DN answered the dump and sent
        everything it had up to here. Past the place of the fault (or at it: a refused position),
        the DN is no longer failed; its repeats count on until it hands out a new transaction."""
        fault = self.fault
        if fault is None or src.state != "streaming":
            return
        if fault.file is not None and (src.file, src.pos) < (fault.file, fault.offset or 0):
            return
        self._healed(f"the DN answers again, at {src.file}:{src.pos}")

    def _position(self) -> tuple[str | None, int | None]:
        src = self.source
        if isinstance(src, ReplicationSource):
            return src.file or None, src.pos
        return self.file or None, self.pos

    def _reopen(self) -> None:
        """A new source and assembler from the newest restart point handed out; the transactions
        the merge took after it are dropped when they come again."""
        old = self.source
        if isinstance(old, ReplicationSource):
            events, nbytes, reconnects = self._carried
            self._carried = (events + old.events, nbytes + old.bytes, reconnects + old.reconnects)
        stop = getattr(old, "stop", None)
        if stop is not None:
            stop()
        at = self.resume_from
        first = self._resume_state
        state = at.vtso_state() if at is not None else (
            VtsoState(first.tso, first.txn_id, first.seq) if first is not None else None)
        self.asm = Assembler(self.dn_id, storage_seq=self.storage_seq, state=state)
        self._skip = (self._last.vtso, self._taken_at_last) if self._last is not None else None
        self.source = self.reopen(at)  # type: ignore[misc]
        self.file, self.pos = (at.file, at.offset) if at is not None else ("", 0)
        e, b, r = self._carried
        self._carried = (e, b, r + 1)           # reading again is a reconnection
        if self.stopped.is_set():
            self.stop()

    # -- the merge's thread (a replication source) ------------------------------------------------
    def begin(self) -> DnFeed:
        if not self.pulled:
            self.thread.start()
        return self

    def _hook(self, idle_stop: Callable[[], bool] | None, before_wait: Callable[[], None] | None,
              emitted: Callable[[], str | None] | None) -> None:
        src = self.source
        guarded = None if before_wait is None else _own_failures(before_wait)

        def waiting_for_the_dn() -> None:
            if self.fault is not None and isinstance(src, ReplicationSource):
                self._answers(src)
            if guarded is not None:
                guarded()
        src.before_wait = waiting_for_the_dn  # type: ignore[attr-defined]
        if idle_stop is not None:
            src.while_waiting = lambda: idle_stop() and self._may_end(emitted) and _stop_waiting()  # type: ignore[attr-defined]

    def _pull(self, idle_stop: Callable[[], bool] | None, before_wait: Callable[[], None] | None,
              emitted: Callable[[], str | None] | None) -> Iterator[DnTxn]:
        """The DN's transactions, read when the merge asks for them. The source calls
        ``before_wait()`` before it waits for the network. While a stop is pending
        (``idle_stop()``) and the merge's output is at a whole transaction (``_may_end``) the
        source's wait is cut short (``StopWaiting``) and this yields ``merger.IDLE``: the merge
        ends there (the file being assembled is given up: the next start re-reads it from the last
        checkpoint). Else it waits for the DN, as a feed thread's queue would. A fault of the DN's
        stream is waited out and the DN read again (``reopen``), in this thread: the merge waits for
        the DN meanwhile, as it would for a silent one."""
        while True:
            self._hook(idle_stop, before_wait, emitted)
            fault: Exception | None = None
            try:
                yield from self._pull_source()
            except StopWaiting:
                fault = StopWaiting()
            except _OwnFailure as own:       # the pipeline's own write (e.g. DiskFull): not this DN's error
                raise own.__cause__ from None  # type: ignore[misc]
            except Exception as exc:
                if self.stopped.is_set():
                    raise FeedStopped(self.dn_id) from None
                if self.reopen is None:
                    self.error = exc
                    log.error("%s", _message(self.dn_id, exc))
                    raise
                fault = exc
            if fault is None:
                raise FeedStopped(self.dn_id)
            if isinstance(fault, StopWaiting):
                self.waiting = False
                yield from self._idle_until_stopped()
            delay = self._fault_at(fault)
            yield from self._backoff(delay, idle_stop, before_wait, emitted)
            self._reopen()

    def _pull_source(self) -> Iterator[DnTxn]:
        asm, taken = self.asm, self._taken
        for name, events in self.source.files():
            self.file = name
            txns = asm.feed(name, events)
            while True:
                self.waiting = True
                txn = next(txns, None)
                self.waiting = False
                if txn is None:
                    break
                if taken(txn):
                    yield txn
            if self.stopped.is_set():
                break

    def _idle_until_stopped(self) -> Iterator[object]:
        yield IDLE
        while not self.stopped.wait(IDLE_TICK_S):
            yield IDLE
        raise FeedStopped(self.dn_id)

    def _backoff(self, seconds: float, idle_stop: Callable[[], bool] | None,
                 before_wait: Callable[[], None] | None, emitted: Callable[[], str | None] | None) -> Iterator[object]:
        """Wait ``seconds`` before reading the DN again. What the pipeline appended is written out
        first (replicas read on meanwhile); a pending stop ends the wait (``IDLE``, as a silent DN
        does) when the merge may end there."""
        if before_wait is not None:
            before_wait()
        self.waiting = True
        deadline = time.monotonic() + seconds
        try:
            while True:
                if self.stopped.is_set():
                    raise FeedStopped(self.dn_id)
                if idle_stop is not None and idle_stop() and self._may_end(emitted):
                    self.waiting = False
                    yield from self._idle_until_stopped()
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.stopped.wait(min(left, IDLE_TICK_S))
        finally:
            self.waiting = False

    def _may_end(self, emitted: Callable[[], str | None] | None) -> bool:
        """The merge, waiting for this DN, ends when told ``IDLE`` (``merger.merge``): nothing was
        taken from the DN yet; or the last transaction taken was emitted (``emitted()``: the newest
        vtso the pipeline consumed); or it is a broadcast's branch (one per DN: the merge emits
        the group it holds). Else it is in a group the merge holds until it sees this DN's next
        transaction (two branches of one DN): told ``IDLE``, it would wait all the same."""
        last = self._last
        if last is None or last.kind in BROADCAST_KINDS:
            return True
        done = emitted() if emitted is not None else None
        return done is not None and done >= last.vtso

    # -- a thread (a followed directory) ----------------------------------------------------------
    def _run(self) -> None:
        """Source → assembler → the merge's queue, one transaction at a time; a fault is waited
        out and the directory read again (``reopen``)."""
        try:
            while not self.stopped.is_set():
                try:
                    self._run_source()
                    return
                except BaseException as exc:  # noqa: BLE001 - handed to the merge thread
                    if self.stopped.is_set():
                        return
                    if self.reopen is None or not isinstance(exc, Exception):
                        self.error = exc
                        log.error("%s", _message(self.dn_id, exc))
                        return
                    if self.stopped.wait(self._fault_at(exc)):
                        return
                    self._reopen()
        finally:
            self._put(_END)

    def _run_source(self) -> None:
        asm, taken = self.asm, self._taken
        for name, events in self.source.files():
            self.file = name
            for txn in asm.feed(name, self._count(name, events)):
                if taken(txn):
                    self._put(txn)
            if self.stopped.is_set():
                break

    def _count(self, name: str, events: Iterable) -> Iterator:
        """Position and counters as events pass (dir sources keep none of their own)."""
        for ev in events:
            self.pos = ev.pos + ev.h[3]
            self.events += 1
            self.bytes += ev.h[3]
            yield ev

    def _put(self, item: object) -> None:
        while True:
            try:
                self.queue.put(item, timeout=0.2)
                return
            except queue.Full:
                if self.stopped.is_set():
                    return

    def stream(self, idle_stop: Callable[[], bool] | None = None, before_wait: Callable[[], None] | None = None,
               emitted: Callable[[], str | None] | None = None) -> Iterator[DnTxn]:
        """The DN's transactions for the merge (blocks while the DN has nothing newer, calling
        ``before_wait()`` first). While it waits and ``idle_stop()`` is true it yields
        ``merger.IDLE`` (see ``drain_feed``, ``_pull``; ``emitted()``: the newest vtso the
        pipeline consumed)."""
        if self.pulled:
            return self._pull(idle_stop, before_wait, emitted)
        return drain_feed(self, idle_stop, end_of_input_returns=True, before_wait=before_wait)

    def stop(self) -> None:
        self.stopped.set()
        stop = getattr(self.source, "stop", None)
        if stop is not None:
            stop()

    def join(self, timeout: float = 10.0) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    # -- status -----------------------------------------------------------------------------------
    def status(self) -> dict:
        src = self.source
        now = time.monotonic()
        carried_events, carried_bytes, carried_reconnects = self._carried
        if isinstance(src, ReplicationSource):
            state, file, pos = src.state, src.file, src.pos
            events, nbytes, error = carried_events + src.events, carried_bytes + src.bytes, src.last_error
            reconnects = carried_reconnects + src.reconnects
            where = f"{src.host}:{src.port}"
        else:
            state = "failed" if self.error else ("stopped" if not self.thread.is_alive() else "following")
            file, pos, events, nbytes, reconnects, error = (self.file, self.pos, self.events, self.bytes,
                                                            carried_reconnects, None)
            where = str(getattr(src, "directory", ""))
        fault = self.fault
        if self.error is not None:
            state, error = "failed", _message(self.dn_id, self.error)
        elif fault is not None:
            state, error = "failed", fault.describe()
        oldest = self.asm.sorter.oldest_open()
        held = None
        if oldest is not None:
            held = {"xid": oldest.xid, "at": str(oldest.start), "age_s": round(now - oldest.opened_at, 3),
                    "committed_behind": len(self.asm.sorter.heap)}
        last_tso = self.last_tso
        last_ms = (last_tso >> 22) if last_tso else None
        return {"dn": self.dn_id, "source": where, "state": state, "file": file, "pos": pos,
                "events": events, "bytes": nbytes, "txns": self.txns, "reconnects": reconnects,
                "last_error": error, "fault": fault.as_dict() if fault is not None else None,
                "faults": self.faults, "regenerated": self.regenerated, "last_tso": last_tso, "last_vtso": self.last_vtso,
                "last_tso_age_ms": round(time.time() * 1000 - last_ms) if last_ms else None,
                "open_prepares": len(self.asm.sorter.wait), "oldest_open_prepare": held,
                "queued": self.queue.qsize(), "merge_waits": self.waiting or not self.pulled}


def dn_source(dn, *, start_file: str | None, start_pos: int, server_id: int, backoff_initial: float,
              backoff_max: float, connect_timeout: float, heartbeat_s: float) -> DnSource:
    """The source a ``DnConfig`` describes, starting at ``start_file:start_pos`` (None: the first file)."""
    if dn.is_remote:
        return ReplicationSource(dn.id, dn.host, dn.port, dn.user or "", dn.password,
                                 start_file=start_file, start_pos=start_pos, server_id=server_id,
                                 heartbeat=heartbeat_s, backoff_initial=backoff_initial,
                                 backoff_max=backoff_max, connect_timeout=connect_timeout,
                                 tls=dn.tls_context())
    stopped = threading.Event()
    src = DirSource(Path(dn.dir), dn_id=dn.id, follow=True, start_file=start_file, start_pos=start_pos,
                    poll_interval=dn.poll_ms / 1000, should_stop=stopped.is_set)
    src.stop = stopped.set  # type: ignore[attr-defined]
    return src
