"""``build --engine spark`` against ``build --engine local``, on one shared
local[2] SparkSession: the same ``binlog.*`` files byte for byte — also when the
output is cut into several vtso ranges written by parallel tasks and the local writer's rotation
puts file boundaries inside ranges — the same index, ``state.json`` and meta store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binlog.errors import BinlogError
from dumper.cluster import broadcast_prefix
from dumper.verify import verify
from extractor import extract, storage_sequences
from gbinlog.local_engine import BuildError, Settings
from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine.batch import build as spark_build
from gbinlog.spark_engine.layout import unpack_u32
from tests.spark_support import FIXTURES, dn_dirs, meta_rows, spark  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.slow


def state_of(directory: Path) -> dict:
    state = json.loads((directory / "state.json").read_text())
    state["counts"].pop("written")  # the local engine saves this count before it is known (always 0)
    return state


@pytest.fixture(scope="module")
def local_outputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    return {fx.name: (root / fx.name, local_build(dn_dirs(fx), root / fx.name)) for fx in FIXTURES}


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_one_range_is_byte_identical_to_local(spark, local_outputs, tmp_path, fixture):  # noqa: F811
    local_dir, local = local_outputs[fixture.name]
    result = spark_build(dn_dirs(fixture), tmp_path / "out", spark=spark, ranges=1)
    assert result.ranges == 1
    assert result.files == local.files == ["binlog.000001"]
    for name in local.files:
        assert (tmp_path / "out" / name).read_bytes() == (local_dir / name).read_bytes()
    assert (tmp_path / "out" / "binlog.index").read_bytes() == (local_dir / "binlog.index").read_bytes()
    assert state_of(tmp_path / "out") == state_of(local_dir)
    assert meta_rows(tmp_path / "out") == meta_rows(local_dir)
    assert (result.txns, result.events, result.bytes, result.last_vtso) == \
        (local.txns, local.events, local.bytes, local.last_vtso)
    assert not (tmp_path / "out" / ".spark-ranges").exists()


def same_files(a: Path, b: Path) -> list[str]:
    names = [line.strip().removeprefix("./") for line in (a / "binlog.index").read_text().splitlines()]
    assert (a / "binlog.index").read_bytes() == (b / "binlog.index").read_bytes()
    assert sorted(p.name for p in a.glob("binlog.0*")) == sorted(names)
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


@pytest.mark.parametrize("name", ["ddl-3dn", "scale-2dn", "mixed-2dn"])
def test_several_ranges_and_small_files_are_byte_identical(spark, tmp_path, name):  # noqa: F811
    """DDLs, scale-out and reshaped rows fall into different ranges (each range's shaper starts from
    the broadcast history) and the 40 KB rotation cuts files inside ranges and across them."""
    fixture = next(f for f in FIXTURES if f.name == name)
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=Settings(max_file_size=40 << 10))
    result = spark_build(dn_dirs(fixture), tmp_path / "out", spark=spark, ranges=4, max_file_size=40 << 10)
    assert result.ranges == 4 and len(local.files) >= 2
    # the writers' guessed start points hold, but for the DN that leaves (reread.speculate)
    assert ("guess missed" in result.timings) == (name == "scale-2dn"), result.timings
    assert result.files == local.files
    same_files(tmp_path / "out", tmp_path / "local")
    assert state_of(tmp_path / "out") == state_of(tmp_path / "local")
    assert meta_rows(tmp_path / "out") == meta_rows(tmp_path / "local")
    report = verify(tmp_path / "out", fixture / "truth.json")
    assert report.ok and report.truth_checked, report.errors[:3]
    # a local resume of the spark output has nothing left to do
    again = local_build(dn_dirs(fixture), tmp_path / "out", settings=Settings(max_file_size=40 << 10))
    assert again.txns == 0 and again.resumed


@pytest.mark.parametrize("windows", [2, 4])
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_in_several_windows_is_byte_identical(spark, tmp_path, fixture, windows):  # noqa: F811
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=Settings(max_file_size=48 << 10))
    result = spark_build(dn_dirs(fixture), tmp_path / "out", spark=spark, ranges=windows, max_file_size=48 << 10)
    assert result.ranges == windows and result.files == local.files
    same_files(tmp_path / "out", tmp_path / "local")
    assert state_of(tmp_path / "out") == state_of(tmp_path / "local")
    assert meta_rows(tmp_path / "out") == meta_rows(tmp_path / "local")


def test_filters_and_ddl_comments_on_a_real_session(spark, tmp_path):  # noqa: F811
    """``--exclude`` and DDL comments off through the window tasks of a real ``local[2]`` session:
    the local engine's files, state.json (the settings recorded) and meta store."""
    for name, settings in (("bank-4dn", Settings(max_file_size=48 << 10, filter={"include": [], "exclude": ["bank.audit*"]})),
                           ("ddl-3dn", Settings(max_file_size=48 << 10, ddl_comments=False))):
        fixture = next(f for f in FIXTURES if f.name == name)
        local = local_build(dn_dirs(fixture), tmp_path / f"local-{name}", settings=settings)
        result = spark_build(dn_dirs(fixture), tmp_path / f"spark-{name}", spark=spark, ranges=3, settings=settings)
        assert result.files == local.files
        same_files(tmp_path / f"spark-{name}", tmp_path / f"local-{name}")
        assert state_of(tmp_path / f"spark-{name}") == state_of(tmp_path / f"local-{name}")
        assert state_of(tmp_path / f"spark-{name}")["settings"] == settings.output_settings()
        assert meta_rows(tmp_path / f"spark-{name}") == meta_rows(tmp_path / f"local-{name}")


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_range_count_that_is_not_a_whole_number_is_refused(spark, tmp_path, value):  # noqa: F811
    """``spark.gbinlog.ranges`` below 1 or not a number: a BuildError naming it, nothing written
    (``0`` used to build one range without a word)."""
    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    with pytest.raises(BuildError, match=f"spark.gbinlog.ranges={value}: expected a whole number of at least 1"):
        spark_build(dn_dirs(fixture), tmp_path / "bad", spark=spark, conf={"spark.gbinlog.ranges": value})
    assert not (tmp_path / "bad").exists()
    with pytest.raises(BuildError, match="ranges=0: expected a whole number"):
        spark_build(dn_dirs(fixture), tmp_path / "bad", spark=spark, ranges=0)
    assert not (tmp_path / "bad").exists()


def test_a_wrong_guess_costs_a_second_round_not_wrong_bytes(spark, tmp_path, monkeypatch):  # noqa: F811
    """A head of one transaction misses ddl-3dn's later DDLs: the guessed history is wrong. In 3
    ranges a writer below the last fails on it, so the build scans and writes the ranges again; in
    2 the second range is written again — the local engine's files all the same."""
    from gbinlog.spark_engine import speculate

    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    local = local_build(dn_dirs(fixture), tmp_path / "local", settings=Settings(max_file_size=40 << 10))
    monkeypatch.setattr(speculate, "HEAD_QUIET_TXNS", 1)
    result = spark_build(dn_dirs(fixture), tmp_path / "out", spark=spark, ranges=3, max_file_size=40 << 10)
    assert "guess missed" in result.timings and result.files == local.files
    same_files(tmp_path / "out", tmp_path / "local")
    assert state_of(tmp_path / "out") == state_of(tmp_path / "local")
    assert meta_rows(tmp_path / "out") == meta_rows(tmp_path / "local")
    # in 2 ranges the start points hold: only the second range is written again, with the history
    # the first met (no scan)
    result = spark_build(dn_dirs(fixture), tmp_path / "redo", spark=spark, ranges=2, max_file_size=40 << 10)
    assert "guess redone" in result.timings and "guess missed" not in result.timings
    same_files(tmp_path / "redo", tmp_path / "local")
    assert state_of(tmp_path / "redo") == state_of(tmp_path / "local")
    assert meta_rows(tmp_path / "redo") == meta_rows(tmp_path / "local")
    # without guesses: the scan first, one round of writers
    result = spark_build(dn_dirs(fixture), tmp_path / "scan", spark=spark, ranges=3, max_file_size=40 << 10,
                         conf={"spark.gbinlog.guess": "false"})
    assert "guess missed" not in result.timings and result.timings["extract tasks cpu"] > 0
    same_files(tmp_path / "scan", tmp_path / "local")
    with pytest.raises(BuildError, match="spark.gbinlog.guess=maybe: expected true or false"):
        spark_build(dn_dirs(fixture), tmp_path / "bad", spark=spark, ranges=3, conf={"spark.gbinlog.guess": "maybe"})


def test_input_split_at_restart_points(spark, local_outputs, tmp_path):  # noqa: F811
    """More input partitions than DNs: each DN cut at two restart points (from a first extraction)."""
    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    dirs = dn_dirs(fixture)
    seqs = storage_sequences(d.name for d in dirs)
    splits = {}
    for d in dirs:
        points = [t.restart for t in extract(d, storage_seq=seqs[d.name]) if t.restart is not None]
        splits[d.name] = [points[len(points) // 3], points[2 * len(points) // 3]]
    result = spark_build(dirs, tmp_path / "out", spark=spark, splits=splits, ranges=1)
    local_dir, local = local_outputs["bank-4dn"]
    assert (tmp_path / "out" / "binlog.000001").read_bytes() == (local_dir / "binlog.000001").read_bytes()
    assert result.txns == local.txns


def test_bad_input_is_the_local_engines_typed_error(spark, tmp_path):  # noqa: F811
    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    for d in dn_dirs(fixture):
        shutil.copytree(d, tmp_path / "in" / d.name)
    victim = sorted((tmp_path / "in" / "dn1").glob("mysql-bin.0*"))[-1]
    data = bytearray(victim.read_bytes())
    data[len(data) - 5000] ^= 0x40                           # late in the input: a task meets it
    victim.write_bytes(bytes(data))
    dirs = dn_dirs(tmp_path / "in")
    # the pre-check reads only each DN's first broadcasts: the bad event is met by a Spark task
    assert len(broadcast_prefix(extract(tmp_path / "in" / "dn1"))) == 16
    with pytest.raises(BinlogError) as local_err:
        local_build(dirs, tmp_path / "local")
    with pytest.raises(BinlogError) as spark_err:
        spark_build(dirs, tmp_path / "spark", spark=spark, ranges=2)
    assert type(spark_err.value) is type(local_err.value)
    assert str(spark_err.value) == str(local_err.value)
    assert victim.name in str(spark_err.value) and spark_err.value.offset > len(data) - 6000
    assert not list((tmp_path / "spark").glob("binlog.*"))   # nothing emitted


def test_bad_input_in_a_dns_head_is_the_local_engines_typed_error(spark, tmp_path, monkeypatch):  # noqa: F811
    """A bad event in the part of a DN the driver reads for the guessed history (its head): the
    build goes the scan's way and the scan's task reports the local engine's error, not a
    ``SparkTaskError`` of the driver's own read. (The fixtures' heads lie inside the broadcast
    prefixes the driver checks first, which would meet it before: that check is skipped here.)"""
    from gbinlog.spark_engine import batch
    from gbinlog.spark_engine.batch import FIRST_RANGE_SHARE, dn_specs, plan_build
    from gbinlog.spark_engine.speculate import head_history

    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    for d in dn_dirs(fixture):
        shutil.copytree(d, tmp_path / "in" / d.name)
    dirs = dn_dirs(tmp_path / "in")
    victim = sorted((tmp_path / "in" / "dn1").glob("mysql-bin.0*"))[0]
    data = bytearray(victim.read_bytes())
    at = len(data) // 4
    data[at] ^= 0x40
    victim.write_bytes(bytes(data))
    with pytest.raises(BinlogError):   # the driver's read of the heads meets it (the build's plan)
        head_history(plan_build(dn_specs(dirs), 2, first_share=FIRST_RANGE_SHARE))
    with pytest.raises(BinlogError) as local_err:
        local_build(dirs, tmp_path / "local")
    monkeypatch.setattr(batch, "_check_inputs", lambda dns: {d.dn: None for d in dns})
    with pytest.raises(BinlogError) as spark_err:
        spark_build(dirs, tmp_path / "spark", spark=spark, ranges=2)
    assert type(spark_err.value) is type(local_err.value)
    assert str(spark_err.value) == str(local_err.value)
    assert victim.name in str(spark_err.value) and at - 2000 < spark_err.value.offset <= at
    assert not list((tmp_path / "spark").glob("binlog.*"))   # nothing emitted


def test_an_output_of_other_dns_is_refused_as_the_local_engine_refuses_it(spark, local_outputs):  # noqa: F811
    """Another cluster's output directory: the local engine's resume error, one line, the
    directory untouched (no Spark job runs)."""
    from dumper.cluster import ClusterMismatch

    local_dir, _ = local_outputs["drift-2dn"]
    other = next(f for f in FIXTURES if f.name != "drift-2dn")
    before = {p.name: p.read_bytes() for p in local_dir.iterdir() if p.is_file()}
    with pytest.raises(ClusterMismatch) as local_err:
        local_build(dn_dirs(other), local_dir)
    with pytest.raises(ClusterMismatch) as spark_err:
        spark_build(dn_dirs(other), local_dir, spark=spark)
    assert str(spark_err.value) == str(local_err.value)
    assert {p.name: p.read_bytes() for p in local_dir.iterdir() if p.is_file()} == before


def test_simulated_input_with_many_files_per_dn(spark, tmp_path):  # noqa: F811
    """A fresh simulated input (4 DNs, several files each): the TSO samples of the file starts
    balance the output ranges; the files are the local engine's, byte for byte."""
    from simulator.run import simulate

    summary = simulate("bank", 4, 2500, 21, tmp_path / "in", max_file_size=96 << 10)
    assert summary["events"] > 50_000
    dirs = dn_dirs(tmp_path / "in")
    assert all(len(list(d.glob("mysql-bin.0*"))) >= 4 for d in dirs)
    local = local_build(dirs, tmp_path / "local", settings=Settings(max_file_size=300 << 10))
    result = spark_build(dirs, tmp_path / "spark", spark=spark, ranges=4, max_file_size=300 << 10)
    sizes = [sum(unpack_u32(r)) for r in result.range_sizes]
    assert len(sizes) == 4 and min(sizes) > 0.5 * max(sizes), sizes
    assert len(local.files) >= 3
    same_files(tmp_path / "spark", tmp_path / "local")
    assert result.events == local.events
    report = verify(tmp_path / "spark", tmp_path / "in" / "truth.json")
    assert report.ok and report.truth_checked, report.errors[:3]


def test_a_physical_ddl_of_a_dn_after_it_left_is_not_in_the_history(spark, tmp_path):  # noqa: F811
    """``dn1`` leaves ``scale-2dn`` at an instruction; here it then writes a physical DDL (a copy of
    its last one). The local merge never reads it, so it is not in ``meta.db``; the Spark build's
    history, gathered before the windows are shaped, must leave it out too — guessed or scanned, and
    with the DDL below the last range boundary (where the first wave's scan meets it)."""
    from binlog import read_events
    from binlog.writer import put_event
    from extractor.model import TxnKind
    from gbinlog.spark_engine.batch import dn_specs, plan_build

    fixture = next(f for f in FIXTURES if f.name == "scale-2dn")
    for d in dn_dirs(fixture):
        shutil.copytree(d, tmp_path / "in" / d.name)
    dn1 = tmp_path / "in" / "dn1"
    txns = list(extract(dn1))
    assert txns[-1].kind is TxnKind.INSTRUCTION           # its branch of the instruction it leaves at
    ddl = [t for t in txns if t.kind is TxnKind.PHYSICAL_DDL][-1]
    last_file = dn1 / txns[-1].end.file
    assert ddl.start.file == last_file.name
    data = bytearray(last_file.read_bytes())
    appended_at = pos = len(data)
    for ev in read_events(last_file):
        if ddl.start.offset <= ev.pos < ddl.end.offset:   # the same events again: new log_pos and CRC32
            ts, type_code, server_id, _size, _log_pos, flags = ev.h
            pos = put_event(data, pos, ts, type_code, server_id, bytes(ev.raw[19:-4]), flags)
    assert pos > appended_at
    last_file.write_bytes(bytes(data))
    late = list(extract(dn1))[-1]
    assert late.kind is TxnKind.PHYSICAL_DDL and late.start.offset == appended_at and late.vtso > txns[-1].vtso
    dirs = dn_dirs(tmp_path / "in")
    plan = plan_build(dn_specs(dirs), 8)
    assert late.vtso < plan.bounds[-1]                    # the scan of the first wave reads it

    local = local_build(dirs, tmp_path / "local")
    phys = meta_rows(tmp_path / "local")["binlog_phy_ddl_history"]
    assert phys and not [r for r in phys if r[2] == "dn1" and r[1] == late.vtso]
    for guess in ("true", "false"):
        out = tmp_path / guess
        result = spark_build(dirs, out, spark=spark, ranges=8, conf={"spark.gbinlog.guess": guess})
        assert result.ranges == 8
        assert meta_rows(out) == meta_rows(tmp_path / "local"), guess
        same_files(out, tmp_path / "local")
        assert state_of(out) == state_of(tmp_path / "local")
    assert local.txns == result.txns


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], env={**os.environ, **(env or {})}, timeout=300)


def test_a_build_killed_is_finished_by_the_other_engine(tmp_path):
    """``gbinlog build`` killed by SIGKILL mid-write (a torn transaction at its end), finished by
    ``build --engine spark`` in 3 windows; ``build --engine spark`` killed by SIGKILL (driver, JVM
    and workers) while its windows run, finished by ``gbinlog build``: both the uninterrupted
    build's files, index and state.json."""
    import signal
    import time

    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    dns = [f"--dn={d}" for d in dn_dirs(fixture)]
    common = ["--max-file-size=32KB", "--no-progress"]
    spark_args = ["--engine=spark", "--master=local[2]", "--conf=spark.gbinlog.ranges=3"]
    assert _cli("build", *dns, f"--out={tmp_path / 'whole'}", *common).returncode == 0
    killed = _cli("build", *dns, f"--out={tmp_path / 'a'}", *common, env={"GBINLOG_CRASH_AT": "torn:40"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(list((tmp_path / "a").glob("binlog.0*"))) >= 2
    r = _cli("build", *dns, f"--out={tmp_path / 'a'}", *common, *spark_args)
    assert r.returncode == 0, r.stderr
    same_files(tmp_path / "a", tmp_path / "whole")
    assert state_of(tmp_path / "a") == state_of(tmp_path / "whole")
    # the other way round: kill the Spark build once its windows are at work
    proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "build", *dns, f"--out={tmp_path / 'b'}", *common,
                             *spark_args], cwd=Path(__file__).resolve().parents[1], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "b").glob(".spark-ranges/window-*/*")) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (tmp_path / "b" / "state.json").exists()
    r = _cli("build", *dns, f"--out={tmp_path / 'b'}", *common)
    assert r.returncode == 0, r.stderr
    same_files(tmp_path / "b", tmp_path / "whole")
    assert state_of(tmp_path / "b") == state_of(tmp_path / "whole")
