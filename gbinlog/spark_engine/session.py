"""A SparkSession with defaults for a small machine, ``--conf k=v`` overrides, and a clear error
when Java is missing.

Defaults: UI and console progress off, few shuffle partitions, Arrow on, log4j2 at ERROR (a
properties file written next to the temp dir, passed to driver and executors), ``SPARK_LOCAL_IP``
on loopback (no hostname lookup warning), Spark's Python workers run this interpreter (so they
import this project from the same venv). Anything can be overridden with ``conf``.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
import threading
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


def user_dir() -> Path | None:
    """``$TMPDIR/gbinlog-spark-<uid>`` (made 0700): the log4j2 file and the CDS archive. None when
    it is not this user's alone (another owner, not a directory, writable by group or others):
    nothing is read from it or written to it then."""
    path = Path(tempfile.gettempdir(), f"gbinlog-spark-{os.getuid()}")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return path


def log4j2_file() -> Path:
    """The quiet log4j2 properties file (rewritten only when its text differs)."""
    path = (user_dir() or Path(tempfile.mkdtemp(prefix="gbinlog-spark-"))) / "log4j2.properties"
    if not path.is_file() or path.read_text() != LOG4J2:
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
        # workers forked with the batch build's modules already imported (daemon.py)
        "spark.python.daemon.module": "gbinlog.spark_engine.daemon",
        # the JVM ↔ Python worker (and driver) sockets: over TCP on loopback every task waited
        # ≈ 40 ms before its function ran (a delayed ACK: a trivial 2-task job 94–101 ms warm, over a
        # Unix socket 46–59 ms)
        "spark.python.unix.domain.socket.enabled": "true",
    }


def merged_conf(conf: Mapping[str, str] | None) -> dict[str, str]:
    """Defaults overridden by ``conf``; user Java options keep the quiet log4j2 setting unless
    they name their own log4j2 configuration, and our collector / compiler choice unless they
    choose one (``-XX:+Use…GC``, ``-XX:…Tiered…``); the driver's class-data-sharing archive
    (``spark.gbinlog.cds``, ``cds_options``) unless they name their own."""
    conf = dict(conf or {})
    cds = conf.pop("spark.gbinlog.cds", None)
    user_driver = conf.get("spark.driver.extraJavaOptions", "")
    env_options = " ".join(os.environ.get(k, "") for k in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"))
    if cds is None and not any(o in user_driver for o in ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare:off")) \
            and "-Xshare:off" not in env_options:
        cds = default_cds_archive()
    out = default_conf()
    if cds and cds != "off":
        out["spark.driver.extraJavaOptions"] += " " + cds_options(cds)
    for key, value in conf.items():
        if key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            ours = [o for o in out[key].split() if not (
                "log4j2.configurationFile" in o and "log4j2.configurationFile" in value
                or o == JVM_OPTIONS[0] and "GC" in value or o == JVM_OPTIONS[1] and "Tiered" in value)]
            value = " ".join((*ours, value)).strip()
        out[key] = value
    return out


def default_cds_archive() -> str | None:
    """The default ``spark.gbinlog.cds``: one archive per user, Spark version and JDK (the JVM
    ignores an archive of another JDK or other jars, so a new one is named for them), in the temp
    directory; None when the JDK is not found (the session then fails with its own message)."""
    import hashlib

    import pyspark

    try:
        java_home = os.path.realpath(find_java_home())
        modules = Path(java_home, "lib", "modules").stat().st_mtime_ns
    except (SparkUnavailable, OSError):
        return None
    base = user_dir()
    # a dynamic archive sits on the JDK's base one: without it the JVM would refuse to start
    if base is None or not Path(java_home, "lib", "server", "classes.jsa").is_file():
        return None
    key = hashlib.sha1(f"{pyspark.__version__}|{pyspark.__file__}|{java_home}|{modules}".encode()).hexdigest()[:12]
    return str(base / f"cds-{key}.jsa")


def cds_options(archive: str) -> str:
    """``--conf spark.gbinlog.cds=PATH`` (default ``default_cds_archive()``; ``off``: none): the
    driver JVM's class-data-sharing archive — written at the exit of the first run (70–175 MB),
    mapped by the next ones: session start and the first job about 1.8 s faster.
    The JVM writes it when it exits, after this process, so each run writes its own
    ``PATH.<pid>.tmp`` and a later run takes a finished one (untouched for ``CDS_SETTLE_S``) as
    ``PATH``: two first runs at once cannot interleave their writes. An archive that does not
    match this JDK and these jars is ignored by the JVM (it starts as without one). Its log lines
    are kept quiet, errors still go to stderr."""
    path = Path(archive)
    # (a JVM that dies on a damaged archive leaves its crash log there, not in the working directory)
    quiet = f"-Xlog:disable -Xlog:all=error:stderr -XX:ErrorFile={path.parent}/hs_err_pid%p.log"
    if not path.is_file():
        _adopt_finished_archive(path)
    if path.is_file():
        return f"-XX:SharedArchiveFile={archive} {quiet}"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}-{os.urandom(4).hex()}.tmp {quiet}"


def _ours_mapped(settings: Mapping[str, str]) -> Path | None:
    """The default archive the driver JVM was told to map (not one the user named), if any."""
    default = default_cds_archive()
    if default and f"-XX:SharedArchiveFile={default}" in settings.get("spark.driver.extraJavaOptions", "").split():
        return Path(default)
    return None


CDS_SETTLE_S = 10.0


def _adopt_finished_archive(path: Path) -> None:
    """Rename the newest finished ``PATH.<pid>.tmp`` to ``PATH``; drop the other finished ones."""
    import time

    now = time.time()
    done = []
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            st = tmp.stat()
        except OSError:
            continue
        if now - st.st_mtime >= CDS_SETTLE_S and st.st_size > 0:
            done.append((st.st_mtime, tmp))
    done.sort()
    for i, (_, tmp) in enumerate(reversed(done)):
        try:
            if i == 0:
                os.replace(tmp, path)
            else:
                tmp.unlink()
        except OSError:
            pass


def prepare_environment() -> None:
    """Process environment Spark reads before its JVM starts."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["JAVA_HOME"] = find_java_home()
    _import_while_the_jvm_starts("pyspark.testing.utils")


def _import_while_the_jvm_starts(module: str) -> None:
    """Import ``module`` in a thread, while the driver waits for the JVM it launches. pyspark's
    ``SparkContext`` init passes a bool to the JVM; py4j offers it to pyspark's numpy converter,
    whose check imports ``pyspark.testing.utils``, which imports pandas and numpy: 0.34 s of the
    driver's critical path, after the JVM is up and before the context is created."""
    if module in sys.modules:
        return
    import importlib

    # pyspark itself (it imports pyspark.sql) in this thread first: the driver's next imports are
    # of it, so the thread below only ever holds the import locks of modules the driver waits for
    import pyspark  # noqa: F401

    def load() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - pyspark imports it itself later and reports its own errors
            pass

    threading.Thread(target=load, name="gbinlog-preload", daemon=True).start()


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
        archive = _ours_mapped(settings)
        if archive is not None:    # a damaged archive (a dump cut short): dropped, started without
            archive.unlink(missing_ok=True)
            return spark_session(master, {**parse_conf(conf), "spark.gbinlog.cds": "off"}, app_name)
        raise SparkUnavailable(f"Spark did not start (JAVA_HOME={os.environ.get('JAVA_HOME')}): {exc}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class ContextSession:
    """What a batch build needs of a session, on a bare SparkContext: ``sparkContext``,
    ``conf.get``, ``stop``. The build only schedules Python tasks (RDDs), so it skips the SQL
    session's start (its JVM side, pandas and pyarrow in the driver: about 3 s of CPU of a whole
    ``build --engine spark``, bench/spark.py)."""

    def __init__(self, sc) -> None:
        self.sparkContext = sc
        self.conf = _ContextConf(sc)

    def stop(self) -> None:
        """``SparkContext.stop``, except that the Python accumulator server is shut down in a
        background thread: its handler notices a shutdown only at its next one-second poll, so
        pyspark's own stop waited ≈ 0.9 s of every ``build --engine spark`` for it."""
        sc = self.sparkContext
        server = getattr(sc, "_accumulatorServer", None)
        if server is not None and hasattr(server, "shutdown"):
            sc._accumulatorServer = None
            threading.Thread(target=server.shutdown, name="gbinlog-accumulator-stop", daemon=True).start()
        sc.stop()


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
        archive = _ours_mapped(settings)
        if archive is not None:    # a damaged archive (a dump cut short): dropped, started without
            archive.unlink(missing_ok=True)
            return spark_context(master, {**parse_conf(conf), "spark.gbinlog.cds": "off"}, app_name)
        raise SparkUnavailable(f"Spark did not start (JAVA_HOME={os.environ.get('JAVA_HOME')}): {exc}") from exc
    sc.setLogLevel("ERROR")
    return ContextSession(sc)
