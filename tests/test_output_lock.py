"""Every writer of an output directory takes its ``gbinlog.lock``: a ``gbinlog build`` (either engine)
into a directory a ``gbinlog run`` (or another build) writes is refused with one line naming the
directory and the holder's pid, exit 1, and writes nothing."""

from __future__ import annotations

import os

import pytest

from gbinlog.local_engine import BuildError, build
from gbinlog.output_lock import LOCK_FILE, OutputInUse, lock_holder, lock_output
from tests.writer_support import BANK_DNS, gbinlog, listing, one_error_line, run_config, service


def build_args(out, *extra: str) -> list[str]:
    return ["build", *[f"--dn={d}" for d in BANK_DNS], f"--out={out}", *extra]


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_build_into_a_directory_another_writer_holds_is_refused(tmp_path, engine):
    out = tmp_path / "out"
    lock = lock_output(out, "run")           # what gbinlog run takes at its start
    try:
        before = listing(out)
        line = one_error_line(gbinlog(*build_args(out, f"--engine={engine}")), 1)
        assert line.endswith(f"--out {out} is in use by another gbinlog run (pid {os.getpid()})"), line
        assert listing(out) == before
    finally:
        lock.release()


def test_build_into_the_directory_of_a_running_run_is_refused(tmp_path):
    out = tmp_path / "out"
    with service("run", "--config", run_config(tmp_path, out)) as svc:
        svc.wait_for("SIGTERM stops")
        proc = gbinlog(*build_args(out))
        line = one_error_line(proc, 1)
        assert line.endswith(f"--out {out} is in use by another gbinlog run (pid {svc.proc.pid})"), line
        assert proc.stdout == ""                  # no "built …": it stopped before its pipeline
        assert lock_holder(out).pid == svc.proc.pid
        assert svc.stop() == 0


def test_a_build_holds_the_lock_while_it_writes(tmp_path):
    """The local engine's build holds the lock: a second writer is refused meanwhile; afterwards the
    lock is free again (the file stays: removing it could let two writers in)."""
    out = tmp_path / "out"
    seen = []

    def second_writer(progress) -> None:
        if not seen:
            holder = lock_holder(out)
            with pytest.raises(OutputInUse, match=f"in use by another gbinlog build \\(pid {os.getpid()}\\)"):
                lock_output(out, "run")
            seen.append(holder)

    build(BANK_DNS, out, on_progress=second_writer)
    assert seen and seen[0].pid == os.getpid() and seen[0].command == "build"
    assert lock_holder(out) is None and (out / LOCK_FILE).exists()
    lock_output(out, "run").release()


def test_the_library_build_is_refused_too(tmp_path):
    out = tmp_path / "out"
    lock = lock_output(out, "build")
    try:
        with pytest.raises(BuildError, match=f"--out {out} is in use by another gbinlog build"):
            build(BANK_DNS, out)
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]
    finally:
        lock.release()
