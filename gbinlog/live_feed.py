"""The DN side of ``gbinlog run``: one feed per DN.

``DnFeed`` runs one DN's source (replication protocol or a followed directory) and its
``Assembler`` in a thread and hands the released ``DnTxn``s to the pipeline's merge through a
bounded queue, so a DN that is slow on the network never holds the GIL-bound merge in a read. It
keeps what ``gbinlog status`` shows: connection state, position, last TSO, oldest open prepare.
Membership (a DN joining or leaving) is the merge's (``merger.merge``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from extractor.assembler import Assembler
from extractor.live_source import ReplicationSource
from extractor.model import DnTxn
from extractor.source import DirSource, DnSource
from extractor.vtso import VtsoState, vtso_tso
from merger import IDLE

log = logging.getLogger(__name__)
_END = object()
QUEUE_TXNS = 20_000
HANDOFF_TXNS = 64   # transactions handed to the merge at once, at most (see DnFeed._run)


class FeedStopped(Exception):
    """The feed was stopped (shutdown): the merge ends without emitting anything more."""


def drain_feed(feed: object, idle_stop: Callable[[], bool] | None, *,
               end_of_input_returns: bool, before_wait: Callable[[], None] | None = None) -> Iterator[DnTxn]:
    """The items of a feed's ``queue`` until its ``_END``: blocks while the DN has nothing newer
    (calling ``before_wait()`` first, in the merge's thread: the live pipeline writes out what it
    appended then); yields ``merger.IDLE`` while ``idle_stop()`` says a shutdown is pending (the
    merge ends there when its output is at a whole transaction, else it keeps waiting);
    ``FeedStopped`` once ``stopped`` (a recorded ``error`` wins). At ``_END`` of a finite input the
    iterator ends when ``end_of_input_returns``; a feed whose input never ends (Spark's) counts it
    as stopped. An item may be a list of transactions (``DnFeed`` hands them over in batches)."""
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
        if type(item) is list:
            yield from item
        else:
            yield item


class DnFeed:
    """One DN: source → Assembler (vtso, Sorter) → queue. ``stream()`` is what the merge reads."""

    def __init__(self, dn_id: str, source: DnSource, *, storage_seq: str, state: VtsoState | None = None,
                 start: str = "") -> None:
        self.dn_id = dn_id
        self.source = source
        self.asm = Assembler(dn_id, storage_seq=storage_seq, state=state)
        self.start = start
        self.queue: queue.Queue = queue.Queue(QUEUE_TXNS // HANDOFF_TXNS)   # items: lists of ≤ HANDOFF_TXNS
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self.txns = 0
        self.last_tso: int | None = None          # newest released TSO (commit TSO or DN max)
        self.last_tso_at = 0.0                    # monotonic time it was released
        self.last_vtso = ""
        self.events = 0                           # dir sources: counted here
        self.bytes = 0
        self.file = ""
        self.pos = 0
        self._held: list[DnTxn] = []              # released, not yet on the queue (_run's thread)
        self.thread = threading.Thread(target=self._run, name=f"gbinlog-dn:{dn_id}", daemon=True)

    # -- thread -----------------------------------------------------------------------------------
    def begin(self) -> DnFeed:
        self.thread.start()
        return self

    def _run(self) -> None:
        """Source → assembler → the merge's queue. Released transactions are handed over in lists:
        a queue put + get per transaction (two lock round trips) was ~5 % of ``gbinlog run``'s CPU.
        A list leaves when the source is about to wait for the network (``before_wait``: nothing
        is held back while the DN is quiet), at ``HANDOFF_TXNS``, and at the end of each file; a
        directory source (no such signal) hands over each transaction at once."""
        asm = self.asm
        # A replication source keeps its own position and counters (status reads them there).
        counted = isinstance(self.source, ReplicationSource)
        limit = HANDOFF_TXNS if counted else 1
        if counted:
            self.source.before_wait = self._hand_over  # type: ignore[union-attr]
        try:
            for name, events in self.source.files():
                self.file = name
                for txn in asm.feed(name, events if counted else self._count(name, events)):
                    self._held.append(txn)
                    if len(self._held) >= limit:
                        self._hand_over()
                self._hand_over()
                if self.stopped.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the merge thread
            if not self.stopped.is_set():
                self.error = exc
                log.error("DN %s: %s", self.dn_id, exc)
        finally:
            self._hand_over()
            self._put(_END)

    def _hand_over(self) -> None:
        """Put the held transactions on the queue as one item; status follows the last of them."""
        held = self._held
        if not held:
            return
        last = held[-1]
        self.txns += len(held)
        self.last_tso = vtso_tso(last.vtso)
        self.last_tso_at = time.monotonic()
        self.last_vtso = last.vtso
        self._held = []
        self._put(held)

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

    def stream(self, idle_stop: Callable[[], bool] | None = None,
               before_wait: Callable[[], None] | None = None) -> Iterator[DnTxn]:
        """The DN's transactions for the merge (blocks while the DN has nothing newer, calling
        ``before_wait()`` first). While it waits and ``idle_stop()`` is true it yields
        ``merger.IDLE`` (see ``drain_feed``)."""
        return drain_feed(self, idle_stop, end_of_input_returns=True, before_wait=before_wait)

    def stop(self) -> None:
        self.stopped.set()
        stop = getattr(self.source, "stop", None)
        if stop is not None:
            stop()

    def join(self, timeout: float = 10.0) -> None:
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
        last_ms = (self.last_tso >> 22) if self.last_tso else None
        return {"dn": self.dn_id, "source": where, "state": state, "file": file, "pos": pos,
                "events": events, "bytes": nbytes, "txns": self.txns, "reconnects": reconnects,
                "last_error": error, "last_tso": self.last_tso, "last_vtso": self.last_vtso,
                "last_tso_age_ms": round(time.time() * 1000 - last_ms) if last_ms else None,
                "open_prepares": len(self.asm.sorter.wait), "oldest_open_prepare": held,
                "queued": self.queue.qsize()}


def dn_source(dn, *, start_file: str | None, start_pos: int, server_id: int, backoff_initial: float,
              backoff_max: float, connect_timeout: float, heartbeat_s: float) -> DnSource:
    """The source a ``DnConfig`` describes, starting at ``start_file:start_pos`` (None: the first file)."""
    if dn.is_remote:
        return ReplicationSource(dn.id, dn.host, dn.port, dn.user or "", dn.password,
                                 start_file=start_file, start_pos=start_pos, server_id=server_id,
                                 heartbeat=heartbeat_s, backoff_initial=backoff_initial,
                                 backoff_max=backoff_max, connect_timeout=connect_timeout)
    stopped = threading.Event()
    src = DirSource(Path(dn.dir), dn_id=dn.id, follow=True, start_file=start_file, start_pos=start_pos,
                    poll_interval=dn.poll_ms / 1000, should_stop=stopped.is_set)
    src.stop = stopped.set  # type: ignore[attr-defined]
    return src
