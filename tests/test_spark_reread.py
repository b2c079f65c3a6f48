"""The ``reread`` Spark build's task functions, run in-process (no JVM): the scan's start points,
the range writers and the in-place first range, against the exchange through files and against
the local engine's files. The same functions run inside Spark in ``test_spark_build.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractor import extract
from extractor.errors import CommitWithoutPrepare
from extractor.model import Pos
from extractor.txn_codec import BodyDecoder
from extractor.vtso import VtsoState
from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine.batch import RangeSettings, dn_specs, plan_build, write_range_files
from gbinlog.spark_engine.exchange import decode_txns, dn_ends, extract_part, scale_in
from gbinlog.spark_engine.ranges import RangeSource
from gbinlog.spark_engine.reread import scan_part, start_points, write_range_reread
from gbinlog.spark_engine.speculate import (
    head_history,
    history_misses,
    lead_in_start,
    newest_point_below,
    start_misses,
)
from schema_shaper import collect_history
from tests.spark_support import FIXTURES, dn_dirs


def _settings(tmp: Path, plan) -> RangeSettings:
    return RangeSettings(str(tmp), [d.dn for d in plan.dns], plan.bounds, 1, "5.7.44-gbinlog", 200,
                         max_file_size=1 << 30, gtids=False)


def _history(parts: list[dict]) -> list:
    return collect_history(decode_txns((e for p in parts for e in p["history"]), BodyDecoder()))


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_range_writers_equal_the_exchange_through_files(tmp_path, fixture):
    """Every range but the first: the same range file bytes and summaries as ``exchange=files``
    (its writers read every transaction the extraction tasks encoded)."""
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    assert len(plan.bounds) == 2
    rows = {}
    for exchange in ("files", "reread"):
        tmp = tmp_path / exchange
        tmp.mkdir()
        settings = _settings(tmp, plan)
        if exchange == "files":
            parts = [r for i in range(len(plan.parts)) for r in extract_part(plan, str(tmp), i)]
        else:
            parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
        history = _history(parts)
        settings.left = scale_in(parts, settings.dns)
        if exchange == "files":
            settings.ends = dn_ends(parts)      # as the driver: a DN going on past a range passed it
            attempts = [p["attempt"] for p in parts]
            rows[exchange] = [next(write_range_files(settings, plan, history, attempts, r)) for r in (1, 2)]
        else:
            starts = start_points(plan, parts)
            # a start point below every boundary the DN reaches (None: from its first event)
            assert all(s[0] is None for s in starts)
            assert any(isinstance(s[1], list) and s[1][1] > 4 for s in starts), starts
            rows[exchange] = [next(write_range_reread(settings, plan, history, starts, r)) for r in (1, 2)]
    for a, b in zip(rows["files"], rows["reread"], strict=True):
        for key in ("txns", "written", "events", "size", "last_vtso", "info", "sizes", "stamps"):
            assert a[key] == b[key], (a["rng"], key)
        assert (tmp_path / "reread" / b["file"]).read_bytes() == (tmp_path / "files" / a["file"]).read_bytes()


def test_the_first_range_writes_the_local_engines_files_and_each_attempt_its_own(tmp_path):
    """With one range the writer task is the whole build: ``GlobalBinlog`` writes the local
    engine's files, in a directory of the attempt's own (the driver moves them into the output
    directory): a second attempt of the task (a Spark retry, a speculative copy) writes the same
    files without touching the first's, and nothing lands in the output directory meanwhile."""
    from gbinlog.local_engine import Settings

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=Settings(max_file_size=40 << 10))
    plan = plan_build(dn_specs(dn_dirs(fixture)), 1)
    out = tmp_path / "out"
    settings = _settings(tmp_path, plan)
    settings.max_file_size, settings.gtids = 40 << 10, True     # the local engine's: GTIDs on
    starts = start_points(plan, [])
    assert starts == [[None]] * len(plan.dns)    # one range: every DN from its first event
    dirs = []
    for attempt in range(2):
        row = next(write_range_reread(settings, plan, [], starts, 0))
        written = Path(row["direct"]["dir"])
        dirs.append(written)
        assert written.parent == tmp_path and row["direct"]["files"] == local.files and len(local.files) >= 2
        assert sorted(p.name for p in written.glob("binlog.0*")) == local.files, attempt
        assert (row["txns"], row["written"]) == (local.txns, local.written)
    assert dirs[0] != dirs[1] and not out.exists()
    for name in local.files:
        assert (dirs[0] / name).read_bytes() == (dirs[1] / name).read_bytes() == \
            (tmp_path / "local" / name).read_bytes(), name


def test_an_attempt_still_writing_a_range_never_touches_the_file_the_driver_places(tmp_path, monkeypatch):
    """A later range's writer names its file per attempt (``layout.range_file_name``): a duplicate
    attempt (``spark.speculation``, a retry beside a lost executor still running, or an earlier
    job's writer of a range written again) that starts after the collected one finished, and dies
    half-way, leaves that one's file whole. With one file per range, its open truncated it."""
    from gbinlog.spark_engine.render import RangeFile

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 2)
    parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
    settings = _settings(tmp_path, plan)
    settings.left = scale_in(parts, settings.dns)
    starts, history = start_points(plan, parts), _history(parts)
    monkeypatch.setattr(RangeFile, "FLUSH_BYTES", 4096)
    done = next(write_range_reread(settings, plan, history, starts, 1))
    placed = (tmp_path / done["file"]).read_bytes()
    assert done["written"] > 10 and len(placed) == done["size"] > 3 * 4096
    real_write, seen = RangeFile.write, []

    def dies_half_way(self, g, dml, ts):
        seen.append(self.name)
        if len(seen) > done["written"] // 2:
            raise RuntimeError("executor lost")
        return real_write(self, g, dml, ts)

    monkeypatch.setattr(RangeFile, "write", dies_half_way)
    with pytest.raises(RuntimeError):   # (as a task error, encoded for the driver)
        next(write_range_reread(settings, plan, history, starts, 1))
    assert (tmp_path / done["file"]).read_bytes() == placed
    zombie = tmp_path / seen[0]
    assert seen[0] != done["file"] and 4096 <= zombie.stat().st_size < len(placed)
    assert placed.startswith(zombie.read_bytes())     # the same bytes as far as it came


def test_an_extraction_attempt_still_writing_never_touches_the_collected_exchange_files(tmp_path, monkeypatch):
    """``exchange=files``: each extraction attempt writes its own exchange files (the row names the
    attempt, the writers read that one's): a second attempt of the partition that dies half-way
    leaves the first's files byte for byte."""
    from gbinlog.spark_engine import exchange

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    first = next(extract_part(plan, str(tmp_path), 0))
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(files) == len(first["txns"]) >= 2
    real, calls = exchange.encode_record, []

    def dies_half_way(t):
        calls.append(t)
        if len(calls) > sum(first["txns"].values()) // 2:
            raise RuntimeError("executor lost")
        return real(t)

    monkeypatch.setattr(exchange, "encode_record", dies_half_way)
    monkeypatch.setattr(exchange, "BATCH", 8)
    with pytest.raises(RuntimeError):
        next(extract_part(plan, str(tmp_path), 0))
    assert {n: (tmp_path / n).read_bytes() for n in files} == files
    assert all(first["attempt"] in n for n in files) and len(list(tmp_path.iterdir())) > len(files)


def _guessing_rows(tmp: Path, plan, head: list) -> list[dict]:
    """Every range's writer with guessed start points (``starts=None``), as the speculative job runs them."""
    settings = _settings(tmp, plan)
    settings.left = {}
    history = collect_history(decode_txns(head, BodyDecoder()))
    return [next(write_range_reread(settings, plan, history, None, r)) for r in range(len(plan.bounds) + 1)]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_guessed_start_points_and_history_are_the_scans(tmp_path, fixture):
    """Without the scan: each range's writer guesses its start points from the files just below its
    boundary, the driver its history from the DNs' heads. The guesses are the scan's start points,
    the range files the scan's bytes, and the check agrees — except for scale-2dn, whose storage
    change below the last boundary (a DN leaving) the guesses do not model: the check says so."""
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    scan_tmp, guess_tmp = tmp_path / "scan", tmp_path / "guess"
    scan_tmp.mkdir()
    guess_tmp.mkdir()
    parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
    settings = _settings(scan_tmp, plan)
    settings.left = scale_in(parts, settings.dns)
    starts = start_points(plan, parts)
    scanned = [next(write_range_reread(settings, plan, _history(parts), starts, r)) for r in (1, 2)]
    head = head_history(plan)
    rows = _guessing_rows(guess_tmp, plan, head)
    for r in (1, 2):
        assert rows[r]["starts"] == [s[r] for s in starts], r
        assert rows[r - 1]["reach"] == [s[r] for s in starts], r
    for a, b in zip(scanned, rows[1:], strict=True):
        for key in ("txns", "written", "events", "size", "last_vtso", "info", "sizes", "stamps"):
            assert a[key] == b[key], (a["rng"], key)
        assert (guess_tmp / b["file"]).read_bytes() == (scan_tmp / a["file"]).read_bytes()
    # the history the writers below the last boundary met is the scan's
    assert sorted(map(repr, (e for r in rows[:2] for e in r["history"]))) == \
        sorted(map(repr, (e for p in parts for e in p["history"])))
    miss = start_misses(rows)
    if fixture.name == "scale-2dn":
        assert miss == "a storage change below the last boundary"
    else:
        assert miss is None and history_misses(rows, head, plan.bounds) == []


def test_a_lead_in_from_a_later_file_reads_past_commits_of_earlier_prepares(tmp_path):
    """The guess for a boundary inside a DN's second file reads that file alone, although it opens
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


def test_a_lead_in_inside_a_file_begins_at_an_event_start_below_the_boundary(monkeypatch):
    """With marks every 2 KB and a lead-in of 8 KB, the guess for a boundary late in a DN's first
    file reads from a group start inside it (leniently), not from the file's start: the point
    is still the whole DN's; a boundary near a file's start reads it from there."""
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


def test_a_range_shaped_with_a_wrong_history_is_written_again_as_the_scans(tmp_path):
    """ddl-3dn in 2 ranges, the history guessed from a head of one transaction: the start points
    hold, range 1 fails on a table its history lacks; written again from its checked start points
    with the history range 0 met, its file is the scan path's, byte for byte."""
    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 2)
    short = head_history(plan, quiet=1)
    (tmp_path / "guess").mkdir()
    rows = _guessing_rows(tmp_path / "guess", plan, short)
    assert start_misses(rows) is None and "miss" in rows[1]
    assert history_misses(rows, short, plan.bounds) == [1]
    settings = _settings(tmp_path / "guess", plan)
    settings.left = {}
    starts = [[None, rows[1]["starts"][i]] for i in range(len(plan.dns))]
    met = collect_history(decode_txns(rows[0]["history"], BodyDecoder()))
    again = next(write_range_reread(settings, plan, met, starts, 1))
    (tmp_path / "scan").mkdir()
    parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
    settings = _settings(tmp_path / "scan", plan)
    settings.left = scale_in(parts, settings.dns)
    scanned = next(write_range_reread(settings, plan, _history(parts), start_points(plan, parts), 1))
    for key in ("txns", "written", "events", "size", "last_vtso", "info", "sizes", "stamps"):
        assert again[key] == scanned[key], key
    assert (tmp_path / "guess" / again["file"]).read_bytes() == (tmp_path / "scan" / scanned["file"]).read_bytes()
    assert sorted(map(repr, again["history"])) == sorted(map(repr, scanned["history"]))


def test_wrong_guesses_are_caught(tmp_path, monkeypatch):
    """A history that misses DDLs below the last boundary (a head of one transaction): the ranges
    it reaches are named for a second round, and a writer it makes fail returns a row saying why
    (not an error); a start point that is not the scan's (a later file's start taken as quiet; the
    scan's point with another vtso sequence): a miss."""
    from gbinlog.spark_engine import speculate

    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    plan = plan_build(dn_specs(dn_dirs(fixture)), 3)
    head, short = head_history(plan), head_history(plan, quiet=1)
    assert 0 < len(short) < len(head)
    (tmp_path / "a").mkdir()
    rows = _guessing_rows(tmp_path / "a", plan, head)
    assert start_misses(rows) is None and history_misses(rows, head, plan.bounds) == []
    # with the short head as the guess: every range with a missing entry below its lower boundary
    missing = [e for e in head if repr(e) not in set(map(repr, short))]
    want = [r for r in (1, 2) if any(e[0][7] < plan.bounds[r - 1] for e in missing)]
    assert want and history_misses(rows, short, plan.bounds) == want
    (tmp_path / "b").mkdir()
    rows = _guessing_rows(tmp_path / "b", plan, short)
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
    (tmp_path / "c").mkdir()
    miss = start_misses(_guessing_rows(tmp_path / "c", plan, head))
    assert miss is not None and miss.startswith("range 1: CommitWithoutPrepare: DN dn0: mysql-bin.000002: offset 462"), miss
    # the scan's point with another vtso sequence: it reads without error, the check catches it
    monkeypatch.setattr(speculate, "lead_in_start", lambda plan, i, bound:
                        (lambda p: p if p in (None, "done") else [*p[:4], p[4] + 7])(real(plan, i, bound)))
    (tmp_path / "d").mkdir()
    rows = _guessing_rows(tmp_path / "d", plan, head)
    assert not any("miss" in r for r in rows)
    truth = rows[0]["reach"][0]
    assert isinstance(truth, list)
    assert start_misses(rows) == f"range 1, DN #0: start point {[*truth[:4], truth[4] + 7]} is not the scan's {truth}"
