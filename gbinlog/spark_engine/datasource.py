"""The ``dnbinlog`` Python DataSource for ``gbinlog run --engine spark``:
``spark.readStream.format("dnbinlog")`` (``stream_source.DnBinlogStreamReader``), DN binlogs in,
Arrow batches of DN transactions (``arrow_codec``) out; offsets are per DN restart positions
(file, position, extractor state).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from gbinlog.spark_engine.arrow_codec import SPARK_DDL


class DnBinlogSource(DataSource):
    """``format("dnbinlog")`` (streaming)."""

    @classmethod
    def name(cls) -> str:
        return "dnbinlog"

    def schema(self) -> str:
        return SPARK_DDL

    def streamReader(self, schema):
        from gbinlog.spark_engine.stream_source import DnBinlogStreamReader

        return DnBinlogStreamReader(self.options)


def register(spark) -> None:
    """Make ``format("dnbinlog")`` available in ``spark`` (once per session)."""
    if not getattr(spark, "_gbinlog_dnbinlog", False):
        spark.dataSource.register(DnBinlogSource)
        spark._gbinlog_dnbinlog = True
