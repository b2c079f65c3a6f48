"""Spark's Python daemon (``spark.python.daemon.module``, set by ``session.default_conf``) with the
batch build's task modules imported before it forks a worker per task: every worker then starts
with them instead of importing them itself (about 0.3 s of CPU per worker, on the first job's
path). ``pyspark.worker`` is imported here too (pyspark's daemon imports it after the fork, in
every worker: it starts no thread). Its objects are frozen out of the cyclic GC (``gc.freeze``)
before the workers fork: their collections do not walk (and copy-on-write touch) the preloaded
modules. Otherwise it is ``pyspark.daemon``."""

import gc
import importlib
import sys
from pathlib import Path

# what a batch build's tasks import (``batch._import_task_modules`` warms workers with the same)
TASK_MODULES = ("dumper.window", "gbinlog.local_engine", "gbinlog.spark_engine.layout",
                "gbinlog.spark_engine.windows", "gbinlog.spark_engine.speculate", "merger", "schema_shaper")


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` without Spark's ``pyspark.zip`` when that zip is the one inside the installed
    pyspark package (``…/site-packages/pyspark/python/lib/pyspark.zip``) and that package is
    what ``path`` imports as pyspark without the zip: the same modules then import from the
    package with their cached bytecode, where ``zipimport`` compiles every one of them at every
    daemon start (0.5 s of the first job, on 2 cores). A zip from another Spark (a cluster's
    ``SPARK_HOME``), or one that another pyspark on the path would replace, is kept."""
    from importlib.machinery import PathFinder

    for entry in path:
        zip_path = Path(entry)
        if zip_path.name != "pyspark.zip" or len(zip_path.parents) < 4:
            continue
        package = zip_path.parents[2]
        if package.name != "pyspark" or zip_path.parent.name != "lib" or zip_path.parents[1].name != "python":
            continue
        kept = [e for e in path if e != entry]
        found = PathFinder.find_spec("pyspark", kept)
        # only when the package this zip came with is the pyspark that imports without it
        if found is not None and found.origin == str(package / "__init__.py"):
            return kept
    return list(path)


if __name__ == "__main__":
    sys.path[:] = prefer_installed_pyspark(sys.path)   # before pyspark is first imported

    import pyspark.worker  # noqa: F401
    from pyspark.daemon import manager

    for module in TASK_MODULES:
        importlib.import_module(module)

    gc.freeze()
    manager()
