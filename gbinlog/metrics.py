"""Prometheus metrics of ``gbinlog run`` (prometheus-client, one registry per runner).

Counters are totals (Prometheus derives events/s with ``rate()``); gauges are refreshed by the
runner's status loop. Names::

    gbinlog_dn_events_total{dn}        events read from the DN
    gbinlog_dn_bytes_total{dn}         bytes read from the DN
    gbinlog_dn_txns_total{dn}          transactions the DN's extractor released
    gbinlog_dn_connected{dn}           1 while streaming (a dir DN: 1 while followed)
    gbinlog_dn_reconnects_total{dn}    reconnections after errors
    gbinlog_dn_lag_ms{dn}              now − physical time of the DN's newest released TSO
    gbinlog_dn_open_prepares{dn}       prepared, not yet committed transactions held by the Sorter
    gbinlog_txns_out_total             global transactions consumed (written or not: heartbeats
                                       off the 30 s grid, physical DDL, instructions)
    gbinlog_events_out_total           events written to the global binlog
    gbinlog_lag_ms                     now − physical time of the last vtso written (end to end)
    gbinlog_replicas                   replicas attached to the endpoint
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


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
        self.dn_lag = Gauge("gbinlog_dn_lag_ms", "Now minus the DN's newest released TSO (ms)", ["dn"],
                            registry=r)
        self.dn_open = Gauge("gbinlog_dn_open_prepares", "Prepared transactions not yet committed", ["dn"],
                             registry=r)
        self.txns_out = Counter("gbinlog_txns_out", "Global transactions consumed", registry=r)
        self.events_out = Counter("gbinlog_events_out", "Events written to the global binlog", registry=r)
        self.lag = Gauge("gbinlog_lag_ms", "Now minus the last vtso written (ms), end to end", registry=r)
        self.replicas = Gauge("gbinlog_replicas", "Replicas attached to the endpoint", registry=r)
        self._server: Any = None
        self._seen: dict[tuple[str, str], float] = {}

    def add_to(self, counter: Counter, key: str | None, total: float) -> None:
        """Move a counter (labelled with ``key``, or not) to ``total``: the sources keep their own
        running totals, the counter follows them."""
        seen = self._seen.get((counter._name, key or ""), 0.0)
        if total > seen:
            (counter.labels(key) if key is not None else counter).inc(total - seen)
            self._seen[(counter._name, key or "")] = total

    def watch_endpoint(self, server: Any) -> None:
        """Per-replica gauges of the endpoint (gbinlog/replica_metrics.py)."""
        from gbinlog.replica_metrics import register
        register(self.registry, server)

    def serve(self, host: str, port: int) -> None:
        """Expose ``/metrics`` on ``host:port`` (raises ``OSError`` when the port is taken)."""
        self._server = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        server = self._server[0] if isinstance(self._server, tuple) else self._server
        if server is not None:
            server.shutdown()
            server.server_close()
        self._server = None
