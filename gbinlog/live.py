"""``gbinlog run``: the live service — DNs in, global binlog out, replicas attached.

Wiring only; every rule lives in the stages. One process:

* a ``DnFeed`` per DN (``extractor.live_source.ReplicationSource`` → ``Assembler``, read in the
  pipeline's thread when the merge asks for the DN's next transaction; a followed binlog directory
  in a thread of its own), from the restart point ``state.json`` keeps for it; a fault of a DN's
  stream (CRC mismatch, ERR 1236, …) marks that DN failed and its feed reads it again from its last
  restart point after a backoff, while the merge waits for it and the endpoint serves on;
* the pipeline (``dumper.pipeline.Pipeline``) takes every DN as its own input, as ``gbinlog
  build`` does: its merge joins branches and owns membership (a standby DN's feed starts when a
  ``StorageInstChange`` instruction lists it; a DN it drops leaves), it drops what a restart
  regenerates, shapes, appends to the global binlog, writes out what it appended whenever the
  merge is about to wait for a DN (``Pipeline.flush_ready``: one write for all the transactions
  that were ready; at most ``FLUSH_BOUND_S`` later while the DNs keep it busy) and checkpoints
  (fsync, then ``state.json``, the same format ``gbinlog build`` writes: either resumes the
  other's output directory);
* the replication endpoint (``dumper.server``) serves the output directory as it grows;
* a status thread refreshes Prometheus metrics and ``status.json`` (read by ``gbinlog status``).

``stop()`` (SIGTERM/SIGINT) is a clean shutdown: the feeds stop, the merge ends at a whole
transaction, the core flushes, fsyncs and writes ``state.json``, the endpoint closes. After a
SIGKILL the next start recovers: the binlog is cut after its last CTS marker and every DN is read
again from its restart point (``state.json`` remembers which standby DNs joined and the storage
sequences, so vtsos regenerate identically).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pymysql

from dumper.cluster import dn_server_id
from extractor import RestartPoint, list_binlog_files
from extractor.model import DnTxn
from extractor.vtso import tso_physical_ms, vtso_tso
from gbinlog.config import Config, DnConfig
from gbinlog.live_feed import DnFeed, FeedStopped, dn_source
from gbinlog.metrics import Metrics, health_of
from gbinlog.output_lock import LOCK_FILE, OutputLock, OutputLockError, lock_output

log = logging.getLogger(__name__)
STATUS_FILE = "status.json"
RATE_WINDOW_S = 2.0
# Appended transactions are written out when the merge is about to wait for a DN; while the DNs
# never let it wait (catching up) at least this often.
FLUSH_BOUND_S = 0.005
SHUTDOWN_GRACE_S = 5.0


class RunError(Exception):
    """An operator error before or while starting (bad DN, port in use, …): one line, exit 2."""


class ClusterRefused(RunError):
    """The configured DN directories are not one whole cluster (exit 1, as ``build``)."""


class ShutdownAbort(Exception):
    """``stop()`` could not end at a transaction boundary in time (a DN delivered nothing)."""


# -- checks before anything starts --------------------------------------------------------------------
def check_dn(dn: DnConfig, timeout: float) -> None:
    """The DN answers and takes our credentials (a replication source would retry forever)."""
    if not dn.is_remote:
        if not Path(dn.dir).is_dir():
            raise RunError(f"DN {dn.id}: binlog directory {dn.dir} does not exist")
        return
    try:
        pymysql.connect(host=dn.host, port=dn.port, user=dn.user, password=dn.password,
                        connect_timeout=timeout, read_timeout=timeout, ssl=dn.tls_context()).close()
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        msg = " ".join(str(exc.args[-1]).split()) if exc.args else str(exc)
        if code in (1044, 1045, 1698):
            raise RunError(f"DN {dn.id} ({dn.host}:{dn.port}) refused user {dn.user!r}: access denied "
                           "(wrong user or password?)") from None
        raise RunError(f"DN {dn.id} ({dn.host}:{dn.port}) is unreachable: {msg}") from None
    except OSError as exc:
        raise RunError(f"DN {dn.id} ({dn.host}:{dn.port}) is unreachable: {exc.strerror or exc}") from None


def check_port(host: str, port: int, what: str) -> None:
    """``port`` can be bound on ``host`` (else: in use, or not ours to take)."""
    if not port:
        return
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise RunError(f"{what} {host}:{port} cannot be used: {exc.strerror or exc}") from None


# -- the runner -----------------------------------------------------------------------------------------
class LiveRunner:
    """``start()`` (checks, lock, recovery, endpoint, metrics), ``run()`` (blocks until ``stop()`` or
    an error), ``close()``. ``status()`` is the dict ``gbinlog status`` prints."""

    def __init__(self, cfg: Config, *, status_interval: float = 0.5) -> None:
        self.cfg = cfg
        self.out = Path(cfg.output.dir)
        self.status_interval = status_interval
        self.stopping = threading.Event()
        self.feeds: dict[str, DnFeed] = {}
        self.pipeline: Any = None
        self.endpoint: Any = None
        self.metrics = Metrics()
        self._last_status: dict | None = None
        self.metrics.health_source = lambda: self._last_status   # /healthz reads the status loop's last
        self.started_at = time.time()
        self.progress: Any = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.state: Any = None
        self._lock: OutputLock | None = None
        self._status_thread: threading.Thread | None = None
        self._last_progress_at = 0.0
        self._rates: dict[str, deque] = {}
        self._stalled: set[str] = set()
        self.started = False
        self.ha: Any = None                   # gbinlog.ha.HaAgent with an [ha] config
        self._retention: Any = None           # dumper.server.retention.Rounds with no endpoint (else it runs them)

    # -- start ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start everything, or leave nothing behind: a failed start removes the output directory,
        and lock it created, and keeps the last status of a previous run."""
        before = {p: p.exists() for p in (self.out, self.out / LOCK_FILE, *self._meta_store_files())}
        try:
            self._start()
        except BaseException:
            self.close()
            for path in sorted(before, key=lambda p: len(str(p)), reverse=True):
                if not before[path]:
                    try:
                        path.rmdir() if path == self.out else path.unlink(missing_ok=True)
                    except OSError:
                        pass
            raise
        self.started = True

    def _check_cluster(self) -> None:
        """DN directories that are not one whole cluster are refused before anything is written
        (``extractor.members``); DNs over the network cannot be read ahead and are checked by the
        membership rule as they stream."""
        from extractor import list_binlog_files
        from extractor.members import ClusterIncomplete, check_complete, dn_instruction
        if any(d.is_remote for d in self.cfg.dn):
            return
        found = {d.id: dn_instruction(d.dir, d.id) if d.dir.is_dir() and list_binlog_files(d.dir) else None
                 for d in self.cfg.dn}
        try:
            check_complete(found)
        except ClusterIncomplete as exc:
            raise ClusterRefused(str(exc)) from None

    def _start(self) -> None:
        cfg = self.cfg
        for dn in self._initial_dns_unchecked():
            if not dn.is_remote and not Path(dn.dir).is_dir():
                raise RunError(f"DN {dn.id}: binlog directory {dn.dir} does not exist")
        self._check_cluster()
        try:
            self._lock = lock_output(self.out, "run")
        except OutputLockError as exc:
            raise RunError(f"output.dir {exc}") from None
        if cfg.server.port:
            check_port(cfg.server.host, cfg.server.port, "server.port")
        if cfg.metrics.port:
            check_port(cfg.metrics.host, cfg.metrics.port, "metrics.port")
        self._load_state()
        for dn in self._initial_dns():
            check_dn(dn, cfg.source.connect_timeout_s)
        self._check_meta_store()
        self._recover()
        if cfg.metrics.port:
            try:
                self.metrics.serve(cfg.metrics.host, cfg.metrics.port)
            except OSError as exc:
                raise RunError(f"metrics.port {cfg.metrics.host}:{cfg.metrics.port} cannot be used: "
                               f"{exc.strerror or exc}") from None
        if cfg.server.port:
            self._start_endpoint()
        if cfg.ha.member:
            from gbinlog.ha import HaAgent
            self.ha = HaAgent(self).start()
        elif self.endpoint is None:   # retention without an endpoint: the status loop runs its rounds
            from dumper.server.retention import Rounds
            self._retention = Rounds.for_directory(self.out, cfg.output, cfg.streams.settings())
        self._status_thread = threading.Thread(target=self._status_loop, name="gbinlog-status", daemon=True)
        self._status_thread.start()

    def _meta_store_location(self) -> str:
        """The meta store this run uses: the one ``state.json`` recorded, else ``metadb``'s."""
        from dumper.state import meta_store_location
        target = self.state.meta_store if self.state is not None else self._settings().meta_store
        return meta_store_location(self.out, target)

    def _meta_store_files(self) -> list[Path]:
        """The files of a SQLite meta store (a failed start removes those it made)."""
        where = self._meta_store_location()
        return [] if "://" in where else [Path(where + suffix) for suffix in ("", "-wal", "-shm", "-journal")]

    def _check_meta_store(self) -> None:
        """The meta store opens: one that cannot (a server that does not answer, a full disk) stops
        the start, not the service after it said it runs."""
        from schema_shaper.meta_store import MetaStore, MetaStoreUnavailable
        try:
            MetaStore.open(self._meta_store_location()).close()
        except MetaStoreUnavailable as exc:
            raise RunError(f"metadb {exc}: {exc.advice}") from None

    def _load_state(self) -> None:
        from dumper.state import StateError, load_state
        try:
            self.state = load_state(self.out)
        except StateError as exc:
            raise RunError(f"output.dir {self.out}: {exc}") from None

    def _initial_dns_unchecked(self) -> list[DnConfig]:
        """The DNs read from the start, before ``state.json`` says which standby ones joined."""
        return [d for d in self.cfg.dn if not d.standby]

    def _initial_dns(self) -> list[DnConfig]:
        """The DNs read from the start: not a standby DN that has not joined, not a DN that left
        (as ``state.json`` says; the pipeline decides the same way)."""
        st = self.state
        joined = set(st.joined) | set(st.heartbeat_dns) if st else set()
        left = set(st.left) if st else set()
        return [d for d in self.cfg.dn if d.id not in left and (not d.standby or d.id in joined)]

    def _settings(self):
        from gbinlog.local_engine import Settings
        cfg = self.cfg
        meta = cfg.metadb or "meta.db"
        return Settings(server_id=cfg.server.server_id, server_version=cfg.output.server_version,
                        max_file_size=cfg.output.rotate_size, meta_store=meta, checkpoint_seconds=1.0,
                        flush_seconds=FLUSH_BOUND_S, filter=cfg.filter.settings(), gtids=cfg.output.gtids,
                        ddl_comments=cfg.output.ddl_comments, streams=cfg.streams.settings())

    def _recover(self) -> None:
        """Cut the binlog after its last CTS marker before the endpoint serves it (a replica must
        never read bytes a restart takes back)."""
        from dumper.global_binlog import DumperError, GlobalBinlog
        s = self._settings()
        state = self.state
        if s.stream_spec().split:               # a stream group: each stream recovered on its own
            from dumper.stream_group import StreamGroup
            try:
                group = StreamGroup(self.out, s.stream_spec(), state=state, server_id=s.server_id,
                                    server_version=s.server_version, max_file_size=s.max_file_size,
                                    heartbeat_interval=s.heartbeat_interval, gtids=s.gtids)
            except (DumperError, OSError) as exc:
                raise RunError(f"output.dir {self.out}: {exc}") from None
            for action in group.recovery.actions:
                log.warning("recovery of %s: %s", self.out, action)
            group.close()
            return
        try:
            gb = GlobalBinlog(self.out, server_id=s.server_id, server_version=s.server_version,
                              max_file_size=s.max_file_size, heartbeat_interval=s.heartbeat_interval,
                              hint=(state.binlog.file, state.binlog.pos) if state and state.binlog else None,
                              gtids=s.gtids)
        except (DumperError, OSError) as exc:
            raise RunError(f"output.dir {self.out}: {exc}") from None
        for action in gb.recovery.actions:
            log.warning("recovery of %s: %s", self.out, action)
        gb.close()

    def _start_endpoint(self) -> None:
        from dumper.server import ConfigError, start_in_thread
        from gbinlog.endpoint_config import endpoint_config
        srv = self.cfg.server
        try:
            streams = self.cfg.streams.settings()
            self.endpoint = start_in_thread(endpoint_config(srv, self.cfg.output, directory=self.out,
                                                            base=None if streams else "binlog",
                                                            poll_interval=0.02, streams=streams))
        except ConfigError as exc:   # e.g. a TLS pair that cannot be loaded or made
            raise RunError(f"server: {exc}") from None
        except OSError as exc:
            raise RunError(f"server.port {srv.host}:{srv.port} cannot be used: {exc.strerror or exc}") from None
        self.metrics.watch_endpoint(self.endpoint.server)

    # -- DN feeds ---------------------------------------------------------------------------------
    def _feed(self, dn: DnConfig, restart: RestartPoint | None, storage_seq: str) -> DnFeed:
        src = self.cfg.source
        backoff_initial, backoff_max = src.backoff_initial_ms / 1000, src.backoff_max_ms / 1000

        def source_at(at: RestartPoint | None):
            """The DN read from ``at`` (None: its first file): at the start, and again after a fault."""
            return dn_source(dn, start_file=at.file if at else None, start_pos=at.offset if at else 4,
                             server_id=src.server_id, backoff_initial=backoff_initial, backoff_max=backoff_max,
                             connect_timeout=src.connect_timeout_s,
                             heartbeat_s=min(1.0, self.cfg.heartbeat.stall_ms / 4000))
        # a fault of the DN's stream is the DN's alone: the feed marks it failed and reads it again
        # (the merge waits for it meanwhile; the endpoint serves what was written)
        feed = DnFeed(dn.id, source_at(restart), storage_seq=storage_seq, restart=restart,
                      start=str(restart) if restart else "first file", reopen=source_at,
                      backoff_initial=backoff_initial, backoff_max=backoff_max)
        self.feeds[dn.id] = feed
        return feed.begin()

    # -- run ----------------------------------------------------------------------------------------
    def run(self) -> Any:
        """Run the pipeline until ``stop()`` (or an error, which is raised after a clean stop).
        ``stop()`` ends the merge after the next whole transaction (``merger.IDLE``); if no DN
        delivers one within ``SHUTDOWN_GRACE_S`` the feeds stop and ``ShutdownAbort`` says the run
        ended without a last checkpoint (the next start re-reads from the previous one)."""
        from dumper.pipeline import Pipeline

        inputs = [LiveDn(self, dn) for dn in self.cfg.dn]
        self.pipeline = Pipeline(inputs, self.out, self._settings(), resume=True, should_stop=self.stopping.is_set,
                                 on_progress=self._on_progress, progress_seconds=0.05)
        try:
            self.result = self.pipeline.run()
            return self.result
        except FeedStopped:
            self.error = ShutdownAbort("a DN delivered nothing for the shutdown grace period: stopped without a "
                                       "last checkpoint (the next start re-reads from the previous one)")
            raise self.error from None
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self._stop_feeds()

    def _on_progress(self, progress: Any) -> None:
        self.progress = progress
        self._last_progress_at = time.monotonic()
        if self.endpoint is not None:
            self.endpoint.notify()

    def stop(self) -> None:
        """Clean shutdown (safe from a signal handler): the run ends after the next whole
        transaction; if none comes within ``SHUTDOWN_GRACE_S`` the feeds are stopped."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        timer = threading.Timer(SHUTDOWN_GRACE_S, self._stop_feeds)
        timer.daemon = True
        timer.start()

    def _stop_feeds(self) -> None:
        self.stopping.set()
        for feed in list(self.feeds.values()):
            feed.stop()
        for feed in list(self.feeds.values()):
            feed.join(5)

    def close(self) -> None:
        """Stop the endpoint, metrics and status thread; write the last status; release the lock."""
        self._stop_feeds()
        if self._status_thread is not None:
            self._status_thread.join(5)
        if self.started:      # a failed start keeps the last good status of a previous run
            try:
                self._write_status()
            except OSError:
                pass
        if self.ha is not None:
            self.ha.close()
            self.ha = None
        if self.endpoint is not None:
            self.endpoint.stop()
            self.endpoint = None
        self.metrics.close()
        if self._lock is not None:
            try:
                self._lock.release()
            except OSError:
                pass
            self._lock = None

    # -- status -------------------------------------------------------------------------------------
    def _status_loop(self) -> None:
        while not self.stopping.wait(self.status_interval):
            try:
                if self._retention is not None:
                    self._retention.due()
                self._write_status()
            except Exception as exc:  # noqa: BLE001 - status must never stop the service
                log.warning("status: %s", exc)

    def _rate(self, key: str, total: float) -> float:
        """Per-second rate of a running total over the last ~2 s (any number of callers)."""
        now = time.monotonic()
        samples = self._rates.setdefault(key, deque())
        samples.append((now, total))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.popleft()
        t0, v0 = samples[0]
        return max(0.0, (total - v0) / (now - t0)) if now - t0 >= 0.2 else 0.0

    def status(self) -> dict:
        now_ms = time.time() * 1000
        dns = []
        for dn in self.cfg.dn:
            feed = self.feeds.get(dn.id)
            if feed is None:
                dns.append({"dn": dn.id, "source": dn.describe(), "state": "standby" if dn.standby else "idle"})
                continue
            st = feed.status()
            st["events_per_s"] = round(self._rate(f"in:{dn.id}", st["events"]), 1)
            # With heartbeats every interval_ms a DN is never silent for long: stall_ms of silence
            # means the DN (or its link, or a prepare held open) stops the whole merge.
            age = st["last_tso_age_ms"]
            # (a DN read in the merge's thread is behind only while the merge waits for it: the
            # others' newer transactions wait unread meanwhile)
            st["stalled"] = (age is None or age > self.cfg.heartbeat.stall_ms) and st.pop("merge_waits", True)
            if st["stalled"] and dn.id not in self._stalled and time.time() - self.started_at > 5:
                log.warning("DN %s: no transaction for %s ms (heartbeats expected every %d ms): the merge waits "
                            "for it", dn.id, age if age is not None else "∞", self.cfg.heartbeat.interval_ms)
            if st["stalled"]:
                self._stalled.add(dn.id)
            else:
                self._stalled.discard(dn.id)
            dns.append(st)
        p = (self.pipeline.snapshot() if self.pipeline is not None else None) or self.progress
        last = p.last_vtso if p is not None else None
        lag = round(now_ms - tso_physical_ms(vtso_tso(last))) if last else None
        pipe = self.pipeline
        replicas = self.endpoint.server.replica_stats() if self.endpoint is not None else []
        out_events = p.events if p is not None else 0
        return {
            "pid": os.getpid(), "time": round(time.time(), 3), "uptime_s": round(time.time() - self.started_at, 1),
            "state": "failed" if self.error else ("stopping" if self.stopping.is_set() else "running"),
            "error": str(self.error) if self.error else None,
            "output": str(self.out),
            "endpoint": f"{self.cfg.server.host}:{self.endpoint.port}" if self.endpoint else None,
            "endpoint_expected": bool(self.cfg.server.port),
            "endpoint_listening": self.endpoint is not None and self.endpoint.thread.is_alive(),
            "heartbeat": {"interval_ms": self.cfg.heartbeat.interval_ms, "stall_ms": self.cfg.heartbeat.stall_ms},
            "dns": dns,
            "merge": {"watermark": getattr(pipe, "last_consumed", None), "dns": list(pipe.merged) if pipe else [],
                      "joined": dict(pipe.membership.joined) if pipe else {},
                      "left": dict(pipe.membership.left) if pipe else {}},
            "last_vtso": last, "lag_ms": lag,
            "txns": p.txns if p is not None else 0, "written": p.written if p is not None else 0,
            "events_out": out_events, "bytes_out": p.bytes_out if p is not None else 0,
            "events_out_per_s": round(self._rate("out", out_events), 1),
            "txns_out_per_s": round(self._rate("txns", p.written if p is not None else 0), 1),
            "replicas": replicas,
        }

    def _write_status(self) -> None:
        st = self.status()
        if self.ha is not None:
            st["ha"] = self.ha.status()
        m = self.metrics
        for d in st["dns"]:
            if "events" not in d:
                continue
            dn = d["dn"]
            m.add_to(m.dn_events, dn, d["events"])
            m.add_to(m.dn_bytes, dn, d["bytes"])
            m.add_to(m.dn_txns, dn, d["txns"])
            m.add_to(m.dn_reconnects, dn, d["reconnects"])
            m.dn_connected.labels(dn).set(1 if d["state"] in ("streaming", "following") else 0)
            fault = d.get("fault")
            m.dn_failed.labels(dn).set(0 if d["state"] != "failed" else 2 if fault and fault["persistent"] else 1)
            m.add_to(m.dn_faults, dn, d.get("faults", 0))
            if d["last_tso_age_ms"] is not None:
                m.dn_lag.labels(dn).set(d["last_tso_age_ms"])
            m.dn_open.labels(dn).set(d["open_prepares"])
        p = (self.pipeline.snapshot() if self.pipeline is not None else None) or self.progress
        if p is not None:
            m.add_to(m.txns_out, None, p.txns)
            m.add_to(m.events_out, None, p.events)
        if st["lag_ms"] is not None:
            m.lag.set(st["lag_ms"])
        m.replicas.set(len(st["replicas"]))
        m.update_output(self.out, streams=self.cfg.streams.settings())
        ok, reason = health_of(st)
        st["health"] = {"ok": ok, "reason": reason}
        self._last_status = st
        tmp = self.out / f".{STATUS_FILE}.tmp"
        tmp.write_text(json.dumps(st, indent=1) + "\n")
        os.replace(tmp, self.out / STATUS_FILE)


class LiveDn:
    """A configured DN as the pipeline's input: its feed starts when the pipeline opens it (at the
    start, or when it joins)."""

    def __init__(self, runner: LiveRunner, dn: DnConfig) -> None:
        self.runner, self.dn = runner, dn
        self.dn_id = dn.id
        self.standby = dn.standby

    def server_id(self) -> int | None:
        """Of a directory DN, from its first file; a remote DN's is not known before it connects."""
        if self.dn.is_remote or not Path(self.dn.dir).is_dir():
            return None
        files = list_binlog_files(Path(self.dn.dir))
        return dn_server_id(self.dn.dir, files[0]) if files else None

    def stream(self, restart: RestartPoint | None, storage_seq: str,
               should_stop: Callable[[], bool] | None = None) -> Iterable[DnTxn]:
        pipeline = self.runner.pipeline
        return self.runner._feed(self.dn, restart, storage_seq).stream(
            self.runner.stopping.is_set, pipeline.flush_ready, lambda: getattr(pipeline, "last_merged", None))


def run_service(cfg: Config, *, on_started: Callable[[LiveRunner], None] | None = None) -> LiveRunner:
    """Start, run until stopped, close (what ``gbinlog run`` does, signals aside)."""
    runner = LiveRunner(cfg)
    try:
        runner.start()
        if on_started is not None:
            on_started(runner)
        runner.run()
    finally:
        runner.close()
    return runner
