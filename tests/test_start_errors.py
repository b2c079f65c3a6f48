"""A writer that cannot start says so in one line naming the key or path and what to do, and leaves
nothing behind: on a full disk (a real, full tmpfs) and with a meta store that does not answer (a
``mysql://`` URL to a closed local port, its password never shown)."""

from __future__ import annotations

from gbinlog.local_engine import build
from gbinlog.replica import free_port
from tests.writer_support import BANK_DNS, fill, gbinlog, listing, one_error_line, run_config, tmpfs

PASSWORD = "s3cret-pw"


def build_args(out, *extra: str) -> list[str]:
    return ["build", *[f"--dn={d}" for d in BANK_DNS], f"--out={out}", *extra]


def closed_store() -> tuple[str, str]:
    """A meta store URL nothing answers, and how errors must show it."""
    port = free_port()
    return (f"mysql://gbinlog:{PASSWORD}@127.0.0.1:{port}/gbinlog_meta",
            f"mysql://gbinlog:***@127.0.0.1:{port}/gbinlog_meta")


# -- a full disk ----------------------------------------------------------------------------------------
def test_build_on_a_full_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "256k") as disk:
        fill(disk)
        out = disk / "global" / "out"
        line = one_error_line(gbinlog(*build_args(out)), 1)
        assert f"--out {out}: " in line and "No space left on device" in line, line
        assert line.endswith("its file system is full: free space there"), line
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_run_on_a_full_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "256k") as disk:
        fill(disk)
        out = disk / "out"
        line = one_error_line(gbinlog("run", "--config", run_config(tmp_path, out)), 2)
        assert line.startswith(f"gbinlog run: error: output.dir {out}: "), line
        assert "No space left on device" in line and line.endswith("its file system is full: free space there")
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]


def test_run_on_a_full_disk_resuming_an_output_directory(tmp_path):
    """The lock of an existing directory can still be written; its meta store cannot be opened
    (SQLite's -wal/-shm need room): refused at start, naming metadb's file, the last status kept."""
    with tmpfs(tmp_path / "disk", "2m") as disk:
        out = disk / "out"
        build(BANK_DNS, out)
        (out / "status.json").write_text('{"state": "running", "from": "the previous run"}\n')
        fill(disk)
        before = listing(out)
        line = one_error_line(gbinlog("run", "--config", run_config(tmp_path, out)), 2)
        assert line.startswith(f"gbinlog run: error: metadb {out / 'meta.db'}: "), line
        assert line.endswith("its file system is full: free space there"), line
        after = listing(out)
        assert after.pop("gbinlog.lock").split()[1:] == [b"run"]    # the failed start's pid, no other change
        before.pop("gbinlog.lock")
        assert after == before


# -- a meta store that does not answer -----------------------------------------------------------------
def test_run_with_a_metadb_that_does_not_answer(tmp_path):
    url, shown = closed_store()
    out = tmp_path / "out"
    proc = gbinlog("run", "--config", run_config(tmp_path, out, top=f'metadb = "{url}"'))
    line = one_error_line(proc, 2)
    assert line.startswith(f"gbinlog run: error: metadb {shown}: Can't connect to MySQL server"), line
    assert line.endswith("check the URL, that the server runs and that it takes the user and password"), line
    assert PASSWORD not in proc.stderr
    assert not out.exists()                      # no lock, no status.json, no directory


def test_run_with_a_metadb_that_does_not_answer_keeps_the_last_status(tmp_path):
    url, shown = closed_store()
    out = tmp_path / "out"
    out.mkdir()
    (out / "status.json").write_text('{"state": "running", "from": "the previous run"}\n')
    proc = gbinlog("run", "--config", run_config(tmp_path, out, top=f'metadb = "{url}"'))
    assert f"metadb {shown}: " in one_error_line(proc, 2)
    assert listing(out) == {"status.json": b'{"state": "running", "from": "the previous run"}\n'}


def test_build_with_a_meta_store_that_does_not_answer(tmp_path):
    url, shown = closed_store()
    out = tmp_path / "new" / "out"
    proc = gbinlog(*build_args(out, f"--meta-store={url}"))
    line = one_error_line(proc, 1)
    assert f"--meta-store {shown}: Can't connect to MySQL server" in line, line
    assert PASSWORD not in proc.stderr
    assert not (tmp_path / "new").exists()
