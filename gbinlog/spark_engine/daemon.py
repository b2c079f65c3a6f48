"""Spark's Python daemon (``spark.python.daemon.module``, set by ``session.default_conf``) with the
batch build's task modules imported before it forks a worker per task: every worker then starts
with them instead of importing them itself (about 0.3 s of CPU per worker, on the first job's
path). Its objects are frozen out of the cyclic GC (``gc.freeze``) before the workers fork: their
collections do not walk (and copy-on-write touch) the preloaded modules. Otherwise it is
``pyspark.daemon``."""

import gc

from pyspark.daemon import manager

import dumper.global_binlog  # noqa: F401
import gbinlog.spark_engine.exchange  # noqa: F401
import gbinlog.spark_engine.layout  # noqa: F401
import gbinlog.spark_engine.render  # noqa: F401
import gbinlog.spark_engine.reread  # noqa: F401
import merger  # noqa: F401
import schema_shaper  # noqa: F401

if __name__ == "__main__":
    gc.freeze()
    manager()
