"""``build`` on Spark: archived DN binlogs → the global binlog, byte-identical to the local engine.

The job (DESIGN.md §5):

1. Driver: DN ids and storage sequences, one input partition per DN (or per byte range cut at
   restart points), output range boundaries from cheap per-DN TSO samples (``ranges``), and for
   each range a partition key — so the shuffle below is an exact range partitioning with no
   sampling pass over the input.
2. ``dnbinlog`` tasks extract (assembly, vtso, first-level sort) and yield Arrow rows of DN
   transactions tagged with their range; ``repartition(n, "pkey")`` moves each to its range.
   The shuffled data is persisted, so step 3 and 4 read the input once.
3. The (few) DDL marks and physical DDLs are collected to the driver → the schema history
   (``schema_shaper.collect_history``), broadcast.
4. ``mapInArrow`` writer per range: rows in DN order → ``merger.merge`` (branch join, trace merge)
   → ``Shaper.from_history(history, range start)`` → ``dumper.encode_txn`` → one file: FDE +
   transactions. It returns a one-row summary.
5. Driver: each non-empty range becomes ``binlog.NNNNNN`` in range order; its FDE timestamp is set
   (the first file: its first transaction's; later ones: the previous file's last, as the local
   writer's rotation does) and every file but the last gets the ROTATE to the next; then
   ``binlog.index``, the meta store and ``state.json``.

File boundaries: a range file ends where its vtso range ends, not where the local writer's size
rule rotates. With one range (the default when the input is smaller than ``max_file_size``) the
files are identical to the local engine's; with several, the event streams without FDE/ROTATE are
identical (``tests/test_spark_build.py``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa

from gbinlog.spark_engine.datasource import DnSpec, PartSpec, ReadPlan, partition_keys
from gbinlog.spark_engine.errors import in_task, reraise

# Marks and physical DDLs: the only rows the driver needs before shaping.
HISTORY_KINDS = ("ddl_mark", "physical_ddl")
SUMMARY = pa.schema([("rng", pa.int32()), ("txns", pa.int64()), ("written", pa.int64()),
                     ("size", pa.int64()), ("first_ts", pa.int64()), ("last_ts", pa.int64()),
                     ("last_vtso", pa.string()), ("points", pa.string()), ("seconds", pa.float64())])
SUMMARY_DDL = ("rng int, txns long, written long, size long, first_ts long, last_ts long, "
               "last_vtso string, points string, seconds double")
TMP_DIR = ".spark-ranges"


@dataclass
class RangeSettings:
    """What every writer task needs (pickled with the task)."""

    tmp_dir: str
    n_dns: int
    bounds: list[str]
    server_id: int
    server_version: str
    heartbeat_interval: int
    on_error: str = "raise"


@dataclass
class BuildResult:
    files: list[str]
    txns: int = 0
    written: int = 0
    bytes: int = 0
    ranges: int = 1
    seconds: float = 0.0
    last_vtso: str | None = None
    range_seconds: list[float] = field(default_factory=list)


# -- planning (driver) ----------------------------------------------------------------------------

def dn_specs(dn_dirs: Sequence[str | os.PathLike]) -> list[DnSpec]:
    """DN id = directory name (DESIGN.md §6); storage sequences collision-free over the set."""
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


def plan_build(dns: list[DnSpec], ranges: int, splits: dict[str, list] | None = None) -> ReadPlan:
    """The read plan: input partitions (per DN, cut at the given restart points) and ``ranges``
    output ranges balanced by bytes over the TSO line."""
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
    bounds = range_bounds([tso_samples(d.dir) for d in dns], ranges) if ranges > 1 else []
    return ReadPlan(dns, parts, bounds, partition_keys(len(bounds) + 1))


# -- one range (executor) ---------------------------------------------------------------------------

def _dn_streams(table: pa.Table, n_dns: int) -> list[Iterator]:
    """Per DN, its rows in extraction order, decoded lazily in chunks."""
    import pyarrow.compute as pc

    from gbinlog.spark_engine.arrow_codec import BodyDecoder, decode_batch

    if table.num_rows:
        table = table.take(pc.sort_indices(table, [("dn_idx", "ascending"), ("seq", "ascending")]))
    dn_col = table.column("dn_idx").to_pylist()
    decoder = BodyDecoder()

    def stream(lo: int, hi: int) -> Iterator:
        for off in range(lo, hi, 1000):
            yield from decode_batch(table.slice(off, min(1000, hi - off)), decoder)

    import bisect
    streams = []
    for i in range(n_dns):
        lo, hi = bisect.bisect_left(dn_col, i), bisect.bisect_right(dn_col, i)
        streams.append(stream(lo, hi))
    return streams


@in_task
def write_range(settings: RangeSettings, history, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: all rows of one output range → merged, shaped, rendered into one file."""
    from pyspark import TaskContext

    from dumper.global_binlog import encode_txn, file_start
    from merger import merge
    from schema_shaper import Shaper, shape

    t0 = time.perf_counter()
    rng = TaskContext.get().partitionId()
    entries = history.value if hasattr(history, "value") else history
    batches = [b for b in batches if b.num_rows]
    table = pa.Table.from_batches(batches) if batches else None
    upto = settings.bounds[rng - 1] if rng > 0 else "0" * 54
    shaper = Shaper.from_history(entries, upto, on_error=settings.on_error)
    path = Path(settings.tmp_dir, f"range-{rng:05d}")
    head = file_start(server_id=settings.server_id, server_version=settings.server_version, timestamp=0)
    txns = written = 0
    first_ts = last_ts = -1
    last_vtso = None
    points: dict[str, list] = {}
    pos = len(head)
    with open(path, "wb") as fh:
        fh.write(head)
        if table is not None:
            out = bytearray()
            for lt in shape(merge(_dn_streams(table, settings.n_dns)), shaper=shaper):
                txns += 1
                last_vtso = lt.vtso
                for b in lt.source.branches:
                    if b.restart is not None:
                        points[b.dn] = [lt.vtso, *b.restart]
                data = encode_txn(lt, pos, settings.server_id, heartbeat_interval=settings.heartbeat_interval)
                if data:
                    out += data
                    pos += len(data)
                    written += 1
                    if first_ts < 0:
                        first_ts = lt.timestamp
                    last_ts = lt.timestamp
                    if len(out) >= 1 << 22:
                        fh.write(out)
                        out.clear()
            fh.write(out)
        fh.flush()
        os.fsync(fh.fileno())
    yield pa.RecordBatch.from_pylist([{
        "rng": rng, "txns": txns, "written": written, "size": pos, "first_ts": first_ts, "last_ts": last_ts,
        "last_vtso": last_vtso, "points": json.dumps(points), "seconds": time.perf_counter() - t0}],
        schema=SUMMARY)


# -- the job (driver) -------------------------------------------------------------------------------

def _read(spark, plan: ReadPlan):
    return spark.read.format("dnbinlog").option("plan", plan.to_json()).load()


def collect_schema_history(df) -> list:
    """The marks and physical DDLs of the input, as schema history entries (driver side)."""
    from pyspark.sql import functions as F

    from gbinlog.spark_engine.arrow_codec import decode_batch
    from schema_shaper import collect_history

    table = df.where(F.col("kind").isin(*HISTORY_KINDS)).toArrow()
    return collect_history(decode_batch(table))


def default_ranges(dns: Sequence[DnSpec], max_file_size: int) -> int:
    """One range per ``max_file_size`` of input (the output is about the input's size)."""
    return max(1, math.ceil(input_bytes(dns) / max_file_size))


def build(dn_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *, server_id: int = 1,
          server_version: str | None = None, max_file_size: int | None = None,
          heartbeat_interval: int | None = None, master: str | None = None, conf=None, spark=None,
          ranges: int | None = None, splits: dict[str, list] | None = None,
          on_error: str = "raise") -> BuildResult:
    """Build the global binlog of ``dn_dirs`` into ``out_dir`` on Spark.

    ``spark``: an existing session (else one is made from ``master``/``conf`` and stopped at the
    end). ``ranges``: output ranges = files (default: input size / ``max_file_size``, at least 1;
    also ``--conf spark.gbinlog.ranges=N``). ``splits``: per DN id, restart points to cut its input
    at (more input partitions than DNs).
    """
    from dumper.global_binlog import DEFAULT_MAX_FILE_SIZE, DEFAULT_SERVER_VERSION, HEARTBEAT_INTERVAL
    from gbinlog.spark_engine.session import parse_conf, spark_session

    t0 = time.perf_counter()
    conf = parse_conf(conf)
    server_version = server_version or DEFAULT_SERVER_VERSION
    max_file_size = max_file_size or DEFAULT_MAX_FILE_SIZE
    heartbeat_interval = heartbeat_interval or HEARTBEAT_INTERVAL
    out = Path(out_dir)
    dns = dn_specs(dn_dirs)
    own = spark is None
    if own:
        spark = spark_session(master, conf)
    try:
        if ranges is None:
            setting = conf.get("spark.gbinlog.ranges") or spark.conf.get("spark.gbinlog.ranges", None)
            ranges = int(setting) if setting else default_ranges(dns, max_file_size)
        plan = plan_build(dns, ranges, splits)
        n = len(plan.pkeys)
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / TMP_DIR
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        settings = RangeSettings(str(tmp), len(dns), plan.bounds, server_id, server_version,
                                 heartbeat_interval, on_error)
        from pyspark import StorageLevel

        shuffled = _read(spark, plan).repartition(n, "pkey").persist(StorageLevel.DISK_ONLY)
        try:
            try:
                history = collect_schema_history(shuffled)
                bc = spark.sparkContext.broadcast(history)
                rows = shuffled.mapInArrow(partial(write_range, settings, bc), SUMMARY_DDL).toArrow().to_pylist()
            except Exception as exc:  # a Py4J/PySpark error carrying a task's typed error
                reraise(exc)
        finally:
            shuffled.unpersist()
        rows.sort(key=lambda r: r["rng"])
        result = finish_files(out, tmp, rows, dns, history, server_id=server_id, server_version=server_version)
    finally:
        if own:
            spark.stop()
    result.ranges = n
    result.seconds = time.perf_counter() - t0
    return result


def finish_files(out: Path, tmp: Path, rows: list[dict], dns: Sequence[DnSpec], history: list, *,
                 server_id: int, server_version: str) -> BuildResult:
    """Range files → ``binlog.NNNNNN`` (FDE timestamps, ROTATE between files), index, meta store,
    state.json."""
    from dumper.global_binlog import BASE, file_name, file_start, rotate_event, write_index

    for old in out.glob(f"{BASE}.[0-9]*"):
        old.unlink()
    result = BuildResult(files=[], range_seconds=[r["seconds"] for r in rows])
    kept = [r for r in rows if r["written"]]
    prev_ts = None
    for k, r in enumerate(kept):
        name = file_name(k + 1)
        src = tmp / f"range-{r['rng']:05d}"
        fde_ts = r["first_ts"] if prev_ts is None else prev_ts
        head = file_start(server_id=server_id, server_version=server_version, timestamp=fde_ts)
        with open(src, "r+b") as fh:
            fh.write(head)  # same length as the provisional FDE: only timestamp and CRC change
            if k + 1 < len(kept):
                fh.seek(r["size"])
                fh.write(rotate_event(r["size"], file_name(k + 2), timestamp=r["last_ts"], server_id=server_id))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(src, out / name)
        result.files.append(name)
        prev_ts = r["last_ts"]
    write_index(out, result.files, BASE)
    shutil.rmtree(tmp, ignore_errors=True)
    result.txns = sum(r["txns"] for r in rows)
    result.written = sum(r["written"] for r in rows)
    result.bytes = sum((out / f).stat().st_size for f in result.files)
    result.last_vtso = next((r["last_vtso"] for r in reversed(rows) if r["last_vtso"]), None)
    write_state(out, rows, dns, history, result)
    return result


def write_state(out: Path, rows: list[dict], dns: Sequence[DnSpec], history: list, result: BuildResult) -> None:
    """state.json (and the meta store): placeholder until the local engine's format is known."""
    points: dict[str, list] = {}
    for r in rows:
        points.update(json.loads(r["points"]))
    state = {"last_vtso": result.last_vtso, "files": result.files,
             "dns": {d.dn: {"dir": d.dir, "storage_seq": d.storage_seq, "restart": points.get(d.dn)} for d in dns}}
    tmp = out / ".state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, out / "state.json")
