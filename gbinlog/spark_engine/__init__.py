"""The Spark engine (docs/architecture.md §8, docs/spark.md): the pipeline run as Spark tasks.

* ``batch``: ``build(...)`` for ``gbinlog build --engine spark``: the driver's windows, the cluster
  rule across them, the meta store and ``state.json``; ``windows``: the window tasks
  (``dumper.window.run_window``) and how they find their start points (``speculate``: guessed
  and checked; ``scan_part``: exact); ``plan``/``ranges``: DN byte ranges and the window bounds;
  ``layout``: the windows' bytes placed as the local writer's files (``xkernel``: its loop).
* ``streaming``: ``SparkLiveRunner`` for ``gbinlog run --engine spark``, fed by the ``dnbinlog``
  streaming source (``datasource``, ``stream_source``, ``arrow_codec``).
* ``session``: a SparkSession with small-machine defaults, ``--conf k=v``, a clear error when Java
  is missing; ``daemon``: Spark's Python daemon with the task modules preloaded; ``errors``: typed
  errors carried across the task boundary.

Importing this package does not import pyspark; ``build`` imports the engine on first call.
"""


def build(*args, **kwargs):
    """``gbinlog build --engine spark``: see ``gbinlog.spark_engine.batch.build``."""
    from gbinlog.spark_engine.batch import build as _build

    return _build(*args, **kwargs)
