"""``StreamGroup``: the pipeline's output when ``[streams] count`` > 1 (docs/streams.md).

One ``GlobalBinlog`` per stream (``OUT/stream<k>``, files ``<group>_stream_<k>_binlog.NNNNNN``)
behind what the pipeline writes to: ``append`` routes each shaped transaction
(``dumper.streams.route_transaction``) and appends each part to its stream.

Crash safety, stream by stream: a checkpoint fsyncs every stream, then writes the group's
``OUT/state.json`` (restart points, the last vtso consumed, each stream's last marker and counts,
the table→stream map's history) and then each stream's own ``state.json`` (for the tools that
read one stream's directory). On resume every stream is recovered on its own (cut after its last
marker), the DNs are re-read from the group's restart points, and a stream drops each part at or
below the last transaction its files hold: every stream ends as an uninterrupted run's.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from binlog.kernel import route_pass_txn
from dumper.cluster import ClusterMismatch
from dumper.global_binlog import GlobalBinlog, check_same_bytes
from dumper.recovery import count_span
from dumper.state import BinlogMark, State, load_state, save_state
from dumper.streams import RecordRouter, StreamMap, StreamSpec, route_transaction
from schema_shaper.model import LogicalTxn
from schema_shaper.rows import PASS


@dataclasses.dataclass(slots=True)
class GroupRecovery:
    actions: list[str]


class StreamGroup:
    """N streams written as one output (see the module doc). ``state``: the group's saved state
    (None: a fresh output, or one that crashed before its first checkpoint)."""

    def __init__(self, out: str | os.PathLike, spec: StreamSpec, *, state: State | None, server_id: int,
                 server_version: str, max_file_size: int, heartbeat_interval: int, gtids: bool) -> None:
        self.out = Path(out)
        self.spec = spec
        saved = (state.streams or {}) if state is not None else {}
        marks = saved.get("marks") or {}
        self.tables = StreamMap.restored(spec.count, saved.get("tables"), state.last_vtso if state else None)
        self.records = RecordRouter(spec.count) if spec.hash == "record" else None
        self.by_database = spec.hash == "database"
        self.binlogs: list[GlobalBinlog] = []
        for k in range(spec.count):
            mark = marks.get(str(k))
            self.binlogs.append(GlobalBinlog(spec.directory(out, k), base=spec.base(k), server_id=server_id,
                                             server_version=server_version, max_file_size=max_file_size,
                                             heartbeat_interval=heartbeat_interval, gtids=gtids,
                                             gtid_stream=spec.name(k),
                                             hint=(mark["file"], mark["pos"]) if mark else None))
        self.recovery = GroupRecovery([f"{spec.name(k)}: {a}" for k, b in enumerate(self.binlogs)
                                       for a in b.recovery.actions])
        for k, b in enumerate(self.binlogs):
            mark = marks.get(str(k))
            if mark and (b.last_written_vtso is None or b.last_written_vtso < mark["vtso"]):
                raise ClusterMismatch(f"{b.directory}: the stream ends at {b.last_written_vtso}, before "
                                      f"{mark['vtso']} which {self.out / 'state.json'} says was durable: files "
                                      "were lost or damaged")
        # without a saved state, the last transaction of each stream must come out again with the
        # same bytes (else the directory holds another cluster's binlog): checked as it passes
        self.unmatched = {k: b.last_written_vtso for k, b in enumerate(self.binlogs)
                          if state is None and b.last_written_vtso is not None}
        self.resumed = any(b.files for b in self.binlogs)
        self.last_vtso: str | None = None
        self.last_written_vtso: str | None = None
        self.last_marker = None
        self.bytes_written = 0
        saved_counts = saved.get("counts") or {}
        self.base_counts = []
        for k, b in enumerate(self.binlogs):
            base = {key: int((saved_counts.get(str(k)) or {}).get(key, 0)) for key in ("written", "events", "bytes")}
            mark = marks.get(str(k))
            span = count_span(b.directory, b.files, (mark["file"], mark["pos"]) if mark else None, b.last_marker)
            base["written"] += span.written
            base["events"] += span.events
            base["bytes"] += span.bytes
            self.base_counts.append(base)

    # -- what the pipeline writes to ------------------------------------------------------------------
    @property
    def before_write(self):
        return self.binlogs[0].before_write

    @before_write.setter
    def before_write(self, fn) -> None:
        for b in self.binlogs:
            b.before_write = fn

    @property
    def txns_written(self) -> int:
        return sum(b.txns_written for b in self.binlogs)

    @property
    def events_written(self) -> int:
        return sum(b.events_written for b in self.binlogs)

    @property
    def files(self) -> list[str]:
        return [f"{b.directory.name}/{name}" for b in self.binlogs for name in b.files]

    def append(self, txn: LogicalTxn) -> int:
        size = 0
        binlogs = self.binlogs
        for k, part in route_transaction(txn, self.spec, self.tables, self.records):
            b = binlogs[k]
            last = b.last_vtso
            if last is not None and part.vtso <= last:
                if self.unmatched.get(k) == part.vtso:
                    check_same_bytes(b, part)
                    del self.unmatched[k]
                continue                        # resumed: this stream's files hold it already
            if k in self.unmatched:
                raise ClusterMismatch(f"{b.directory} holds a stream whose last transaction {self.unmatched[k]} "
                                      f"these DNs do not produce (they went from below it to {part.vtso}): "
                                      "another cluster's output? Use a new output directory")
            size += b.append(part)
        self.last_vtso = txn.vtso
        self.bytes_written += size
        return size

    def append_passed(self, g, plans) -> int | None:
        """The hot path (database and table hashing): a DML transaction whose every block passes
        through is routed by its blocks' logical tables (``binlog.kernel.route_pass_txn``: the
        shaper's plan cache and ``StreamMap.known``) and each stream's part framed in one kernel
        call, without a ``LogicalTxn``.
        None, with nothing done, when it does not pass as a whole (or under record hashing, or
        while a stream's last transaction is still to be matched): then ``append(shape_txn(g))``."""
        if self.records is not None or self.unmatched:
            return None
        routed = route_pass_txn(g.blocks, g.branches, plans, PASS, self.tables.known, self.by_database)
        if routed is None:
            return None
        passed, streams, sid, archive = routed
        if streams is None:                     # a table seen for the first time: routed here, known after
            streams = [self._stream_of_block(blk[0], blk[1]) for blk in passed]
            if streams.count(streams[0]) == len(streams):
                streams = streams[0]
        vtso = g.vtso
        if type(streams) is int:                # the whole transaction to one stream
            b = self.binlogs[streams]
            last = b.last_vtso
            size = 0 if last is not None and vtso <= last else b.append_pass_blocks(vtso, passed, sid, archive)
        else:
            parts: dict[int, list] = {}
            for k, blk in zip(streams, passed, strict=True):
                parts.setdefault(k, []).append(blk)
            size = 0
            for k in sorted(parts):
                b = self.binlogs[k]
                last = b.last_vtso
                if last is not None and vtso <= last:
                    continue                    # resumed: this stream's files hold it already
                size += b.append_pass_blocks(vtso, parts[k], sid, archive)
        self.last_vtso = vtso
        self.bytes_written += size
        return size

    def _stream_of_block(self, db: str, table: str) -> int:
        """A block's stream the first time its table is seen (then ``StreamMap.known`` has it)."""
        if self.by_database:
            return self.tables.stream_of_database(db)
        return self.tables.stream_of_table(db, table)

    def flush(self, fsync: bool = True) -> None:
        for b in self.binlogs:
            b.flush(fsync=fsync)

    def close(self) -> None:
        errors = []
        for b in self.binlogs:
            try:
                b.close()
            except Exception as exc:   # close every stream; report the first failure
                errors.append(exc)
        if errors:
            raise errors[0]

    # -- checkpoint -------------------------------------------------------------------------------------
    def save_states(self, st: State) -> None:
        """The group's ``state.json``, then each stream's (call after ``flush(fsync=True)``)."""
        marks, counts = {}, {}
        for k, b in enumerate(self.binlogs):
            if b.last_marker is not None:
                marks[str(k)] = {"file": b.last_marker[0], "pos": b.last_marker[1], "vtso": b.last_written_vtso}
            base = self.base_counts[k]
            counts[str(k)] = {"written": base["written"] + b.txns_written, "events": base["events"] + b.events_written,
                              "bytes": base["bytes"] + b.bytes_written}
        st.streams = {"marks": marks, "counts": counts, "tables": list(self.tables.moves)}
        st.counts = {"txns": st.counts.get("txns", 0),
                     **{key: sum(c[key] for c in counts.values()) for key in ("written", "events", "bytes")}}
        save_state(self.out, st)
        meta = st.meta_store if "://" in st.meta_store or os.path.isabs(st.meta_store) else f"../{st.meta_store}"
        for k, b in enumerate(self.binlogs):
            mark = marks.get(str(k))
            own = dataclasses.replace(
                st, streams=None, meta_store=meta, settings={**st.settings, "stream": k},
                binlog=BinlogMark(mark["file"], mark["pos"], mark["vtso"]) if mark else None,
                counts={"txns": st.counts.get("txns", 0), **counts[str(k)]})
            save_state(b.directory, own)


def is_stream_group(out: str | os.PathLike) -> bool:
    """Whether ``out`` is a stream group's output directory (its ``state.json`` says so)."""
    try:
        state = load_state(out)
    except Exception:
        return False
    return state is not None and "stream" not in state.settings and \
        StreamSpec.from_settings(state.settings.get("streams")).split
