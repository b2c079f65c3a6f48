"""One output range of the Spark batch build: its DNs' transactions merged, shaped and written.

``render_range`` is the writer task's body for every exchange. It writes a range file (events
positioned as if that file were a binlog file, FDE first; ``layout`` later copies its bytes into
the final files), or — the first range of ``exchange=reread`` — the final files themselves, with the
local engine's writer (``GlobalBinlog``), so those bytes are never copied.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path


class RangeFile:
    """A range file: the local writer's framing (``kernel.frame_pass_txn`` for a pass-through DML
    transaction, else ``encode_txn`` of the shaped one) into a buffer written every 4 MB."""

    FLUSH_BYTES = 1 << 22

    def __init__(self, settings, rng: int, shaper, attempt: str | None = None) -> None:
        from binlog import kernel
        from dumper.global_binlog import BEGIN_HEAD, encode_txn, file_start
        from gbinlog.spark_engine.layout import range_file_name
        from gbinlog.spark_engine.xkernel import count_events
        from schema_shaper.rows import PASS

        self.settings, self.shaper, self.rng = settings, shaper, rng
        self.out = bytearray(file_start(server_id=settings.server_id, server_version=settings.server_version,
                                        timestamp=0))
        self.pos = len(self.out)
        self.events = 0
        self.name = range_file_name(rng, attempt or uuid.uuid4().hex[:16])
        self.fh = open(Path(settings.tmp_dir, self.name), "xb")  # noqa: SIM115 - closed by close()
        # bound once: ``write`` runs once per transaction
        self._frame, self._head, self._plans, self._pass = kernel.frame_pass_txn, BEGIN_HEAD, shaper.plans, PASS
        self._encode, self._count = encode_txn, count_events
        self.progress = None   # ``follow.Progress`` when the first range's task follows this one

    def track(self, sizes: list[int], stamps: list[int], progress) -> None:
        """Publish to ``progress`` (a ``follow.Progress``, whose owner ends it), after each flush,
        the transactions ``sizes``/``stamps`` (the caller's lists, appended after each ``write``)."""
        self.progress, self._sizes, self._stamps = progress, sizes, stamps

    def write(self, g, dml: bool, ts: int) -> int:
        """The bytes ``g`` took (0: nothing written)."""
        out, pos, sid = self.out, self.pos, self.settings.server_id
        at = len(out)
        n = self._frame(out, pos, ts, sid, self._head, g.blocks, g.branches, g.vtso, self._plans, self._pass) \
            if dml else -1
        if n < 0:
            data = self._encode(self.shaper.shape_txn(g), pos, sid, heartbeat_interval=self.settings.heartbeat_interval)
            if not data:
                return 0
            out += data
            n = self._count(data)
        size = len(out) - at
        self.pos += size
        self.events += n
        if len(out) >= self.FLUSH_BYTES:
            self.fh.write(out)
            out.clear()
            if self.progress is not None:   # the transactions before this one are in the file now
                self.fh.flush()
                self.progress.publish(self._sizes, self._stamps)
        return size

    def close(self, ok: bool) -> dict | None:
        try:
            if ok:
                self.fh.write(self.out)     # no fsync: a temporary file; the final files are synced once placed
        finally:
            self.fh.close()
        if ok and self.progress is not None:
            self.progress.publish(self._sizes, self._stamps)
        return None


class FinalFiles:
    """The first range written as the final files by ``GlobalBinlog``, as the local pipeline
    writes (``append_passed``, else ``append`` of the shaped transaction), into a directory of
    this attempt's own in the build's temp directory: the driver moves them into the output
    directory (``layout.finish_files``), so a failed or duplicate attempt never leaves files
    there. Sizes are reported without the GTID events, as the range files' (``layout`` adds them)."""

    name = None   # no range file: the row's ``direct`` says where the files are

    def __init__(self, settings, rng: int, shaper) -> None:
        import tempfile

        from dumper.global_binlog import GlobalBinlog
        from dumper.gtid import GTID_EVENT_LEN

        self.settings, self.shaper = settings, shaper
        self.dir = tempfile.mkdtemp(prefix="first-", dir=settings.tmp_dir)
        self.writer = GlobalBinlog(self.dir, server_id=settings.server_id,
                                   server_version=settings.server_version, max_file_size=settings.max_file_size,
                                   heartbeat_interval=settings.heartbeat_interval, gtids=settings.gtids,
                                   buffer_size=4 << 20)
        self.gtid_len = GTID_EVENT_LEN if settings.gtids else 0
        self.pos = 0

    def write(self, g, dml: bool, ts: int) -> int:
        size = self.writer.append_passed(g, self.shaper.plans) if dml else None
        if size is None:
            size = self.writer.append(self.shaper.shape_txn(g))
        return size - self.gtid_len if size else 0

    @property
    def events(self) -> int:
        w = self.writer
        return w.events_written - (w.txns_written if self.settings.gtids else 0)

    def close(self, ok: bool) -> dict | None:
        """Flushed and synced (final files); where the writer ended (``layout.plan_files``'s
        ``placed``, with the directory they are in)."""
        from dumper.global_binlog import DumperError

        w = self.writer
        if not ok:
            try:
                w.close()
            except (OSError, DumperError):
                pass
            return None
        w.close()
        return {"dir": self.dir, "files": w.files, "position": w.position, "gno": w.gno,
                "file_txns": w.file_txns, "last_marker": w.last_marker, "sid": w.gtid_sid}


def range_end(settings, dn: str, stream, hi: str | None):
    """DN ``dn``'s stream of one range, saying what the DN has passed when it ends (the emission
    rule, ``merger.emission``): a DN that left the cluster bounds nothing after it left; one whose
    transactions go on past the range's end ``hi`` passed ``hi`` (known from ``settings.ends``, or
    said by the stream itself); else its last transaction counts."""
    from gbinlog.spark_engine.exchange import until
    from merger import PASSED_ALL, EndsPassing

    if dn in settings.left:
        return EndsPassing(until(stream, settings.left[dn]), PASSED_ALL)
    ends = getattr(settings, "ends", None)
    if hi is not None and ends is not None and ends.get(dn, "") >= hi:
        return EndsPassing(stream, hi)
    return stream


def render_range(settings, entries: list, rng: int, streams: list[Iterator], membership=None,
                 direct: bool = False, progress=None) -> dict:
    """One output range: the DNs' transactions in it (``streams``, per DN in DN order) → merged,
    shaped, written (``RangeFile``, or with ``direct`` ``FinalFiles``); returns its summary
    (``shuffle.SUMMARY``'s fields, and ``direct``: where the final files end, or None).

    Also reports what the driver needs for state.json and the cluster rule: per DN the newest
    restart point carried and the last vtso, and the broadcast transactions (heartbeats, marks,
    instructions) whose DN set differs from the one before (checking those checks them all).
    ``membership``: the merge's ``merger.Membership`` (the caller reads which DNs left in it).
    ``progress``: a ``follow.Progress`` the range file publishes its written transactions to."""
    from dumper.cluster import BROADCAST_KINDS
    from dumper.pipeline import fewer_gc_passes
    from extractor.model import TxnKind
    from extractor.vtso import vtso_timestamp
    from gbinlog.spark_engine.layout import pack_u32
    from merger import Membership, merge
    from schema_shaper import Shaper

    t0 = time.perf_counter()
    membership = membership if membership is not None else Membership()
    hi = settings.bounds[rng] if rng < len(settings.bounds) else None
    streams = [range_end(settings, dn, s, hi) for dn, s in zip(settings.dns, streams, strict=False)]
    upto = settings.bounds[rng - 1] if rng > 0 else "0" * 54
    shaper = Shaper.from_history(entries, upto, on_error=settings.on_error)
    # a followed range's file is named by the follow's job token (one attempt there, batch._following)
    sink = FinalFiles(settings, rng, shaper) if direct else \
        RangeFile(settings, rng, shaper, progress.token if progress is not None else None)
    write, dml = sink.write, TxnKind.DML
    txns = 0
    last_vtso = first_written = last_written = None
    points: dict[str, list] = {}
    last_of: dict[str, str] = {}
    broadcasts: list[list] = []
    prev_dns: list[str] | None = None
    sizes: list[int] = []
    stamps: list[int] = []
    if progress is not None:
        sink.track(sizes, stamps, progress)
    ok = False
    try:
        with fewer_gc_passes():   # as the local pipeline's loop: millions of short-lived containers
            for g in merge(streams, membership=membership):
                txns += 1
                vtso = last_vtso = g.vtso
                for b in g.branches:
                    last_of[b.dn] = vtso
                    if b.restart is not None:
                        points[b.dn] = list(b.restart)
                kind = g.kind
                if kind in BROADCAST_KINDS:
                    dns = sorted({b.dn for b in g.branches})
                    if dns != prev_dns:
                        broadcasts.append([vtso, dns])
                        prev_dns = dns
                ts = vtso_timestamp(vtso)
                size = write(g, kind is dml, ts)
                if size:
                    sizes.append(size)
                    stamps.append(ts)
                    last_written = vtso
                    first_written = first_written or vtso
        ok = True
    finally:
        placed = sink.close(ok)
    info = {"points": points, "last_of": last_of, "broadcasts": broadcasts}
    held = membership.held
    if held is not None:    # the emission rule stopped this range (merger.emission)
        info["held"] = [held.dn, held.passed, list(held.at) if held.at else None, held.first_held, held.txns]
    return {"rng": rng, "txns": txns, "written": len(sizes), "events": sink.events, "size": sink.pos,
            "first_ts": stamps[0] if stamps else -1, "last_ts": stamps[-1] if stamps else -1,
            "last_vtso": last_vtso, "last_written_vtso": last_written, "first_written_vtso": first_written,
            "info": json.dumps(info), "sizes": pack_u32(sizes), "stamps": pack_u32(stamps),
            "seconds": time.perf_counter() - t0, "direct": placed, "file": sink.name}
