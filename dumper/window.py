"""One vtso window of a batch build: the pipeline over the transactions in ``(lo, hi]``.

A batch build cut into windows (``gbinlog build --engine spark``, docs/architecture.md §8) runs
``run_window`` once per window, anywhere, in any order. A window starts where a resume starts
(``Pipeline(start=State)``): each DN is re-read from a restart point at or below ``lo``
(``extractor.model.RestartPoint``), what is at or below ``lo`` is regenerated and skipped, and the
shaper is rebuilt from the schema history up to ``lo`` (``Shaper.from_history``). Each DN's stream
stops before its first transaction above ``hi`` and then says it passed ``hi`` (``WindowDn``, the
emission rule of ``merger.emission``). The first window writes the final files with the local
writer; the others write a range file (``WindowBinlog``: the same writer, never rotating, without
GTID events, each transaction's size and timestamp kept) whose bytes the driver places later.

Window bounds are TSO strings of 19 digits, shorter than any vtso, so no transaction sits on a
bound: ``(lo, hi]`` and ``[lo, hi)`` hold the same transactions.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from dumper.global_binlog import GlobalBinlog
from dumper.gtid import GTID_EVENT_LEN
from dumper.pipeline import DnInput, Pipeline, Settings
from dumper.state import State
from extractor.model import DnTxn, RestartPoint, TxnKind
from merger import PASSED_ALL, EndsPassing

HISTORY_KINDS = (TxnKind.DDL_MARK, TxnKind.PHYSICAL_DDL)   # what the shaper's history is made of
RANGE_BASE = "range"
_NEVER = 1 << 62   # a range file never rotates: the driver lays its bytes out in the final files


class WindowDn:
    """A DN of a window: the DN's stream from the given restart point, cut before its first
    transaction above ``hi`` (it then passed ``hi``). ``watch``: also keep the history
    transactions and storage changes above ``lo`` (``history``, ``changes``) for the driver.
    ``last``: the vtso of its last transaction above ``lo``; ``cut``: it was cut at ``hi``.
    ``done``: the DN has nothing above ``lo`` (no restart point reaches it), it gives nothing."""

    def __init__(self, dn: DnInput, lo: str | None, hi: str | None, *, watch: bool = False,
                 done: bool = False) -> None:
        self.dn, self.dn_id, self.lo, self.hi, self.watch, self.done = dn, dn.dn_id, lo, hi, watch, done
        self.standby = getattr(dn, "standby", False)
        self.cut = False
        self.point: RestartPoint | None = None   # the newest restart point read (where a next window starts)
        self.last: str | None = None
        self.history: list[DnTxn] = []
        self.changes: list[list] = []

    def server_id(self) -> int | None:
        return self.dn.server_id()

    @property
    def events_read(self) -> int | None:
        return getattr(self.dn, "events_read", None)

    def stream(self, restart: RestartPoint | None, storage_seq: str, should_stop=None) -> Iterable[DnTxn]:
        if self.done:   # all its transactions lie at or below ``lo``: its end is where the window starts
            return EndsPassing((), PASSED_ALL if getattr(self.dn, "complete", False) else None)
        self.point = restart
        txns = self.dn.stream(restart, storage_seq, should_stop)
        ends = EndsPassing((), getattr(txns, "passed", None))
        ends.stream = self._window(iter(txns), ends)
        return ends

    def _window(self, txns: Iterator[DnTxn], ends: EndsPassing) -> Iterator[DnTxn]:
        from merger.membership import storage_change

        lo, hi, watch, instruction = self.lo or "", self.hi, self.watch, TxnKind.INSTRUCTION
        try:
            for t in txns:
                v = t.vtso
                if hi is not None and v > hi:
                    self.cut, ends.passed = True, hi
                    return
                if t.restart is not None:
                    self.point = t.restart
                if v > lo:
                    self.last = v
                    if watch:
                        kind = t.kind
                        if kind in HISTORY_KINDS:
                            self.history.append(t)
                        elif kind is instruction and (change := storage_change(t)) is not None:
                            self.changes.append([v, change])
                yield t
        finally:
            close = getattr(txns, "close", None)
            if close is not None:
                close()


class WindowBinlog(GlobalBinlog):
    """The local writer, keeping each written transaction's size (without its GTID event) and
    timestamp: what the driver lays the window's bytes out with (``spark_engine.layout``)."""

    def __init__(self, directory: str | os.PathLike, *, durable: bool, **kw) -> None:
        super().__init__(directory, **kw)
        self.durable = durable     # final files are synced; a range file is a temporary one
        self.sizes, self.stamps = array("I"), array("I")
        self.first_written_vtso: str | None = None
        self._gtid_len = GTID_EVENT_LEN if self.gtids else 0

    def _appended(self, vtso: str, ts: int, size: int, n_events: int) -> int:
        self.sizes.append(size - self._gtid_len)
        self.stamps.append(ts)
        if self.first_written_vtso is None:
            self.first_written_vtso = vtso
        return super()._appended(vtso, ts, size, n_events)

    def flush(self, fsync: bool = True) -> None:
        super().flush(fsync and self.durable)


@dataclass
class WindowSummary:
    """What a window reports: where its bytes are, their sizes and timestamps, and what
    ``state.json`` and the cluster rule need (``dumper.state.state_of_windows``)."""

    index: int
    txns: int = 0                        # transactions consumed (above ``lo``)
    written: int = 0
    events: int = 0                      # events and bytes in the final files (GTID events included)
    bytes: int = 0
    sizes: bytes = b""                   # u32 per written transaction, without its GTID event
    stamps: bytes = b""                  # u32 per written transaction
    last_vtso: str | None = None
    first_written_vtso: str | None = None
    last_written_vtso: str | None = None
    points: dict[str, list] = field(default_factory=dict)     # DN → newest restart point
    last_of: dict[str, str] = field(default_factory=dict)     # DN → its last vtso in the window
    broadcasts: list[list] = field(default_factory=list)      # [vtso, DNs] where the DN set changed
    left: dict[str, str] = field(default_factory=dict)        # DNs the window's merge saw leave
    held: list | None = None             # the emission rule stopped the window (merger.Held)
    range_file: str | None = None        # the range file (None: nothing written, or final files)
    final: dict | None = None            # the first window's final files: where the writer ended
    history: list[DnTxn] = field(default_factory=list)        # watched: history transactions
    changes: list[list] = field(default_factory=list)         # watched: storage changes
    # DNs cut at ``hi`` → their restart point there (None: their first event): where the next
    # window reads them from
    cut_at: dict[str, list | None] = field(default_factory=dict)
    dn_events: int | None = None
    seconds: float = 0.0


class WindowPipeline(Pipeline):
    """The pipeline of one window (see the module doc): ``start`` says where it begins,
    ``history`` is the schema history below the window (``schema_shaper`` entries)."""

    def __init__(self, dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings, *, start: State,
                 hi: str | None, history: list, final: bool = False, watch: bool = False,
                 done: Iterable[str] = ()) -> None:
        done = set(done)
        self.windows = [WindowDn(d, start.last_vtso, hi, watch=watch, done=d.dn_id in done) for d in dns]
        super().__init__(self.windows, out_dir, settings, start=start)
        self.history, self.final = history, final
        self.broadcasts: list[list] = []
        self._broadcast_dns: list[str] | None = None

    def open_output(self, state: State | None) -> WindowBinlog:
        s = self.settings
        return WindowBinlog(self.out, durable=self.final, server_id=s.server_id, server_version=s.server_version,
                            heartbeat_interval=s.heartbeat_interval, buffer_size=4 << 20,
                            max_file_size=s.max_file_size if self.final else _NEVER,
                            gtids=s.gtids and self.final, **({} if self.final else {"base": RANGE_BASE}))

    def open_shaper(self):
        from schema_shaper import Shaper

        kw = {"on_error": self.settings.on_error, "ddl_comments": self.settings.ddl_comments}
        return Shaper.from_history(self.history, self.skip, **kw) if self.skip else Shaper(**kw)

    def note_broadcast(self, g) -> None:
        super().note_broadcast(g)
        dns = sorted({b.dn for b in g.branches})
        if dns != self._broadcast_dns:
            self.broadcasts.append([g.vtso, dns])
            self._broadcast_dns = dns

    def checkpoint(self) -> None:
        """Nothing to save: a window's output is the driver's to place (its files are synced there)."""
        self.binlog.flush(fsync=False)

    def summary(self, index: int) -> WindowSummary:
        binlog, result, held = self.binlog, self.result, self.membership.held
        final = written_files(binlog) if self.final else None
        gtid_events = binlog.txns_written if self.settings.gtids and not binlog.gtids else 0   # put in when placed
        return WindowSummary(
            index, txns=result.txns, written=binlog.txns_written, events=binlog.events_written + gtid_events,
            bytes=binlog.bytes_written + gtid_events * GTID_EVENT_LEN,
            sizes=binlog.sizes.tobytes(), stamps=binlog.stamps.tobytes(),
            last_vtso=self.last_consumed if result.txns else None,
            first_written_vtso=binlog.first_written_vtso,
            last_written_vtso=binlog.last_written_vtso if binlog.txns_written else None,
            # the points this window moved (a window held by the emission rule moves none)
            points={dn: list(p) for dn, p in self.restart.items()
                    if p is not None and p != self.start.restart.get(dn)},
            last_of={w.dn_id: w.last for w in self.windows if w.last is not None},
            broadcasts=self.broadcasts, left=dict(self.membership.left),
            held=_held_fields(held),
            range_file=str(self.out / binlog.files[0]) if binlog.files and not self.final else None,
            final=final, history=[t for w in self.windows for t in w.history],
            changes=[c for w in self.windows for c in w.changes],
            cut_at={w.dn_id: _listed(w.point) for w in self.windows if w.cut},
            dn_events=result.dn_events, seconds=result.seconds)


def written_files(binlog: GlobalBinlog) -> dict:
    """Where a window's final files end: what the driver's layout goes on from
    (``spark_engine.layout.plan_files``' ``placed``)."""
    return {"dir": str(binlog.directory), "files": list(binlog.files), "position": binlog.position,
            "gno": binlog.gno, "file_txns": binlog.file_txns,
            "last_marker": list(binlog.last_marker) if binlog.last_marker else None,
            "sid": binlog.gtid_sid.hex() if binlog.gtid_sid else None}


def resume_window(dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings, *,
                  hi: str | None) -> WindowSummary:
    """The first window of a build that resumes an output directory: the ordinary resume of the
    pipeline there (``state.json``, recovery, the meta store), its DNs stopped at ``hi``; it
    writes the final files and ``state.json`` in place (the rest of the build goes on from them)."""
    windows = [WindowDn(d, None, hi) for d in dns]
    pipeline = Pipeline(windows, out_dir, settings)
    result = pipeline.run()
    binlog, held = pipeline.binlog, result.held
    return WindowSummary(
        0, txns=result.txns, written=result.written, events=result.events, bytes=result.bytes,
        last_vtso=pipeline.last_consumed if result.txns else None,
        last_written_vtso=binlog.last_written_vtso if result.written else None,
        last_of={w.dn_id: w.last for w in windows if w.last is not None}, left=dict(pipeline.membership.left),
        held=_held_fields(held),
        final=written_files(binlog), cut_at={w.dn_id: _listed(w.point) for w in windows if w.cut},
        dn_events=result.dn_events, seconds=result.seconds)


def _held_fields(held) -> list | None:
    """A ``merger.Held`` as plain fields (a summary crosses process boundaries)."""
    return None if held is None else [held.dn, held.passed, list(held.at) if held.at else None, held.first_held,
                                      held.txns]


def _listed(point: RestartPoint | None) -> list | None:
    return None if point is None else list(point)


def run_window(dns: Sequence[DnInput], out_dir: str | os.PathLike, settings: Settings, *, index: int,
               start: State, hi: str | None, history: list, final: bool = False,
               watch: bool = False, done: Iterable[str] = ()) -> WindowSummary:
    """Window ``index`` ``(start.last_vtso, hi]`` of ``dns`` into ``out_dir`` (a new directory of
    its own): the first window (``final``) as the final files, the others as a range file.
    ``done``: DNs with nothing above ``lo``."""
    pipeline = WindowPipeline(dns, out_dir, settings, start=start, hi=hi, history=history, final=final,
                              watch=watch, done=done)
    pipeline.run()
    return pipeline.summary(index)
