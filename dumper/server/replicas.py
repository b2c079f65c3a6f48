"""Per-replica figures of the endpoint: who reads (server id, user, address, TLS), where (file:pos), how
fast (bytes/s) and how far behind the head, in seconds.

"Seconds behind the head" is wall-clock time, not binlog timestamps (those are the cluster's commit
times, and a replica of old files would look years behind): the sampler records when the head (the
newest file's size) reached each position; a replica at position P is behind by how long ago the head
passed P — 0 while it is at the head. Sampled on the server's loop every ``interval`` seconds; cheap
(one stat of the newest file, a few numbers per dump).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dumper.server.dump import BinlogDump
    from dumper.server.server import BinlogServer

HISTORY = 24 * 3600          # seconds of head positions kept (one sample per interval while it moves)


def _key(file: str, pos: int) -> tuple[str, int]:
    return (file, pos)       # binlog.NNNNNN names sort in order


class ReplicaStats:
    def __init__(self, server: BinlogServer, interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        # Head positions (increasing) and when each was first seen: bisect finds when the head passed P.
        self._keys: list[tuple[str, int]] = []
        self._times: list[float] = []
        self._rates: dict[int, tuple[float, int, float]] = {}         # id(dump) -> (t, bytes, bytes/s)
        self.snapshot: list[dict] = []

    def _sample_head(self, now: float) -> tuple[str, int] | None:
        bdir = self.server.bdir
        files = bdir.files()
        if not files:
            return None
        try:
            head = _key(files[-1], bdir.size(files[-1]))
        except OSError:
            return None
        if not self._keys or self._keys[-1] < head:
            self._keys.append(head)
            self._times.append(now)
        if len(self._times) > 1 and now - self._times[0] > HISTORY:
            cut = bisect.bisect_left(self._times, now - HISTORY)
            del self._keys[:cut], self._times[:cut]
        return head

    def _behind(self, pos: tuple[str, int], head: tuple[str, int] | None, now: float) -> float:
        """Seconds since the head first went past ``pos`` (0 at the head)."""
        if head is None or pos >= head:
            return 0.0
        i = bisect.bisect_right(self._keys, pos)       # first sample beyond pos
        if i >= len(self._keys):
            return 0.0
        return round(now - self._times[i], 3)

    def _rate(self, dump: BinlogDump, now: float) -> float:
        prev = self._rates.get(id(dump))
        rate = 0.0
        if prev is not None and now > prev[0]:
            rate = (dump.bytes_sent - prev[1]) / (now - prev[0])
        self._rates[id(dump)] = (now, dump.bytes_sent, rate)
        return rate

    def tick(self, now: float | None = None) -> list[dict]:
        now = time.monotonic() if now is None else now
        head = self._sample_head(now)
        rows = []
        live = set()
        for conn in self.server.connections():
            d = conn.dump
            if d is None:
                continue
            live.add(id(d))
            s = d.session
            slave = s.slave or {}
            rows.append({
                "server_id": d.request.server_id or slave.get("server_id", 0),
                "user": s.user, "host": s.host, "port": conn.peer_port, "conn_id": s.conn_id,
                "tls": conn.secure, "file": d.file, "pos": d.position,
                "bytes_sent": d.bytes_sent, "events_sent": d.events_sent,
                "bytes_per_s": round(self._rate(d, now), 1),
                "seconds_behind_head": self._behind(_key(d.file, d.position), head, now),
                "started_at": d.started_at,
            })
        for k in list(self._rates):
            if k not in live:
                del self._rates[k]
        self.snapshot = rows
        return rows

    async def run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # figures must never take the endpoint down
                pass
            await asyncio.sleep(self.interval)
