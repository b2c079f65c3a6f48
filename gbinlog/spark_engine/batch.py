"""``build`` on Spark: archived DN binlogs → the global binlog, byte-identical to the local engine.

The driver cuts the merged order into vtso windows (``ranges``: bounds from cheap per-DN TSO
samples, one window per executor core by default), runs one ``dumper.window.run_window`` task per
window (``windows``: each is the local pipeline from its DNs' restart points to its upper bound),
then places the windows' bytes (``layout``: the local writer's rotation replayed over the
windows' transaction sizes, GTID events put in, ``log_pos`` relocated) and writes ``binlog.index``,
the meta store and ``state.json`` (``dumper.state.state_of_windows``). docs/architecture.md §5.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dumper.pipeline import Settings
from gbinlog.spark_engine.errors import reraise
from gbinlog.spark_engine.plan import DnSpec, PartSpec, ReadPlan

if TYPE_CHECKING:
    from dumper.state import State
    from dumper.window import WindowSummary

TMP_DIR = ".spark-ranges"
# The first window writes the final files (GTID payloads and rotation, their fsyncs): 6 % more
# CPU per byte than a range file on 2.35 GB (6.9 against 6.5 s), so it gets that much less input
# and the windows finish together.
FIRST_RANGE_SHARE = 0.94
# ``local``, ``local[N]``, ``local[*]``, ``local[N,F]`` (F: a failed task's attempts)
_LOCAL_MASTER = re.compile(r"local(?:\[(\d+|\*)(?:,(\d+))?\])?")


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


def plan_build(dns: list[DnSpec], ranges: int, splits: dict[str, list] | None = None,
               samples: list | None = None, first_share: float = 1.0, resumed: State | None = None,
               done: str | None = None) -> ReadPlan:
    """The read plan: input partitions (per DN, cut at the given restart points) and ``ranges``
    windows balanced by bytes over the TSO line (``samples``: the DNs' ``tso_samples``, read here
    when not given). ``resumed``: the output's state (``recovered_state``): the partitions begin
    at its restart points; the windows share what lies above ``done``."""
    from extractor.vtso import vtso_tso
    from gbinlog.spark_engine.ranges import range_bounds, samples_above, tso_samples

    floor = done
    parts: list[PartSpec] = []
    for i, d in enumerate(dns):
        points = sorted((splits or {}).get(d.dn, []), key=lambda p: (p.file, p.offset))
        begin = resumed.restart.get(d.dn) if resumed is not None else None
        if begin is not None:
            points = [p for p in points if (p.file, p.offset) > (begin.file, begin.offset)]
        start = tuple(begin) if begin is not None else None
        for p in points:
            parts.append(PartSpec(i, start[0:2] if start else None, (p.file, p.offset),
                                  tuple(start[2:]) if start else None))
            start = (p.file, p.offset, p.tso, p.txn_id, p.seq)
        parts.append(PartSpec(i, start[0:2] if start else None, None, tuple(start[2:]) if start else None))
    if ranges > 1 and samples is None:
        samples = [tso_samples(d.dir) for d in dns]
    if ranges > 1 and floor is not None:
        samples = [samples_above(s, vtso_tso(floor)) for s in samples]
    bounds = range_bounds(samples, ranges, first_share) if ranges > 1 else []
    return ReadPlan(dns, parts, [b for b in bounds if floor is None or b > floor])


# -- the job (driver) -------------------------------------------------------------------------------

def executor_cores(sc) -> int:
    """The cores tasks run on: N of a ``local[N]`` master (``*``: this machine's), else Spark's
    default parallelism (``spark.default.parallelism``, 4 by default here; set it to the cluster's
    cores)."""
    m = _LOCAL_MASTER.fullmatch(sc.master)
    if m is None:
        return max(1, sc.defaultParallelism)
    n = m.group(1)
    return (os.cpu_count() or 1) if n == "*" else int(n or 1)


def recovered_state(out: Path, dns: list[DnSpec], settings: Settings,
                    cluster_stopped: bool) -> tuple[State, str | None] | None:
    """An output directory that already holds a global binlog, recovered as the local engine
    recovers it (``Pipeline.recover``: the DNs and settings checked, a torn end cut): its
    ``state.json`` (an empty ``State`` when it has none yet: the first window then re-reads from
    the DNs' starts) and the last vtso done (the files' or the state's); None for a new output."""
    from dumper.pipeline import Pipeline
    from dumper.recovery import list_files
    from dumper.state import State, load_state
    from gbinlog.local_engine import DirDn

    if not out.is_dir() or not (list_files(out) or load_state(out) is not None):
        return None
    pipeline = Pipeline([DirDn(d.dir, d.dn, complete=cluster_stopped) for d in dns], out, settings)
    try:
        pipeline.recover()
    finally:
        if pipeline.binlog is not None:
            pipeline.binlog.close()
    for d in dns:    # the output's storage sequences (a resume keeps them)
        d.storage_seq = pipeline.seqs[d.dn]
    return pipeline.state or State(), pipeline.last_done()


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


def _build(dn_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, settings: Settings | None = None,
           master: str | None = None, conf=None, spark=None, ranges: int | None = None,
           splits: dict[str, list] | None = None, check_cluster: bool = False, cluster_stopped: bool = False,
           **fields: object) -> BuildResult:
    """``gbinlog build --engine spark``: the global binlog of ``dn_dirs`` in ``out_dir`` (a new
    directory, or an output of either engine to resume), the same files, index, state.json and
    meta store the local engine writes.

    ``settings``: the pipeline's (``dumper.pipeline.Settings``: filters, GTIDs, DDL comments …);
    or its fields given one by one (``server_id=``, ``max_file_size=`` …). ``spark``: an existing
    session (else one from ``master``/``conf``, stopped at the end). ``ranges``: windows (default:
    one per executor core; or ``--conf spark.gbinlog.ranges=N``). ``splits``: per DN id, restart
    points to cut its input at for the scan (more input partitions than DNs). ``check_cluster``:
    the DN set is one whole cluster (``extractor.members.check_dn_dirs``). ``cluster_stopped``: the
    DNs' binlogs are whole (``--cluster-stopped``). Errors are the local engine's types
    (``BuildError``, ``ClusterMismatch``, ``OrderingError``, ``BinlogError``, ``ShapeError``).
    """
    from gbinlog.spark_engine.layout import finish_files
    from gbinlog.spark_engine.windows import WindowJob, window_jobs

    t0 = time.perf_counter()
    conf = _check_args(dn_dirs, conf)
    settings = settings or Settings(**{k: v for k, v in fields.items() if v is not None})
    out = Path(out_dir)
    dns = dn_specs(dn_dirs)
    resumed, done = recovered_state(out, dns, settings, cluster_stopped) or (None, None)
    spark, own, (server_ids, samples) = _session_and_inputs(spark, master, conf, dns,
                                                            check_cluster and resumed is None)
    try:
        guess = (_setting(spark, conf, "guess", "true") or "").lower()
        if guess not in ("true", "false"):
            from gbinlog.local_engine import BuildError

            raise BuildError(f"spark.gbinlog.guess={guess}: expected true or false")
        ranges = _ranges(spark, conf, ranges) or executor_cores(spark.sparkContext)
        plan = plan_build(dns, ranges, splits, samples, FIRST_RANGE_SHARE, resumed, done)
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / TMP_DIR
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        job = WindowJob(str(tmp), settings, server_ids, cluster_stopped)
        if resumed is not None:
            job.resume(str(out), resumed)
        timings = {"plan": time.perf_counter() - t0}
        try:
            try:
                rows, history = window_jobs(spark, plan, job, timings, guess == "true")
            except Exception as exc:  # a Py4J/PySpark error carrying a task's typed error
                reraise(exc)
            timings["write"] = time.perf_counter() - t0 - timings["plan"] - timings["extract+history"]
            windows = [r["summary"] for r in rows]
            t1 = time.perf_counter()
            try:
                check_members(windows)
                result = finish_files(spark, out, tmp, windows, BuildResult(out), settings=settings)
                result.held = held_of(windows)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            if resumed is None:
                remove_binlog_files(out)   # what the driver moved: no partial build is left
            raise
        timings["files"] = time.perf_counter() - t1
    finally:
        if own:
            spark.stop()
    t1 = time.perf_counter()
    write_meta_and_state(out, windows, dns, server_ids, history, result, left=job.left, settings=settings,
                         resumed=resumed is not None, stored_upto=plan.bounds[0] if plan.bounds else None)
    timings["finish"] = time.perf_counter() - t1
    result.timings = {**timings, **result.timings}
    result.ranges = len(windows)
    result.seconds = time.perf_counter() - t0
    return result


def held_of(windows: list[WindowSummary]) -> object:
    """Where the emission rule stopped the build (``merger.Held``), from the windows: the lowest
    window that held says where; every window from there held its rest back."""
    from extractor.model import Pos
    from merger import Held

    held = None
    for w in windows:
        if w.held is None:
            continue
        if held is None:
            dn, passed, at, first, _ = w.held
            held = Held(dn, passed, Pos(*at) if at else None, first)
        held.txns += w.held[4]
    return held


def remove_binlog_files(out: Path) -> None:
    """The global binlog files and index of a failed build (the directory held none before it)."""
    from dumper.global_binlog import BASE
    from dumper.recovery import list_files

    if not out.is_dir():
        return
    for name in [*list_files(out), f"{BASE}.index"]:
        (out / name).unlink(missing_ok=True)


def check_members(windows: list[WindowSummary]) -> None:
    """The local engine's cluster rule (``check_broadcast_members``) across windows: a broadcast
    transaction has a branch from every DN that took part in an earlier one, unless that DN's input
    ended before it. Each window checked its own and reports the broadcasts whose DN set changed;
    checking those is checking all (members only grow, ended DNs only grow)."""
    from dumper.cluster import check_broadcast_members
    from extractor.model import DnTxn, Pos, TxnKind
    from merger.model import GlobalTxn

    last_of: dict[str, str] = {}
    for w in windows:
        last_of.update(w.last_of)
    members: set[str] = set()
    for w in windows:
        for vtso, names in w.broadcasts:
            ended = {dn for dn, last in last_of.items() if last < vtso}
            branches = [DnTxn(TxnKind.HEARTBEAT, dn, 0, "", Pos("", 0), vtso=vtso) for dn in names]
            check_broadcast_members(GlobalTxn(vtso, TxnKind.HEARTBEAT, [], branches), members, ended)


def write_meta_and_state(out: Path, windows: list[WindowSummary], dns: Sequence[DnSpec], server_ids: dict,
                         history: list, result: BuildResult, *, left: dict[str, str], settings: Settings,
                         resumed: bool = False, stored_upto: str | None = None) -> None:
    """The meta store (the history entries the shaper applied, as the local engine stores them) and
    ``state.json`` (what a later resume or ``gbinlog run`` continues from). ``resumed``: the
    output's first window (its own resume) stored the entries up to ``stored_upto`` (None: all)
    itself, and saved the state the others go on from."""
    from dumper.state import BinlogMark, load_state, meta_store_location, save_state, state_of_windows
    from schema_shaper import MetaStore, ShapeError, Shaper

    base = load_state(out) if resumed else None
    meta_store = base.meta_store if base is not None else settings.meta_store
    if resumed:
        history = [e for e in history if stored_upto is not None and e.vtso > stored_upto]
    store = MetaStore.open(meta_store_location(out, meta_store))
    try:
        shaper = Shaper.as_of(store, stored_upto, on_error=settings.on_error) if resumed and history else \
            Shaper(store=store, on_error=settings.on_error)
        for entry in history:
            try:
                shaper.apply(entry)
            except ShapeError:
                if settings.on_error == "raise":
                    raise
    finally:
        store.close()
    kept = [w for w in windows[1 if base is not None else 0:] if w.written]
    mark = BinlogMark(*result.last_mark, kept[-1].last_written_vtso) if kept else None
    save_state(out, state_of_windows(
        windows[1:] if base is not None else windows, server_ids=server_ids,
        storage_seqs={d.dn: d.storage_seq for d in dns}, left=left, meta_store=meta_store,
        settings=settings.output_settings(), binlog=mark, base=base))
