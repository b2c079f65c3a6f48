"""The Spark engine (docs/architecture.md): the same stage functions run as Spark jobs.

* ``session``: a SparkSession with small-machine defaults (``spark_session``), ``--conf k=v``,
  a clear error when Java is missing.
* ``datasource``: the ``dnbinlog`` Python DataSource (batch: DN byte ranges in, Arrow batches of
  DN transactions out; exact range partitioning keys); ``stream_source``: its streaming reader.
* ``arrow_codec``: ``DnTxn`` ⇄ Arrow rows, exact round trip.
* ``ranges``: DN byte ranges (``RangeSource``) and output vtso ranges from cheap TSO samples.
* ``batch``: ``build(...)`` for ``gbinlog build --engine spark``; ``exchange``: DN transactions
  handed from extraction tasks to range writers through files (no rows in the JVM); ``shuffle``:
  the earlier Spark-shuffle exchange, kept to compare; ``layout``: the local writer's file
  boundaries over the range files.
* ``streaming``: ``run(config, should_stop)`` / ``SparkLiveRunner`` for ``gbinlog run --engine spark``.
* ``errors``: typed errors carried across the task boundary.

Importing this package does not import pyspark; ``build`` imports the engine on first call.
"""


def build(*args, **kwargs):
    """``gbinlog build --engine spark``: see ``gbinlog.spark_engine.batch.build``."""
    from gbinlog.spark_engine.batch import build as _build

    return _build(*args, **kwargs)
