"""The first range's task placing the second range while it is written (``follow.py``), in-process
(no JVM; ``test_spark_build.py`` runs it inside Spark): the final files are the local engine's
whether the follower catches the writer mid-way, finds it done, finds it not started, sees it fail
or is overruled by the driver; and a layout resumed frame by frame is the layout of the whole."""

from __future__ import annotations

import threading
import time
from array import array
from itertools import accumulate
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dumper.global_binlog import file_name
from gbinlog.local_engine import Settings
from gbinlog.local_engine import build as local_build
from gbinlog.spark_engine import follow as follow_mod
from gbinlog.spark_engine.batch import BuildResult, RangeSettings, dn_specs, plan_build
from gbinlog.spark_engine.errors import decode
from gbinlog.spark_engine.follow import FOLLOWED, Progress, absorb_followed, progress_path
from gbinlog.spark_engine.layout import finish_files, plan_files
from gbinlog.spark_engine.render import RangeFile
from gbinlog.spark_engine.reread import scan_part, start_points, write_range_reread
from tests.spark_support import FIXTURES, dn_dirs
from tests.test_spark_build import same_files
from tests.test_spark_reread import _history

MAX_FILE = 6 << 10     # small files: rotations inside both ranges and across the boundary


class _Local:
    """What ``finish_files`` asks of a Spark session, in-process (its copy job runs here, and the
    copy tasks are counted)."""

    def __init__(self) -> None:
        self.copies = 0
        self.sparkContext = self

    @staticmethod
    def getConf() -> dict:
        return {"spark.master": "local[2]"}

    def parallelize(self, jobs, _n):
        local = self

        class _Rdd:
            def map(self, fn):
                local.copies += len(jobs)
                return type("Done", (), {"collect": lambda _self: [fn(j) for j in jobs]})()
        return _Rdd()


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    """bank-4dn in 2 ranges: the plan, the scan's start points and history, the local engine's files."""
    fixture = next(f for f in FIXTURES if f.name == "bank-4dn")
    local = tmp_path_factory.mktemp("local") / "out"
    result = local_build(dn_dirs(fixture), local, settings=Settings(max_file_size=MAX_FILE))
    assert len(result.files) >= 4
    plan = plan_build(dn_specs(dn_dirs(fixture)), 2)
    parts = [r for i in range(len(plan.parts)) for r in scan_part(plan, i)]
    return plan, start_points(plan, parts), _history(parts), local


def _settings(tmp: Path, plan, token: str | None) -> RangeSettings:
    tmp.mkdir(parents=True, exist_ok=True)
    return RangeSettings(str(tmp), [d.dn for d in plan.dns], plan.bounds, 1, "5.7.44-gbinlog", 200,
                         max_file_size=MAX_FILE, gtids=True, may_follow=token is not None, follow=token)


def _write(settings, bank, rng: int) -> dict:
    plan, starts, history, _ = bank
    return list(write_range_reread(settings, plan, history, starts, rng))[0]


def _finish(tmp: Path, rows: list[dict], bank) -> BuildResult:
    out = tmp / "out"
    out.mkdir()
    absorbed = absorb_followed(rows)
    spark = _Local()
    result = finish_files(spark, out, tmp, rows, BuildResult(out), server_id=1, server_version="5.7.44-gbinlog",
                          max_file_size=MAX_FILE, gtids=True)
    same_files(out, bank[3])
    result.timings.update(absorbed=absorbed, copies=spark.copies)
    return result


def _slow_frames(monkeypatch, seconds: float) -> None:
    """Small flushes, each frame a little late: the follower meets the writer mid-way."""
    monkeypatch.setattr(RangeFile, "FLUSH_BYTES", 400)
    publish = Progress.publish

    def late(self, sizes, stamps):
        time.sleep(seconds)
        publish(self, sizes, stamps)
    monkeypatch.setattr(Progress, "publish", late)


def test_the_follower_places_the_second_range_while_it_is_written(tmp_path, bank, monkeypatch):
    _slow_frames(monkeypatch, 0.002)
    settings = _settings(tmp_path, bank[0], "job-a")
    second: list[dict] = []
    writer = threading.Thread(target=lambda: second.append(_write(settings, bank, 1)))
    writer.start()
    while not progress_path(settings.tmp_dir, FOLLOWED, "job-a").exists():
        time.sleep(0.001)
    first = _write(settings, bank, 0)
    writer.join()
    followed = first["followed"]
    assert followed is not None and followed["waited"] > 0   # it waited for frames: the writer was mid-way
    assert followed["txns"] == second[0]["written"] > 50 and second[0]["progress"] == "job-a"
    result = _finish(tmp_path, [first, second[0]], bank)
    assert result.timings["absorbed"] and second[0]["absorbed"]
    assert result.timings["copies"] == 0        # nothing left to copy after the writers


def test_a_writer_done_before_the_follower_starts_is_placed_at_once(tmp_path, bank):
    settings = _settings(tmp_path, bank[0], "job-b")
    second = _write(settings, bank, 1)
    first = _write(settings, bank, 0)
    assert first["followed"]["txns"] == second["written"] and first["followed"]["waited"] == 0
    result = _finish(tmp_path, [first, second], bank)
    assert result.timings["absorbed"] and result.timings["copies"] == 0


def test_a_writer_not_started_is_not_followed(tmp_path, bank, monkeypatch):
    """The second range runs after the first (its task did not start): the follower does not wait
    for it longer than ``START_SECONDS``."""
    monkeypatch.setattr(follow_mod, "START_SECONDS", 0.05)
    settings = _settings(tmp_path, bank[0], "job-c")
    first = _write(settings, bank, 0)
    assert first["followed"] is None
    second = _write(settings, bank, 1)
    result = _finish(tmp_path, [first, second], bank)
    assert not result.timings["absorbed"] and "absorbed" not in second and result.timings["copies"] > 0


def test_a_follow_of_another_job_is_cut_back_and_the_range_copied(tmp_path, bank):
    """The second range written again after the follow (a wrong guessed history: ``guess redone``,
    its own job, not followed): the driver drops the follow, cuts the first range's last file back
    to its own end, and the copy path places the new range file."""
    settings = _settings(tmp_path, bank[0], "job-d")
    _write(settings, bank, 1)
    first = _write(settings, bank, 0)
    placed = first["followed"]["placed"]
    assert (placed["files"], placed["position"]) != (first["direct"]["files"], first["direct"]["position"])
    again = _write(_settings(tmp_path, bank[0], None), bank, 1)
    assert "progress" not in again
    result = _finish(tmp_path, [first, again], bank)
    assert not result.timings["absorbed"] and result.timings["copies"] > 0


def test_a_row_of_the_same_job_that_differs_from_the_follow_is_an_error(tmp_path, bank):
    """Never expected: the followed row and the follow disagree within one job. The range file's
    pages are released behind the follower, so the copy path cannot place it: an error, no files."""
    settings = _settings(tmp_path, bank[0], "job-g")
    second = _write(settings, bank, 1)
    first = _write(settings, bank, 0)
    second["stamps"] = second["stamps"][:-4] + b"\0\0\0\0"
    with pytest.raises(RuntimeError, match=r"range 1: its row \(\d+ transactions\) is not what the first range's task placed"):
        absorb_followed([first, second])


def test_a_failed_writer_leaves_the_first_range_as_it_was(tmp_path, bank, monkeypatch):
    """The followed writer fails after some frames (``FAILED``): the follower gives up, the first
    range's last file is cut back to its own end, and nothing is absorbed."""
    settings = _settings(tmp_path, bank[0], "job-e")
    plan, starts, history, _ = bank
    monkeypatch.setattr(RangeFile, "FLUSH_BYTES", 400)
    real_write = RangeFile.write
    calls = []

    def failing(self, g, dml, ts):
        calls.append(1)
        if len(calls) == 60:
            raise RuntimeError("the writer's disk is gone")
        return real_write(self, g, dml, ts)
    monkeypatch.setattr(RangeFile, "write", failing)
    with pytest.raises(RuntimeError) as failed:
        list(write_range_reread(settings, plan, history, starts, 1))
    assert str(decode(str(failed.value))) == "the writer's disk is gone"
    raw = progress_path(settings.tmp_dir, FOLLOWED, "job-e").read_bytes()
    assert len(raw) > 8 and raw[-4:] == b"\xfe\xff\xff\xff"     # frames, then FAILED
    first = _write(settings, bank, 0)
    assert first["followed"] is None
    last = Path(first["direct"]["dir"], first["direct"]["files"][-1])
    assert last.stat().st_size == first["direct"]["position"]
    assert not absorb_followed([first])


def test_a_second_attempt_of_the_follower_fails_on_the_released_pieces(tmp_path, bank):
    """The first attempt released the range file's pages behind it; a second attempt of the first
    range (which following never runs where tasks are retried: ``batch._following``) must not take
    the released pieces as written — its own directory does not hold them: an error, not zeros."""
    settings = _settings(tmp_path, bank[0], "job-f")
    _write(settings, bank, 1)
    assert _write(settings, bank, 0)["followed"] is not None
    plan, starts, history, _ = bank
    with pytest.raises(RuntimeError) as failed:
        list(write_range_reread(settings, plan, history, starts, 0))
    assert "was released before it was placed here" in str(decode(str(failed.value)))


@pytest.mark.parametrize(("master", "conf", "follows"), [
    ("local[2]", {}, True), ("local[*]", {}, True), ("local[1]", {}, False),
    ("local[2,3]", {}, False),                    # retries failed tasks
    ("local-cluster[2,1,1024]", {}, False), ("spark://h:7077", {}, False),
    ("local[2]", {"spark.speculation": "true"}, False), ("local[2]", {"spark.gbinlog.follow": "false"}, False)])
def test_following_runs_only_where_a_task_runs_once_on_two_cores(master, conf, follows, monkeypatch):
    from gbinlog.spark_engine import batch

    monkeypatch.setattr(batch.os, "cpu_count", lambda: 2)
    all_conf = {"spark.master": master, **conf}

    class _Session:
        class sparkContext:  # noqa: N801 - pyspark's name
            defaultParallelism = 2

            @staticmethod
            def getConf() -> dict:
                return all_conf

        sparkContext.master = master
        conf = type("Conf", (), {"get": staticmethod(lambda key, default=None: all_conf.get(key, default))})

    assert batch._following(_Session(), {}) is follows


def _per_txn(layout, sizes_of: dict[int, array], bases: dict[int, int], fde_len: int, extra: int) -> list[tuple]:
    """Where each transaction lands: (range file offset, file, file offset, gno, seq)."""
    out = []
    for f in layout.files:
        for g in f.segments:
            before = list(accumulate(sizes_of[g.rng], initial=0))
            s = before.index(g.rel_start - fde_len)
            at, k = g.start, 0
            while before[s + k] < g.rel_end - fde_len:
                out.append((bases[g.rng] + before[s + k], g.file, at, g.first_gno + k, g.first_seq + k))
                at += sizes_of[g.rng][s + k] + extra
                k += 1
    return sorted(out)


_sizes = st.lists(st.integers(min_value=19, max_value=3000), min_size=1, max_size=80)


@settings(max_examples=300, deadline=None)
@example(sizes=[100] * 30, cuts=[3, 10, 11], max_file_size=520, gtids=True, placed_at=500)
@example(sizes=[100] * 30, cuts=[1, 2, 9], max_file_size=520, gtids=True, placed_at=None)
@given(sizes=_sizes, cuts=st.lists(st.integers(min_value=1, max_value=79), max_size=6),
       max_file_size=st.integers(min_value=200, max_value=20000), gtids=st.booleans(),
       placed_at=st.one_of(st.none(), st.integers(min_value=150, max_value=25000)))
def test_a_layout_resumed_frame_by_frame_is_the_layout_of_the_whole(sizes, cuts, max_file_size, gtids, placed_at):
    """``follow`` plans each batch of frames from where the last batch ended (``Layout.end``): the
    same files, rotations, heads and places for every transaction as one plan of the whole range.
    ``placed_at=None``: the first range ended its file, the next holds only its head."""
    from dumper.gtid import GTID_EVENT_LEN, previous_gtids_len

    fde_len, extra = 120, GTID_EVENT_LEN if gtids else 0
    stamps = list(range(5000, 5000 + len(sizes)))
    if placed_at is None:   # just rotated: the new file's FDE (and PREVIOUS_GTIDS), no transaction
        head = fde_len + (previous_gtids_len(7) if gtids else 0)
        placed = {"files": ["binlog.000001", "binlog.000002"], "position": head, "gno": 7, "file_txns": 0,
                  "last_marker": ["binlog.000001", 900]}
    else:
        placed = {"files": ["binlog.000001", "binlog.000002"], "position": placed_at, "gno": 7, "file_txns": 3,
                  "last_marker": ["binlog.000002", placed_at]}
    kwargs = {"max_file_size": max_file_size, "fde_len": fde_len, "gtids": gtids, "file_name": file_name}
    whole = plan_files([(1, array("I", sizes), array("I", stamps))], placed=placed, **kwargs)
    points = sorted({c for c in cuts if c < len(sizes)} | {0, len(sizes)})
    state, files, got, base = placed, {}, [], 0
    for a, b in zip(points, points[1:], strict=False):
        part = plan_files([(0, array("I", sizes[a:b]), array("I", stamps[a:b]))], placed=state, **kwargs)
        got += _per_txn(part, {0: array("I", sizes[a:b])}, {0: base}, fde_len, extra)
        base += sum(sizes[a:b])
        for f in part.files:
            known = files.setdefault(f.name, f)
            if not f.in_place:
                assert known is f, f.name        # each file is new in one batch only
            if not f.in_place or f.name == state["files"][-1]:   # (earlier files: resumed by name only)
                known.end = f.end
            if f.rotate_ts is not None:
                known.rotate_ts = f.rotate_ts
        state = part.end
    assert got == _per_txn(whole, {1: array("I", sizes)}, {1: 0}, fde_len, extra)
    assert state == whole.end
    assert [f.name for f in whole.files] == list(files)
    for f in whole.files:
        mine = files[f.name]
        assert (mine.end, mine.rotate_ts) == (f.end, f.rotate_ts), f.name
        if not f.in_place:
            assert (mine.fde_ts, mine.gno_before) == (f.fde_ts, f.gno_before), f.name
