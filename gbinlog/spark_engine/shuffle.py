"""``spark.gbinlog.exchange=shuffle``: the batch build's earlier exchange, kept to compare with the
file exchange (``bench/spark.py --shuffle``; ``tests/test_spark_build.py`` checks its bytes too).

The ``dnbinlog`` DataSource yields Arrow rows of DN transactions tagged with their range and an
exact partition key; ``repartition(n, "pkey")`` moves each to its range's partition; the shuffled
rows are persisted (memory, spilling to disk) so the schema history (marks and physical DDLs,
collected to the driver) and the writers read the input once; a ``mapInArrow`` writer per range
runs ``render.render_range``. Measured on 1.1 M DN events: 10.1 s of CPU per warm build against the
file exchange's 5.5–6.0 s (the rows cross Python → JVM → shuffle files → JVM → Python).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pyarrow as pa

from gbinlog.spark_engine.batch import RangeSettings
from gbinlog.spark_engine.errors import in_task
from gbinlog.spark_engine.exchange import HISTORY_KINDS
from gbinlog.spark_engine.plan import ReadPlan
from gbinlog.spark_engine.render import render_range

SUMMARY = pa.schema([("rng", pa.int32()), ("txns", pa.int64()), ("written", pa.int64()), ("events", pa.int64()),
                     ("size", pa.int64()), ("first_ts", pa.int64()), ("last_ts", pa.int64()),
                     ("last_vtso", pa.string()), ("last_written_vtso", pa.string()),
                     ("first_written_vtso", pa.string()), ("info", pa.string()),
                     ("sizes", pa.binary()), ("stamps", pa.binary()), ("seconds", pa.float64()),
                     ("file", pa.string())])
SUMMARY_DDL = ", ".join(f"{f.name} {dict(int32='int', int64='long', string='string', double='double', binary='binary')[str(f.type)]}"
                        for f in SUMMARY)


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
    """mapInArrow (``exchange=shuffle``): all rows of one output range → ``render_range``."""
    from pyspark import TaskContext

    rng = TaskContext.get().partitionId()
    entries = history.value if hasattr(history, "value") else history
    batches = [b for b in batches if b.num_rows]
    streams = _dn_streams(pa.Table.from_batches(batches), len(settings.dns)) if batches else []
    yield pa.RecordBatch.from_pylist([render_range(settings, entries, rng, streams)], schema=SUMMARY)


def _read(spark, plan: ReadPlan):
    from gbinlog.spark_engine.datasource import register

    register(spark)
    return spark.read.format("dnbinlog").option("plan", plan.to_json()).load()


def collect_schema_history(df, left: dict[str, str]) -> list:
    """The marks and physical DDLs of the input, as schema history entries (driver side); none of
    a DN after it ``left`` (``exchange.before_leaving``)."""
    from pyspark.sql import functions as F

    from gbinlog.spark_engine.arrow_codec import decode_batch
    from gbinlog.spark_engine.exchange import before_leaving
    from schema_shaper import collect_history

    table = df.where(F.col("kind").isin(*HISTORY_KINDS)).toArrow()
    return collect_history(before_leaving(decode_batch(table), left))


def shuffled_scale_in(df, dns: list[str]) -> dict[str, str]:
    """``exchange.scale_in`` over the shuffled rows (instructions and each DN's last vtso)."""
    from pyspark.sql import functions as F

    from extractor.txn_codec import BodyDecoder
    from gbinlog.spark_engine.arrow_codec import decode_batch
    from gbinlog.spark_engine.exchange import dn_ends, scale_in
    from merger.membership import storage_change

    found: dict[str, list] = {}
    for t in decode_batch(df.where(F.col("kind") == "instruction").toArrow(), BodyDecoder()):
        if (storage := storage_change(t)) is not None:
            found.setdefault(t.dn, []).append([t.vtso, storage])
    lasts = df.groupBy("dn").agg(F.max("vtso").alias("last")).collect()
    parts = [{"dn": r["dn"], "last": r["last"], "instructions": found.get(r["dn"], [])} for r in lasts]
    return scale_in(parts, dns), dn_ends(parts)


def shuffle_jobs(spark, plan: ReadPlan, settings: RangeSettings, timings: dict[str, float]) -> tuple[list[dict], list]:
    from pyspark import StorageLevel

    t0 = time.perf_counter()
    shuffled = _read(spark, plan).repartition(len(plan.pkeys), "pkey").persist(StorageLevel.MEMORY_AND_DISK)
    try:
        settings.left, settings.ends = shuffled_scale_in(shuffled, settings.dns)
        history = collect_schema_history(shuffled, settings.left)
        timings["extract+history"] = time.perf_counter() - t0
        bc = spark.sparkContext.broadcast(history)
        rows = shuffled.mapInArrow(partial(write_range, settings, bc), SUMMARY_DDL).toArrow().to_pylist()
    finally:
        shuffled.unpersist()
    return rows, history
