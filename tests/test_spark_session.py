"""Spark session defaults, ``--conf`` and the missing-Java message."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gbinlog.cli import main
from gbinlog.spark_engine import session
from gbinlog.spark_engine.session import SparkUnavailable, find_java_home, merged_conf, parse_conf
from tests.spark_support import FIXTURES, dn_dirs, spark  # noqa: F401  (the session fixture)


def test_parse_conf():
    assert parse_conf(["a=b", " c = d=e "]) == {"a": "b", "c": "d=e"}
    assert parse_conf({"x": 1}) == {"x": "1"}
    assert parse_conf(None) == {}
    with pytest.raises(SparkUnavailable, match="expected KEY=VALUE"):
        parse_conf(["spark.ui.enabled"])


def test_defaults_and_overrides():
    conf = merged_conf({"spark.sql.shuffle.partitions": "8", "spark.driver.extraJavaOptions": "-Xss4m"})
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "false" and conf["spark.ui.showConsoleProgress"] == "false"
    # the user's JVM options keep the quiet log4j2 configuration unless they bring their own
    assert conf["spark.driver.extraJavaOptions"].endswith("-Xss4m")
    assert "log4j2.configurationFile=file:" in conf["spark.driver.extraJavaOptions"]
    own = merged_conf({"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:/x", "spark.gbinlog.cds": "off"})
    assert own["spark.driver.extraJavaOptions"] == "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=file:/x"


def test_the_driver_gets_a_class_data_sharing_archive_by_default(tmp_path, monkeypatch):
    """By default the driver JVM maps a per-JDK, per-Spark archive when one is there, else writes one
    at its exit to a file of its own (``PATH.<pid>.tmp``) that a later run adopts once finished;
    ``off`` or the user's own archive options leave ours out."""
    import os
    import time

    monkeypatch.setattr(session.tempfile, "gettempdir", lambda: str(tmp_path))
    archive = Path(session.default_cds_archive())
    assert archive.parent == tmp_path / f"gbinlog-spark-{os.getuid()}" and archive.name.startswith("cds-")
    first = merged_conf(None)["spark.driver.extraJavaOptions"]
    assert any(o.startswith(f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}-") and o.endswith(".tmp")
               for o in first.split()), first
    assert "SharedArchiveFile" not in first
    # two runs' dumps: one still being written (recent), one finished; the finished one is adopted
    old, fresh = Path(f"{archive}.111.tmp"), Path(f"{archive}.222.tmp")
    old.write_bytes(b"finished archive")
    fresh.write_bytes(b"being written")
    past = time.time() - session.CDS_SETTLE_S - 5
    os.utime(old, (past, past))
    second = merged_conf(None)["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile={archive}" in second.split()
    assert archive.read_bytes() == b"finished archive" and not old.exists() and fresh.exists()
    assert "SharedArchiveFile" not in merged_conf({"spark.gbinlog.cds": "off"})["spark.driver.extraJavaOptions"]
    mine = merged_conf({"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/elsewhere.jsa"})
    assert mine["spark.driver.extraJavaOptions"].count("SharedArchiveFile") == 1
    # no class-data sharing wanted (a dynamic archive would stop the JVM from starting)
    assert "Archive" not in merged_conf({"spark.driver.extraJavaOptions": "-Xshare:off"})["spark.driver.extraJavaOptions"]
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xshare:off")
    assert "Archive" not in merged_conf(None)["spark.driver.extraJavaOptions"]
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    # a directory others may write to is not used
    archive.parent.chmod(0o777)
    assert session.user_dir() is None and session.default_cds_archive() is None
    assert "Archive" not in merged_conf(None)["spark.driver.extraJavaOptions"]
    archive.parent.chmod(0o700)


@pytest.mark.slow
def test_a_damaged_archive_is_dropped_and_the_session_starts_without(tmp_path):
    """A dump cut short (the first run killed while its JVM wrote it) would crash every JVM that
    maps it: the session start drops it and starts again without one."""
    import os
    import subprocess
    import sys
    import time

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    run = ("import sys; from pathlib import Path; from gbinlog.spark_engine import session; "
           "cs = session.spark_context('local[1]', {}); print(cs.sparkContext.parallelize([1, 2, 3]).sum()); "
           "print(Path(session.default_cds_archive()).exists()); cs.stop()")
    first = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True, timeout=120)
    assert first.stdout.split() == ["6", "False"], first.stderr[-2000:]
    base = tmp_path / f"gbinlog-spark-{os.getuid()}"
    # the JVM dumps its archive when it exits, after the Python process
    deadline, size = time.time() + 60, -1
    while time.time() < deadline:
        dumps = list(base.glob("cds-*.jsa.*.tmp"))
        if dumps and dumps[0].stat().st_size == size and size > 1 << 20:
            break
        size = dumps[0].stat().st_size if dumps else -1
        time.sleep(1.0)
    assert dumps and size > 1 << 20, list(base.iterdir())
    archive = Path(str(dumps[0]).split(".jsa.")[0] + ".jsa")
    archive.write_bytes(dumps[0].read_bytes()[: 8 << 20])    # a valid start, cut short
    dumps[0].unlink()
    second = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and second.stdout.split()[-2:] == ["6", "False"], second.stderr[-2000:]
    # the first JVM did die on it (its crash report kept next to the archive), the second started
    assert "fatal error" in second.stdout and list(base.glob("hs_err_pid*.log")), second.stdout[:500]
    assert not archive.exists() and not list(Path.cwd().glob("hs_err_pid*.log"))



def test_no_java_is_a_clear_message(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(session, "JAVA_CANDIDATES", ())
    from pyspark.sql import SparkSession
    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))  # as in a fresh CLI
    with pytest.raises(SparkUnavailable, match="apt-get install openjdk-17-jre-headless"):
        find_java_home()
    args = ["build", "--engine", "spark", "--out", str(tmp_path / "out"),
            *[a for d in dn_dirs(FIXTURES[0]) for a in ("--dn", str(d))]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert "needs Java 17" in result.output and "openjdk-17-jre-headless" in result.output
    assert not (tmp_path / "out" / "binlog.000001").exists()


def test_bad_conf_on_the_command_line(tmp_path):
    args = ["build", "--engine", "spark", "--out", str(tmp_path / "out"), "--conf", "spark.ui.enabled",
            *[a for d in dn_dirs(FIXTURES[0]) for a in ("--dn", str(d))]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1 and "expected KEY=VALUE" in result.output


@pytest.mark.slow
def test_the_shared_session_has_the_small_machine_defaults(spark):  # noqa: F811
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"            # the tests' override
    import os
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    # the data source, registered by its users
    from gbinlog.spark_engine.datasource import register

    register(spark)
    df = spark.read.format("dnbinlog").option("plan", _plan_json()).load()
    assert df.columns[:3] == ["vtso", "kind", "dn"]


def _plan_json() -> str:
    from gbinlog.spark_engine.batch import dn_specs, plan_build
    return plan_build(dn_specs(dn_dirs(FIXTURES[0])), 1).to_json()


def test_user_jvm_choices_replace_ours():
    from gbinlog.spark_engine.session import JVM_OPTIONS

    assert all(o in merged_conf(None)["spark.executor.extraJavaOptions"].split() for o in JVM_OPTIONS)
    mine = merged_conf({"spark.driver.extraJavaOptions": "-XX:+UseG1GC -XX:-TieredCompilation"})
    opts = mine["spark.driver.extraJavaOptions"].split()
    assert not set(JVM_OPTIONS) & set(opts) and opts[-2:] == ["-XX:+UseG1GC", "-XX:-TieredCompilation"]
    assert any("log4j2.configurationFile" in o for o in opts)


@pytest.mark.slow
def test_a_missing_dn_is_the_local_engines_one_line_error(tmp_path):
    """The cluster check runs while the JVM starts (``check_cluster``); its error is the local
    engine's, and nothing is written."""
    bank = next(f for f in FIXTURES if f.name.startswith("bank"))
    out = tmp_path / "out"
    dirs = [d for d in dn_dirs(bank) if d.name != "dn2"]
    result = CliRunner().invoke(main, ["build", "--engine", "spark", "--master", "local[1]", "--out", str(out),
                                       *[a for d in dirs for a in ("--dn", str(d))]])
    assert result.exit_code == 1, result.output
    assert "DN dn2 is missing" in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists()


def test_the_daemon_drops_only_the_installed_pysparks_own_zip(tmp_path):
    from gbinlog.spark_engine.daemon import prefer_installed_pyspark

    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    own = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    py4j = str(site / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")
    other = str(tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip")   # a cluster's SPARK_HOME
    assert prefer_installed_pyspark([own, py4j, "/x", str(site)]) == [py4j, "/x", str(site)]
    (tmp_path / "spark-home" / "python" / "lib").mkdir(parents=True)
    assert prefer_installed_pyspark([other, py4j, str(site)]) == [other, py4j, str(site)]
    # the package not on the path: its zip is what imports pyspark, kept
    assert prefer_installed_pyspark([own, "/x"]) == [own, "/x"]
    # another pyspark earlier on the path would be imported without the zip: kept
    (tmp_path / "opt" / "pyspark").mkdir(parents=True)
    (tmp_path / "opt" / "pyspark" / "__init__.py").write_text("")
    assert prefer_installed_pyspark([own, str(tmp_path / "opt"), str(site)]) == \
        [own, str(tmp_path / "opt"), str(site)]
    (site / "pyspark" / "__init__.py").unlink()
    assert prefer_installed_pyspark([own, str(site)]) == [own, str(site)]


def _worker_modules(_) -> tuple[str, bool]:
    import sys

    import pyspark
    return pyspark.__file__, "pyspark.worker" in sys.modules and "gbinlog.spark_engine.windows" in sys.modules


@pytest.mark.slow
def test_workers_import_pyspark_from_the_package_not_the_zip(spark):  # noqa: F811
    """Spark puts its pyspark.zip first on the workers' path; zipimport compiled all of pyspark at
    every daemon start (0.5 s of the first job). The daemon imports it from the package instead,
    with the worker and task modules loaded before it forks."""
    import pyspark

    found = spark.sparkContext.parallelize(range(2), 2).map(_worker_modules).collect()
    assert found == [(pyspark.__file__, True)] * 2 and ".zip" not in pyspark.__file__


def test_the_jvm_start_overlaps_the_import_pysparks_context_init_would_wait_for():
    """``SparkContext`` init makes py4j offer a bool to pyspark's numpy converter, which imports
    ``pyspark.testing.utils`` (and pandas): 0.34 s after the JVM is up. The driver starts that
    import in a thread before it launches the JVM."""
    import subprocess
    import sys

    code = ("import sys, threading\n"
            "from gbinlog.spark_engine import session\n"
            "assert 'pyspark.testing.utils' not in sys.modules\n"
            "session.prepare_environment()\n"
            "[t.join() for t in threading.enumerate() if t.name == 'gbinlog-preload']\n"
            "print('pyspark.testing.utils' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True"]
