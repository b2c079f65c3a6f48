"""The streaming side of ``dnbinlog``: ``spark.readStream.format("dnbinlog")``.

Options: ``dns`` (JSON list of ``{"id", "storage_seq"}`` with ``"dir"`` — a DN binlog directory the
executors can read — or ``"host", "port", "user", "password", "server_id"`` — a DN read over the
replication protocol, as ``gbinlog run --engine local`` reads it) and ``out`` (the output
directory: its ``state.json`` holds the durable restart points, ``spark-read-dns.json`` the DNs the
pipeline has opened — a standby DN is read once it joined).

An offset is, per active DN, the end of what the DN had written when the batch was planned
(``[file, size]``) and the restart point the output had made durable then (``state.json``; None:
the DN's first file). A micro-batch reads every DN from that restart point up to that end, in one
task per DN: the executor runs the assembler (vtso, first-level sort) and yields what it releases.
So a batch re-reads the few transactions after the last checkpoint; the driver drops what it has
already handed on (per DN, by (vtso, end position)) and the pipeline drops vtso ≤ the last one
written. Offsets are kept in Spark's checkpoint, so a replayed batch reads exactly the same bytes,
and a restart point older than the output's is only more re-reading: nothing is lost.

Over the protocol, the end is the last file and its size in the DN's ``SHOW BINARY LOGS`` (a DN that
does not answer keeps its previous end: no new data from it this batch), and the task reads with a
replica connection (``extractor.live_source.ReplicationSource``) from the restart point until it has
the events up to that end, or the DN sends a heartbeat (it has nothing more), then disconnects
(``ReplicationRange``).

Planning reads only directory listings, file sizes, ``SHOW BINARY LOGS`` and two small JSON files:
it never parses a DN binlog (stream-reader methods run in a JVM-spawned Python process that shares nothing with the
driver).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from extractor.source import DnSource
from gbinlog.spark_engine.errors import in_task


class _StreamPart(InputPartition):
    def __init__(self, dn_idx: int, restart: list | None, end: list) -> None:
        super().__init__(dn_idx)
        self.dn_idx, self.restart, self.end = dn_idx, restart, end


def durable_restart_points(out: str) -> dict[str, list | None]:
    """Per DN the restart point in ``<out>/state.json`` as ``[file, pos, tso, txn_id, seq]``."""
    path = Path(out, "state.json")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    points = {}
    for dn, p in (doc.get("dns") or {}).items():
        points[dn] = None if p is None else [p["file"], int(p["pos"]), int(p["tso"]), int(p["txn_id"]), int(p["seq"])]
    return points


READ_DNS_FILE = "spark-read-dns.json"


def read_dns(out: str) -> set[str]:
    """The DNs the pipeline has opened (``<out>/spark-read-dns.json``, written by the driver when a
    DN is opened — at the start or when it joins): the ones the source reads."""
    try:
        return set(json.loads(Path(out, READ_DNS_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return set()


class DnBinlogStreamReader(DataSourceStreamReader):
    def __init__(self, options) -> None:
        if "dns" not in options or "out" not in options:
            raise ValueError("dnbinlog stream: options 'dns' (JSON) and 'out' (output directory) are required")
        self.dns = json.loads(options["dns"])
        self.out = options["out"]

    def initialOffset(self) -> dict:
        return {"dns": {}}

    def _ends(self, old: dict) -> dict[str, list]:
        from extractor.source import list_binlog_files

        reading = read_dns(self.out)
        ends = {}
        for d in self.dns:
            if d["id"] not in reading:
                continue
            if "host" in d:
                end = self._remote_end(d) or (old.get(d["id"]) or {}).get("end")
                if end:
                    ends[d["id"]] = end
                continue
            directory = Path(d["dir"])
            names = list_binlog_files(directory) if directory.is_dir() else []
            if names:
                ends[d["id"]] = [names[-1], (directory / names[-1]).stat().st_size]
        return ends

    def _remote_end(self, dn: dict) -> list | None:
        """``remote_end`` at most every ``REMOTE_POLL`` seconds per DN, over one kept connection:
        Spark asks for the latest offset in a loop (every 10 ms when idle), and a login per call
        would load the DN."""
        import time

        now = time.monotonic()
        cache = self.__dict__.setdefault("_remote", {})
        conn, checked, end = cache.get(dn["id"], (None, 0.0, None))
        if now - checked >= REMOTE_POLL:
            conn, end = remote_end(dn, conn=conn)
            cache[dn["id"]] = (conn, now, end)
        return end

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        old = (start or {}).get("dns", {})
        ends = self._ends(old)
        if old and {dn: v["end"] for dn, v in old.items()} == ends:
            return start                      # nothing new: no batch
        points = durable_restart_points(self.out)
        return {"dns": {dn: {"end": end, "restart": points.get(dn)} for dn, end in ends.items()}}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        index = {d["id"]: i for i, d in enumerate(self.dns)}
        return [_StreamPart(index[dn], v["restart"], v["end"]) for dn, v in sorted(end["dns"].items(),
                                                                              key=lambda kv: index[kv[0]])]

    def read(self, partition: _StreamPart) -> Iterator:
        return read_stream_part(self.dns[partition.dn_idx], partition.dn_idx, partition.restart, partition.end)

    def commit(self, end: dict) -> None:
        pass


@in_task
def read_stream_part(dn: dict, dn_idx: int, restart: list | None, end: list) -> Iterator:
    """One DN from ``restart`` up to ``end``: what the assembler releases (no end-of-input check:
    the DN goes on, an open prepare is simply not released yet)."""
    from extractor.assembler import Assembler
    from extractor.model import Pos
    from extractor.vtso import VtsoState
    from gbinlog.spark_engine.arrow_codec import iter_encoded
    from gbinlog.spark_engine.ranges import RangeSource

    begin = Pos(restart[0], restart[1]) if restart else None
    source = ReplicationRange(dn, begin, Pos(*end)) if "host" in dn else RangeSource(dn["dir"], dn["id"], begin, Pos(*end))
    asm = Assembler(dn["id"], storage_seq=dn["storage_seq"], state=VtsoState(*restart[2:]) if restart else None)

    def txns():
        for name, events in source.files():
            yield from asm.feed(name, events)

    yield from iter_encoded(txns(), dn_idx)


REMOTE_POLL = 0.1


def remote_end(dn: dict, timeout: float = 5.0, conn=None) -> tuple:
    """``(connection, [last file, its size])`` of a DN over the protocol (``SHOW BINARY LOGS``):
    on ``conn`` if given and alive, else on a new connection (returned for the next call); the end
    is None when the DN does not answer (the connection is then closed and None)."""
    import pymysql

    try:
        if conn is None:
            conn = pymysql.connect(host=dn["host"], port=int(dn["port"]), user=dn.get("user") or "",
                                   password=dn.get("password") or "", connect_timeout=timeout, read_timeout=timeout)
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            rows = cur.fetchall()
    except (pymysql.err.MySQLError, OSError):
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close any way
                pass
        return None, None
    return conn, ([str(rows[-1][0]), int(rows[-1][1])] if rows else None)


class ReplicationRange(DnSource):
    """DN ``dn`` (a ``dns`` option entry with host/port) over the replication
    protocol from ``start`` (None: its first file) up to ``end``. The events that end at or before
    ``end`` are yielded; the connection closes at ``end``, at an event past it, or at the first
    heartbeat (the DN had nothing more to send, so everything up to ``end`` has come). A DN that
    delivers nothing for ``stall`` seconds is an error naming it."""

    def __init__(self, dn: dict, start, end, stall: float = 60.0) -> None:
        self.dn, self.dn_id, self.start, self.end, self.stall = dn, dn["id"], start, end, stall
        self.reached = False
        self._last = 0.0

    def files(self) -> Iterator:
        import time

        from extractor.live_source import LiveSourceError, ReplicationSource

        dn, end = self.dn, self.end
        if self.start is not None and (self.start.file, self.start.offset) >= (end.file, end.offset):
            return
        self._last = time.monotonic()
        src = ReplicationSource(dn["id"], dn["host"], int(dn["port"]), dn.get("user") or "", dn.get("password") or "",
                                start_file=self.start.file if self.start else None,
                                start_pos=self.start.offset if self.start else 4,
                                server_id=int(dn.get("server_id") or 4_200_000), heartbeat=0.1,
                                should_stop=lambda: time.monotonic() - self._last > self.stall)
        src.on_idle = lambda: self._done(src)
        try:
            for name, events in src.files():
                if name > end.file:
                    self._done(src)
                    return
                yield name, self._upto(src, name, events)
                if self.reached:
                    return
        finally:
            src.stop()
        if not self.reached:
            raise LiveSourceError(f"delivered nothing for {self.stall:.0f} s before {end.file}:{end.offset}",
                                  dn=dn["id"], file=src.file or None, offset=src.pos)

    def _done(self, src) -> None:
        self.reached = True
        src.stop()

    def _upto(self, src, name: str, events: Iterator) -> Iterator:
        import time

        end = self.end
        for ev in events:
            self._last = time.monotonic()
            if name == end.file and ev.pos + ev.h[3] > end.offset:
                self._done(src)
                return
            yield ev
            if name == end.file and ev.pos + ev.h[3] == end.offset:
                self._done(src)
                return
