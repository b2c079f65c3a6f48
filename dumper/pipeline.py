"""The pipeline of every engine (docs/architecture.md): extractor → merger → schema_shaper → dumper,
crash-safe and resumable, in named steps.

``Pipeline(dns, out_dir, settings).run()`` is what ``gbinlog build`` (DN binlog directories),
``gbinlog build`` with worker processes, ``gbinlog run`` (live DN feeds, the replication protocol or
followed directories) and the Spark streaming driver (DN feeds filled by Spark batches) all run,
each with real per-DN inputs (anything with ``dn_id``, ``server_id()``, ``stream(restart,
storage_seq, should_stop)`` and optionally ``standby``). The steps:

1. **recover** — ``state.json`` (``dumper.state``) and the global binlog (``GlobalBinlog`` cuts
   anything after the last CTS marker), checking the DNs and settings are the ones the output was
   made with: any engine resumes any engine's output directory;
2. **restart points** — per DN, where to re-read from (``state.json``; None: its first file);
3. **extract per DN** — one stream per DN that is a member (not a standby DN that has not joined,
   not a DN that left);
4. **merge** — ``merger.merge``, which owns membership: a DN joins at the ``StorageInstChange``
   instruction that lists it (``join``), a DN the instruction drops leaves after its branch;
5. **shape** — ``Shaper.as_of`` the meta store at the last vtso done; regenerated transactions
   ≤ that vtso are dropped (and counted, so ``state.json`` ends as an uninterrupted run's); a DN
   that joins brings its physical DDLs from before the join (``prejoin``);
6. **write** — ``GlobalBinlog.append``;
7. **checkpoint** — every ``checkpoint_seconds`` / ``checkpoint_bytes``: fsync of the binlog, then
   ``state.json`` (atomic) with each DN's newest restart point, the members, joined and left DNs.

Any crash point gives byte-identical output: nothing written depends on a clock or counter, the
vtsos regenerate identically from restart points, and ``GlobalBinlog.append`` refuses a vtso that
is not above the last.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dumper.cluster import (
    BROADCAST_KINDS,
    ClusterMismatch,
    broadcast_prefix,
    check_broadcast_members,
    check_broadcast_prefixes,
    check_distinct_dns,
    check_same_dns,
)
from dumper.global_binlog import (
    DEFAULT_MAX_FILE_SIZE,
    DEFAULT_SERVER_VERSION,
    HEARTBEAT_INTERVAL,
    DumperError,
    GlobalBinlog,
    check_same_bytes,
    crash_now,
    crash_point,
)
from dumper.recovery import count_span, list_files
from dumper.state import STATE_FILE, BinlogMark, State, load_state, meta_store_location, save_state
from extractor import RestartPoint, storage_sequences
from extractor.model import DnTxn, TxnKind
from extractor.vtso import vtso_actual_tso
from merger import GlobalTxn, Held, Membership, merge

log = logging.getLogger(__name__)
_DML = TxnKind.DML


class BuildError(DumperError):
    """An operator error (missing DN directory, output directory in use, settings changed)."""


@dataclass(slots=True)
class Settings:
    """Everything that shapes the output bytes (first four) and how often the runner checkpoints.

    ``meta_store``: the shaper's meta store, a path relative to the output directory or a
    ``mysql://`` URL. ``flush_seconds``: how long appended transactions may stay in memory before
    they are written to the file (0: after every transaction). A live service whose replicas
    follow the file also calls ``Pipeline.flush_ready`` whenever its merge is about to wait for a
    DN, so a short bound only matters while DNs keep it busy (catching up).
    """

    server_id: int = 1
    server_version: str = DEFAULT_SERVER_VERSION
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    heartbeat_interval: int = HEARTBEAT_INTERVAL
    meta_store: str = "meta.db"
    checkpoint_seconds: float = 2.0
    checkpoint_bytes: int = 64 << 20
    flush_seconds: float = 0.5
    on_error: str = "raise"
    # DirDn inputs: extract each DN in its own worker process (None: when there is more than one
    # CPU). Off by default: on this 2-CPU machine the pickling of transactions between processes
    # costs about what the parallel extraction saves (bench/build.py --workers on|off).
    workers: bool | None = False
    # refuse DN directories that are not one whole cluster (extractor.members); off only to make
    # such an output on purpose (tests of verify)
    check_cluster: bool = True
    # [filter] include/exclude (schema_shaper.filters): changes the output, so a resume checks it
    filter: dict | None = None
    # a GTID event before every transaction and PREVIOUS_GTIDS in every file (dumper.gtid); off for
    # consumers that cannot take them
    gtids: bool = True
    # the ``# POLARX_*`` lines before each DDL statement (schema_shaper.query.ddl_text); off for
    # consumers whose DDL parsers do not skip comment lines
    ddl_comments: bool = True
    # [streams] count / hash / group (dumper.streams): more than one stream writes a stream group
    streams: dict | None = None

    def output_settings(self) -> dict:
        out = {"server_id": self.server_id, "server_version": self.server_version,
               "max_file_size": self.max_file_size, "heartbeat_interval": self.heartbeat_interval,
               "gtids": self.gtids}
        if self.filter:
            out["filter"] = self.filter
        if not self.ddl_comments:    # recorded only when off: outputs made before the setting stay valid
            out["ddl_comments"] = False
        spec = self.stream_spec()
        if spec.split:               # recorded only for a group: single-stream outputs stay valid
            out["streams"] = spec.settings()
        return out

    def stream_spec(self):
        from dumper.streams import StreamSpec

        return StreamSpec.from_settings(self.streams)


class DnInput(Protocol):
    """One DN for the pipeline (``standby``, optional: it is read only once it joins)."""

    dn_id: str

    def server_id(self) -> int | None:
        """The DN's server id (from its binlog), None when it is not known yet."""

    def stream(self, restart: RestartPoint | None, storage_seq: str,
               should_stop: Callable[[], bool] | None = None) -> Iterable[DnTxn]:
        """The DN's transactions in ascending vtso, from ``restart`` (None: from the start)."""


@dataclass(slots=True)
class Progress:
    """Where a run is (passed to ``on_progress``); ``in_bytes_done`` is None for inputs without a
    known size."""

    txns: int = 0                 # transactions consumed (incl. NONE and off-second heartbeats)
    written: int = 0              # transactions written
    events: int = 0               # events written
    bytes_out: int = 0
    in_bytes_done: int | None = None
    in_bytes_total: int | None = None
    last_vtso: str | None = None
    seconds: float = 0.0
    done: bool = False


@dataclass(slots=True)
class BuildResult:
    out_dir: Path
    files: list[str] = field(default_factory=list)
    txns: int = 0
    written: int = 0
    skipped: int = 0              # regenerated on resume and dropped (vtso ≤ last)
    events: int = 0
    bytes: int = 0
    dn_events: int | None = None  # DN events read (None: an input that does not count them)
    last_vtso: str | None = None
    seconds: float = 0.0
    resumed: bool = False
    recovery: list[str] = field(default_factory=list)
    checkpoints: int = 0
    held: Held | None = None      # the emission rule stopped the output below a DN's end of input


class Pipeline:
    """One run of the pipeline over ``dns`` into ``out_dir`` (see the module doc). ``run()`` returns
    when every DN stream ended or ``should_stop()`` said so; the output is checkpointed then.
    Errors: ``BuildError`` (operator), ``ClusterMismatch``, ``DumperError``/``DiskFull`` (output),
    ``OrderingError``/``BinlogError`` (input), ``ShapeError`` — the output always ends at a whole
    transaction. ``membership`` (joined/left DNs) and ``merged`` (DNs read) are live for status."""

    def __init__(self, dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings | None = None, *,
                 resume: bool = True, should_stop: Callable[[], bool] | None = None,
                 on_progress: Callable[[Progress], None] | None = None, progress_seconds: float = 0.25,
                 start: State | None = None) -> None:
        self.dns = list(dns)
        # where the run starts instead of the output directory's state.json (a window of a batch
        # build, ``dumper.window``): its restart points, last vtso done, members and settings
        self.start = start
        self.out = Path(out_dir)
        self.settings = settings or Settings()
        self.resume = resume
        self.should_stop = should_stop
        self.on_progress = on_progress
        self.progress_seconds = progress_seconds
        # finite inputs of a known size (DN directories) report how far the run is in them
        sized = all(hasattr(d, "offset_of") for d in self.dns) and on_progress is not None
        self.sized = {d.dn_id: d for d in self.dns} if sized else None
        self.total_input = sum(d.total_bytes for d in self.dns) if sized else None
        self.t0 = time.perf_counter()
        self.membership = Membership()
        self.merged: list[str] = []
        self.result = BuildResult(self.out)
        self.binlog: GlobalBinlog | None = None
        self.store = None

    # -- 1. recover ----------------------------------------------------------------------------------
    def recover(self) -> None:
        """Load ``state.json``, check the DNs and settings, recover the binlog files."""
        out, settings = self.out, self.settings
        out.mkdir(parents=True, exist_ok=True)
        ids = [d.dn_id for d in self.dns]
        if len(set(ids)) != len(ids):
            raise BuildError(f"DN ids given twice: {', '.join(sorted(i for i in set(ids) if ids.count(i) > 1))}")
        state = self.start if self.start is not None else load_state(out)
        if self.start is None and not self.resume and (state is not None or (out.is_dir() and (
                list_files(out) or any(out.glob("stream*/*_binlog.index"))))):
            raise BuildError(f"output directory {out} already holds a global binlog; resume it (--resume) or "
                             "use a new directory")
        self.state = state
        self.server_ids = {d.dn_id: d.server_id() for d in self.dns}
        check_distinct_dns(self.server_ids)
        if state is not None:
            check_same_dns(state.server_ids, self.server_ids, str(out))
            if state.settings and state.settings != settings.output_settings():
                raise BuildError(f"{out} was built with {state.settings}; these settings "
                                 f"({settings.output_settings()}) would give different bytes: use the same ones "
                                 "or a new output directory")
            self.seqs = dict(state.storage_seqs)
            self.meta_target = state.meta_store
            self.membership.joined.update(state.joined)
            self.membership.left.update(state.left)
        else:
            self.seqs = storage_sequences(ids)
            self.meta_target = settings.meta_store
            if not list_files(out) and all(hasattr(d, "probe") for d in self.dns):
                # a fresh build of finite inputs: refuse DNs of two clusters before anything is written
                check_broadcast_prefixes({d.dn_id: broadcast_prefix(d.probe(self.seqs[d.dn_id])) for d in self.dns})
        self.binlog = self.open_output(state)
        self.result.resumed = state is not None or self.binlog.last_vtso is not None or \
            getattr(self.binlog, "resumed", False)
        self.result.recovery = list(self.binlog.recovery.actions)
        for action in self.result.recovery:
            log.warning("recovery of %s: %s", out, action)
        if state is not None and state.binlog is not None and (
                self.binlog.last_written_vtso is None or self.binlog.last_written_vtso < state.binlog.vtso):
            raise DumperError(f"{out}: the binlog ends at {self.binlog.last_written_vtso}, before "
                              f"{state.binlog.vtso} which {STATE_FILE} says was durable: files were lost or damaged")

    def open_output(self, state: State | None) -> GlobalBinlog:
        """The global binlog in the output directory, recovered; with ``[streams] count`` > 1 a
        ``StreamGroup`` of one per stream (``dumper.stream_group``)."""
        settings = self.settings
        spec = settings.stream_spec()
        if spec.split:
            from dumper.stream_group import StreamGroup

            return StreamGroup(self.out, spec, state=state, server_id=settings.server_id,  # type: ignore[return-value]
                               server_version=settings.server_version, max_file_size=settings.max_file_size,
                               heartbeat_interval=settings.heartbeat_interval, gtids=settings.gtids)
        return GlobalBinlog(self.out, server_id=settings.server_id, server_version=settings.server_version,
                            max_file_size=settings.max_file_size, heartbeat_interval=settings.heartbeat_interval,
                            hint=(state.binlog.file, state.binlog.pos) if state and state.binlog else None,
                            gtids=settings.gtids)

    # -- 2. restart points ---------------------------------------------------------------------------
    def restart_points(self) -> None:
        """Per DN where to re-read from, the last vtso done, and what the counts continue from."""
        state, binlog = self.state, self.binlog
        self.restart: dict[str, RestartPoint | None] = {d.dn_id: None for d in self.dns}
        if state is not None:
            self.restart.update(state.restart)
        self.skip = self.last_done()
        self.prior = state.last_vtso if state else None
        self.members = set(state.heartbeat_dns) if state else set()
        self.cluster_id = state.cluster_id if state else None
        self.base = _resumed_counts(self.out, binlog, state)

    def last_done(self) -> str | None:
        """The last vtso done: the newest the recovered files hold or ``state.json`` says (what a
        resume regenerates and drops)."""
        state = self.state
        return max(filter(None, [self.binlog.last_vtso, state.last_vtso if state else None]), default=None)

    # -- 3. extract per DN ---------------------------------------------------------------------------
    def _open(self, d: DnInput) -> Iterable[DnTxn]:
        self.merged.append(d.dn_id)
        return d.stream(self.restart.get(d.dn_id), self.seqs[d.dn_id], self.should_stop)

    def extract(self) -> dict[str, Iterable[DnTxn]]:
        """One stream per member DN, in DN order: not a standby DN that has not joined (it is
        opened when it joins), not a DN that left."""
        joined, left = self.membership.joined, self.membership.left
        return {d.dn_id: self._open(d) for d in self.dns
                if d.dn_id not in left and (not getattr(d, "standby", False) or d.dn_id in joined
                                            or d.dn_id in self.members)}

    def _join(self, dn_id: str, vtso: str) -> tuple[int, Iterable[DnTxn]]:
        for rank, d in enumerate(self.dns):
            if d.dn_id == dn_id:
                log.warning("DN %s joins at %s (StorageInstChange)", dn_id, vtso)
                return rank, self._open(d)
        raise BuildError(f"the StorageInstChange instruction at {vtso} adds DN {dn_id}, which is not among the "
                         f"inputs ({', '.join(d.dn_id for d in self.dns)}): add it (a [[dn]] with standby = true) "
                         "and start again")

    # -- 4. merge ------------------------------------------------------------------------------------
    def merge(self) -> Iterator[GlobalTxn]:
        # the branches of one transaction are ordered by the DN order (the merge ranks), so a
        # standby DN opened later keeps its place
        # every DN had passed the last transaction done (the emission rule held the run that did
        # it to that): a DN that has nothing after its restart point passed at least that
        return merge(self.extract(), ranks={d.dn_id: i for i, d in enumerate(self.dns)}, join=self._join,
                     should_stop=self.should_stop, membership=self.membership, passed=self.skip)

    # -- 5. shape ------------------------------------------------------------------------------------
    def shaper(self):
        """The shaper's ``shape_txn`` (with the ``[filter]``), resumed from the meta store."""
        from schema_shaper.filters import TableFilter, with_filter

        # With a state, the shaper resumes from the meta store and regenerated txns ≤ skip are
        # dropped unshaped. Without one (a crash before the first checkpoint) everything is
        # re-read and re-shaped from the start, and the last transaction in the files must come
        # out with the same bytes: else the directory holds another cluster's binlog.
        self.replay = self.state is None and self.skip is not None
        shaper = self.open_shaper()
        self.binlog.before_write = shaper.defer_store_sync()   # the meta store is synced before each write
        self.schema = shaper
        table_filter = TableFilter.from_settings(self.settings.filter)
        # without a [filter], a DML transaction that passes through is shaped and written in one call
        self.passing = shaper.plans if table_filter is None else None
        return with_filter(shaper.shape_txn, table_filter)

    def open_shaper(self):
        """The ``Shaper`` as of the last vtso done (``Shaper.as_of`` the meta store), or a new one."""
        from schema_shaper import MetaStore, Shaper

        self.store = MetaStore.open(meta_store_location(self.out, self.meta_target))
        on_error, comments = self.settings.on_error, self.settings.ddl_comments
        if self.skip and not self.replay:
            return Shaper.as_of(self.store, self.skip, on_error=on_error, ddl_comments=comments)
        return Shaper(store=self.store, on_error=on_error, ddl_comments=comments)

    def prejoin(self, g: GlobalTxn) -> None:
        """A DN joined at instruction ``g``: its physical DDLs from before the join (the merge set
        them aside) reach the shaper before anything after the join is shaped."""
        txns = list(self.membership.prejoin)
        self.membership.prejoin.clear()
        if not self.replay and self.skip is not None and g.vtso <= self.skip:
            return                              # in the meta store already (Shaper.as_of)
        self.schema.apply_prejoin(txns, g.vtso)

    def regenerated(self, g: GlobalTxn, shape_txn) -> None:
        """A transaction ≤ the last one done: dropped; counted (and its membership checked) when a
        crashed run consumed it after its last checkpoint; re-shaped and compared when replaying."""
        self.result.skipped += 1
        vtso = g.vtso
        if self.membership.prejoin:
            self.prejoin(g)
        if self.prior is None or vtso > self.prior:
            self.base["txns"] += 1
            self.note_broadcast(g)
        if self.replay:
            lt = shape_txn(g)
            if vtso == self.binlog.last_written_vtso:
                check_same_bytes(self.binlog, lt)
                self.matched_last = True

    def note_broadcast(self, g: GlobalTxn) -> None:
        if g.kind in BROADCAST_KINDS:
            check_broadcast_members(g, self.members, self.membership.ended | set(self.membership.left),
                                    self.membership.head_of)
            if self.cluster_id is None:
                self.cluster_id = vtso_actual_tso(g.vtso)

    # -- 7. checkpoint -------------------------------------------------------------------------------
    def flush_ready(self) -> None:
        """Write out what was appended (not fsync'ed: checkpoints do that). Called by a live input
        in the loop's thread when the merge is about to wait for a DN: every transaction appended
        is in the file before the service waits, in one write for all that were ready, instead of
        one write each (``flush_seconds=0``: ~10 % of ``gbinlog run``'s CPU at 400 k DN events/s)."""
        if self.binlog is not None:
            self.binlog.flush(fsync=False)

    def checkpoint(self) -> None:
        binlog, base, state = self.binlog, self.base, self.state
        binlog.flush(fsync=True)
        # state.json's restart points may be past a physical DDL that wrote nothing to the binlog
        # (so no write synced the meta store for it): its history is made durable first.
        self.schema.sync_store()
        if crash_point("checkpoint"):
            crash_now()
        mark = binlog.last_marker
        st = State(cluster_id=self.cluster_id, server_ids=self.server_ids, storage_seqs=self.seqs,
                   last_vtso=self.last_consumed,
                   binlog=BinlogMark(mark[0], mark[1], binlog.last_written_vtso) if mark else
                   (state.binlog if state else None),
                   restart=dict(self.restart), heartbeat_dns=sorted(self.members), meta_store=self.meta_target,
                   settings=self.settings.output_settings(),
                   joined=dict(self.membership.joined), left=dict(self.membership.left),
                   counts={"txns": base["txns"] + self.result.txns, "written": base["written"] + binlog.txns_written,
                           "events": base["events"] + binlog.events_written,
                           "bytes": base["bytes"] + binlog.bytes_written})
        if hasattr(binlog, "save_states"):
            binlog.save_states(st)              # a stream group: its state, then each stream's
        else:
            save_state(self.out, st)
        self.result.checkpoints += 1

    # -- the loop: 6. write --------------------------------------------------------------------------
    def run(self) -> BuildResult:
        try:
            self.recover()
            self.restart_points()
            shape_txn = self.shaper()
            self.last_consumed = self.skip
            self.last_merged: str | None = None
            self.matched_last = not self.replay
            with fewer_gc_passes():
                self._loop(self.merge(), shape_txn)
            if not self.matched_last:
                raise ClusterMismatch(f"{self.out} holds a global binlog whose last transaction "
                                      f"{self.binlog.last_written_vtso} these DNs do not produce: another "
                                      "cluster's output? Use a new output directory")
            self.checkpoint()
            return self._finish()
        finally:
            # On an error the files keep only whole transactions (append writes whole ones, a failed
            # write is cut back) and state.json the last checkpoint: a restart redoes the rest.
            if self.binlog is not None:
                try:
                    self.binlog.close()
                except DumperError as exc:
                    log.error("closing %s: %s", self.out, exc)
            if self.store is not None:
                self.store.close()

    def _loop(self, merged: Iterator[GlobalTxn], shape_txn) -> None:
        settings, binlog, result, restart, skip = self.settings, self.binlog, self.result, self.restart, self.skip
        append, append_passed, perf_counter = binlog.append, binlog.append_passed, time.perf_counter
        passing = self.passing
        now = perf_counter()
        flush_each = settings.flush_seconds <= 0
        next_check = now + settings.checkpoint_seconds
        next_flush = math.inf if flush_each else now + settings.flush_seconds
        next_progress = math.inf if self.on_progress is None else now + self.progress_seconds
        # per transaction one clock read and one comparison: the earliest of the three is due
        next_due = min(next_check, next_flush, next_progress)
        bytes_due = settings.checkpoint_bytes    # a checkpoint also after this much output
        prejoin = self.membership.prejoin
        should_stop = self.should_stop
        for g in merged:
            for b in g.branches:
                if b.restart is not None:
                    restart[b.dn] = b.restart
            vtso = g.vtso
            self.last_merged = vtso     # out of the merge (regenerated or not): what a live feed may end after
            if skip is not None and vtso <= skip:
                self.regenerated(g, shape_txn)
                continue
            if not self.matched_last:
                raise ClusterMismatch(f"{self.out} holds a global binlog whose last transaction "
                                      f"{binlog.last_written_vtso} these DNs do not produce (they went from below "
                                      f"it to {vtso}): another cluster's output? Use a new output directory")
            if g.kind in BROADCAST_KINDS:
                self.note_broadcast(g)
            if prejoin:
                self.prejoin(g)
            # the hot path: a DML transaction that passes through, shaped and written in one call
            if g.kind is not _DML or passing is None or append_passed(g, passing) is None:
                append(shape_txn(g))
            self.last_consumed = vtso
            result.txns += 1
            if flush_each:
                binlog.flush(fsync=False)
            now = perf_counter()
            if now >= next_due or binlog.bytes_written >= bytes_due:
                if now >= next_progress:
                    next_progress = now + self.progress_seconds
                    self._report(g, False)
                if now >= next_check or binlog.bytes_written >= bytes_due:
                    self.checkpoint()
                    bytes_due = binlog.bytes_written + settings.checkpoint_bytes
                    next_check = perf_counter() + settings.checkpoint_seconds
                elif now >= next_flush:
                    binlog.flush(fsync=False)
                    next_flush = now + settings.flush_seconds
                next_due = min(next_check, next_flush, next_progress)
            if should_stop is not None and should_stop():
                break

    # -- progress ------------------------------------------------------------------------------------
    def snapshot(self) -> Progress | None:
        """Where the run is now (for a status thread: the loop may be waiting in the merge, long
        after its last ``on_progress``)."""
        binlog = self.binlog
        if binlog is None or not hasattr(self, "last_consumed"):
            return None
        return Progress(txns=self.result.txns, written=binlog.txns_written, events=binlog.events_written,
                        bytes_out=binlog.bytes_written, last_vtso=self.last_consumed,
                        seconds=time.perf_counter() - self.t0)

    def _report(self, g: GlobalTxn | None, done: bool) -> None:
        binlog, result = self.binlog, self.result
        p = getattr(self, "progress", None) or Progress(in_bytes_total=self.total_input)
        self.progress = p
        if self.sized is not None and g is not None:
            done_in = self.__dict__.setdefault("_done_in", {})
            for b in g.branches:
                if b.end is not None and b.dn in self.sized:
                    done_in[b.dn] = self.sized[b.dn].offset_of(b.end.file, b.end.offset)
            p.in_bytes_done = sum(done_in.values())
        p.txns, p.written, p.events = result.txns, binlog.txns_written, binlog.events_written
        p.bytes_out, p.last_vtso = binlog.bytes_written, self.last_consumed
        p.seconds = time.perf_counter() - self.t0
        if done:
            p.in_bytes_done, p.done = self.total_input, True
        self.on_progress(p)

    def _finish(self) -> BuildResult:
        binlog, result = self.binlog, self.result
        result.written, result.events, result.bytes = binlog.txns_written, binlog.events_written, binlog.bytes_written
        result.last_vtso = self.last_consumed
        result.held = self.membership.held
        read = [getattr(d, "events_read", None) for d in self.dns]
        result.dn_events = None if None in read else sum(read)
        result.files = list(binlog.files)
        result.seconds = time.perf_counter() - self.t0
        if self.on_progress is not None:
            self._report(None, True)
        return result


@contextmanager
def fewer_gc_passes(young: int = 50_000) -> Iterator[None]:
    """The cyclic GC's young-generation pass every ``young`` container allocations instead of 700
    while the loop runs. The loop allocates millions of short-lived containers (events, records,
    transactions) that reference counting frees; at the default threshold the collector spent
    ~15 % of a build re-scanning the ones still in flight (bench/build.py, 1M events: 3.0 → 2.6
    CPU-s). Cyclic garbage is still collected, a little later."""
    old = gc.get_threshold()
    gc.set_threshold(max(young, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _resumed_counts(out: Path, binlog: GlobalBinlog, state: State | None) -> dict[str, int]:
    """The counts to continue from: the saved ones plus what the files hold after the saved binlog
    mark (transactions written after the last checkpoint, kept by recovery)."""
    counts = dict(state.counts) if state else {}
    base = {k: counts.get(k, 0) for k in ("txns", "written", "events", "bytes")}
    saved = (state.binlog.file, state.binlog.pos) if state and state.binlog else None
    span = count_span(out, binlog.files, saved, binlog.last_marker)
    base["written"] += span.written
    base["events"] += span.events
    base["bytes"] += span.bytes
    return base


def run_pipeline(dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings | None = None,
                 **kw) -> BuildResult:
    """``Pipeline(dns, out_dir, settings, **kw).run()``."""
    return Pipeline(dns, out_dir, settings, **kw).run()
