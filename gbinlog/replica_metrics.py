"""Prometheus gauges of the endpoint's replicas, read from ``BinlogServer.replica_stats()`` at scrape time
(a custom collector: no series left behind by a replica that went away). Names::

    gbinlog_replica_connected{server_id,user,host}            1 per attached replica (dump)
    gbinlog_replica_file_number{server_id,user,host}          N of binlog.N the replica is reading
    gbinlog_replica_position_bytes{server_id,user,host}       its position in that file
    gbinlog_replica_sent_bytes{server_id,user,host}           bytes sent to it since it attached
    gbinlog_replica_send_rate_bytes{server_id,user,host}      bytes/s over the last sample
    gbinlog_replica_seconds_behind_head{server_id,user,host}  how long ago the head passed its position

and the endpoint's login counters (``dumper.server.login_throttle``)::

    gbinlog_failed_logins_total                               refused passwords since start
    gbinlog_delayed_logins_total                              login attempts delayed after failures
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

_LABELS = ["server_id", "user", "host"]
_GAUGES = [
    ("gbinlog_replica_connected", "1 per replica attached to the endpoint", lambda r: 1),
    ("gbinlog_replica_file_number", "Sequence number of the binlog file the replica reads",
     lambda r: int(r["file"].rsplit(".", 1)[-1]) if r["file"].rsplit(".", 1)[-1].isdigit() else 0),
    ("gbinlog_replica_position_bytes", "The replica's position in that file", lambda r: r["pos"]),
    ("gbinlog_replica_sent_bytes", "Bytes sent to the replica since it attached", lambda r: r["bytes_sent"]),
    ("gbinlog_replica_send_rate_bytes", "Bytes per second sent to the replica (last sample)",
     lambda r: r["bytes_per_s"]),
    ("gbinlog_replica_seconds_behind_head", "Seconds since the newest binlog position passed the replica's",
     lambda r: r["seconds_behind_head"]),
]


_LOGIN_COUNTERS = [
    ("gbinlog_failed_logins", "Logins refused for a wrong password or an unknown user", "failed_logins"),
    ("gbinlog_delayed_logins", "Login attempts delayed after consecutive failures of their user and host",
     "delayed_logins"),
]


class ReplicaCollector:
    def __init__(self, server: Any) -> None:
        self.server = server

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        rows = self.server.replica_stats()
        for name, doc, value in _GAUGES:
            family = GaugeMetricFamily(name, doc, labels=_LABELS)
            for r in rows:
                family.add_metric([str(r["server_id"]), r["user"], r["host"]], float(value(r)))
            yield family
        throttle = self.server.login_throttle
        for name, doc, attribute in _LOGIN_COUNTERS:
            yield CounterMetricFamily(name, doc, value=getattr(throttle, attribute))

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        for name, doc, _ in _GAUGES:
            yield GaugeMetricFamily(name, doc, labels=_LABELS)
        for name, doc, _ in _LOGIN_COUNTERS:
            yield CounterMetricFamily(name, doc)


def register(registry: CollectorRegistry, server: Any) -> ReplicaCollector:
    """Add the replica gauges of ``server`` (a ``BinlogServer``) to ``registry``."""
    collector = ReplicaCollector(server)
    registry.register(collector)
    return collector
