"""``gbinlog run --engine spark``: the live service with Structured Streaming doing the DN side.

The ``cluster.toml`` is the local engine's: DNs given by ``dir = …`` or over the replication
protocol (``host``/``port``/``user``/``password``), read by the executors (``stream_source``).
Everything but the DN feeds is ``gbinlog.live.LiveRunner`` (lock, recovery, endpoint, metrics,
status and the pipeline ``dumper.pipeline.Pipeline``: merge → shape → dump → checkpoint, one input
per DN). Here
the feeds are filled by a streaming query over ``dnbinlog`` (``stream_source``): each micro-batch,
executors read every DN from its durable restart point to the bytes written so far and assemble
its transactions; the driver's ``foreachBatch`` collects them as Arrow, drops per DN what it has
already handed on (a batch re-reads the transactions after the last checkpoint) and queues the
rest for the merge. The pipeline then drops vtso ≤ the last one written, so a batch replayed after a
crash (Spark replays it with the same offsets and batch id) writes nothing twice and loses nothing.

Stopping: the pipeline ends at a whole transaction and checkpoints, exactly as the local live
service does (the query keeps delivering meanwhile); then the query is stopped between two batches
only (``graceful_stop``: a ``stop()`` inside ``foreachBatch`` can trip a
JVM StackOverflowError).

Entry points: ``run(config, should_stop)`` and ``SparkLiveRunner`` (a drop-in for ``LiveRunner``);
``gbinlog run --engine spark --config cluster.toml`` runs it (gbinlog/run_cmd.py).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from extractor.model import DnTxn
from extractor.vtso import vtso_tso
from gbinlog.config import Config, DnConfig
from gbinlog.live import LiveRunner, RunError
from gbinlog.live_feed import _END, drain_feed
from gbinlog.spark_engine.stream_source import READ_DNS_FILE

log = logging.getLogger(__name__)
CHECKPOINT_DIR = "spark-checkpoint"
QUEUE_TXNS = 20_000
# Test hook: kill -9 this process in the middle of foreachBatch number N (after half its data).
KILL_AT_BATCH_ENV = "GBINLOG_SPARK_KILL_AT_BATCH"


def graceful_stop(query, poll: float = 0.01, timeout: float = 60.0) -> None:
    """Stop a streaming query between two batches, never inside ``foreachBatch``."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(poll)
    query.stop()


class SparkFeed:
    """One DN's transactions as Spark batches deliver them: a bounded queue the live merge reads
    (``stream``, the ``DnFeed`` contract) and ``offer`` fills, dropping what was handed on before."""

    def __init__(self, dn_id: str, where: str) -> None:
        self.dn_id = dn_id
        self.where = where
        self.queue: queue.Queue = queue.Queue(QUEUE_TXNS)
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self.last_key: tuple | None = None
        self.txns = self.dropped = 0
        self.last_tso: int | None = None
        self.last_vtso = ""
        self.file, self.pos = "", 0

    def offer(self, txns: list[DnTxn]) -> None:
        """Queue the transactions of one batch (in the DN's order) that come after the last one
        queued: a batch starts at a restart point, so it repeats a few."""
        last = self.last_key
        for t in txns:
            end = t.end
            key = (t.vtso, end.file, end.offset) if end is not None else (t.vtso, "", 0)
            if last is not None and key <= last:
                self.dropped += 1
                continue
            if not self._put(t):
                return
            last = self.last_key = key
            self.txns += 1
            self.last_vtso = t.vtso
            self.last_tso = vtso_tso(t.vtso)
            if end is not None:
                self.file, self.pos = end.file, end.offset

    def _put(self, item: object) -> bool:
        while True:
            try:
                self.queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                if self.stopped.is_set():
                    return False

    def fail(self, exc: BaseException) -> None:
        self.error = exc
        try:
            self.queue.put_nowait(_END)
        except queue.Full:
            self.stopped.set()

    def begin(self) -> SparkFeed:
        return self

    def stream(self, idle_stop: Callable[[], bool] | None = None, before_wait: Callable[[], None] | None = None,
               emitted: Callable[[], str | None] | None = None) -> Iterator[DnTxn]:
        """As ``DnFeed.stream``: blocks while the DN has nothing newer (``before_wait()`` first);
        ``merger.IDLE`` while a shutdown is pending and it waits, ``FeedStopped`` once stopped."""
        return drain_feed(self, idle_stop, end_of_input_returns=False, before_wait=before_wait)

    def stop(self) -> None:
        self.stopped.set()

    def join(self, timeout: float = 10.0) -> None:
        pass

    def status(self) -> dict:
        last_ms = (self.last_tso >> 22) if self.last_tso else None
        return {"dn": self.dn_id, "source": self.where, "state": "failed" if self.error else
                ("stopped" if self.stopped.is_set() else "streaming"),
                "file": self.file, "pos": self.pos, "events": 0, "bytes": 0, "txns": self.txns,
                "reconnects": 0, "last_error": str(self.error) if self.error else None,
                "last_tso": self.last_tso, "last_vtso": self.last_vtso,
                "last_tso_age_ms": round(time.time() * 1000 - last_ms) if last_ms else None,
                "open_prepares": 0, "oldest_open_prepare": None, "queued": self.queue.qsize(),
                "repeated": self.dropped}


class SparkLiveRunner(LiveRunner):
    """``LiveRunner`` whose DN feeds come from a Structured Streaming query (see the module doc).

    ``master``/``conf``: the Spark session (``--master``, ``--conf k=v``); ``trigger``: a
    processing-time interval such as ``"500 milliseconds"`` (default: as fast as possible)."""

    def __init__(self, cfg: Config, *, master: str | None = None, conf: Mapping[str, str] | list[str] | None = None,
                 trigger: str | None = None, status_interval: float = 0.5) -> None:
        super().__init__(cfg, status_interval=status_interval)
        self.master, self.conf, self.trigger = master, conf, trigger
        self.spark: Any = None
        self.query: Any = None
        self.spark_feeds: dict[str, SparkFeed] = {}
        self._feeds_lock = threading.Lock()
        self.batches: list[dict] = []
        self._kill_at = int(os.environ.get(KILL_AT_BATCH_ENV, "-1"))
        self._watcher: threading.Thread | None = None

    # -- start ------------------------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        from gbinlog.spark_engine.session import SparkUnavailable, spark_session

        try:
            self.spark = spark_session(self.master, self.conf, app_name="gbinlog-run")
        except SparkUnavailable as exc:
            raise RunError(str(exc)) from None
        from extractor.vtso import storage_sequences

        # the storage sequences the pipeline uses: state.json's, or all configured DNs' at first
        seqs = dict(self.state.storage_seqs) if self.state else storage_sequences([d.id for d in self.cfg.dn])
        self._write_read_dns([d.id for d in self._initial_dns()])
        dns = [self._source_option(d, seqs[d.id]) for d in self.cfg.dn]
        from gbinlog.spark_engine.datasource import register

        register(self.spark)
        reader = (self.spark.readStream.format("dnbinlog").option("dns", json.dumps(dns))
                  .option("out", str(self.out)).load())
        writer = (reader.writeStream.foreachBatch(self._batch)
                  .option("checkpointLocation", str(self.out / CHECKPOINT_DIR)))
        if self.trigger:
            writer = writer.trigger(processingTime=self.trigger)
        self.query = writer.start()
        self._watcher = threading.Thread(target=self._watch, name="gbinlog-spark-watch", daemon=True)
        self._watcher.start()

    def _source_option(self, dn: DnConfig, storage_seq: str) -> dict:
        """A DN as the ``dnbinlog`` stream source reads it: its directory, or host/port/credentials
        and our replica server id (``[source]``), as ``--engine local`` connects."""
        if not dn.is_remote:
            return {"id": dn.id, "dir": str(dn.dir), "storage_seq": storage_seq}
        return {"id": dn.id, "host": dn.host, "port": dn.port, "user": dn.user or "", "password": dn.password,
                "server_id": self.cfg.source.server_id, "storage_seq": storage_seq}

    def _watch(self) -> None:
        """A query that dies (a task's error, a lost driver JVM) fails the feeds, so the pipeline
        stops with that error after its last whole transaction."""
        try:
            self.query.awaitTermination()
            exc: BaseException | None = None
        except Exception as e:  # noqa: BLE001 - re-raised in the pipeline thread
            exc = e
        if exc is not None and not self.stopping.is_set():
            from gbinlog.spark_engine.errors import decode

            err = decode(str(exc)) or RunError(f"the Spark streaming query failed: {str(exc).splitlines()[0]}")
            log.error("spark: %s", err)
            for feed in list(self.spark_feeds.values()):
                feed.fail(err)

    # -- feeds ------------------------------------------------------------------------------------
    def _spark_feed(self, dn_id: str) -> SparkFeed:
        with self._feeds_lock:
            feed = self.spark_feeds.get(dn_id)
            if feed is None:
                dn = self.cfg.dn_by_id(dn_id)
                feed = self.spark_feeds[dn_id] = SparkFeed(dn_id, dn.describe() if dn else "?")
            return feed

    def _feed(self, dn: DnConfig, restart=None, storage_seq: str = "") -> SparkFeed:  # type: ignore[override]
        """The pipeline opens a DN (at the start, or when it joins): the streaming source reads it
        from the next batch on, from its durable restart point (``READ_DNS_FILE``)."""
        feed = self._spark_feed(dn.id)
        self.feeds[dn.id] = feed  # type: ignore[assignment]
        self._write_read_dns(list(self.feeds))
        return feed

    def _write_read_dns(self, dns: list[str]) -> None:
        tmp = self.out / f".{READ_DNS_FILE}.tmp"
        tmp.write_text(json.dumps(sorted(set(dns))) + "\n")
        os.replace(tmp, self.out / READ_DNS_FILE)

    def _batch(self, df, batch_id: int) -> None:
        """foreachBatch: the batch's DN transactions to the feeds, per DN in the DN's order."""
        import pyarrow.compute as pc

        from gbinlog.spark_engine.arrow_codec import BodyDecoder, decode_batch

        t0 = time.perf_counter()
        table = df.toArrow()
        n = table.num_rows
        if n:
            table = table.take(pc.sort_indices(table, [("dn_idx", "ascending"), ("seq", "ascending")]))
            names = table.column("dn").to_pylist()
            decoder = BodyDecoder()
            start = 0
            while start < n:
                dn = names[start]
                end = start
                while end < n and names[end] == dn:
                    end += 1
                txns = decode_batch(table.slice(start, end - start), decoder)
                if batch_id == self._kill_at:
                    self._spark_feed(dn).offer(txns[:len(txns) // 2])
                    log.warning("%s=%d: kill -9 in the middle of the batch", KILL_AT_BATCH_ENV, batch_id)
                    os.kill(os.getpid(), signal.SIGKILL)
                self._spark_feed(dn).offer(txns)
                start = end
        self.batches.append({"id": batch_id, "rows": n, "seconds": round(time.perf_counter() - t0, 4),
                             "at": time.time()})
        del self.batches[:-100]

    # -- stop -------------------------------------------------------------------------------------
    # ``stop()`` is LiveRunner's: the pipeline ends after the next whole transaction while the query
    # keeps delivering (a broadcast group may need the next batch to be provably whole); ``close()``
    # then stops the query between two batches.

    def close(self) -> None:
        self.stopping.set()
        try:
            if self.query is not None and self.query.isActive:
                graceful_stop(self.query, timeout=10)
        except Exception as exc:  # noqa: BLE001
            log.warning("stopping the Spark query: %s", exc)
        super().close()
        if self.spark is not None:
            self.spark.stop()
            self.spark = None

    def status(self) -> dict:
        st = super().status()
        st["engine"] = "spark"
        q = self.query
        st["spark"] = {"batches": len(self.batches), "last_batch": self.batches[-1] if self.batches else None,
                       "active": bool(q is not None and q.isActive)}
        return st


def run(config: Config, should_stop: Callable[[], bool] | None = None, *, master: str | None = None,
        conf: Mapping[str, str] | list[str] | None = None, trigger: str | None = None,
        on_started: Callable[[SparkLiveRunner], None] | None = None) -> SparkLiveRunner:
    """``gbinlog run --engine spark``: start, run until ``should_stop()`` (polled every 0.1 s) or an
    error, stop cleanly, close. Returns the runner (``result``: the pipeline's ``BuildResult``)."""
    runner = SparkLiveRunner(config, master=master, conf=conf, trigger=trigger)
    try:
        runner.start()
        if on_started is not None:
            on_started(runner)
        if should_stop is not None:
            def poll() -> None:
                while not runner.stopping.is_set():
                    if should_stop():
                        runner.stop()
                        return
                    time.sleep(0.1)
            threading.Thread(target=poll, name="gbinlog-spark-should-stop", daemon=True).start()
        runner.run()
    finally:
        runner.close()
    return runner
