"""The ``dnbinlog`` Python DataSource: DN binlog byte ranges in, Arrow batches of DN transactions out.

Batch: ``spark.read.format("dnbinlog").option("plan", ReadPlan(...).to_json()).load()``. Each input
partition is one DN byte range (a whole DN, or a range cut at a safe restart position, with the
extractor state at that position); its task runs ``extract`` (assembly, vtso, first-level sort)
and yields ``arrow_codec.SCHEMA`` batches, each row tagged with its output range (``rng``) and a
key (``pkey``) whose Spark hash lands in partition ``rng`` — so ``repartition(n, "pkey")`` is an
exact range partitioning by vtso with boundaries known up front: no sampling pass over the input.

Streaming: ``spark.readStream.format("dnbinlog")`` (see ``DnBinlogStreamReader``); offsets are
per DN restart positions (file, position, extractor state).
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from gbinlog.spark_engine.arrow_codec import SPARK_DDL
from gbinlog.spark_engine.errors import in_task
from gbinlog.spark_engine.plan import (  # noqa: F401 - re-exported: the plan's names, where they were
    DnSpec,
    PartSpec,
    RangeOf,
    ReadPlan,
    part_txns,
    partition_keys,
    spark_int_hash,
)


@in_task
def read_part(plan: ReadPlan, index: int) -> Iterator:
    """Arrow batches of input partition ``index``'s transactions, tagged with their output range."""
    from gbinlog.spark_engine.arrow_codec import iter_encoded

    yield from iter_encoded(part_txns(plan, index), plan.parts[index].dn_idx, RangeOf(plan.bounds, plan.pkeys),
                            seq_start=index << 32)


class _Part(InputPartition):
    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class DnBinlogReader(DataSourceReader):
    def __init__(self, plan: ReadPlan) -> None:
        self.plan = plan

    def partitions(self) -> list[InputPartition]:
        return [_Part(i) for i in range(len(self.plan.parts))]

    def read(self, partition: _Part) -> Iterator:
        return read_part(self.plan, partition.index)


class DnBinlogSource(DataSource):
    """``format("dnbinlog")``; option ``plan``: a ``ReadPlan`` as JSON."""

    @classmethod
    def name(cls) -> str:
        return "dnbinlog"

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema) -> DnBinlogReader:
        if "plan" not in self.options:
            raise ValueError("dnbinlog: option 'plan' (a ReadPlan as JSON) is required")
        return DnBinlogReader(ReadPlan.from_json(self.options["plan"]))

    def streamReader(self, schema):
        from gbinlog.spark_engine.stream_source import DnBinlogStreamReader

        return DnBinlogStreamReader(self.options)


def register(spark) -> None:
    """Make ``format("dnbinlog")`` available in ``spark`` (once per session)."""
    if not getattr(spark, "_gbinlog_dnbinlog", False):
        spark.dataSource.register(DnBinlogSource)
        spark._gbinlog_dnbinlog = True
