"""``build`` on Spark: archived DN binlogs → the global binlog, byte-identical to the local engine.

The job (docs/architecture.md):

1. Driver: DN ids and storage sequences, one input partition per DN (or per byte range cut at
   restart points), and output range boundaries from cheap per-DN TSO samples (``ranges``): no
   sampling pass over the input.
2. One Python task per input partition (``exchange.extract_part``) extracts (assembly, vtso,
   first-level sort) and appends each transaction to its range's exchange file in the build's temp
   directory (the local engine's worker-pipe codec); it returns only counts and the (few) DDL marks
   and physical DDLs → the schema history (``schema_shaper.collect_history``) on the driver. No
   transaction enters the JVM (``spark.gbinlog.exchange=shuffle``: the earlier Spark shuffle of
   Arrow rows, persisted, kept for comparison — bench/spark.py measures both).
3. One Python task per range (``write_range_files`` → ``render.render_range``): the DNs' exchange files of
   that range → ``merger.merge`` (branch join, trace merge) → ``Shaper.from_history(history,
   range start)`` → ``dumper.encode_txn`` → one range file. It returns a one-row summary (counts,
   restart points, broadcasts, each transaction's size and timestamp).
4. Driver (``layout``): replays the local writer's rotation over the sizes, writes each file's FDE
   and ROTATE; tasks move range bytes to their final offsets (GTID events put in, ``log_pos`` and
   CRC rewritten); then ``binlog.index``, the meta store and ``state.json``.

The files are the local engine's, byte for byte, whatever the number of ranges and the rotation
size (``tests/test_spark_build.py``). Ranges default to one per ``max_file_size`` of input, in whole
waves of executor cores (``--conf spark.gbinlog.ranges=N`` sets them).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from gbinlog.spark_engine.errors import in_task, reraise
from gbinlog.spark_engine.layout import finish_files
from gbinlog.spark_engine.plan import DnSpec, PartSpec, ReadPlan, partition_keys

TMP_DIR = ".spark-ranges"
# With exchange=reread the first range is written by GlobalBinlog into the final files (GTID
# payloads and bookkeeping per transaction in Python, its fsyncs): 6 % more CPU per byte than a
# range file on 2.35 GB (6.9 against 6.5 s), so it gets that much less input and the two finish together.
FIRST_RANGE_SHARE = 0.94
# ... and when it then follows the second range (``follow.py``: places its bytes while it is being
# written), it gets less again, so that it is done early enough to catch up with the second one.
FOLLOW_FIRST_SHARE = 0.88
# ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (F: a failed task's attempts)
_LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:,(\d+))?\])?")


@dataclass
class RangeSettings:
    """What every writer task needs (pickled with the task)."""

    tmp_dir: str
    dns: list[str]
    bounds: list[str]
    server_id: int
    server_version: str
    heartbeat_interval: int
    on_error: str = "raise"
    left: dict[str, str] = field(default_factory=dict)   # scale-in: DN → instruction vtso (exchange.scale_in)
    # files/shuffle exchanges: each DN's last vtso, so a range's stream of a DN that goes on past the
    # range's end passes it (the emission rule, merger.emission); reread: the streams say it themselves
    ends: dict[str, str] | None = None
    # the first range written as final files, as the local writer writes them (``render.FinalFiles``)
    max_file_size: int = 0
    gtids: bool = False
    # the first range's task may follow the second (``follow.py``); ``follow``: the writer job's token
    may_follow: bool = False
    follow: str | None = None


@dataclass
class BuildResult:
    out_dir: Path
    files: list[str] = field(default_factory=list)
    txns: int = 0
    written: int = 0
    skipped: int = 0
    events: int = 0
    bytes: int = 0
    last_vtso: str | None = None
    seconds: float = 0.0
    resumed: bool = False
    ranges: int = 1
    range_seconds: list[float] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    last_mark: tuple[str, int] | None = None
    range_sizes: list[bytes] = field(default_factory=list)   # per range, its transactions' sizes (u32)
    held: object = None     # a ``merger.Held``: the emission rule stopped the output below a DN's end


# -- planning (driver) ----------------------------------------------------------------------------

def dn_specs(dn_dirs: Sequence[str | os.PathLike]) -> list[DnSpec]:
    """DN id = directory name; storage sequences collision-free over the set."""
    from extractor import storage_sequences

    dirs = [Path(d).resolve() for d in dn_dirs]
    ids = [d.name for d in dirs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two DN directories with one name (DN id): {sorted(ids)}")
    seqs = storage_sequences(ids)
    return [DnSpec(d.name, str(d), seqs[d.name]) for d in dirs]


def input_bytes(dns: Sequence[DnSpec]) -> int:
    from extractor.source import list_binlog_files

    return sum((Path(d.dir) / n).stat().st_size for d in dns for n in list_binlog_files(Path(d.dir)))


def plan_build(dns: list[DnSpec], ranges: int, splits: dict[str, list] | None = None,
               samples: list | None = None, first_share: float = 1.0) -> ReadPlan:
    """The read plan: input partitions (per DN, cut at the given restart points) and ``ranges``
    output ranges balanced by bytes over the TSO line (``samples``: the DNs' ``tso_samples``,
    read here when not given)."""
    from gbinlog.spark_engine.ranges import range_bounds, tso_samples

    parts: list[PartSpec] = []
    for i, d in enumerate(dns):
        points = sorted((splits or {}).get(d.dn, []), key=lambda p: (p.file, p.offset))
        start = None
        for p in points:
            parts.append(PartSpec(i, start[0:2] if start else None, (p.file, p.offset),
                                  tuple(start[2:]) if start else None))
            start = (p.file, p.offset, p.tso, p.txn_id, p.seq)
        parts.append(PartSpec(i, start[0:2] if start else None, None, tuple(start[2:]) if start else None))
    if ranges > 1 and samples is None:
        samples = [tso_samples(d.dir) for d in dns]
    bounds = range_bounds(samples, ranges, first_share) if ranges > 1 else []
    return ReadPlan(dns, parts, bounds, partition_keys(len(bounds) + 1))


# -- one range (executor) ---------------------------------------------------------------------------

@in_task
def write_range_files(settings: RangeSettings, plan: ReadPlan, history, attempts: list[str],
                      rng: int) -> Iterator[dict]:
    """Task (``exchange=files``): output range ``rng`` from the exchange files of the extraction
    ``attempts`` (per input partition) → ``render_range``."""
    from gbinlog.spark_engine.exchange import range_streams
    from gbinlog.spark_engine.render import render_range

    entries = history.value if hasattr(history, "value") else history
    cpu = time.process_time()
    row = render_range(settings, entries, rng, range_streams(plan, settings.tmp_dir, rng, attempts))
    row["cpu"] = time.process_time() - cpu
    yield row


# -- the job (driver) -------------------------------------------------------------------------------

def default_ranges(dns: Sequence[DnSpec], max_file_size: int, cores: int = 1) -> int:
    """One range per ``max_file_size`` of input (the output is at most about the input's size),
    rounded up to a multiple of the executor cores (``cores``: Spark's default parallelism) so
    every core writes in every wave. More ranges cost no extra pass: range bytes are copied into
    place anyway (GTIDs are put in then), except for a single range without GTIDs (renamed)."""
    cores = max(1, cores)
    return cores * math.ceil(max(1, math.ceil(input_bytes(dns) / max_file_size)) / cores)


def executor_cores(sc) -> int:
    """The cores tasks run on: N of a ``local[N]`` master (``*``: this machine's), else Spark's
    default parallelism (``spark.default.parallelism``, 4 by default here; set it to the cluster's
    cores)."""
    m = _LOCAL_MASTER.fullmatch(sc.master)
    if m is None:
        return max(1, sc.defaultParallelism)
    n = m.group(1)
    return (os.cpu_count() or 1) if n == "*" else int(n or 1)


def _check_output(out: Path) -> None:
    from dumper.recovery import list_files
    from dumper.state import load_state
    from gbinlog.local_engine import BuildError

    if out.is_dir() and (list_files(out) or load_state(out) is not None):
        raise BuildError(f"output directory {out} already holds a global binlog: --engine spark builds into a "
                         "new directory (resume this one with --engine local)")


def _check_inputs(dns: Sequence[DnSpec]) -> dict[str, int | None]:
    """The local engine's checks before anything is written: DN server ids distinct, and the DNs'
    first broadcast transactions those of one cluster."""
    from dumper.cluster import broadcast_prefix, check_broadcast_prefixes, check_distinct_dns, dn_server_id
    from extractor import extract, list_binlog_files
    from gbinlog.local_engine import BuildError

    server_ids = {}
    for d in dns:
        files = list_binlog_files(Path(d.dir))
        if not files:
            raise BuildError(f"DN binlog directory {d.dir} holds no binlog file")
        server_ids[d.dn] = dn_server_id(d.dir, files[0])
    check_distinct_dns(server_ids)
    check_broadcast_prefixes({d.dn: broadcast_prefix(extract(d.dir, dn_id=d.dn, storage_seq=d.storage_seq))
                              for d in dns})
    return server_ids


def _check_args(dn_dirs: Sequence[str | os.PathLike], conf) -> dict[str, str]:
    """The arguments a build cannot start without (DN directories, ``--conf``): ``BuildError``s."""
    from gbinlog.local_engine import BuildError
    from gbinlog.spark_engine.session import SparkUnavailable, parse_conf

    if not dn_dirs:
        raise BuildError("no DN directory given")
    missing = [str(d) for d in dn_dirs if not Path(d).is_dir()]
    if missing:
        raise BuildError(f"DN binlog directory {', '.join(missing)} does not exist")
    try:
        return parse_conf(conf)
    except SparkUnavailable as exc:
        raise BuildError(str(exc)) from None


def _session(spark, master: str | None, conf: dict[str, str]):
    """``(session, own)``: the given session, else the embedding application's active one (kept),
    else a new one (``own``: stopped by the build)."""
    from gbinlog.local_engine import BuildError
    from gbinlog.spark_engine.session import SparkUnavailable, spark_context

    if spark is not None:
        return spark, False
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # embedded in an application that has its session: use it, keep it
        return active, False
    try:
        return spark_context(master, conf), True   # tasks only: no SQL session needed
    except SparkUnavailable as exc:
        raise BuildError(str(exc)) from None


def _read_inputs(dns: list[DnSpec], check_cluster: bool) -> tuple[dict[str, int | None], list]:
    """What the driver reads of the inputs before the jobs: the cluster checks (``check_cluster``:
    ``check_dn_dirs``, a byte search over every file), the DN server ids, the TSO samples."""
    from gbinlog.spark_engine.ranges import tso_samples

    if check_cluster:
        from extractor.members import check_dn_dirs

        check_dn_dirs({d.dn: d.dir for d in dns})
    return _check_inputs(dns), [tso_samples(d.dir) for d in dns]


def _session_and_inputs(spark, master: str | None, conf: dict[str, str], dns: list[DnSpec], check_cluster: bool):
    """``(session, own, _read_inputs(...))``: the inputs are read in a thread while the JVM starts
    (2.35 GB: ≈ 7 s of checks and samples against ≈ 4 s of session start, bench/spark.py). An input
    error wins over a session error, as when the inputs were checked first; a session this
    started is stopped when the inputs fail."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="gbinlog-inputs") as pool:
        inputs = pool.submit(_read_inputs, dns, check_cluster)
        try:
            spark, own = _session(spark, master, conf)
        except BaseException:
            inputs.result()
            raise
        try:
            if own and not inputs.done():
                _warm_workers(spark)
            return spark, own, inputs.result()
        except BaseException:
            if own:
                spark.stop()
            raise


def _warm_workers(spark) -> None:
    """While the inputs are still being read: one small job that starts the Python workers and
    imports the task modules in them (a first job's ≈ 1.5–2 s, moved off the build's path)."""
    n = spark.sparkContext.defaultParallelism
    try:
        spark.sparkContext.parallelize(range(n), n).map(_import_task_modules).collect()
    except Exception:  # noqa: BLE001 - best effort: the build's own jobs report any real failure
        pass


def _import_task_modules(_) -> int:
    import importlib

    from gbinlog.spark_engine.daemon import TASK_MODULES

    for module in TASK_MODULES:
        importlib.import_module(module)
    return os.getpid()


def run_ranges(spark, plan: ReadPlan, settings: RangeSettings, timings: dict[str, float],
               exchange: str = "reread", guess: bool = True) -> tuple[list[dict], list]:
    """The two jobs: extract (and exchange the transactions by range) and collect the schema
    history, then one writer per range. Returns the writers' summaries in range order and the
    history. ``exchange``: ``reread`` (``reread.py``, the default; ``guess``: its writers guess
    the scan's answers, ``speculate.py``), ``files`` (``exchange.py``) or ``shuffle`` (a Spark
    shuffle of Arrow rows, persisted): the last two for comparison (bench/spark.py)."""
    from gbinlog.local_engine import BuildError

    if exchange not in ("reread", "files", "shuffle"):
        raise BuildError(f"spark.gbinlog.exchange={exchange}: expected reread, files or shuffle")
    t0 = time.perf_counter()
    try:
        if exchange == "shuffle":
            from gbinlog.spark_engine.shuffle import shuffle_jobs

            rows, history = shuffle_jobs(getattr(spark, "session", spark), plan, settings, timings)
        elif exchange == "files":
            rows, history = _file_jobs(spark, plan, settings, timings)
        else:
            from gbinlog.spark_engine.reread import reread_jobs

            rows, history = reread_jobs(spark, plan, settings, timings, speculate=guess)
    except Exception as exc:  # a Py4J/PySpark error carrying a task's typed error
        shutil.rmtree(settings.tmp_dir, ignore_errors=True)
        reraise(exc)
    timings["write"] = time.perf_counter() - t0 - timings["extract+history"]
    rows.sort(key=lambda r: r["rng"])
    return rows, history


def _file_jobs(spark, plan: ReadPlan, settings: RangeSettings, timings: dict[str, float]) -> tuple[list[dict], list]:
    from extractor.txn_codec import BodyDecoder
    from gbinlog.spark_engine.exchange import before_leaving, decode_txns, dn_ends, extract_part, scale_in
    from schema_shaper import collect_history

    t0 = time.perf_counter()
    sc = spark.sparkContext
    n_parts, n_ranges = len(plan.parts), len(plan.bounds) + 1
    parts = sc.parallelize(range(n_parts), n_parts).mapPartitions(
        _one_task(partial(extract_part, plan, settings.tmp_dir))).collect()
    settings.left = scale_in(parts, settings.dns)
    settings.ends = dn_ends(parts)
    attempts = [p["attempt"] for p in sorted(parts, key=lambda p: p["part"])]
    history = collect_history(before_leaving(decode_txns((e for p in parts for e in p["history"]), BodyDecoder()),
                                             settings.left))
    timings["extract+history"] = time.perf_counter() - t0
    rows = sc.parallelize(range(n_ranges), n_ranges).mapPartitions(
        _one_task(partial(write_range_files, settings, plan, history, attempts))).collect()
    # CPU inside the task functions (bench/spark.py: the rest of the workers' CPU is Spark's)
    timings["extract tasks cpu"] = sum(p["cpu"] for p in parts)
    timings["write tasks cpu"] = sum(r["cpu"] for r in rows)
    return rows, history


def _one_task(fn):
    """For ``parallelize(range(n), n).mapPartitions``: ``fn(i)`` on the partition's one index ``i``."""
    def run(indexes: Iterator[int]) -> Iterator:
        for i in indexes:
            yield from fn(i)
    return run


def _setting(spark, conf: dict[str, str], name: str, default: str | None) -> str | None:
    """``spark.gbinlog.<name>`` from ``--conf``, else from the session's configuration."""
    key = f"spark.gbinlog.{name}"
    return conf.get(key) or spark.conf.get(key, None) or default


def _ranges(spark, conf: dict[str, str], ranges: int | None) -> int | None:
    """The output ranges asked for (the argument, else ``spark.gbinlog.ranges``), None for the
    default; anything but a whole number ≥ 1 is a ``BuildError`` (``0`` used to build one range)."""
    from gbinlog.local_engine import BuildError

    if ranges is not None:
        if isinstance(ranges, bool) or not isinstance(ranges, int) or ranges < 1:
            raise BuildError(f"ranges={ranges!r}: expected a whole number of at least 1")
        return ranges
    setting = _setting(spark, conf, "ranges", None)
    if setting is None:
        return None
    try:
        value = int(setting)
    except ValueError:
        value = 0
    if value < 1:
        raise BuildError(f"spark.gbinlog.ranges={setting}: expected a whole number of at least 1")
    return value


def build(dn_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, **options: object) -> BuildResult:
    """``_build``, holding the output directory's lock (``gbinlog.output_lock``, as every writer of an
    output directory) from before the Spark session starts until the last file is written."""
    from gbinlog.local_engine import BuildError
    from gbinlog.output_lock import OutputLockError, locked_output
    from schema_shaper.meta_store import MetaStoreUnavailable

    try:
        with locked_output(out_dir, "build"):
            return _build(dn_dirs, out_dir, **options)
    except OutputLockError as exc:
        raise BuildError(f"--out {exc}") from None
    except MetaStoreUnavailable as exc:
        raise BuildError(f"--meta-store {exc}: {exc.advice}") from None


def _build(dn_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, server_id: int = 1,
          server_version: str | None = None, max_file_size: int | None = None,
          heartbeat_interval: int | None = None, meta_store: str = "meta.db", on_error: str = "raise",
          master: str | None = None, conf=None, spark=None, ranges: int | None = None,
          splits: dict[str, list] | None = None, gtids: bool = True, check_cluster: bool = False) -> BuildResult:
    """``gbinlog build --engine spark``: the global binlog of ``dn_dirs`` in ``out_dir`` (a new
    directory), the same files, index, state.json and meta store the local engine writes.

    ``spark``: an existing session (else one from ``master``/``conf``, stopped at the end).
    ``ranges``: output ranges (default: input size / ``max_file_size``, at least one per core; or
    ``--conf spark.gbinlog.ranges=N``). ``splits``: per DN id, restart points to cut its input at
    (more input partitions than DNs). ``check_cluster``: the DN set is one whole cluster
    (``extractor.members.check_dn_dirs``, as the local engine checks). Errors are the local engine's types (``BuildError``,
    ``ClusterMismatch``, ``OrderingError``, ``BinlogError``, ``ShapeError``).
    """
    from dumper.global_binlog import DEFAULT_MAX_FILE_SIZE, DEFAULT_SERVER_VERSION, HEARTBEAT_INTERVAL

    t0 = time.perf_counter()
    conf = _check_args(dn_dirs, conf)
    server_version = server_version or DEFAULT_SERVER_VERSION
    max_file_size = max_file_size or DEFAULT_MAX_FILE_SIZE
    heartbeat_interval = heartbeat_interval or HEARTBEAT_INTERVAL
    out = Path(out_dir)
    _check_output(out)
    dns = dn_specs(dn_dirs)
    spark, own, (server_ids, samples) = _session_and_inputs(spark, master, conf, dns, check_cluster)
    try:
        exchange = _setting(spark, conf, "exchange", "reread")
        guess = _setting(spark, conf, "guess", "true").lower()
        if guess not in ("true", "false"):
            from gbinlog.local_engine import BuildError

            raise BuildError(f"spark.gbinlog.guess={guess}: expected true or false")
        guess = guess == "true"
        ranges = _ranges(spark, conf, ranges)
        if ranges is None:
            cores = spark.sparkContext.defaultParallelism
            ranges = executor_cores(spark.sparkContext) if exchange == "reread" else \
                default_ranges(dns, max_file_size, cores)
        may_follow = exchange == "reread" and ranges > 1 and _following(spark, conf)
        plan = plan_build(dns, ranges, splits, samples, (FOLLOW_FIRST_SHARE if may_follow else FIRST_RANGE_SHARE)
                          if exchange == "reread" else 1.0)
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / TMP_DIR
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        settings = RangeSettings(str(tmp), [d.dn for d in dns], plan.bounds, server_id, server_version,
                                 heartbeat_interval, on_error, max_file_size=max_file_size,
                                 gtids=gtids, may_follow=may_follow)
        timings = {"plan": time.perf_counter() - t0}
        try:
            rows, history = run_ranges(spark, plan, settings, timings, exchange, guess)
            t1 = time.perf_counter()
            try:
                check_members(rows, dns)
                _absorb(rows, timings)
                result = finish_files(spark, out, tmp, rows, BuildResult(out), server_id=server_id,
                                      server_version=server_version, max_file_size=max_file_size, gtids=gtids)
                result.held = held_of(rows)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            remove_binlog_files(out)   # what the driver moved or wrote: no partial build is left
            raise
        timings["files"] = time.perf_counter() - t1
    finally:
        if own:
            spark.stop()
    t1 = time.perf_counter()
    write_meta_and_state(out, rows, dns, server_ids, history, result, left=settings.left,
                         meta_store=meta_store, on_error=on_error,
                         settings={"server_id": server_id, "server_version": server_version,
                                   "max_file_size": max_file_size, "heartbeat_interval": heartbeat_interval,
                                   "gtids": gtids})
    timings["finish"] = time.perf_counter() - t1
    result.timings = {**timings, **result.timings}
    result.ranges = len(plan.pkeys)
    result.seconds = time.perf_counter() - t0
    return result


def held_of(rows: list[dict]) -> object:
    """Where the emission rule stopped the build (``merger.Held``), from the ranges' rows: the
    lowest range that held says where; every range from there held its rest back."""
    from extractor.model import Pos
    from merger import Held

    held = None
    for row in sorted(rows, key=lambda r: r["rng"]):
        found = json.loads(row["info"]).get("held")
        if found is None:
            continue
        if held is None:
            dn, passed, at, first, _ = found
            held = Held(dn, passed, Pos(*at) if at else None, first)
        held.txns += found[4]
    return held


def _following(spark, conf: dict[str, str]) -> bool:
    """Whether the first range's task may follow the second (``follow.py``): ``spark.gbinlog.follow``
    (default true), on a plain ``local[N]`` master with N ≥ 2 (the two writers at once) without
    speculation: there a task runs once, never again (``local[N,F]`` and ``local-cluster`` retry
    failed tasks: a second attempt of the first range would follow a range file whose pages the
    first attempt released; the followed range's file is named by the job's token, not per
    attempt, so a second attempt of the second range would fail to create it)."""
    from gbinlog.local_engine import BuildError
    from gbinlog.spark_engine.layout import copies_may_release

    setting = (_setting(spark, conf, "follow", "true") or "true").lower()
    if setting not in ("true", "false"):
        raise BuildError(f"spark.gbinlog.follow={setting}: expected true or false")
    sc = spark.sparkContext
    local = _LOCAL_MASTER.fullmatch(sc.master or "")
    return setting == "true" and local is not None and local.group(2) is None \
        and copies_may_release(sc.getConf()) and executor_cores(sc) > 1


def _absorb(rows: list[dict], timings: dict[str, float]) -> None:
    from gbinlog.spark_engine.follow import absorb_followed

    followed = rows[0].get("followed") if rows else None
    if followed:
        timings["follow"] = followed["seconds"]
        timings["follow: waited"] = followed["waited"]
    timings["followed"] = float(absorb_followed(rows))


def remove_binlog_files(out: Path) -> None:
    """The global binlog files and index of a failed build (the directory held none before it)."""
    from dumper.global_binlog import BASE
    from dumper.recovery import list_files

    if not out.is_dir():
        return
    for name in [*list_files(out), f"{BASE}.index"]:
        (out / name).unlink(missing_ok=True)


def check_members(rows: list[dict], dns: Sequence[DnSpec]) -> None:
    """The local engine's cluster rule (``check_broadcast_members``) over all ranges: a broadcast
    transaction has a branch from every DN that took part in an earlier one, unless that DN's input
    ended before it. Each range reports the broadcasts whose DN set changed; checking those is
    checking all (members only grow, ended DNs only grow)."""
    from dumper.cluster import check_broadcast_members
    from extractor.model import DnTxn, Pos, TxnKind
    from merger.model import GlobalTxn

    last_of: dict[str, str] = {}
    for r in rows:
        last_of.update(json.loads(r["info"])["last_of"])
    members: set[str] = set()
    for r in rows:
        for vtso, names in json.loads(r["info"])["broadcasts"]:
            ended = {dn for dn, last in last_of.items() if last < vtso}
            branches = [DnTxn(TxnKind.HEARTBEAT, dn, 0, "", Pos("", 0), vtso=vtso) for dn in names]
            check_broadcast_members(GlobalTxn(vtso, TxnKind.HEARTBEAT, [], branches), members, ended)


def write_meta_and_state(out: Path, rows: list[dict], dns: Sequence[DnSpec], server_ids: dict, history: list,
                         result: BuildResult, *, left: dict[str, str], meta_store: str, on_error: str,
                         settings: dict) -> None:
    """The meta store (the history entries the shaper applied, as the local engine stores them) and
    ``state.json`` (what a later ``--engine local`` resume or ``gbinlog run`` continues from)."""
    from dumper.state import BinlogMark, State, meta_store_location, save_state
    from extractor.model import RestartPoint
    from schema_shaper import MetaStore, ShapeError, Shaper

    store = MetaStore.open(meta_store_location(out, meta_store))
    try:
        shaper = Shaper(store=store, on_error=on_error)
        for entry in history:
            try:
                shaper.apply(entry)
            except ShapeError:
                if on_error == "raise":
                    raise
    finally:
        store.close()
    restart: dict[str, RestartPoint | None] = {d.dn: None for d in dns}
    members: set[str] = set()
    cluster_id = None
    for r in rows:
        info = json.loads(r["info"])
        for dn, p in info["points"].items():
            restart[dn] = RestartPoint(*p)
        for vtso, names in info["broadcasts"]:
            members.update(names)
            if cluster_id is None:
                cluster_id = vtso[:38]
    kept = [r for r in rows if r["written"]]
    mark = BinlogMark(*result.last_mark, kept[-1]["last_written_vtso"]) if kept else None
    save_state(out, State(cluster_id=cluster_id, server_ids=server_ids,
                          storage_seqs={d.dn: d.storage_seq for d in dns}, last_vtso=result.last_vtso,
                          binlog=mark, restart=restart, heartbeat_dns=sorted(members), left=dict(left),
                          meta_store=meta_store,
                          settings=settings,
                          counts={"txns": result.txns, "written": result.written, "events": result.events,
                                  "bytes": result.bytes}))
