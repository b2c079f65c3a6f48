"""A SparkSession with defaults for a small machine, ``--conf k=v`` overrides, and a clear error
when Java is missing (reference/spark.md §1–§2).

Defaults: UI and console progress off, few shuffle partitions, Arrow on, log4j2 at ERROR (a
properties file written next to the temp dir, passed to driver and executors), ``SPARK_LOCAL_IP``
on loopback (no hostname lookup warning), Spark's Python workers run this interpreter (so they
import this project from the same venv). Anything can be overridden with ``conf``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

DEFAULT_MASTER = "local[*]"
JAVA_CANDIDATES = ("/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/default-java")

LOG4J2 = """\
# written by gbinlog.spark_engine.session: Spark logs errors only
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.api.python.PythonGatewayServer
logger.repl.level = error
"""


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java, a bad ``--conf``, the JVM exited); the message says what to do."""


def parse_conf(items: Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (the CLI's ``--conf``) or a mapping → dict. A missing ``=`` is an error."""
    if items is None:
        return {}
    if isinstance(items, Mapping):
        return {str(k): str(v) for k, v in items.items()}
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SparkUnavailable(f"--conf {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def find_java_home() -> str:
    """JAVA_HOME for Spark: the environment's, else the one of ``java`` on PATH, else the Debian
    Java 17 location. Raises ``SparkUnavailable`` with the install command when there is none."""
    env = os.environ.get("JAVA_HOME")
    if env and Path(env, "bin", "java").is_file():
        return env
    java = shutil.which("java")
    if java:
        return str(Path(os.path.realpath(java)).parent.parent)
    for cand in JAVA_CANDIDATES:
        if Path(cand, "bin", "java").is_file():
            return cand
    raise SparkUnavailable(
        "--engine spark needs Java 17 and none was found (no JAVA_HOME, no `java` on PATH). "
        "Install it with `apt-get install openjdk-17-jre-headless` (./dev.sh does this), or set "
        "JAVA_HOME to a Java 17+ installation.")


def log4j2_file() -> Path:
    """The quiet log4j2 properties file (rewritten only when its text differs)."""
    path = Path(tempfile.gettempdir(), f"gbinlog-spark-{os.getuid()}", "log4j2.properties")
    if not path.is_file() or path.read_text() != LOG4J2:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LOG4J2)
        os.replace(tmp, path)
    return path


# The JVMs only schedule Python tasks (the batch build's transactions never enter them; a stream's
# micro-batches are small): the serial collector and the C1 compiler alone cut a warm build's JVM
# CPU from 1.0–1.9 s to 0.3 s (1.1 M DN events) and the first build after start by half (bench/spark.py).
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def default_conf() -> dict[str, str]:
    """Small-machine defaults; every key can be overridden with ``--conf``."""
    log4j = " ".join((*JVM_OPTIONS, f"-Dlog4j2.configurationFile=file:{log4j2_file()}"))
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "2g",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        # Executors' Python workers must import this project: the same interpreter (venv).
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }


def merged_conf(conf: Mapping[str, str] | None) -> dict[str, str]:
    """Defaults overridden by ``conf``; user Java options keep the quiet log4j2 setting unless
    they name their own log4j2 configuration, and our collector / compiler choice unless they
    choose one (``-XX:+Use…GC``, ``-XX:…Tiered…``)."""
    out = default_conf()
    for key, value in (conf or {}).items():
        if key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            ours = [o for o in out[key].split() if not (
                "log4j2.configurationFile" in o and "log4j2.configurationFile" in value
                or o == JVM_OPTIONS[0] and "GC" in value or o == JVM_OPTIONS[1] and "Tiered" in value)]
            value = " ".join((*ours, value)).strip()
        out[key] = value
    cds = out.pop("spark.gbinlog.cds", None)
    if cds:
        out["spark.driver.extraJavaOptions"] += " " + cds_options(cds)
    return out


def cds_options(archive: str) -> str:
    """``--conf spark.gbinlog.cds=PATH``: the driver JVM's class-data-sharing archive — written at
    the exit of the first run (150–175 MB), mapped by the next ones: session start about 2× faster
    (reference/spark.md §1). An archive that does not match this JDK and these jars is ignored by
    the JVM (it starts as without one). Its log lines are kept quiet, errors still go to stderr."""
    quiet = "-Xlog:disable -Xlog:all=error:stderr"
    if Path(archive).is_file():
        return f"-XX:SharedArchiveFile={archive} {quiet}"
    Path(archive).parent.mkdir(parents=True, exist_ok=True)
    return f"-XX:ArchiveClassesAtExit={archive} {quiet}"


def prepare_environment() -> None:
    """Process environment Spark reads before its JVM starts."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["JAVA_HOME"] = find_java_home()


def spark_session(master: str | None = None, conf: Mapping[str, str] | Iterable[str] | None = None,
                  app_name: str = "gbinlog"):
    """A SparkSession (``getOrCreate``: an active session is reused as it is) with the defaults
    above, ``master`` (default ``local[*]``) and ``conf`` overrides. The ``dnbinlog`` data source is
    registered by its users (``datasource.register``: it starts a Python process in the JVM, 1.4 s
    of CPU a batch build does not need). Raises ``SparkUnavailable`` when Java is missing or the JVM does not start."""
    prepare_environment()
    from pyspark.sql import SparkSession

    settings = merged_conf(parse_conf(conf))
    builder = SparkSession.builder.master(master or settings.pop("spark.master", DEFAULT_MASTER))
    builder = builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # py4j / pyspark raise several types for a JVM that will not start
        raise SparkUnavailable(f"Spark did not start (JAVA_HOME={os.environ.get('JAVA_HOME')}): {exc}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class ContextSession:
    """What a batch build needs of a session, on a bare SparkContext: ``sparkContext``,
    ``conf.get``, ``stop``. The build only schedules Python tasks (RDDs), so it skips the SQL
    session's start (its JVM side, pandas and pyarrow in the driver: about 3 s of CPU of a whole
    ``build --engine spark``, bench/spark.py); ``session`` makes one on the context when a caller
    needs DataFrames (``spark.gbinlog.exchange=shuffle``)."""

    def __init__(self, sc) -> None:
        self.sparkContext = sc
        self.conf = _ContextConf(sc)
        self._session = None

    @property
    def session(self):
        if self._session is None:
            from pyspark.sql import SparkSession

            self._session = SparkSession(self.sparkContext)
        return self._session

    def stop(self) -> None:
        self.sparkContext.stop()


class _ContextConf:
    def __init__(self, sc) -> None:
        self._sc = sc

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._sc.getConf().get(key, default)


def spark_context(master: str | None = None, conf: Mapping[str, str] | Iterable[str] | None = None,
                  app_name: str = "gbinlog") -> ContextSession:
    """``spark_session`` without the SQL session: a SparkContext with the same defaults and
    overrides, wrapped as a ``ContextSession``. Raises ``SparkUnavailable`` as ``spark_session``."""
    prepare_environment()
    from pyspark import SparkConf, SparkContext

    settings = merged_conf(parse_conf(conf))
    spark_conf = SparkConf().setMaster(master or settings.pop("spark.master", DEFAULT_MASTER)).setAppName(app_name)
    for key, value in settings.items():
        spark_conf.set(key, value)
    try:
        sc = SparkContext.getOrCreate(spark_conf)
    except Exception as exc:  # py4j / pyspark raise several types for a JVM that will not start
        raise SparkUnavailable(f"Spark did not start (JAVA_HOME={os.environ.get('JAVA_HOME')}): {exc}") from exc
    sc.setLogLevel("ERROR")
    return ContextSession(sc)
