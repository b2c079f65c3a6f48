"""The Spark engine (DESIGN.md §5): the same stage functions run as Spark jobs.

* ``session``: a SparkSession with small-machine defaults (``spark_session``), ``--conf k=v``.
* ``datasource``: the ``dnbinlog`` Python DataSource — DN binlog byte ranges in, Arrow batches of
  DN transactions out (batch and streaming).
* ``arrow_codec``: ``DnTxn`` ⇄ Arrow rows, exact round trip.
* ``batch``: ``build(...)`` for ``gbinlog build --engine spark``.
* ``streaming``: ``run(config, should_stop)`` for ``gbinlog run --engine spark``.

Nothing here imports pyspark at module import time except ``session``/``datasource``/``batch``/
``streaming`` themselves, so ``arrow_codec`` is usable (and testable) without a JVM.
"""


def build(*args, **kwargs):
    """``gbinlog build --engine spark``: see ``gbinlog.spark_engine.batch.build``."""
    from gbinlog.spark_engine.batch import build as _build

    return _build(*args, **kwargs)
