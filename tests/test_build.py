"""``gbinlog build`` end to end: the global binlog of every fixture is
read by the real ``mariadb-binlog`` and replayed into a real MariaDB, rotation at 1 MB, and the
operator errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binlog import EventType, read_all
from dumper.verify import verify
from gbinlog.local_engine import DirDn, Settings, build, run_pipeline
from simulator.replay import literal
from simulator.run import simulate
from simulator.values import decode_value
from tests.mariadb import MariaDB, mariadb_binlog
from tests.test_simulator_binlogs import printed_rows, same_value

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))
GBINLOG = [sys.executable, "-m", "gbinlog.cli"]


def dn_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("dn"))


def run_cli(*args: str, check: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run([*GBINLOG, *args], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, **(env or {})})
    if check and out.returncode != 0:
        raise AssertionError(f"gbinlog {' '.join(args)}: {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """Every fixture built once with 256 KB files (mixed-2dn makes several)."""
    out = {}
    for name in FIXTURES:
        d = tmp_path_factory.mktemp(name)
        build(dn_dirs(ROOT / "fixtures" / name), d, settings=Settings(max_file_size=256 << 10))
        out[name] = d
    return out


def binlog_names(d: Path) -> list[str]:
    return [line.strip()[2:] for line in (d / "binlog.index").read_text().splitlines()]


# -- mariadb-binlog prints the truth's logical rows ------------------------------------------------
@pytest.mark.parametrize("name", FIXTURES)
def test_mariadb_binlog_prints_the_truths_logical_rows(built, name):
    truth = json.loads((ROOT / "fixtures" / name / "truth.json").read_text())
    d = built[name]
    text = mariadb_binlog("-v", "--base64-output=DECODE-ROWS", *[str(d / n) for n in binlog_names(d)])
    got = [(g["db"], g["table"], g["op"], img) for g in printed_rows(text) for img in g["rows"]]
    schemas = truth["logical_schemas"]
    want = [(c["db"], c["table"], c["op"], r if c["op"] == "update" else [r], schemas[c["schema"]])
            for t in truth["txns"] if t["kind"] == "dml" for c in t["changes"] for r in c["rows"]]
    assert len(got) == len(want) > 100
    for k, ((db, table, op, images), (tdb, ttable, top, timages, schema)) in enumerate(zip(got, want, strict=True)):
        assert (db, table, op) == (tdb, ttable, top), k
        for img, timg in zip(images, timages, strict=True):
            assert len(img) == len(schema["columns"]), (k, db, table)
            for c, printed, value in zip(schema["columns"], img, timg, strict=True):
                assert same_value(c["type"], printed, decode_value(value)), (k, c, printed, value)
    # every logical DDL once, in order, and no physical name anywhere
    for ddl in truth["ddls"]:
        assert text.count(ddl["mysql_sql"]) >= 1, ddl["mysql_sql"][:60]
    assert "_p0000" not in text and "__cdc" not in text


# -- replay with the real tools into a real MariaDB ------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = MariaDB.start(tmp_path_factory.mktemp("mariadb-replay"))
    yield s
    s.stop()


def checksum(server: MariaDB, db: str, table: str, columns: list[str]) -> tuple[int, int]:
    cols = ", ".join(f"`{c}`" for c in columns)
    rows = server.query(f"SELECT COUNT(*), BIT_XOR(CAST(CRC32(CONCAT_WS('|', {cols})) AS UNSIGNED)) "
                        f"FROM `{db}`.`{table}`")
    return int(rows[0][0]), int(rows[0][1])


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_replay_with_mariadb_binlog_into_mariadb_gives_the_truths_tables(built, server, name):
    truth = json.loads((ROOT / "fixtures" / name / "truth.json").read_text())
    d = built[name]
    files = [str(d / n) for n in binlog_names(d)]
    sql = subprocess.run(["mariadb-binlog", "--no-defaults", *files], capture_output=True, check=True).stdout
    server.run_sql(sql)
    for key, t in truth["tables"].items():
        columns = [c["name"] for c in t["columns"]]
        # the expected checksum: the truth's rows loaded into a scratch table of the same definition
        scratch = f"truth_{abs(hash(key)) % 10**8}"
        server.query(f"CREATE DATABASE IF NOT EXISTS `{scratch}`")
        server.run_sql(f"USE `{scratch}`;\n{t['create_sql']};\n", check=True)
        if t["rows"]:
            values = ", ".join("(" + ", ".join(literal(v, c) for v, c in zip(r, t["columns"], strict=True)) + ")"
                               for r in t["rows"])
            server.run_sql(f"SET time_zone = '+00:00';\nINSERT INTO `{scratch}`.`{t['table']}` VALUES {values};\n")
        assert checksum(server, t["db"], t["table"], columns) == checksum(server, scratch, t["table"], columns), key
        server.query(f"DROP DATABASE `{scratch}`")
    if "bank" in truth:
        b = truth["bank"]
        total = server.query(f"SELECT SUM(balance), COUNT(*) FROM `{b['db']}`.`{b['table']}`")[0]
        assert (int(total[0]), int(total[1])) == (b["expected_total"], b["accounts"])
    # tables the truth dropped are gone
    for ddl in truth["ddls"]:
        if ddl["sql_kind"] == "DROP_DATABASE":
            assert not server.query(f"SHOW DATABASES LIKE '{ddl['db']}'")


# -- rotation at 1 MB ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bigger(tmp_path_factory) -> Path:
    """A 4-DN bank run whose global binlog is several MB."""
    root = tmp_path_factory.mktemp("bank-big")
    simulate("bank", 4, 6000, 21, root / "in", max_file_size=1 << 20)
    return root / "in"


@pytest.mark.slow
def test_rotation_at_1mb_many_files_whole_txns_index(bigger, tmp_path):
    out = tmp_path / "out"
    r = run_cli("build", *[f"--dn={d}" for d in dn_dirs(bigger)], f"--out={out}", "--max-file-size=1MB",
                "--no-progress", check=True)
    assert "built" in r.stdout and "events/s" in r.stdout
    names = binlog_names(out)
    assert len(names) >= 4 and names == [f"binlog.{i:06d}" for i in range(1, len(names) + 1)]
    assert sorted(p.name for p in out.glob("binlog.0*")) == names
    for i, n in enumerate(names):
        evs = read_all(out / n)
        assert evs[0].type_code == EventType.FORMAT_DESCRIPTION
        if i < len(names) - 1:
            assert evs[-1].type_code == EventType.ROTATE and evs[-1].body.next_file == names[i + 1]
            assert (out / n).stat().st_size >= 1 << 20
            # no txn spans files: the last event before ROTATE is a CTS marker, the first after
            # the FDE starts a txn
            assert evs[-2].body.query.startswith(b"CTS::")
        # GTIDs on (the default): PREVIOUS_GTIDS after the FDE, a GTID event before each txn
        assert [e.type_code for e in evs[1:4]] == [EventType.PREVIOUS_GTIDS, EventType.GTID, EventType.QUERY]
    report = verify(out)
    assert report.ok, report.errors
    assert report.kinds["dml"] > 5000
    listing = run_cli("binlogs", str(out), check=True).stdout
    assert all(n in listing for n in names)
    events = run_cli("events", str(out / names[1]), "--from=4", "--limit=3", check=True).stdout.splitlines()
    assert events[1].split("\t")[:3] == [names[1], "4", "Format_desc"] and events[2].split("\t")[2] == "Previous_gtids"


# -- bad input and operator errors -----------------------------------------------------------------
@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("clusters")
    simulate("bank", 2, 60, 31, root / "a", truth=False)
    simulate("bank", 2, 60, 32, root / "b", truth=False)
    return root / "a", root / "b"


def assert_no_output(out: Path) -> None:
    assert not list(out.glob("binlog.*")) and not (out / "state.json").exists()


def test_missing_dn_dir(tmp_path):
    r = run_cli("build", f"--dn={ROOT / 'fixtures/bank-4dn/dn0'}", f"--dn={tmp_path / 'nope'}",
                f"--out={tmp_path / 'out'}")
    assert r.returncode == 1 and f"DN binlog directory {tmp_path / 'nope'} does not exist" in r.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_dn_dirs_from_different_clusters(two_clusters, tmp_path):
    a, b = two_clusters
    r = run_cli("build", f"--dn={a / 'dn0'}", f"--dn={b / 'dn1'}", f"--out={tmp_path / 'out'}")
    assert r.returncode == 1 and "DN dn1 is of another cluster" in r.stderr, r.stderr
    assert_no_output(tmp_path / "out")


def test_two_clusters_caught_in_the_stream_when_no_precheck_is_possible(two_clusters, tmp_path):
    """Live inputs cannot be read ahead: the membership rule stops the run at the first broadcast
    transaction that misses a member, before it is written."""
    a, b = two_clusters
    from dumper.cluster import ClusterMismatch

    with pytest.raises(ClusterMismatch, match="not one cluster"):
        run_pipeline([_NoPrecheck(DirDn(a / "dn0")), _NoPrecheck(DirDn(b / "dn1"))], tmp_path / "out")
    report = verify(tmp_path / "out")
    assert report.ok, report.errors  # whatever was written before is whole transactions


class _NoPrecheck:
    """A DN input that is not a ``DirDn`` (as a live one), wrapping one."""

    def __init__(self, inner: DirDn) -> None:
        self.inner = inner
        self.dn_id = inner.dn_id

    def server_id(self):
        return self.inner.server_id()

    def stream(self, restart, storage_seq, should_stop=None):
        return self.inner.stream(restart, storage_seq, should_stop)


@pytest.mark.slow
def test_out_dir_holding_another_clusters_binlog(two_clusters, tmp_path):
    a, b = two_clusters
    out = tmp_path / "out"
    run_cli("build", f"--dn={a / 'dn0'}", f"--dn={a / 'dn1'}", f"--out={out}", check=True)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith("binlog")}
    r = run_cli("build", f"--dn={b / 'dn0'}", f"--dn={b / 'dn1'}", f"--out={out}")
    assert r.returncode == 1 and "holds the global binlog of another cluster" in r.stderr, r.stderr
    # without state.json the files themselves tell: the last txn is not what these DNs produce
    (out / "state.json").unlink()
    r = run_cli("build", f"--dn={b / 'dn0'}", f"--dn={b / 'dn1'}", f"--out={out}")
    assert r.returncode == 1 and "another cluster" in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith("binlog")} == before
    # --no-resume refuses an existing output; the right DNs resume it (nothing new to add)
    r = run_cli("build", f"--dn={a / 'dn0'}", f"--dn={a / 'dn1'}", f"--out={out}", "--no-resume")
    assert r.returncode == 1 and "already holds a global binlog" in r.stderr
    r = run_cli("build", f"--dn={a / 'dn0'}", f"--dn={a / 'dn1'}", f"--out={out}", check=True)
    assert "0 transactions" in r.stdout and "resumed" in r.stdout
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name.startswith("binlog")} == before


def test_changed_settings_on_resume_are_refused(two_clusters, tmp_path):
    a, _ = two_clusters
    out = tmp_path / "out"
    run_cli("build", f"--dn={a / 'dn0'}", f"--dn={a / 'dn1'}", f"--out={out}", check=True)
    r = run_cli("build", f"--dn={a / 'dn0'}", f"--dn={a / 'dn1'}", f"--out={out}", "--max-file-size=64KB")
    assert r.returncode == 1 and "would give different bytes" in r.stderr


@pytest.mark.slow
def test_disk_full_on_a_tiny_tmpfs(bigger, tmp_path):
    """A real full filesystem (a 1.5 MB tmpfs for a ~5 MB output): the build stops with a clear
    error and a non-zero exit, the files end at a whole transaction; with room again it resumes to
    the bytes of an uninterrupted build."""
    src = bigger
    ref = tmp_path / "ref"
    run_cli("build", *[f"--dn={d}" for d in dn_dirs(src)], f"--out={ref}", check=True)
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", str(mnt)], check=True)
    try:
        meta = tmp_path / "meta.db"  # the meta store elsewhere: the binlog is what fills the disk
        r = run_cli("build", *[f"--dn={d}" for d in dn_dirs(src)], f"--out={mnt}", f"--meta-store={meta}")
        assert r.returncode == 1 and "No space left on device" in r.stderr, (r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        report = verify(mnt)
        assert report.ok and report.txns > 1000, report.errors
        subprocess.run(["mount", "-o", "remount,size=32m", str(mnt)], check=True)
        run_cli("build", *[f"--dn={d}" for d in dn_dirs(src)], f"--out={mnt}", f"--meta-store={meta}", check=True)
        for p in ref.glob("binlog.*"):
            assert (mnt / p.name).read_bytes() == p.read_bytes(), p.name
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(mnt, ignore_errors=True)


def test_progress_bar_and_summary(tmp_path):
    """--progress forces the bar (normally only on a terminal): input bytes, txns, events, MB."""
    src = ROOT / "fixtures" / "drift-2dn"
    r = run_cli("build", *[f"--dn={d}" for d in dn_dirs(src)], f"--out={tmp_path / 'out'}", "--progress", check=True)
    assert "build:" in r.stderr and "txns=" in r.stderr and "100%" in r.stderr, r.stderr[-500:]
    assert r.stdout.startswith(f"built {tmp_path / 'out'}: 217 transactions (204 written")
    r = run_cli("build", *[f"--dn={d}" for d in dn_dirs(src)], f"--out={tmp_path / 'out2'}", check=True)
    assert r.stderr == ""  # not a terminal: no bar
