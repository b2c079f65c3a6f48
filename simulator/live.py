"""Live mode: the simulated cluster in real time (``gbinlog simulate --live [--serve]``).

The same cluster, workloads and DN writers as ``simulate``; only the clock differs. Simulated time
starts at the wall clock (so TSOs carry real milliseconds and latency can be measured from them) and
the scheduler never runs an action before its wall-clock time: the DN binlog directories grow as a
real cluster's would, with a heartbeat every 200 ms. After every burst of actions the DN files are
flushed so followers see whole groups at once.

``stop()`` (SIGINT/SIGTERM in the CLI, or ``duration`` elapsed) ends the workload cleanly: no new
client transaction starts, those in flight finish, jobs still scheduled run, one last heartbeat
covers everything, and ``truth.json`` is written. The binlogs then hold no open prepare.

With ``serve`` each DN directory is served over the replication protocol by the dumper's endpoint
(one port per DN, in this process), also for a DN that joins mid-run (``scale``); ``cluster.json``
in the output directory lists the DNs, their directories and ports, and is rewritten on a join.
``stop_server(dn)`` / ``start_server(dn)`` take one DN's endpoint down and up again (fault tests).
"""

from __future__ import annotations

import gc
import heapq
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simulator.cluster import Cluster, SimConfig
from simulator.ddl import cdc_start
from simulator.node import DnNode
from simulator.run import MAX_DNS, SimulateError, command_line, validate
from simulator.truth import TruthBuilder, stats, write_truth
from simulator.workloads import make_driver

log = logging.getLogger(__name__)
FLUSH_EVERY_S = 0.005      # while busy, flush DN files at least this often
MAX_SLEEP_S = 0.05         # re-check stop() at least this often while idle
UNBOUNDED_TXNS = 1 << 62


@dataclass(slots=True)
class ServeOptions:
    """Serve each DN directory over the replication protocol."""

    host: str = "127.0.0.1"
    port: int = 0              # DN i listens on port + i; 0 = any free port
    user: str = "gbinlog"
    password: str = "gbinlog"


class _LiveCluster(Cluster):
    """The cluster with a hook on every DN that joins (its directory exists from then on)."""

    on_dn_added: Callable[[DnNode], None] | None = None

    def add_dn(self) -> DnNode:
        node = super().add_dn()
        node.log.flush()
        if self.on_dn_added is not None:
            self.on_dn_added(node)
        return node


class LiveSimulation:
    """A cluster writing DN binlogs in real time into ``out`` (which must be empty or absent)."""

    def __init__(self, workload: str, dns: int, out: str | os.PathLike, *, seed: int = 1,
                 tps: int = 400, duration: float | None = None, txns: int | None = None,
                 hole_rate: float = 0.3, sessions: int = 8, max_file_size: int = 1 << 20,
                 consensus: bool = True, truth: bool = True, serve: ServeOptions | None = None,
                 force: bool = False) -> None:
        if duration is not None and duration <= 0:
            raise SimulateError(f"--duration must be positive, got {duration}")
        if txns is None:
            txns = max(1, int(tps * duration)) if duration is not None else UNBOUNDED_TXNS
        self.cfg = SimConfig(workload=workload, dns=dns, txns=txns, seed=seed, hole_rate=hole_rate,
                             sessions=sessions, tps=tps, consensus=consensus,
                             max_file_size=max_file_size, truth=truth)
        validate(self.cfg)
        if not 1 <= dns <= MAX_DNS:
            raise SimulateError(f"--dns must be between 1 and {MAX_DNS}, got {dns}")
        self.out = Path(out)
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            if not force or not self.out.is_dir():
                raise SimulateError(f"--out {self.out} exists and is not an empty directory "
                                "(use --force to replace it)")
            shutil.rmtree(self.out)
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimulateError(f"cannot write --out {self.out}: {exc.strerror or exc}") from None
        self.duration = duration
        self.serve = serve
        self.servers: dict[str, Any] = {}
        self.ports: dict[str, int] = {}
        self._stop = threading.Event()
        self._stopping = False
        self.finished = threading.Event()
        self.cl: _LiveCluster | None = None
        self.started_at = 0.0
        self.summary: dict[str, Any] = {}
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    # -- control (any thread) -----------------------------------------------------------------------
    def stop(self) -> None:
        """End the workload cleanly (in-flight txns finish, truth written); ``run()`` then returns."""
        self._stop.set()

    @property
    def dn_ids(self) -> list[str]:
        return [n.id for n in self.cl.dns] if self.cl else []

    # -- the run ----------------------------------------------------------------------------------
    def run(self, on_ready: Callable[[LiveSimulation], None] | None = None) -> dict[str, Any]:
        """Run in real time until the workload is done (``duration``/``txns``) or ``stop()``."""
        try:
            return self._run(on_ready)
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.finished.set()

    def _run(self, on_ready: Callable[[LiveSimulation], None] | None) -> dict[str, Any]:
        wall0 = time.time()
        sim0 = int(wall0 * 1_000_000)
        cl = _LiveCluster(self.cfg, self.out)
        cl.now = sim0                      # TSOs carry wall-clock milliseconds
        cl.start_salt = sim0               # the CdcStart instruction id differs per live run
        cl.on_dn_added = self._dn_added
        self.cl = cl
        for _ in range(self.cfg.dns):
            cl.add_dn()
        cl.cdc_dns = list(cl.dns)
        cl.workload = make_driver(cl, self.cfg.workload)
        cl.after(500, cdc_start, cl)             # the CdcStart instruction: the initial topology
        cl.after(1_000, cl.workload.start)
        cl.after(1_000, cl.heartbeat)
        self.started_at = time.monotonic()
        if on_ready is not None:
            on_ready(self)
        heap = cl._heap
        pop = heapq.heappop
        last_flush = time.monotonic()
        deadline = None if self.duration is None else self.started_at + self.duration
        # The cyclic GC stays on (unlike run_cluster): a live run may last for hours.
        try:
            while heap:
                if not self._stopping and (self._stop.is_set() or
                                           (deadline is not None and time.monotonic() >= deadline)):
                    self._begin_stop()
                when = heap[0][0]
                due = (when - sim0) / 1e6 - (time.time() - wall0)
                if due > 0:
                    self._flush()
                    last_flush = time.monotonic()
                    time.sleep(min(due, MAX_SLEEP_S))
                    continue
                when, _, fn, args = pop(heap)
                cl.now = when
                fn(*args)
                if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    self._flush()
                    last_flush = time.monotonic()
        finally:
            self._flush()
        if not cl.finished:
            raise AssertionError("simulator bug: the live run stopped before every txn and job finished")
        for node in cl.dns:
            node.log.flush(fsync=True)
        self.summary = {"events": sum(n.log.events_written for n in cl.dns), "dns": self.dn_ids,
                        "seconds": time.monotonic() - self.started_at, "stats": stats(cl),
                        "lag_ms": max(0.0, (time.time() - wall0) * 1000 - (cl.now - sim0) / 1000)}
        if self.cfg.truth:
            params = asdict(self.cfg)
            gc.disable()
            try:
                doc = TruthBuilder(cl).build(params, command_line(self.cfg) + " --live")
            finally:
                gc.enable()
            tmp = self.out / ".truth.json.tmp"
            write_truth(tmp, doc)
            os.replace(tmp, self.out / "truth.json")
        return self.summary

    def _begin_stop(self) -> None:
        """No new client txn: sessions see ``started >= txns`` and end (or end as soon as they
        start, when stopped during set-up); jobs still scheduled run now; then the last heartbeat."""
        self._stopping = True
        self.cl.cfg.txns = min(self.cl.cfg.txns, self.cl.started)

    def _flush(self) -> None:
        for node in self.cl.dns:
            fh = node.log._fh
            if fh is not None:
                fh.flush()

    # -- DN endpoints -------------------------------------------------------------------------------
    def _dn_added(self, node: DnNode) -> None:
        if self.serve is None:
            return
        self.start_server(node.id)

    def start_server(self, dn_id: str) -> int:
        """Serve ``dn_id``'s directory (again, on the same port after ``stop_server``)."""
        from dumper.server import ServerConfig, start_in_thread
        opts = self.serve
        if opts is None:
            raise RuntimeError("not serving (no ServeOptions)")
        index = int(dn_id[2:]) if dn_id[2:].isdigit() else len(self.ports)
        port = self.ports.get(dn_id) or (opts.port + index if opts.port else 0)
        node = next(n for n in self.cl.dns if n.id == dn_id)
        cfg = ServerConfig(dir=self.out / dn_id, host=opts.host, port=port,
                           users={opts.user: opts.password}, server_id=node.server_id,
                           version="5.7.44-log", poll_interval=0.01)
        with self._lock:
            handle = start_in_thread(cfg)
            self.servers[dn_id] = handle
            self.ports[dn_id] = handle.port
            self._write_cluster_json()
        log.info("%s served on %s:%d", dn_id, opts.host, handle.port)
        return handle.port

    def stop_server(self, dn_id: str) -> None:
        with self._lock:
            handle = self.servers.pop(dn_id, None)
        if handle is not None:
            handle.stop()

    def stop_servers(self) -> None:
        for dn_id in list(self.servers):
            self.stop_server(dn_id)

    def _write_cluster_json(self) -> None:
        opts = self.serve
        doc = {"dns": [{"id": dn, "dir": str((self.out / dn).resolve()), "host": opts.host,
                        "port": port} for dn, port in sorted(self.ports.items(),
                                                             key=lambda kv: int(kv[0][2:]))],
               "user": opts.user, "password": opts.password, "pid": os.getpid()}
        tmp = self.out / ".cluster.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.out / "cluster.json")
