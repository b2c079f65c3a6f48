"""The ``reread`` Spark build's task functions, run in-process (no JVM): the scan's start points,
the range writers and the in-place first range, against the exchange through files and against
the local engine's files. The same functions run inside Spark in ``test_spark_build.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from extractor.txn_codec import BodyDecoder
from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine.batch import RangeSettings, dn_specs, plan_build, write_range_files
from gbinlog.spark_engine.exchange import decode_txns, extract_part, scale_in
from gbinlog.spark_engine.reread import scan_part, start_points, write_range_reread
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
            rows[exchange] = [next(write_range_files(settings, plan, history, r)) for r in (1, 2)]
        else:
            starts = start_points(plan, parts)
            # a start point below every boundary the DN reaches (None: from its first event)
            assert all(s[0] is None for s in starts)
            assert any(isinstance(s[1], list) and s[1][1] > 4 for s in starts), starts
            rows[exchange] = [next(write_range_reread(settings, plan, history, starts, r)) for r in (1, 2)]
    for a, b in zip(rows["files"], rows["reread"], strict=True):
        for key in ("txns", "written", "events", "size", "last_vtso", "info", "sizes", "stamps"):
            assert a[key] == b[key], (a["rng"], key)
        name = f"range-{a['rng']:05d}"
        assert (tmp_path / "reread" / name).read_bytes() == (tmp_path / "files" / name).read_bytes()


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
