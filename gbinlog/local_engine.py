"""The local engine: DN binlog directories through ``dumper.pipeline.Pipeline`` in
one process (extraction optionally in one worker process per DN, ``gbinlog.dn_worker``).

``build(dn_dirs, out_dir)`` is ``gbinlog build --engine local``: crash-safe and resumable
(docs/architecture.md), and it resumes the output directory of any engine (``gbinlog run``
included), since they all write the same ``state.json``. The pipeline names (``Settings``,
``run_pipeline``, …) are re-exported here for the callers that know them from this module.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from dumper.cluster import dn_server_id
from dumper.pipeline import (
    BuildError,
    BuildResult,
    DnInput,
    Pipeline,
    Progress,
    Settings,
    run_pipeline,
)
from extractor import RestartPoint, extract
from extractor.members import check_dn_dirs
from extractor.model import DnTxn
from extractor.source import DirSource, NotADnDirectory, dn_binlog_files
from gbinlog.output_lock import OutputLockError, locked_output
from merger import PASSED_ALL, EndsPassing
from schema_shaper.meta_store import MetaStoreUnavailable

__all__ = ["BuildError", "BuildResult", "DirDn", "DnInput", "Pipeline", "Progress", "Settings", "build",
           "check_output_dir", "run_pipeline"]


PROBE_KEEP = 64  # at most this many transactions of a probe are kept for the stream that follows


class DirDn:
    """A DN binlog directory (finite: read to its end). The DN id is the directory name."""

    def __init__(self, directory: str | os.PathLike, dn_id: str | None = None, *, worker: bool = False,
                 standby: bool = False, complete: bool = False) -> None:
        self.directory = Path(directory)
        self.worker = worker
        # the DN's whole binlog (its cluster stopped): its end passes every vtso (merger.emission),
        # and a branch still open there is an error
        self.complete = complete
        self.standby = standby          # a DN that joins later: opened at the instruction that adds it
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
        self.sources: list[DirSource] = []
        self._probed: tuple[str, DirSource, Iterator[DnTxn], list[DnTxn]] | None = None

    def server_id(self) -> int | None:
        return dn_server_id(self.directory, self.files[0])

    def stream(self, restart: RestartPoint | None, storage_seq: str,
               should_stop: Callable[[], bool] | None = None) -> Iterator[DnTxn]:
        probed, self._probed = self._probed, None
        if probed is not None and restart is None and not self.worker and probed[0] == storage_seq:
            _, source, txns, seen = probed      # from the start: go on from where the probe stopped
            self.sources.append(source)
            return self._ends(itertools.chain(seen, txns))
        if self.worker:
            from gbinlog.dn_worker import worker_stream

            return self._ends(worker_stream(self.directory, self.dn_id, storage_seq, restart, self.complete))
        source = DirSource(self.directory, dn_id=self.dn_id, start_file=restart.file if restart else None,
                           start_pos=restart.offset if restart else 4)
        self.sources.append(source)
        return self._ends(extract(source, storage_seq=storage_seq, complete=self.complete,
                                  state=restart.vtso_state() if restart else None))

    def _ends(self, txns: Iterator[DnTxn]) -> Iterable[DnTxn]:
        """The DN's stream; a complete DN's end passes every vtso (``merger.emission``)."""
        return EndsPassing(txns, PASSED_ALL) if self.complete else txns

    @property
    def events_read(self) -> int | None:
        """DN events read by ``stream`` so far (None with a worker process: counted there)."""
        return None if self.worker else sum(s.events_read for s in self.sources)

    def probe(self, storage_seq: str) -> Iterator[DnTxn]:
        """The DN's first transactions, in this process (a look ahead before a build starts). When
        the caller stops within ``PROBE_KEEP`` transactions, they are kept with the extraction where
        it stopped, and the next ``stream`` from the start goes on from there instead of opening and
        reading the DN's first file again: a fixed cost per DN, which the number of DNs multiplies
        (the probe reads ~23 transactions a DN at 32 DNs; ~300 at 4 DNs, which would only weigh on
        memory, so those are read again as before)."""
        source = DirSource(self.directory, dn_id=self.dn_id)
        txns = extract(source, storage_seq=storage_seq, complete=self.complete)
        seen: list[DnTxn] = []
        probed = self._probed = (storage_seq, source, txns, seen)

        def reading() -> Iterator[DnTxn]:
            for txn in txns:
                if self._probed is probed:
                    if len(seen) < PROBE_KEEP:
                        seen.append(txn)
                    else:
                        self._probed = None     # read too far to keep: a stream starts afresh
                yield txn
        return reading()

    def offset_of(self, file: str, offset: int) -> int:
        """Bytes of this DN's input before ``file``:``offset``."""
        return self._starts.get(file, 0) + offset


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
          should_stop: Callable[[], bool] | None = None, cluster_stopped: bool = False) -> BuildResult:
    """``gbinlog build --engine local``: the global binlog of finite DN binlog directories.

    The output stops by the emission rule (``merger.emission``) where a DN's input ends below the
    others' (``BuildResult.held`` says where); ``cluster_stopped``: the inputs are the DNs' whole
    binlogs, so their ends pass everything and the tail is written (a branch open at a DN's end is
    then an error)."""
    if not dn_dirs:
        raise BuildError("no DN directory given")
    missing = [str(d) for d in dn_dirs if not Path(d).is_dir()]
    if missing:
        raise BuildError(f"DN binlog directory {', '.join(missing)} does not exist")
    settings = settings or Settings()
    workers = settings.workers if settings.workers is not None else (os.cpu_count() or 1) > 1
    dns = [DirDn(d, worker=workers, complete=cluster_stopped) for d in dn_dirs]
    check_output_dir(out_dir, dns)
    if settings.check_cluster:
        check_dn_dirs({d.dn_id: d.directory for d in dns})     # before anything is written
    try:
        with locked_output(out_dir, "build"):
            return run_pipeline(dns, out_dir, settings, resume=resume, on_progress=on_progress,
                                should_stop=should_stop)
    except OutputLockError as exc:
        raise BuildError(f"--out {exc}") from None
    except MetaStoreUnavailable as exc:
        raise BuildError(f"--meta-store {exc}: {exc.advice}") from None
