"""Prometheus metrics of ``gbinlog run`` (prometheus-client, one registry per runner).

Counters are totals (Prometheus derives events/s with ``rate()``); gauges are refreshed by the
runner's status loop. Names::

    gbinlog_dn_events_total{dn}        events read from the DN
    gbinlog_dn_bytes_total{dn}         bytes read from the DN
    gbinlog_dn_txns_total{dn}          transactions the DN's extractor released
    gbinlog_dn_connected{dn}           1 while streaming (a dir DN: 1 while followed)
    gbinlog_dn_reconnects_total{dn}    reconnections after errors
    gbinlog_dn_failed{dn}              1 while the DN's stream is failed (read again after a backoff),
                                       2 when the fault is persistent (the same error at one place)
    gbinlog_dn_faults_total{dn}        faults of the DN's stream (CRC mismatch, ERR 1236, …)
    gbinlog_dn_lag_ms{dn}              now − physical time of the DN's newest released TSO
    gbinlog_dn_open_prepares{dn}       prepared, not yet committed transactions held by the Sorter
    gbinlog_txns_out_total             global transactions consumed (written or not: heartbeats
                                       off the 30 s grid, physical DDL, instructions)
    gbinlog_events_out_total           events written to the global binlog
    gbinlog_lag_ms                     now − physical time of the last vtso written (end to end)
    gbinlog_replicas                   replicas attached to the endpoint
    gbinlog_output_bytes               bytes of the global binlog files in the output directory
    gbinlog_output_files               number of global binlog files
    gbinlog_output_disk_free_bytes     free bytes on the output directory's file system
    gbinlog_stream_output_bytes{stream}  a stream group's: bytes of each stream's files (docs/streams.md)
    gbinlog_stream_output_files{stream}  … and their number
    gbinlog_healthy                    1 when /healthz answers 200
    gbinlog_build_info{version,python} 1 (the running build)
    process_* / python_*               prometheus-client's process and platform collectors

HTTP (``serve``): ``/metrics`` the Prometheus text; ``/healthz`` 200 ``ok`` while the pipeline
advances (no DN silent past ``stall_ms``, the status loop alive) and the endpoint listens, else 503
with the reason (``health_of``); any other path 404.
"""

from __future__ import annotations

import os
import platform
import shutil
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

STATUS_MAX_AGE_S = 5.0     # a status older than this: the status loop (or the process) is stuck


def health_of(status: dict | None, now: float | None = None) -> tuple[bool, str]:
    """(healthy, reason) of a runner status document (``LiveRunner.status()`` / ``status.json``):
    running, the status fresh, no DN failed (its stream errored; it is being read again), no active
    DN stalled (silent past ``stall_ms``: with heartbeats every 200 ms, a silent DN stops the whole
    merge), the endpoint listening when configured."""
    if not status:
        return False, "no status yet"
    now = time.time() if now is None else now
    if status.get("state") != "running":
        return False, f"state {status.get('state')}" + (f": {status['error']}" if status.get("error") else "")
    age = now - float(status.get("time") or 0)
    if age > STATUS_MAX_AGE_S:
        return False, f"status is {age:.0f} s old (the service is stuck?)"
    for d in status.get("dns") or []:
        if d.get("state") == "failed":
            # the DN's stream failed and is read again meanwhile (gbinlog.live_feed): the merge
            # waits for it, and the reason says why and whether it keeps failing at one place
            error = str(d.get("last_error") or "no error recorded")
            error = error.removeprefix(f"DN {d['dn']}: ")
            return False, f"DN {d['dn']} failed: {error}"
    stall_ms = (status.get("heartbeat") or {}).get("stall_ms")
    for d in status.get("dns") or []:
        if d.get("stalled") and d.get("state") not in ("standby", "idle"):
            age_ms = d.get("last_tso_age_ms")
            return False, (f"DN {d['dn']} stalled: no transaction for "
                           f"{'ever' if age_ms is None else f'{age_ms / 1000:.1f} s'} (stall_ms {stall_ms})")
    if status.get("endpoint_expected") and not status.get("endpoint_listening", bool(status.get("endpoint"))):
        return False, "the replication endpoint is not listening"
    return True, "ok"


class _Handler(BaseHTTPRequestHandler):
    registry: CollectorRegistry
    health: Callable[[], tuple[bool, str]]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            body, code, ctype = generate_latest(self.registry), 200, CONTENT_TYPE_LATEST
        elif path == "/healthz":
            ok, reason = type(self).health()
            body, code, ctype = (reason + "\n").encode(), 200 if ok else 503, "text/plain; charset=utf-8"
        else:
            body, code, ctype = b"not found: /metrics or /healthz\n", 404, "text/plain; charset=utf-8"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass


def serve_http(host: str, port: int, registry: CollectorRegistry,
               health: Callable[[], tuple[bool, str]]) -> ThreadingHTTPServer:
    """Serve ``/metrics`` (``registry``) and ``/healthz`` (200 or 503 with ``health()``'s reason)
    on ``host:port`` (0: any free port) in a daemon thread. Raises ``OSError`` when the port is taken."""
    handler = type("Handler", (_Handler,), {"registry": registry, "health": staticmethod(health)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gbinlog-metrics", daemon=True).start()
    return server


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.dn_events = Counter("gbinlog_dn_events", "Events read from the DN", ["dn"], registry=r)
        self.dn_bytes = Counter("gbinlog_dn_bytes", "Bytes read from the DN", ["dn"], registry=r)
        self.dn_txns = Counter("gbinlog_dn_txns", "Transactions released by the DN's extractor", ["dn"],
                               registry=r)
        self.dn_connected = Gauge("gbinlog_dn_connected", "1 while the DN is streaming", ["dn"], registry=r)
        self.dn_reconnects = Counter("gbinlog_dn_reconnects", "Reconnections after errors", ["dn"],
                                     registry=r)
        self.dn_failed = Gauge("gbinlog_dn_failed", "1 while the DN's stream is failed (2: persistent)", ["dn"],
                               registry=r)
        self.dn_faults = Counter("gbinlog_dn_faults", "Faults of the DN's stream", ["dn"], registry=r)
        self.dn_lag = Gauge("gbinlog_dn_lag_ms", "Now minus the DN's newest released TSO (ms)", ["dn"],
                            registry=r)
        self.dn_open = Gauge("gbinlog_dn_open_prepares", "Prepared transactions not yet committed", ["dn"],
                             registry=r)
        self.txns_out = Counter("gbinlog_txns_out", "Global transactions consumed", registry=r)
        self.events_out = Counter("gbinlog_events_out", "Events written to the global binlog", registry=r)
        self.lag = Gauge("gbinlog_lag_ms", "Now minus the last vtso written (ms), end to end", registry=r)
        self.replicas = Gauge("gbinlog_replicas", "Replicas attached to the endpoint", registry=r)
        self.output_bytes = Gauge("gbinlog_output_bytes", "Bytes of the global binlog files", registry=r)
        self.output_files = Gauge("gbinlog_output_files", "Global binlog files in the output directory", registry=r)
        self.disk_free = Gauge("gbinlog_output_disk_free_bytes", "Free bytes on the output file system", registry=r)
        self.stream_bytes = Gauge("gbinlog_stream_output_bytes", "Bytes of a stream's binlog files (stream group)",
                                  ["stream"], registry=r)
        self.stream_files = Gauge("gbinlog_stream_output_files", "A stream's binlog files (stream group)",
                                  ["stream"], registry=r)
        self.healthy = Gauge("gbinlog_healthy", "1 when /healthz answers 200", registry=r)
        from gbinlog import __version__
        Info("gbinlog_build", "The running gbinlog", registry=r).info(
            {"version": __version__, "python": platform.python_version()})
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._server: Any = None
        self._seen: dict[tuple[str, str], float] = {}
        self.health_source: Callable[[], dict | None] = lambda: None

    def health(self) -> tuple[bool, str]:
        ok, reason = health_of(self.health_source())
        self.healthy.set(1 if ok else 0)
        return ok, reason

    def update_output(self, directory: str | os.PathLike, base: str = "binlog", *,
                      streams: dict | None = None) -> None:
        """Disk usage of the output directory: its binlog files (each stream's and their sum, for a
        stream group: ``streams`` its ``[streams]``) and the file system's free bytes."""
        from dumper.streams import StreamSpec

        spec = StreamSpec.from_settings(streams)
        places = [(spec.directory(directory, k), spec.base(k), spec.name(k)) for k in range(spec.count)] \
            if spec.split else [(Path(directory), base, None)]
        total = files = 0
        try:
            for where, prefix, stream in places:
                n = size = 0
                if where.is_dir():
                    with os.scandir(where) as it:
                        for e in it:
                            name = e.name
                            if name.startswith(prefix + ".") and name[len(prefix) + 1:].isdigit():
                                n += 1
                                size += e.stat().st_size
                if stream is not None:
                    self.stream_bytes.labels(stream).set(size)
                    self.stream_files.labels(stream).set(n)
                total += size
                files += n
            self.disk_free.set(shutil.disk_usage(Path(directory)).free)
        except OSError:
            return
        self.output_bytes.set(total)
        self.output_files.set(files)

    def add_to(self, counter: Counter, key: str | None, total: float) -> None:
        """Move a counter (labelled with ``key``, or not) to ``total``: the sources keep their own
        running totals, the counter follows them."""
        seen = self._seen.get((counter._name, key or ""), 0.0)
        if total > seen:
            (counter.labels(key) if key is not None else counter).inc(total - seen)
            self._seen[(counter._name, key or "")] = total

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics`` and ``/healthz`` on ``host:port`` (0: any free port); returns the port.
        Raises ``OSError`` when the port is taken."""
        self._server = serve_http(host, port, self.registry, self.health)
        return self._server.server_address[1]

    @property
    def port(self) -> int | None:
        return self._server.server_address[1] if self._server is not None else None

    def watch_endpoint(self, server: Any) -> None:
        """Per-replica gauges of the endpoint (gbinlog/replica_metrics.py)."""
        from gbinlog.replica_metrics import register
        register(self.registry, server)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
