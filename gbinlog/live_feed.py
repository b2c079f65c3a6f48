"""The DN side of ``gbinlog run``: one feed per DN and a merge that DNs can join.

``DnFeed`` runs one DN's source (replication protocol or a followed directory) and its
``Assembler`` in a thread and hands the released ``DnTxn``s to the merge through a bounded queue,
so a DN that is slow on the network never holds the GIL-bound merge in a read. It keeps what
``gbinlog status`` shows: connection state, position, last TSO, oldest open prepare.

``LiveMerge`` merges the feeds into one vtso-ordered stream that a DN can join mid-run
(scale-out); ``storage_change`` reads the ``StorageInstChange`` instruction that announces it.
"""

from __future__ import annotations

import heapq
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from extractor.assembler import Assembler
from extractor.live_source import ReplicationSource
from extractor.model import DnTxn, TxnKind
from extractor.source import DirSource, DnSource
from extractor.vtso import VtsoState, vtso_tso
from merger import GlobalTxn

log = logging.getLogger(__name__)
_END = object()
QUEUE_TXNS = 20_000


class FeedStopped(Exception):
    """The feed was stopped (shutdown): the merge ends without emitting anything more."""


class FeedIdle(Exception):
    """The merge waits for this DN and a shutdown is pending (see ``DnFeed.stream``)."""


def drain_feed(feed: object, idle_stop: Callable[[], bool] | None, *,
               end_of_input_returns: bool) -> Iterator[DnTxn]:
    """The items of a feed's ``queue`` until its ``_END``: blocks while the DN has nothing newer;
    ``FeedIdle`` when ``idle_stop()`` says a pending shutdown need not wait; ``FeedStopped`` once
    ``stopped`` (a recorded ``error`` wins). At ``_END`` of a finite input the iterator ends when
    ``end_of_input_returns``; a feed whose input never ends (Spark's) counts it as stopped."""
    get = feed.queue.get  # type: ignore[attr-defined]
    while True:
        try:
            item = get(timeout=0.05)
        except queue.Empty:
            if feed.stopped.is_set():  # type: ignore[attr-defined]
                if feed.error is not None:  # type: ignore[attr-defined]
                    raise feed.error from None  # type: ignore[attr-defined]
                raise FeedStopped(feed.dn_id) from None  # type: ignore[attr-defined]
            if idle_stop is not None and idle_stop():
                raise FeedIdle(feed.dn_id) from None  # type: ignore[attr-defined]
            continue
        if item is _END:
            if feed.error is not None:  # type: ignore[attr-defined]
                raise feed.error
            if end_of_input_returns and not feed.stopped.is_set():  # type: ignore[attr-defined]
                return
            raise FeedStopped(feed.dn_id)  # type: ignore[attr-defined]
        yield item


class DnFeed:
    """One DN: source → Assembler (vtso, Sorter) → queue. ``stream()`` is what the merge reads."""

    def __init__(self, dn_id: str, source: DnSource, *, storage_seq: str, state: VtsoState | None = None,
                 start: str = "") -> None:
        self.dn_id = dn_id
        self.source = source
        self.asm = Assembler(dn_id, storage_seq=storage_seq, state=state)
        self.start = start
        self.queue: queue.Queue = queue.Queue(QUEUE_TXNS)
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
        self.thread = threading.Thread(target=self._run, name=f"gbinlog-dn:{dn_id}", daemon=True)

    # -- thread -----------------------------------------------------------------------------------
    def begin(self) -> DnFeed:
        self.thread.start()
        return self

    def _run(self) -> None:
        asm, put = self.asm, self._put
        try:
            for name, events in self.source.files():
                self.file = name
                for txn in asm.feed(name, self._count(name, events)):
                    self.txns += 1
                    self.last_tso = vtso_tso(txn.vtso)
                    self.last_tso_at = time.monotonic()
                    self.last_vtso = txn.vtso
                    put(txn)
                if self.stopped.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the merge thread
            if not self.stopped.is_set():
                self.error = exc
                log.error("DN %s: %s", self.dn_id, exc)
        finally:
            put(_END)

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

    def stream(self, idle_stop: Callable[[], bool] | None = None) -> Iterator[DnTxn]:
        """The DN's transactions for the merge (blocks while the DN has nothing newer). While it
        waits, ``idle_stop()`` true raises ``FeedIdle`` (a shutdown that need not wait)."""
        return drain_feed(self, idle_stop, end_of_input_returns=True)

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


# -- the merge ----------------------------------------------------------------------------------------
class LiveMerge:
    """A blocking k-way merge of DN streams into one stream of ``DnTxn``s in ascending vtso, that a
    DN can join: what ``gbinlog run`` hands to the pipeline core as one input, whose own
    ``merger.merge`` then joins branches exactly as over separate DN streams.

    Blocking as ``merger.merge`` is: a transaction is handed out only while every stream has a
    head, so nothing smaller can still come. Ties (the branches of one transaction) go in DN
    ``order`` (the config's DN order), the order ``merger.merge`` gives branches of DN streams in
    that order, so the trace merge and the output bytes are the same as a batch build's.

    ``add(dn, stream)`` (scale-out, called when an instruction branch is taken): the new DN's
    transactions below the last vtso handed out (its history before it joined) are dropped; its
    branch of the instruction has that very vtso and joins the others.
    """

    def __init__(self, order: dict[str, int]) -> None:
        self.order = order
        self.heap: list[tuple[str, int, str, DnTxn]] = []
        self.its: dict[str, Iterator[DnTxn]] = {}
        self.last: str | None = None
        self.dropped = 0

    @property
    def dns(self) -> list[str]:
        return list(self.its)

    def add(self, dn_id: str, stream: Iterable[DnTxn]) -> None:
        if dn_id in self.its:
            raise ValueError(f"DN {dn_id} is already merged")
        it = self.its[dn_id] = iter(stream)
        self._refill(dn_id, it)

    def refill(self, dn_id: str) -> None:
        """Take DN ``dn_id``'s next head (after its stream was interrupted before giving one)."""
        self._refill(dn_id, self.its[dn_id])

    def _refill(self, dn_id: str, it: Iterator[DnTxn]) -> None:
        last = self.last
        for txn in it:
            if last is not None and txn.vtso < last:
                self.dropped += 1       # a joining DN's history before it joined
                continue
            heapq.heappush(self.heap, (txn.vtso, self.order[dn_id], dn_id, txn))
            return

    def __iter__(self) -> Iterator[DnTxn]:
        heap = self.heap
        while heap:
            vtso, _, dn_id, txn = heapq.heappop(heap)
            self.last = vtso
            yield txn
            self._refill(dn_id, self.its[dn_id])


def storage_change(g: GlobalTxn | DnTxn) -> list[str] | None:
    """The storage list of a ``StorageInstChange`` instruction (reference §5.1), else None.

    The instruction row's columns are found by value: the type column reads ``StorageInstChange``
    and the content column is JSON with ``storageInstList`` — no column names needed (a DN's table
    map may carry none)."""
    if g.kind is not TxnKind.INSTRUCTION or not g.blocks:
        return None
    from binlog.rows_events import decode_rows_event
    from binlog.table_map import decode_table_map

    block = g.blocks[0]
    tm = block.events[0]
    table_map = decode_table_map(tm.payload, tm.ctx)
    for ev in block.events[1:]:
        rows = decode_rows_event(ev.type_code, ev.payload, ev.ctx).rows(table_map)
        for row in rows:
            values = row if isinstance(row, (list, tuple)) else list(row.values())
            texts = [v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v for v in values]
            if "StorageInstChange" not in texts:
                continue
            for v in texts:
                if isinstance(v, str) and "storageInstList" in v:
                    try:
                        return [str(x) for x in json.loads(v)["storageInstList"]]
                    except (ValueError, KeyError, TypeError):
                        return None
    return None

