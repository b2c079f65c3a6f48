"""``output.ddl_comments`` / ``build --no-ddl-comments``: DDL query events without the ``# POLARX_*``
lines (``schema_shaper.query.ddl_text``), read back by the real ``mariadb-binlog``; the rows are the
same, ``verify --truth`` passes, a resume with the other setting is refused, and ``--engine
spark`` writes the same bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.mariadb import mariadb_binlog

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "ddl-3dn"


def gbinlog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], cwd=ROOT, capture_output=True, text=True)


def build(out: Path, *extra: str) -> subprocess.CompletedProcess:
    dns = [a for d in sorted(p for p in FIXTURE.iterdir() if p.is_dir()) for a in ("--dn", str(d))]
    return gbinlog("build", *dns, "--out", str(out), "--no-progress", *extra)


def printed(out: Path) -> str:
    files = [line.strip()[2:] for line in (out / "binlog.index").read_text().splitlines() if line.strip()]
    return mariadb_binlog("--base64-output=decode-rows", "-v", *[str(out / f) for f in files])


def statements(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(start)]


@pytest.mark.slow
def test_ddl_without_polarx_lines_same_rows_and_a_resume_keeps_the_setting(tmp_path):
    with_lines, without = tmp_path / "with", tmp_path / "without"
    assert build(with_lines).returncode == 0
    r = build(without, "--no-ddl-comments")
    assert r.returncode == 0, r.stderr
    a, b = printed(with_lines), printed(without)
    ddl = ("CREATE ", "ALTER ", "DROP ", "RENAME ", "TRUNCATE ")
    assert len(statements(a, "# POLARX_TSO=")) >= 10 and statements(b, "# POLARX_") == []
    # the same DDL statements, in the same order, and the same row images
    assert statements(a, ddl) == statements(b, ddl) and len(statements(b, ddl)) >= 10
    assert statements(a, "### ") == statements(b, "### ") and len(statements(b, "### ")) > 500
    r = gbinlog("verify", str(without), "--truth", str(FIXTURE / "truth.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    # the output records the setting: the other one is refused on the same directory
    r = build(without)
    assert r.returncode != 0 and "ddl_comments" in r.stderr, r.stderr
    r = build(with_lines, "--no-ddl-comments")
    assert r.returncode != 0 and "ddl_comments" in r.stderr, r.stderr
    # the Spark engine writes the same bytes with the setting (its windows run the same pipeline)
    r = build(tmp_path / "spark", "--no-ddl-comments", "--engine", "spark", "--master", "local[2]",
              "--conf", "spark.gbinlog.ranges=3")
    assert r.returncode == 0, r.stderr
    for name in (without / "binlog.index").read_text().split():
        assert (tmp_path / "spark" / name).read_bytes() == (without / name).read_bytes(), name
