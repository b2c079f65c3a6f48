"""Shared helpers for the Spark engine tests: one session for the whole run, fixture lists and
an exact fingerprint of merged transactions.

The session fixture lives here (not in conftest.py); test modules import it with
``from tests.spark_support import spark  # noqa: F401``. pytest shares a session-scoped fixture
across modules when it is the same function object, so every Spark test module uses one JVM.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").iterdir() if (p / "truth.json").is_file())
# The JVM's class-data-sharing archive: written by the first run, halves session start after it.
CDS_ARCHIVE = Path(os.environ.get("GBINLOG_SPARK_CDS", f"/tmp/gbinlog-spark-{os.getuid()}/spark-cds.jsa"))


def dn_dirs(fixture: Path) -> list[Path]:
    return sorted((d for d in fixture.iterdir() if d.is_dir() and d.name.startswith("dn")),
                  key=lambda d: int(d.name[2:]))


def fast_java_options() -> str:
    """JVM options for test sessions: fast start (serial GC, C1 only) + the CDS archive."""
    opts = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable"
    if CDS_ARCHIVE.is_file():
        return f"{opts} -XX:SharedArchiveFile={CDS_ARCHIVE}"
    CDS_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    return f"{opts} -XX:ArchiveClassesAtExit={CDS_ARCHIVE}"


def session_conf() -> dict[str, str]:
    jopts = fast_java_options()
    return {"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2", "spark.driver.extraJavaOptions": jopts,
            "spark.executor.extraJavaOptions": jopts}


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for every Spark test of the run."""
    from gbinlog.spark_engine.session import spark_session

    session = spark_session("local[2]", session_conf(), app_name="gbinlog-tests")
    yield session
    session.stop()


def event_fp(ev) -> tuple:
    return (ev.pos, bytes(ev.raw), ev.ctx.checksum, ev.ctx.server_version, bytes(ev.ctx.post_header_len),
            ev.ctx.binlog_version)


def block_fp(b) -> tuple:
    return (b.trace_id, b.db, b.table, b.hint, event_fp(b.rows_query) if b.rows_query else None,
            tuple(event_fp(e) for e in b.events))


def dn_txn_fp(t) -> tuple:
    """Every field of a DnTxn except the process-local ``opened_at``."""
    return (t.vtso, t.kind, t.dn, t.txn_id, t.branch, tuple(t.start), t.xid, tuple(t.end) if t.end else None,
            t.tso, t.server_id, t.archive, t.restart, t.db, t.sql, event_fp(t.query) if t.query else None,
            tuple(block_fp(b) for b in t.blocks))


def global_fp(g) -> tuple:
    return (g.vtso, g.kind, tuple(block_fp(b) for b in g.blocks), tuple(dn_txn_fp(b) for b in g.branches))
