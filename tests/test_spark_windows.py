"""The Spark batch build's windows (``gbinlog.spark_engine.windows``, ``dumper.window``) run in
this process, without a JVM: the whole build through ``InProcessSpark`` against the local
engine's output in 1, 2 and 4 windows; the scan's and the guessed start points; an attempt of a
window that dies never touches another's files. The same build runs on a real session in
``test_spark_build.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dumper.pipeline import Settings
from extractor import extract
from extractor.errors import CommitWithoutPrepare
from extractor.model import Pos
from extractor.vtso import VtsoState
from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine.batch import build as spark_build
from gbinlog.spark_engine.batch import dn_specs, plan_build
from gbinlog.spark_engine.ranges import RangeSource
from gbinlog.spark_engine.speculate import (
    head_history,
    history_misses,
    lead_in_start,
    newest_point_below,
    start_misses,
)
from gbinlog.spark_engine.windows import (
    WindowJob,
    decode_txns,
    scale_in,
    scan_part,
    start_points,
    write_window,
)
from schema_shaper import collect_history
from tests.spark_support import FIXTURES, InProcessSpark, dn_dirs, meta_rows


def same_output(a: Path, b: Path) -> list[str]:
    """The same files, index, state.json (but the count the local engine saves before it is
    known) and meta store."""
    names = (a / "binlog.index").read_text().split()
    assert (a / "binlog.index").read_bytes() == (b / "binlog.index").read_bytes()
    assert sorted(p.name for p in a.glob("binlog.0*")) == sorted(p.name for p in b.glob("binlog.0*"))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    states = [json.loads((d / "state.json").read_text()) for d in (a, b)]
    for s in states:
        s["counts"].pop("written")
    assert states[0] == states[1]
    assert meta_rows(a) == meta_rows(b)
    return names


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_windows_build_the_local_engines_output(tmp_path, fixture):
    """Every fixture (scale-out and scale-in among them) in 1, 2 and 4 windows, 40 KB rotation
    cutting files inside windows and across them: the local engine's output."""
    settings = Settings(max_file_size=40 << 10)
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=settings)
    for n in (1, 2, 4):
        out = tmp_path / f"w{n}"
        result = spark_build(dn_dirs(fixture), out, spark=InProcessSpark(), ranges=n, settings=settings)
        assert result.ranges == n and result.files == local.files
        assert (result.txns, result.events, result.bytes, result.last_vtso) == \
            (local.txns, local.events, local.bytes, local.last_vtso)
        same_output(out, tmp_path / "local")
        assert not (out / ".spark-ranges").exists()


@pytest.mark.parametrize("name, settings", [
    ("bank-4dn", Settings(max_file_size=40 << 10, filter={"include": [], "exclude": ["bank.audit*"]})),
    ("ddl-3dn", Settings(max_file_size=40 << 10, filter={"include": ["shop.*"], "exclude": []})),
    ("ddl-3dn", Settings(max_file_size=40 << 10, ddl_comments=False)),
    ("mixed-2dn", Settings(max_file_size=40 << 10, gtids=False, server_id=9)),
    ("scale-2dn", Settings(max_file_size=40 << 10, server_version="8.0.36-gbinlog")),
], ids=["exclude", "include", "no-ddl-comments", "no-gtids", "mysql-8.0-fde"])
def test_windows_take_every_output_setting(tmp_path, name, settings):
    """Filters, DDL comments off, GTIDs off, another server id, MySQL 8.0's FDE: the pipeline's own settings, so
    the windows write the local engine's bytes with them, and state.json records them."""
    fixture = next(f for f in FIXTURES if f.name == name)
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=settings)
    result = spark_build(dn_dirs(fixture), tmp_path / "spark", spark=InProcessSpark(), ranges=3, settings=settings)
    assert result.files == local.files and local.written > 0
    same_output(tmp_path / "spark", tmp_path / "local")
    saved = json.loads((tmp_path / "spark" / "state.json").read_text())["settings"]
    assert saved == settings.output_settings()
    local_build(dn_dirs(fixture), tmp_path / "plain", settings=Settings(max_file_size=40 << 10))
    first = "binlog.000001"                # the setting changed the bytes
    assert (tmp_path / "local" / first).read_bytes() != (tmp_path / "plain" / first).read_bytes()


def test_cluster_stopped_windows_write_the_tail_as_the_local_engine(tmp_path):
    """A DN whose input ends early (cut at a quiet point half-way) holds the output at its end; with
    ``cluster_stopped`` its end passes everything and the windows above write the others' tail,
    as the local build does."""
    import shutil

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    for d in dn_dirs(fixture):
        shutil.copytree(d, tmp_path / "in" / d.name)
    dn1 = tmp_path / "in" / "dn1"
    points = [t.restart for t in extract(dn1) if t.restart is not None]
    cut = points[len(points) // 2]
    files = sorted(p.name for p in dn1.glob("mysql-bin.0*"))
    kept = files[:files.index(cut.file) + 1]
    for name in files[len(kept):]:
        (dn1 / name).unlink()
    os.truncate(dn1 / cut.file, cut.offset)
    (dn1 / "mysql-bin.index").write_text("".join(f"./{n}\n" for n in kept))
    dirs = dn_dirs(tmp_path / "in")
    settings = Settings(max_file_size=40 << 10)
    held = local_build(dirs, tmp_path / "held", settings=settings)
    whole = local_build(dirs, tmp_path / "whole", settings=settings, cluster_stopped=True)
    assert held.held is not None and whole.held is None and whole.written > held.written
    for out, stopped in (("spark-held", False), ("spark-whole", True)):
        result = spark_build(dirs, tmp_path / out, spark=InProcessSpark(), ranges=4, settings=settings,
                             cluster_stopped=stopped)
        assert (result.held is None) == stopped
        same_output(tmp_path / out, tmp_path / ("whole" if stopped else "held"))


def _job(tmp: Path, plan, left=None) -> WindowJob:
    from gbinlog.spark_engine.batch import _check_inputs

    return WindowJob(str(tmp), Settings(max_file_size=1 << 30, gtids=False), _check_inputs(plan.dns),
                     left=left or {})


def _history(encoded: list) -> list:
    return collect_history(decode_txns(encoded))


def _scanned(tmp: Path, plan) -> tuple[WindowJob, list, list]:
    parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
    job = _job(tmp, plan, scale_in(parts, [d.dn for d in plan.dns]))
    return job, start_points(plan, parts), _history([e for p in parts for e in p["history"]])


def _guessing_rows(tmp: Path, plan, head: list) -> list[dict]:
    """Every window with guessed start points (``starts=None``), as the speculative job runs them."""
    job = _job(tmp, plan)
    history = _history(head)
    return [next(write_window(job, plan, history, None, r)) for r in range(len(plan.bounds) + 1)]


def _range_bytes(row: dict) -> bytes:
    return Path(row["summary"].range_file).read_bytes()


def _same_window(a: dict, b: dict) -> None:
    sa, sb = a["summary"], b["summary"]
    for key in ("txns", "written", "events", "sizes", "stamps", "last_vtso", "points", "broadcasts", "last_of"):
        assert getattr(sa, key) == getattr(sb, key), (sa.index, key)
    assert _range_bytes(a) == _range_bytes(b)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_guessed_start_points_and_history_are_the_scans(tmp_path, fixture):
    """Without the scan: each window guesses its start points from the files just below its
    bound, the driver its history from the DNs' heads. The guesses are the scan's start points,
    the range files the scan's bytes, and the check agrees — except for scale-2dn, whose storage
    change below the last bound (a DN leaving) the guesses do not model: the check says so."""
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    assert len(plan.bounds) == 2
    job, starts, history = _scanned(tmp_path, plan)
    assert all(s[0] is None for s in starts)
    assert any(isinstance(s[1], list) and s[1][1] > 4 for s in starts), starts
    scanned = [next(write_window(job, plan, history, starts, r)) for r in (1, 2)]
    head = head_history(plan)
    rows = _guessing_rows(tmp_path, plan, head)
    for r in (1, 2):
        assert rows[r]["starts"] == [s[r] for s in starts], r
        assert rows[r - 1]["reach"] == [s[r] for s in starts], r
    for a, b in zip(scanned, rows[1:], strict=True):
        _same_window(a, b)
    miss = start_misses(rows)
    if fixture.name == "scale-2dn":
        assert miss == "a storage change below the last boundary"
    else:
        assert miss is None and history_misses(rows, head, plan.bounds) == []
        # the history the windows below the last bound met is the scan's
        assert sorted(map(repr, _history([e for r in rows[:2] for e in r["history"]]))) == \
            sorted(map(repr, [e for e in history if e.vtso < plan.bounds[-1]]))


def test_each_attempt_of_a_window_writes_its_own_directory(tmp_path, monkeypatch):
    """A window task run twice (a Spark retry, a speculative copy) writes the same bytes in a
    directory of its own; one that dies half-way leaves the other's range file whole. The first
    window writes the final files there, never in the output directory."""
    from dumper.window import WindowBinlog

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 2)
    job, starts, history = _scanned(tmp_path, plan)
    first = next(write_window(job, plan, history, starts, 0))["summary"]
    assert first.final and Path(first.final["dir"]).parent == tmp_path and first.range_file is None
    done = next(write_window(job, plan, history, starts, 1))
    placed = _range_bytes(done)
    assert done["summary"].written > 10 and len(placed) > 3 * 4096
    real, seen = WindowBinlog._appended, []

    def dies_half_way(self, *args):
        seen.append(self.directory)
        if len(seen) > done["summary"].written // 2:
            raise RuntimeError("executor lost")
        return real(self, *args)

    monkeypatch.setattr(WindowBinlog, "_appended", dies_half_way)
    with pytest.raises(RuntimeError):   # (as a task error, encoded for the driver)
        next(write_window(job, plan, history, starts, 1))
    assert _range_bytes(done) == placed and seen[0] != Path(done["summary"].range_file).parent


def test_a_lead_in_from_a_later_file_reads_past_commits_of_earlier_prepares():
    """The guess for a bound inside a DN's second file reads that file alone, although it opens
    with XA COMMITs whose prepares are in the first (a strict reading from there fails): the point
    is the whole DN's."""
    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 1)
    dn = plan.dns[0]
    with pytest.raises(CommitWithoutPrepare):
        list(extract(RangeSource(dn.dir, dn.dn, Pos("mysql-bin.000002", 4)), dn_id=dn.dn, state=VtsoState()))
    txns = list(extract(Path(dn.dir), dn_id=dn.dn, storage_seq=dn.storage_seq))
    later = [t for t in txns if t.start[0] == "mysql-bin.000002"]
    for bound in (later[len(later) // 3].vtso, later[2 * len(later) // 3].vtso):
        truth = newest_point_below(iter(txns), bound, None)
        assert truth[0] == "mysql-bin.000002" and truth[1] > 4
        assert lead_in_start(plan, 0, bound) == truth


def test_a_lead_in_inside_a_file_begins_at_an_event_start_below_the_bound(monkeypatch):
    """With marks every 2 KB and a lead-in of 8 KB, the guess for a bound late in a DN's first
    file reads from a group start inside it (leniently), not from the file's start: the point
    is still the whole DN's; a bound near a file's start reads it from there."""
    from binlog import read_events
    from extractor.vtso import vtso_tso
    from gbinlog.spark_engine import speculate

    monkeypatch.setattr(speculate, "MARK_BYTES", 2048)
    monkeypatch.setattr(speculate, "LEAD_IN_BYTES", 8192)
    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 1)
    dn = plan.dns[1]
    first = Path(dn.dir) / "mysql-bin.000001"
    txns = list(extract(Path(dn.dir), dn_id=dn.dn, storage_seq=dn.storage_seq))
    inside = [t for t in txns if t.start[0] == "mysql-bin.000001" and t.tso]
    events = list(read_events(first))
    bound = inside[-len(inside) // 4].vtso
    at = speculate.lead_in_offset(first, vtso_tso(bound))
    # a group's first event: the one before it an XA_PREPARE (or XID)
    before = next(ev for ev, nxt in zip(events, events[1:], strict=False) if nxt.pos == at)
    assert before.h[1] in (16, 38)
    assert 8192 <= at < next(t.start[1] for t in inside if t.vtso >= bound) - 8192
    truth = newest_point_below(iter(txns), bound, None)
    assert truth[0] == "mysql-bin.000001" and truth[1] > at
    # the lenient read from there finds it by itself (not by falling back to the file's start)
    lenient = extract(RangeSource(dn.dir, dn.dn, Pos("mysql-bin.000001", at)), dn_id=dn.dn,
                      storage_seq=dn.storage_seq, state=VtsoState(), strict=False)
    assert newest_point_below(lenient, bound, None) == truth
    assert lead_in_start(plan, 1, bound) == truth
    assert speculate.lead_in_offset(first, vtso_tso(inside[3].vtso)) == 4


def test_a_window_shaped_with_a_wrong_history_is_written_again_as_the_scans(tmp_path):
    """ddl-3dn in 2 windows, the history guessed from a head of one transaction: the start points
    hold, window 1 fails on a table its history lacks; written again from its checked start points
    with the history window 0 met, its file is the scan path's, byte for byte."""
    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 2)
    short = head_history(plan, quiet=1)
    rows = _guessing_rows(tmp_path, plan, short)
    assert start_misses(rows) is None and "miss" in rows[1]
    assert history_misses(rows, short, plan.bounds) == [1]
    starts = [[None, rows[1]["starts"][i]] for i in range(len(plan.dns))]
    again = next(write_window(_job(tmp_path, plan), plan, _history(rows[0]["history"]), starts, 1))
    job, scan_starts, history = _scanned(tmp_path, plan)
    scanned = next(write_window(job, plan, history, scan_starts, 1))
    _same_window(again, scanned)
    assert sorted(map(repr, again["history"])) == sorted(map(repr, scanned["history"]))


def test_wrong_guesses_are_caught(tmp_path, monkeypatch):
    """A history that misses DDLs below the last bound (a head of one transaction): the windows
    it reaches are named for a second round, and a window it makes fail returns a row saying why
    (not an error); a start point that is not the scan's (a later file's start taken as quiet; the
    scan's point with another vtso sequence): a miss."""
    from gbinlog.spark_engine import speculate

    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    head, short = head_history(plan), head_history(plan, quiet=1)
    assert 0 < len(short) < len(head)
    rows = _guessing_rows(tmp_path, plan, head)
    assert start_misses(rows) is None and history_misses(rows, head, plan.bounds) == []
    # with the short head as the guess: every window with a missing entry below its lower bound
    missing = [e for e in head if repr(e) not in set(map(repr, short))]
    want = [r for r in (1, 2) if any(e[0][7] < plan.bounds[r - 1] for e in missing)]
    assert want and history_misses(rows, short, plan.bounds) == want
    rows = _guessing_rows(tmp_path, plan, short)
    failed = [r for r in rows if "miss" in r]
    assert failed and failed[0]["miss"].startswith("UnknownTable: "), rows
    if failed[0]["rng"] < 2:
        assert start_misses(rows) == f"range {failed[0]['rng']}: {failed[0]['miss']}"
    else:
        assert start_misses(rows) is None and 2 in history_misses(rows, short, plan.bounds)
    real = speculate.lead_in_start
    # a later file's start, as if nothing were open there: DN #0's strict re-read meets a commit of
    # an earlier prepare
    monkeypatch.setattr(speculate, "lead_in_start", lambda plan, i, bound: ["mysql-bin.000002", 4, 0, 0, 0])
    miss = start_misses(_guessing_rows(tmp_path, plan, head))
    assert miss is not None and miss.startswith("range 1: CommitWithoutPrepare: DN dn0: mysql-bin.000002: offset 462"), miss
    # the scan's point with another vtso sequence: it reads without error, the check catches it
    monkeypatch.setattr(speculate, "lead_in_start", lambda plan, i, bound:
                        (lambda p: p if p in (None, "done") else [*p[:4], p[4] + 7])(real(plan, i, bound)))
    rows = _guessing_rows(tmp_path, plan, head)
    assert not any("miss" in r for r in rows)
    truth = rows[0]["reach"][0]
    assert isinstance(truth, list)
    assert start_misses(rows) == f"range 1, DN #0: start point {[*truth[:4], truth[4] + 7]} is not the scan's {truth}"


def _stopped_local(fixture: Path, out: Path, settings: Settings, after: int) -> None:
    """A local build stopped after ``after`` transactions (a whole transaction, checkpointed),
    then a torn half transaction appended to its last file (as a crash mid-write leaves it)."""
    seen = []
    local_build(dn_dirs(fixture), out, settings=settings, should_stop=lambda: seen.append(1) or len(seen) >= after)
    last = sorted(out.glob("binlog.0*"))[-1]
    with open(last, "ab") as fh:
        fh.write(last.read_bytes()[200:900])


@pytest.mark.parametrize("name", ["bank-4dn", "scale-2dn", "ddl-3dn"])
def test_a_stopped_local_build_finished_by_spark_is_one_build(tmp_path, name):
    """A local build stopped half-way (a torn transaction at its end) and finished by the Spark
    engine in 1, 2 and 3 windows: the first window is the output's own resume, the others start
    from the scan of its restart points; the uninterrupted build's files, state and meta store."""
    fixture = next(f for f in FIXTURES if f.name == name)
    settings = Settings(max_file_size=40 << 10)
    local_build(dn_dirs(fixture), tmp_path / "whole", settings=settings)
    for n in (1, 2, 3):
        out = tmp_path / f"resumed{n}"
        _stopped_local(fixture, out, settings, 150)
        before = json.loads((out / "state.json").read_text())["last_vtso"]
        result = spark_build(dn_dirs(fixture), out, spark=InProcessSpark(), ranges=n, settings=settings)
        assert result.ranges == n
        same_output(out, tmp_path / "whole")
        assert before < json.loads((out / "state.json").read_text())["last_vtso"]
        # killed before its first checkpoint (files, no state.json): the first window re-reads the
        # DNs from their starts and checks the files' last transaction, the others begin above it
        out = tmp_path / f"unsaved{n}"
        _stopped_local(fixture, out, settings, 150)
        (out / "state.json").unlink()
        spark_build(dn_dirs(fixture), out, spark=InProcessSpark(), ranges=n, settings=settings)
        same_output(out, tmp_path / "whole")
    # an output already whole: nothing to do, nothing changed
    again = spark_build(dn_dirs(fixture), tmp_path / "whole", spark=InProcessSpark(), ranges=2, settings=settings)
    assert again.written == 0
    # other settings than the output's: refused before anything is written, as the local engine
    from gbinlog.local_engine import BuildError

    with pytest.raises(BuildError, match="would give different bytes"):
        spark_build(dn_dirs(fixture), tmp_path / "whole", spark=InProcessSpark(), settings=Settings(gtids=False))


def test_a_spark_build_that_dies_is_finished_by_the_local_engine(tmp_path, monkeypatch):
    """A resumed Spark build whose later window fails leaves the first window's progress (its
    files and state.json) and nothing else; a new Spark build killed while it moves its files
    into the output leaves whole files only. The local engine finishes either to the
    uninterrupted build's bytes."""
    from gbinlog.spark_engine import batch, layout

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    settings = Settings(max_file_size=40 << 10)
    local_build(dn_dirs(fixture), tmp_path / "whole", settings=settings)
    out = tmp_path / "resumed"
    _stopped_local(fixture, out, settings, 100)
    def dies(*args, **kwargs):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(layout, "finish_files", dies)
    with pytest.raises(RuntimeError, match="executor lost"):
        spark_build(dn_dirs(fixture), out, spark=InProcessSpark(), ranges=3, settings=settings)
    state = json.loads((out / "state.json").read_text())
    assert not (out / ".spark-ranges").exists() and state["last_vtso"]
    local_build(dn_dirs(fixture), out, settings=settings)
    same_output(out, tmp_path / "whole")
    monkeypatch.undo()
    # killed (no clean-up) after moving two files into a new output
    moved, real_replace = [], os.replace

    def killed(src, dst):
        if Path(dst).parent == tmp_path / "new" and Path(dst).name.startswith("binlog.0"):
            if len(moved) == 2:
                raise KeyboardInterrupt
            moved.append(dst)
        return real_replace(src, dst)

    monkeypatch.setattr(layout.os, "replace", killed)
    monkeypatch.setattr(batch, "remove_binlog_files", lambda out: None)
    with pytest.raises(KeyboardInterrupt):
        spark_build(dn_dirs(fixture), tmp_path / "new", spark=InProcessSpark(), ranges=3, settings=settings)
    monkeypatch.undo()
    assert len(list((tmp_path / "new").glob("binlog.0*"))) == 2 and not (tmp_path / "new" / "state.json").exists()
    local_build(dn_dirs(fixture), tmp_path / "new", settings=settings)
    same_output(tmp_path / "new", tmp_path / "whole")
