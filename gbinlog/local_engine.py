"""The local engine (DESIGN.md §5): extractor → merger → schema_shaper → dumper in one process,
crash-safe and resumable (DESIGN.md §4).

``run_pipeline(dns, out_dir, settings)`` is the core every runner shares: ``gbinlog build`` calls it
with ``DirDn`` inputs (finite DN binlog directories), ``gbinlog run`` with live DN inputs (anything
with ``dn_id``, ``server_id()`` and ``stream(restart, storage_seq, should_stop)``). It

1. recovers the output (``GlobalBinlog`` cuts anything after the last CTS marker) and loads
   ``state.json`` (``dumper.state``), checking the DNs are the ones the output was built from;
2. re-reads every DN from its restart point, merges, drops transactions with vtso ≤ the last one
   done, shapes the rest (``Shaper.as_of`` the meta store at that vtso) and appends them;
3. every ``checkpoint_seconds`` / ``checkpoint_bytes``: fsync of the binlog, then ``state.json``
   (atomic) with each DN's newest restart point carried by a transaction consumed so far.

Any crash point gives byte-identical output: nothing written depends on a clock or counter, the
vtsos regenerate identically from restart points, and ``GlobalBinlog.append`` refuses a vtso that
is not above the last.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    dn_server_id,
)
from dumper.global_binlog import (
    DEFAULT_MAX_FILE_SIZE,
    DEFAULT_SERVER_VERSION,
    HEARTBEAT_INTERVAL,
    DumperError,
    GlobalBinlog,
    crash_now,
    crash_point,
    encode_txn,
)
from dumper.recovery import count_span, list_files
from dumper.state import STATE_FILE, BinlogMark, State, load_state, save_state
from extractor import RestartPoint, extract, storage_sequences
from extractor.members import check_dn_dirs
from extractor.model import DnTxn
from extractor.source import NotADnDirectory, dn_binlog_files
from extractor.vtso import vtso_actual_tso
from merger import merge

log = logging.getLogger(__name__)


class BuildError(DumperError):
    """An operator error (missing DN directory, output directory in use, settings changed)."""


@dataclass(slots=True)
class Settings:
    """Everything that shapes the output bytes (first four) and how often the runner checkpoints.

    ``meta_store``: the shaper's meta store, a path relative to the output directory or a
    ``mysql://`` URL. ``flush_seconds``: how long appended transactions may stay in memory before
    they are written to the file (0: after every transaction, for a live service whose replicas
    follow the file).
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

    def output_settings(self) -> dict:
        out = {"server_id": self.server_id, "server_version": self.server_version,
               "max_file_size": self.max_file_size, "heartbeat_interval": self.heartbeat_interval,
               "gtids": self.gtids}
        if self.filter:
            out["filter"] = self.filter
        return out


class DnInput(Protocol):
    """One DN for ``run_pipeline``."""

    dn_id: str

    def server_id(self) -> int | None:
        """The DN's server id (from its binlog), None when it has written nothing yet."""

    def stream(self, restart: RestartPoint | None, storage_seq: str,
               should_stop: Callable[[], bool] | None = None) -> Iterable[DnTxn]:
        """The DN's transactions in ascending vtso, from ``restart`` (None: from the start)."""


class DirDn:
    """A DN binlog directory (finite: read to its end). The DN id is the directory name."""

    def __init__(self, directory: str | os.PathLike, dn_id: str | None = None, *, worker: bool = False) -> None:
        self.directory = Path(directory)
        self.worker = worker
        if not self.directory.is_dir():
            raise BuildError(f"DN binlog directory {self.directory} does not exist")
        self.dn_id = dn_id or self.directory.resolve().name
        try:
            self.files = dn_binlog_files(self.directory, self.dn_id)
        except NotADnDirectory as exc:
            raise BuildError(str(exc)) from None
        self.sizes = [(self.directory / f).stat().st_size for f in self.files]
        starts, total = {}, 0
        for name, size in zip(self.files, self.sizes, strict=True):
            starts[name] = total
            total += size
        self._starts = starts
        self.total_bytes = total

    def server_id(self) -> int | None:
        return dn_server_id(self.directory, self.files[0])

    def stream(self, restart: RestartPoint | None, storage_seq: str,
               should_stop: Callable[[], bool] | None = None) -> Iterator[DnTxn]:
        if self.worker:
            from gbinlog.dn_worker import worker_stream

            return worker_stream(self.directory, self.dn_id, storage_seq, restart)
        if restart is None:
            return extract(self.directory, dn_id=self.dn_id, storage_seq=storage_seq)
        return extract(self.directory, dn_id=self.dn_id, storage_seq=storage_seq, start=restart.pos,
                       state=restart.vtso_state())

    def probe(self, storage_seq: str) -> Iterator[DnTxn]:
        """The DN's first transactions, in this process (a look ahead before a build starts)."""
        return extract(self.directory, dn_id=self.dn_id, storage_seq=storage_seq)

    def offset_of(self, file: str, offset: int) -> int:
        """Bytes of this DN's input before ``file``:``offset``."""
        return self._starts.get(file, 0) + offset


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
    last_vtso: str | None = None
    seconds: float = 0.0
    resumed: bool = False
    recovery: list[str] = field(default_factory=list)
    checkpoints: int = 0


def _watch_end(dn: str, txns: Iterable[DnTxn], ended: set[str]) -> Iterator[DnTxn]:
    """Pass a DN stream through and note when it ends (the heartbeat rule exempts ended DNs)."""
    yield from txns
    ended.add(dn)


def _open_output(out: Path, resume: bool) -> State | None:
    state = load_state(out)
    has_files = out.is_dir() and bool(list_files(out))
    if not resume and (state is not None or has_files):
        raise BuildError(f"output directory {out} already holds a global binlog; resume it (--resume) or "
                         "use a new directory")
    return state


def run_pipeline(dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings | None = None, *,
                 resume: bool = True, should_stop: Callable[[], bool] | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 progress_seconds: float = 0.25) -> BuildResult:
    """Build (or continue) the global binlog of ``dns`` in ``out_dir``; see the module doc.

    Returns when every DN stream ended or ``should_stop()`` said so (checked between
    transactions); the output is checkpointed then. Errors: ``BuildError`` (operator),
    ``ClusterMismatch``, ``DumperError``/``DiskFull`` (output), ``OrderingError``/``BinlogError``
    (input), ``ShapeError`` — the output always ends at a whole transaction.
    """
    from schema_shaper import MetaStore, Shaper
    from schema_shaper.filters import TableFilter, with_filter

    settings = settings or Settings()
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ids = [d.dn_id for d in dns]
    if len(set(ids)) != len(ids):
        raise BuildError(f"DN ids given twice: {', '.join(sorted(i for i in set(ids) if ids.count(i) > 1))}")
    state = _open_output(out, resume)
    server_ids = {d.dn_id: d.server_id() for d in dns}
    check_distinct_dns(server_ids)
    if state is not None:
        check_same_dns(state.server_ids, server_ids, str(out))
        if state.settings and state.settings != settings.output_settings():
            raise BuildError(f"{out} was built with {state.settings}; these settings ({settings.output_settings()}) "
                             "would give different bytes: use the same ones or a new output directory")
        seqs = dict(state.storage_seqs)
        meta_target = state.meta_store
    else:
        seqs = storage_sequences(ids)
        meta_target = settings.meta_store
        if not list_files(out) and all(isinstance(d, DirDn) for d in dns):
            # a fresh build of finite inputs: refuse DNs of two clusters before anything is written
            check_broadcast_prefixes({d.dn_id: broadcast_prefix(d.probe(seqs[d.dn_id])) for d in dns})
    binlog = GlobalBinlog(out, server_id=settings.server_id, server_version=settings.server_version,
                          max_file_size=settings.max_file_size, heartbeat_interval=settings.heartbeat_interval,
                          hint=(state.binlog.file, state.binlog.pos) if state and state.binlog else None,
                          gtids=settings.gtids)
    result = BuildResult(out, resumed=state is not None or binlog.last_vtso is not None,
                         recovery=list(binlog.recovery.actions))
    for action in result.recovery:
        log.warning("recovery of %s: %s", out, action)
    store = None
    try:
        if state is not None and state.binlog is not None and (
                binlog.last_written_vtso is None or binlog.last_written_vtso < state.binlog.vtso):
            raise DumperError(f"{out}: the binlog ends at {binlog.last_written_vtso}, before {state.binlog.vtso} "
                              f"which {STATE_FILE} says was durable: files were lost or damaged")
        skip = max(filter(None, [binlog.last_vtso, state.last_vtso if state else None]), default=None)
        meta_path = meta_target.removeprefix("sqlite://") if meta_target.startswith("sqlite:///") else meta_target
        if "://" not in meta_path and not os.path.isabs(meta_path):
            meta_path = str(out / meta_path)
        store = MetaStore.open(meta_path)
        cluster_id = state.cluster_id if state else None
        # With a state, the shaper resumes from the meta store and regenerated txns ≤ skip are
        # dropped unshaped. Without one (a crash before the first checkpoint) everything is
        # re-read and re-shaped from the start, and the last transaction in the files must come
        # out with the same bytes: else the directory holds another cluster's binlog.
        replay = state is None and skip is not None
        shaper = Shaper.as_of(store, skip, on_error=settings.on_error) if (skip and not replay) else \
            Shaper(store=store, on_error=settings.on_error)
        restart = dict(state.restart) if state else {dn: None for dn in ids}
        members = set(state.heartbeat_dns) if state else set()
        ended: set[str] = set()
        streams = [_watch_end(d.dn_id, d.stream(restart.get(d.dn_id), seqs[d.dn_id], should_stop), ended)
                   for d in dns]
        sizes = {d.dn_id: d for d in dns if isinstance(d, DirDn)}
        total_in = sum(d.total_bytes for d in sizes.values()) if len(sizes) == len(dns) else None
        done_in = {dn: 0 for dn in sizes}
        track_input = total_in is not None and on_progress is not None
        progress = Progress(in_bytes_total=total_in)
        last_consumed = skip
        base = _resumed_counts(out, binlog, state)
        # transactions after the last checkpoint (``prior``) are in the files but not in the saved
        # counts: the regenerated ones ≤ skip are counted (and their membership checked) as the
        # crashed run did, so state.json ends equal to an uninterrupted run's
        prior = state.last_vtso if state else None

        def checkpoint() -> None:
            binlog.flush(fsync=True)
            if crash_point("checkpoint"):
                crash_now()
            mark = binlog.last_marker
            st = State(cluster_id=cluster_id, server_ids=server_ids, storage_seqs=seqs, last_vtso=last_consumed,
                       binlog=BinlogMark(mark[0], mark[1], binlog.last_written_vtso) if mark else
                       (state.binlog if state else None),
                       restart=dict(restart), heartbeat_dns=sorted(members), meta_store=meta_target,
                       settings=settings.output_settings(),
                       counts={"txns": base["txns"] + result.txns, "written": base["written"] + binlog.txns_written,
                               "events": base["events"] + binlog.events_written,
                               "bytes": base["bytes"] + binlog.bytes_written})
            save_state(out, st)
            result.checkpoints += 1

        shape_txn = with_filter(shaper.shape_txn, TableFilter.from_settings(settings.filter))
        append = binlog.append
        next_check = time.perf_counter() + settings.checkpoint_seconds
        next_flush = time.perf_counter() + settings.flush_seconds
        next_progress = time.perf_counter() + progress_seconds
        bytes_at_check = 0
        matched_last = not replay
        last_in_files = binlog.last_written_vtso
        flush_each = settings.flush_seconds <= 0
        for g in merge(streams):
            for b in g.branches:
                if b.restart is not None:
                    restart[b.dn] = b.restart
            vtso = g.vtso
            if skip is not None and vtso <= skip:
                result.skipped += 1
                if prior is None or vtso > prior:
                    base["txns"] += 1
                    if g.kind in BROADCAST_KINDS:
                        check_broadcast_members(g, members, ended)
                        if cluster_id is None:
                            cluster_id = vtso_actual_tso(vtso)
                if replay:
                    lt = shape_txn(g)
                    if vtso == last_in_files:
                        _check_same_bytes(binlog, lt, out)
                        matched_last = True
                continue
            if not matched_last:
                raise ClusterMismatch(f"{out} holds a global binlog whose last transaction {last_in_files} these "
                                      f"DNs do not produce (they went from below it to {vtso}): another "
                                      "cluster's output? Use a new output directory")
            if g.kind in BROADCAST_KINDS:
                check_broadcast_members(g, members, ended)
                if cluster_id is None:
                    cluster_id = vtso_actual_tso(vtso)
            append(shape_txn(g))
            last_consumed = vtso
            result.txns += 1
            if flush_each:
                binlog.flush(fsync=False)
            if track_input:
                for b in g.branches:
                    end = b.end
                    if end is not None and b.dn in sizes:
                        done_in[b.dn] = sizes[b.dn].offset_of(end.file, end.offset)
            now = time.perf_counter()
            if now >= next_progress and on_progress is not None:
                next_progress = now + progress_seconds
                _fill(progress, result, binlog, done_in, total_in, last_consumed, now - t0)
                on_progress(progress)
            if now >= next_check or binlog.bytes_written - bytes_at_check >= settings.checkpoint_bytes:
                checkpoint()
                bytes_at_check = binlog.bytes_written
                next_check = time.perf_counter() + settings.checkpoint_seconds
            elif not flush_each and now >= next_flush:
                binlog.flush(fsync=False)
                next_flush = now + settings.flush_seconds
            if should_stop is not None and should_stop():
                break
        else:
            if not matched_last:
                raise ClusterMismatch(f"{out} holds a global binlog whose last transaction {last_in_files} these "
                                      "DNs do not produce: another cluster's output? Use a new output directory")
        checkpoint()
        result.written = binlog.txns_written
        result.events = binlog.events_written
        result.bytes = binlog.bytes_written
        result.last_vtso = last_consumed
        result.files = list(binlog.files)
        result.seconds = time.perf_counter() - t0
        if on_progress is not None:
            _fill(progress, result, binlog, done_in, total_in, last_consumed, result.seconds)
            progress.in_bytes_done = total_in
            progress.done = True
            on_progress(progress)
        return result
    finally:
        # On an error the files keep only whole transactions (append writes whole ones, a failed
        # write is cut back) and state.json the last checkpoint: a restart redoes the rest.
        try:
            binlog.close()
        except DumperError as exc:
            log.error("closing %s: %s", out, exc)
        if store is not None:
            store.close()


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


def _fill(progress: Progress, result: BuildResult, binlog: GlobalBinlog, done_in: dict[str, int],
          total_in: int | None, last: str | None, seconds: float) -> None:
    progress.txns = result.txns
    progress.written = binlog.txns_written
    progress.events = binlog.events_written
    progress.bytes_out = binlog.bytes_written
    progress.in_bytes_done = sum(done_in.values()) if total_in is not None else None
    progress.last_vtso = last
    progress.seconds = seconds


def _check_same_bytes(binlog: GlobalBinlog, lt, out: Path) -> None:
    """The regenerated last transaction must be the bytes that end the files."""
    mark = binlog.recovery.last_marker
    probe = encode_txn(lt, 0, binlog.server_id, heartbeat_interval=binlog.heartbeat_interval)
    start = mark.end - len(probe)
    path = out / mark.file
    with open(path, "rb") as fh:
        fh.seek(max(start, 0))
        have = fh.read(mark.end - max(start, 0))
    if start < 0 or have != encode_txn(lt, start, binlog.server_id, heartbeat_interval=binlog.heartbeat_interval):
        raise ClusterMismatch(f"{path}: the transaction ending at {mark.end} ({mark.vtso}) is not what these DNs "
                              "produce for that vtso: the directory holds another cluster's binlog (or other "
                              "settings); use a new output directory")


def check_output_dir(out_dir: str | os.PathLike, dns: Sequence[DirDn]) -> None:
    """The output directory is not an input DN's binlog directory (nor inside one), not a file,
    and can be created."""
    out = Path(out_dir)
    where = out.resolve()
    for d in dns:
        src = d.directory.resolve()
        if where == src or src in where.parents:
            raise BuildError(f"--out {out} is DN {d.dn_id}'s binlog directory {d.directory} (an input): the global "
                             "binlog goes to a directory of its own")
    if out.exists() and not out.is_dir():
        raise BuildError(f"--out {out} is not a directory")
    if out.is_dir() and any(out.glob("mysql-bin.*")):
        raise BuildError(f"--out {out} holds a DN's binlog (mysql-bin.*): the global binlog goes to a directory "
                         "of its own")
    parent = next((p for p in [out, *out.parents] if p.exists()), None)
    if parent is None or not os.access(parent, os.W_OK | os.X_OK):
        raise BuildError(f"--out {out}: cannot create or write it ({parent} is not writable)")


def build(dn_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, settings: Settings | None = None,
          resume: bool = True, on_progress: Callable[[Progress], None] | None = None,
          should_stop: Callable[[], bool] | None = None) -> BuildResult:
    """``gbinlog build --engine local``: the global binlog of finite DN binlog directories."""
    if not dn_dirs:
        raise BuildError("no DN directory given")
    missing = [str(d) for d in dn_dirs if not Path(d).is_dir()]
    if missing:
        raise BuildError(f"DN binlog directory {', '.join(missing)} does not exist")
    settings = settings or Settings()
    workers = settings.workers if settings.workers is not None else (os.cpu_count() or 1) > 1
    dns = [DirDn(d, worker=workers) for d in dn_dirs]
    check_output_dir(out_dir, dns)
    if settings.check_cluster:
        check_dn_dirs({d.dn_id: d.directory for d in dns})     # before anything is written
    return run_pipeline(dns, out_dir, settings, resume=resume, on_progress=on_progress, should_stop=should_stop)
