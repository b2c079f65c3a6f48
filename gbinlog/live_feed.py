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
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dumper.cluster import BROADCAST_KINDS
from extractor.assembler import Assembler
from extractor.live_source import ReplicationSource, StopWaiting
from extractor.model import DnTxn
from extractor.source import DirSource, DnSource
from extractor.vtso import VtsoState, vtso_tso
from merger import IDLE

log = logging.getLogger(__name__)
_END = object()
QUEUE_TXNS = 1_000   # a followed directory's feed thread runs at most this far ahead of the merge
IDLE_TICK_S = 0.05   # while a stop is pending: how often a waiting feed says IDLE


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
    what the merge reads."""

    def __init__(self, dn_id: str, source: DnSource, *, storage_seq: str, state: VtsoState | None = None,
                 start: str = "") -> None:
        self.dn_id = dn_id
        self.source = source
        self.asm = Assembler(dn_id, storage_seq=storage_seq, state=state)
        self.start = start
        self.pulled = isinstance(source, ReplicationSource)   # read in the merge's thread
        self.queue: queue.Queue = queue.Queue(QUEUE_TXNS)
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self.txns = 0
        self._last: DnTxn | None = None           # newest released
        self.waiting = False                      # the merge waits for this DN's next transaction
        self.events = 0                           # dir sources: counted here
        self.bytes = 0
        self.file = ""
        self.pos = 0
        self.thread = threading.Thread(target=self._run, name=f"gbinlog-dn:{dn_id}", daemon=True)

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

    # -- the merge's thread (a replication source) ------------------------------------------------
    def begin(self) -> DnFeed:
        if not self.pulled:
            self.thread.start()
        return self

    def _pull(self, idle_stop: Callable[[], bool] | None, before_wait: Callable[[], None] | None,
              emitted: Callable[[], str | None] | None) -> Iterator[DnTxn]:
        """The DN's transactions, read when the merge asks for them. The source calls
        ``before_wait()`` before it waits for the network. While a stop is pending
        (``idle_stop()``) and the merge's output is at a whole transaction (``_may_end``) the
        source's wait is cut short (``StopWaiting``) and this yields ``merger.IDLE``: the merge
        ends there (the file being assembled is given up: the next start re-reads it from the last
        checkpoint). Else it waits for the DN, as a feed thread's queue would."""
        src = self.source
        src.before_wait = None if before_wait is None else _own_failures(before_wait)  # type: ignore[attr-defined]
        if idle_stop is not None:
            src.while_waiting = lambda: idle_stop() and self._may_end(emitted) and _stop_waiting()  # type: ignore[attr-defined]
        asm = self.asm
        try:
            for name, events in src.files():
                self.file = name
                txns = asm.feed(name, events)
                while True:
                    self.waiting = True
                    txn = next(txns, None)
                    self.waiting = False
                    if txn is None:
                        break
                    self.txns += 1
                    self._last = txn
                    yield txn
                if self.stopped.is_set():
                    break
        except StopWaiting:
            self.waiting = False
            yield IDLE
            while not self.stopped.wait(IDLE_TICK_S):
                yield IDLE
        except _OwnFailure as own:       # the pipeline's own write (e.g. DiskFull): not this DN's error
            raise own.__cause__ from None  # type: ignore[misc]
        except Exception as exc:
            if self.stopped.is_set():
                raise FeedStopped(self.dn_id) from None
            self.error = exc
            log.error("DN %s: %s", self.dn_id, exc)
            raise
        raise FeedStopped(self.dn_id)

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
        """Source → assembler → the merge's queue, one transaction at a time."""
        asm = self.asm
        try:
            for name, events in self.source.files():
                self.file = name
                for txn in asm.feed(name, self._count(name, events)):
                    self.txns += 1
                    self._last = txn
                    self._put(txn)
                if self.stopped.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the merge thread
            if not self.stopped.is_set():
                self.error = exc
                log.error("DN %s: %s", self.dn_id, exc)
        finally:
            self._put(_END)

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
        if isinstance(src, ReplicationSource):
            state, file, pos = src.state, src.file, src.pos
            events, nbytes, reconnects, error = src.events, src.bytes, src.reconnects, src.last_error
            where = f"{src.host}:{src.port}"
        else:
            state = "failed" if self.error else ("stopped" if not self.thread.is_alive() else "following")
            file, pos, events, nbytes, reconnects, error = self.file, self.pos, self.events, self.bytes, 0, None
            where = str(getattr(src, "directory", ""))
        if self.error is not None:
            state, error = "failed", str(self.error)
        oldest = self.asm.sorter.oldest_open()
        held = None
        if oldest is not None:
            held = {"xid": oldest.xid, "at": str(oldest.start), "age_s": round(now - oldest.opened_at, 3),
                    "committed_behind": len(self.asm.sorter.heap)}
        last_tso = self.last_tso
        last_ms = (last_tso >> 22) if last_tso else None
        return {"dn": self.dn_id, "source": where, "state": state, "file": file, "pos": pos,
                "events": events, "bytes": nbytes, "txns": self.txns, "reconnects": reconnects,
                "last_error": error, "last_tso": last_tso, "last_vtso": self.last_vtso,
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
