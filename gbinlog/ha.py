"""``gbinlog run`` as one member of an HA group: the ``[ha]`` glue between the runner and
``dumper.ha`` (lease thread, status, metrics, the purge gate).

Every member runs its own pipeline from the DNs into its own output directory and serves it: the
output is deterministic, so all members hold byte-identical files at the same file:pos and GTIDs,
and each keeps its own DN restart points (README, "High availability", says why this and not
copying the leader's files; ``bench/ha_follow.py`` measures both). The lease decides the one member
that does leader-only work: retention purges (``dumper.ha.purge``: the leader records its horizon,
the others follow it). A follower in the lag gate keeps a client that asks for what it has not
written yet waiting (``dumper.server.gtid_dump.dump_request``) instead of refusing it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from dumper.ha import LEADER, HaSettings, LeaseStore, LeaseStoreError, Member
from dumper.ha.purge import purge_round, purge_round_group
from dumper.server.binlogdir import BinlogDir
from dumper.server.retention import Directory
from extractor.vtso import tso_physical_ms, vtso_tso

log = logging.getLogger("gbinlog.ha")


def settings_of(cfg: Any, port: int | None) -> HaSettings:
    ha = cfg.ha
    address = ha.address or f"{cfg.server.host}:{port or cfg.server.port}"
    return HaSettings(member=ha.member, address=address, lease_ms=ha.lease_ms, store=ha.store or cfg.metadb,
                      lag_gate_ms=ha.lag_gate_ms, lag_gate_bytes=ha.lag_gate_bytes, catch_up_ms=ha.catch_up_ms)


def output_position(out: Path, base: str = "binlog") -> tuple[str, int]:
    """(newest file, its size): how far this member has written."""
    try:
        names = [n for n in (out / f"{base}.index").read_text().split() if n]
    except OSError:
        return "", 0
    if not names:
        return "", 0
    name = os.path.basename(names[-1])
    try:
        return name, os.stat(out / name).st_size
    except OSError:
        return name, 0


def group_position(out: Path, streams: dict, rotate_size: int) -> tuple[str, int]:
    """A stream group's position for the lag gate (docs/streams.md): ``<group>.000001`` and the
    bytes its streams hold, each file before a stream's newest counted as ``rotate_size`` (members'
    files are byte-identical, purges do not move it)."""
    from dumper.streams import StreamSpec

    spec = StreamSpec.from_settings(streams)
    total = 0
    for k in range(spec.count):
        name, pos = output_position(spec.directory(out, k), spec.base(k))
        if name:
            total += (int(name.rsplit(".", 1)[1]) - 1) * rotate_size + pos
    return f"{spec.group}.000001", total


def bytes_behind(out: Path, mine: tuple[str, int], theirs: tuple[str, int], rotate_size: int) -> int:
    """How many bytes ``theirs`` is past ``mine`` (0 if not): files are byte-identical across members,
    so the sizes of files this member has finished count for both; its current file and a file it
    has not got yet count as ``rotate_size`` (an estimate: a file rotates once past it)."""
    (f1, p1), (f2, p2) = mine, theirs
    if not f2 or (f1, p1) >= (f2, p2):
        return 0
    if f1 == f2:
        return p2 - p1
    n1, n2 = int(f1.rsplit(".", 1)[1]) if f1 else 0, int(f2.rsplit(".", 1)[1])
    base = f2.rsplit(".", 1)[0]
    total = -p1 + p2
    for n in range(max(n1, 1), n2):
        try:
            size = os.stat(out / f"{base}.{n:06d}").st_size
        except OSError:
            size = rotate_size
        # the file this member is still writing ends (rotates) at rotate_size at least
        total += max(size, rotate_size) if n == n1 else size
    return max(0, total)


class HaAgent:
    """The member of one runner: ``start()``, ``status()``, ``close()``; registers its gauges."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        port = runner.endpoint.port if runner.endpoint is not None else None
        self.settings = settings_of(runner.cfg, port)
        try:
            store = LeaseStore.open(self.settings.store)
        except LeaseStoreError as exc:
            from gbinlog.live import RunError
            raise RunError(f"ha.store: {exc}") from None
        self.member = Member(self.settings, store, position=self._position)
        self._stop = threading.Event()
        self._purger = threading.Thread(target=self._purge_loop, name="gbinlog-ha-purge", daemon=True)
        self.streams = runner.cfg.streams.settings()
        self._directories = _directories(runner.out, runner.cfg.output, self.streams)

    def _output_position(self) -> tuple[str, int]:
        if self.streams:
            return group_position(self.runner.out, self.streams, self.runner.cfg.output.rotate_size)
        return output_position(self.runner.out)

    def _position(self) -> tuple[str, int, str]:
        file, pos = self._output_position()
        p = self.runner.progress
        return file, pos, (p.last_vtso or "") if p is not None else ""

    def start(self) -> HaAgent:
        self.member.start()
        server = self.runner.endpoint.server if self.runner.endpoint is not None else None
        if server is not None:
            server.retention_elsewhere = True                # purge rounds: the leader's, followed (purge_round)
            server.dump_gate = self.dump_refusal             # a follower past the lag gate refuses dumps
            server.catch_up_wait = self.catch_up_wait        # … and within it, waits for what it lacks
            server.purge_refusal = self.purge_refusal        # PURGE BINARY LOGS: on the leader only
        self._purger.start()
        self.runner.metrics.registry.register(_HaCollector(self))
        return self

    # -- PURGE: the leader's, followed by the others (dumper.ha.purge) -----------------------------------
    def _retention(self) -> tuple[bool, float]:
        """(retention configured, seconds between rounds)."""
        endpoint = self.runner.endpoint
        cfg = endpoint.server.config if endpoint is not None else self.runner.cfg.output
        return cfg.expire_logs_seconds > 0 or cfg.max_total_size > 0, getattr(cfg, "retention_interval", 2.0)

    def _purge_loop(self) -> None:
        """A purge round every ``retention_interval``, in its own thread: a slow round (the endpoint's
        loop busy, the store slow) never delays the lease renewals."""
        on, interval = self._retention()
        while not self._stop.wait(interval):
            try:
                if self.streams:
                    runs = [self._on_stream(k) for k in range(len(self._directories))]
                    purge_round_group(self.member, runs, retention_on=on, now=time.time())
                else:
                    purge_round(self.member, self._on_directory, retention_on=on, now=time.time())
            except Exception:  # noqa: BLE001 - a failed round is retried at the next one
                log.exception("HA purge round failed")

    def purge_refusal(self) -> str | None:
        """``PURGE BINARY LOGS`` on a follower: refused (it follows the leader's purges)."""
        if self.member.role == LEADER:
            return None
        leader = self.member.leader()
        return (f"gbinlog HA: this member ({self.settings.member}) is a follower: it purges what the leader purged; "
                f"run PURGE BINARY LOGS on the leader {leader.get('member') or '(none now)'}"
                + (f" at {leader['address']}" if leader.get("address") else ""))

    def _on_directory(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(target, *args)`` where the directory's readers are known: on the endpoint's loop (its
        connections change there), or directly for a run with no endpoint."""
        endpoint = self.runner.endpoint
        if endpoint is None:
            return fn(self._directories[0], *args)

        async def call() -> Any:
            return fn(endpoint.server, *args)
        return asyncio.run_coroutine_threadsafe(call(), endpoint.loop).result(10)

    def _on_stream(self, k: int) -> Callable[..., Any]:
        """``_on_directory`` for stream ``k`` of a stream group."""
        def run(fn: Callable[..., Any], *args: Any) -> Any:
            endpoint = self.runner.endpoint
            if endpoint is None:
                return fn(self._directories[k], *args)
            from dumper.server.stream_dirs import RetentionOfStream

            server = endpoint.server

            async def call() -> Any:
                return fn(RetentionOfStream(server.group.streams[k].bdir, server.config, server), *args)
            return asyncio.run_coroutine_threadsafe(call(), endpoint.loop).result(10)
        return run

    def catch_up_wait(self) -> float:
        """Seconds a new dump asking for data this member has not written yet may wait for it: a
        follower (the lag gate let the dump in) catches up soon — also one whose view of the store is
        old, e.g. just resumed after a pause, or while the store is down and every member follows;
        the leader has everything there is, so such a client is answered at once."""
        return 0.0 if self.member.role == LEADER else self.settings.catch_up_ms / 1000

    def close(self) -> None:
        self._stop.set()
        if self._purger.is_alive():
            self._purger.join(5)
        self.member.close()

    def lag(self) -> tuple[str | None, str | None, int, int | None]:
        """(leader, its address, bytes behind it, ms behind it by vtso) as of the last tick."""
        m = self.member
        leader = m.leader()
        name = leader.get("member") or None
        row = next((r for r in m.members() if r.member == name), None)
        if row is None:
            return name, leader.get("address") or None, 0, None
        behind = bytes_behind(self.runner.out, self._output_position(), (row.file, row.pos),
                              self.runner.cfg.output.rotate_size)
        p = self.runner.progress
        mine = p.last_vtso if p is not None else None
        ms = None
        mine_ms = tso_physical_ms(vtso_tso(mine)) if mine else 0
        if row.vtso and mine_ms > 0:     # before its first transaction a member's lag in time is unknown
            ms = max(0, tso_physical_ms(vtso_tso(row.vtso)) - mine_ms)
        return name, leader.get("address") or None, behind, ms

    def dump_refusal(self) -> str | None:
        """The ERR text for a new dump on a follower past the lag gate, or None to serve it. The
        leader always serves; so does a member that does not know the leader's position (no tick
        has read the store within a lease: during a store outage every member goes on serving)."""
        m, s = self.member, self.settings
        if m.role == LEADER or m.view_age() > s.lease_ms / 1000:
            return None
        leader, address, behind, ms = self.lag()
        if leader is None or leader == s.member:
            return None
        if behind <= s.lag_gate_bytes and (ms is None or ms <= s.lag_gate_ms):
            return None
        return (f"gbinlog HA: this member ({s.member}) is {behind} bytes"
                + (f" / {ms} ms" if ms is not None else "") + f" behind the leader {leader}; past the lag gate "
                f"({s.lag_gate_bytes} bytes / {s.lag_gate_ms} ms): replicate from the leader at {address} "
                "or retry later")

    def status(self) -> dict:
        m = self.member
        rows = m.members()
        leader = m.leader()
        _, _, lag, lag_ms = self.lag()
        return {"member": self.settings.member, "address": self.settings.address, "role": m.role,
                "epoch": m.epoch, "lease_ms": self.settings.lease_ms,
                "leader": leader.get("member") or None, "leader_address": leader.get("address") or None,
                "leader_epoch": leader.get("epoch"), "lag_bytes": lag, "lag_ms": lag_ms, "store_error": m.store_error,
                "serving": self.dump_refusal() is None,
                "transitions": [{"time": round(t, 3), "role": r, "epoch": e} for t, r, e in m.transitions[-20:]],
                "members": [{"member": r.member, "address": r.address, "role": r.role, "epoch": r.epoch,
                             "file": r.file, "pos": r.pos, "vtso": r.vtso} for r in rows]}


class _HaCollector:
    """gbinlog_ha_role (1 leader, 0 follower), gbinlog_ha_epoch, gbinlog_ha_lag_bytes, read at scrape."""

    def __init__(self, agent: HaAgent) -> None:
        self.agent = agent

    def collect(self) -> Iterator[GaugeMetricFamily]:
        st = (self.agent.runner._last_status or {}).get("ha") or {}
        m = self.agent.member
        yield GaugeMetricFamily("gbinlog_ha_role", "1 while this member is the leader, 0 as a follower",
                                value=1.0 if m.role == LEADER else 0.0)
        yield GaugeMetricFamily("gbinlog_ha_epoch", "The fencing epoch this member last held or saw granted",
                                value=float(m.epoch))
        yield GaugeMetricFamily("gbinlog_ha_lag_bytes", "Bytes this member's files are behind the leader's",
                                value=float(st.get("lag_bytes") or 0))

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


def _directories(out: Path, output: Any, streams: dict | None) -> list[Directory]:
    """The directories a member's purge rounds go over when no endpoint serves them: the output,
    or each stream of a stream group."""
    from dumper.streams import StreamSpec

    spec = StreamSpec.from_settings(streams)
    if not spec.split:
        return [Directory(BinlogDir(out, "binlog"), output)]
    return [Directory(BinlogDir(spec.directory(out, k), spec.base(k)), output) for k in range(spec.count)]


def format_ha(ha: dict) -> list[str]:
    """The ``gbinlog status`` lines of the HA group."""
    lines = [f"  HA member {ha['member']} ({ha['address']}): {ha['role']}, epoch {ha['epoch']}; leader "
             f"{ha.get('leader') or '-'} at {ha.get('leader_address') or '-'} (epoch {ha.get('leader_epoch')}); "
             f"lag {ha.get('lag_bytes', 0):,} bytes" + (f"; store error: {ha['store_error']}"
                                                         if ha.get("store_error") else "")]
    for r in ha.get("members", []):
        lines.append(f"    member {r['member']:<10} {r['role']:<8} epoch {r['epoch']:<4} {r['address']}  "
                     f"at {r['file'] or '-'}:{r['pos']}  vtso {r['vtso'] or '-'}")
    return lines
