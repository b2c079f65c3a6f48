"""A real cluster manager. A Spark standalone master and two workers on 127.0.0.1
(``spark-class`` from the pyspark install); ``gbinlog build --engine spark --master spark://…`` runs
its window tasks in executors on those workers (3 windows, files cut by a 48 KB rotation, so range
bytes are also moved into place by tasks) and writes the local engine's bytes; then every fixture
in 1, 2 and 4 windows through one application on the same cluster. Every process the test started
is stopped by pid (process group)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gbinlog.local_engine import Settings
from gbinlog.local_engine import build as local_build
from tests.spark_support import FIXTURES, StandaloneCluster, dn_dirs, fast_java_options, meta_rows

pytestmark = pytest.mark.slow


def test_standalone_master_and_two_workers(tmp_path):
    fixture = next(f for f in FIXTURES if f.name == "ddl-3dn")
    dirs = dn_dirs(fixture)
    local = local_build(dirs, tmp_path / "local", settings=Settings(max_file_size=48 << 10))
    cluster = StandaloneCluster(tmp_path / "cluster", workers=2)
    try:
        cluster.wait_workers()
        jopts = fast_java_options()
        cmd = [sys.executable, "-m", "gbinlog.cli", "build", "--engine", "spark", "--master", cluster.url,
               *[a for d in dirs for a in ("--dn", str(d))], "--out", str(tmp_path / "spark"),
               "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
               "--conf", "spark.cores.max=2", "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
               "--conf", "spark.gbinlog.ranges=3", "--max-file-size", "48KB",
               "--conf", f"spark.driver.extraJavaOptions={jopts}", "--conf", f"spark.executor.extraJavaOptions={jopts}"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert run.returncode == 0, run.stderr[-3000:]
        assert f"{len(local.files)} files" in run.stdout
        # both workers ran an executor of this application
        logs = cluster.executor_logs()
        assert {p.parents[2] for p in logs} == set(cluster.work_dirs), logs
        every = subprocess.run([sys.executable, "-c", EVERY_FIXTURE, cluster.url, str(tmp_path / "every"), jopts],
                               capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])
        assert every.returncode == 0, every.stderr[-3000:]
    finally:
        cluster.stop()
    assert cluster.alive() == []
    assert len(local.files) >= 3
    from tests.test_spark_build import same_files, state_of
    assert same_files(tmp_path / "spark", tmp_path / "local") == local.files
    assert state_of(tmp_path / "spark") == state_of(tmp_path / "local")
    for fx in FIXTURES:    # scale-out and scale-in among them
        local_build(dn_dirs(fx), tmp_path / "local" / fx.name, settings=Settings(max_file_size=48 << 10))
        for n in (1, 2, 4):
            out = tmp_path / "every" / f"{fx.name}-{n}"
            assert same_files(out, tmp_path / "local" / fx.name), out
            assert state_of(out) == state_of(tmp_path / "local" / fx.name), out
            assert meta_rows(out) == meta_rows(tmp_path / "local" / fx.name), out


# every fixture in 1, 2 and 4 windows through one application on the standalone master
EVERY_FIXTURE = """
import sys
from pathlib import Path
from gbinlog.local_engine import Settings
from gbinlog.spark_engine.batch import build
from gbinlog.spark_engine.session import spark_context
from tests.spark_support import FIXTURES, dn_dirs
url, root, jopts = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
spark = spark_context(url, {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                            "spark.driver.extraJavaOptions": jopts, "spark.executor.extraJavaOptions": jopts})
try:
    for fx in FIXTURES:
        for n in (1, 2, 4):
            result = build(dn_dirs(fx), root / f"{fx.name}-{n}", spark=spark, ranges=n,
                           settings=Settings(max_file_size=48 << 10))
            assert result.ranges == n, (fx.name, n, result.ranges)
finally:
    spark.stop()
"""
