"""A DN whose copy ends before the others' (its last files not copied yet): ``gbinlog build`` writes
exactly what a complete build writes up to where that DN's input ends, says what it held back and
exits 3; the same build once the DN's files are complete continues byte for byte to one
uninterrupted build. The emission rule (``merger.emission``): the end of a DN's input is not a
watermark at infinity. ``--cluster-stopped`` writes the tail when the inputs are whole binlogs, and
refuses while a DN has a branch prepared and not committed.

Before the rule, the short build exited 0 having written hundreds of transactions without their
dn1 branch, under the GTIDs of the complete ones.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binlog import read_events
from dumper.verify import verify

ROOT = Path(__file__).resolve().parents[1]
DNS = ["dn0", "dn1", "dn2", "dn3"]
EXIT_HELD = 3


def gbinlog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def build(cluster: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return gbinlog("build", *[f"--dn={cluster / dn}" for dn in DNS], f"--out={out}", "--max-file-size=128KB",
                   "--no-progress", *extra)


def binlog_files(out: Path) -> list[Path]:
    return sorted(out.glob("binlog.0*"))


def cut_dn1(full: Path, cut: Path) -> list[str]:
    """``cut``: a copy of ``full`` whose dn1 lacks the last half of its files; returns them."""
    shutil.copytree(full, cut)
    files = sorted(p.name for p in (cut / "dn1").glob("mysql-bin.0*"))
    gone = files[len(files) // 2:]
    for name in gone:
        (cut / "dn1" / name).unlink()
    (cut / "dn1" / "mysql-bin.index").write_text("".join(f"./{n}\n" for n in files[:len(files) // 2]))
    return gone


def cts_markers(out: Path) -> list[str]:
    """The vtso of every written transaction, from the CTS markers of the files (mariadb-binlog
    prints the same lines; reading them here keeps the test fast)."""
    found = []
    for path in binlog_files(out):
        for ev in read_events(path):
            if ev.header.type_code == 29:       # ROWS_QUERY: '# CTS::<vtso>…'
                text = bytes(ev.raw[19 + 1:]).decode("latin-1")
                m = re.search(r"CTS::(\d{54})", text)
                if m:
                    found.append(m.group(1))
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("short")
    full = base / "full"
    r = gbinlog("simulate", "--workload=bank", "--dns=4", "--txns=1000", "--seed=1", "--max-file-size=65536",
                f"--out={full}")
    assert r.returncode == 0, r.stderr
    ref = base / "ref"
    r = build(full, ref)
    assert r.returncode == 0, r.stderr
    return {"full": full, "ref": ref, "base": base}


def finish_with_the_rest(cluster: dict[str, Path], cut: Path, gone: list[str], out: Path) -> None:
    """dn1's missing files arrive; the same build into ``out`` ends with the complete build's bytes."""
    for name in gone:
        shutil.copy2(cluster["full"] / "dn1" / name, cut / "dn1" / name)
    shutil.copy2(cluster["full"] / "dn1" / "mysql-bin.index", cut / "dn1" / "mysql-bin.index")
    r = build(cut, out)
    assert r.returncode == 0, r.stderr
    assert [p.read_bytes() for p in binlog_files(out)] == [p.read_bytes() for p in binlog_files(cluster["ref"])]


def assert_prefix_of(out: Path, ref: Path) -> None:
    """``out``'s files are a byte prefix of ``ref``'s: every file but the last equal, the last a
    prefix of the file of the same name."""
    mine, theirs = binlog_files(out), binlog_files(ref)
    assert mine and len(mine) <= len(theirs)
    for a, b in zip(mine[:-1], theirs, strict=False):
        assert a.read_bytes() == b.read_bytes(), a.name
    last = mine[-1].read_bytes()
    assert (ref / mine[-1].name).read_bytes()[:len(last)] == last


def test_a_short_dn_holds_the_output_at_its_end_and_the_grown_input_continues_it(cluster, tmp_path):
    cut = tmp_path / "cut"
    gone = cut_dn1(cluster["full"], cut)
    out = tmp_path / "out"
    r = build(cut, out)
    assert r.returncode == EXIT_HELD, r.stdout + r.stderr
    said = r.stderr.strip().splitlines()[-1]
    m = re.search(r"held back (\d+) transaction\(s\) from vtso (\d{54}) on: DN dn1's input ends at "
                  r"(mysql-bin\.\d{6}):(\d+) \(it passed vtso (\d{54})\)", said)
    assert m, said
    held, first_held, file, offset, passed = int(m[1]), m[2], m[3], int(m[4]), m[5]
    kept = sorted(p.name for p in (cut / "dn1").glob("mysql-bin.0*"))
    assert file == kept[-1] and 4 < offset <= (cut / "dn1" / file).stat().st_size
    assert_prefix_of(out, cluster["ref"])
    written, complete = cts_markers(out), cts_markers(cluster["ref"])
    assert written == complete[:len(written)] and len(written) < len(complete)
    # what was written is all at or below what dn1 passed; the next complete transaction is above
    assert written[-1] <= passed < first_held and complete[len(written)] >= first_held
    assert held > 0
    # dn1's files arrive: the same command continues to the complete build's bytes
    finish_with_the_rest(cluster, cut, gone, out)
    assert (out / "binlog.index").read_text() == (cluster["ref"] / "binlog.index").read_text()
    state, ref_state = (json.loads((d / "state.json").read_text()) for d in (out, cluster["ref"]))
    assert state == ref_state
    assert verify(out, cluster["full"] / "truth.json").ok


def cut_after_last_prepare(cut: Path) -> tuple[str, int]:
    """Truncate dn1's last file right after its last XA_PREPARE: that branch's commit is gone."""
    last = sorted((cut / "dn1").glob("mysql-bin.0*"))[-1]
    prepare = [ev for ev in read_events(last) if ev.header.type_code == 38][-1]
    with open(last, "r+b") as fh:
        fh.truncate(prepare.pos + len(prepare.raw))
    return last.name, prepare.pos


def test_cluster_stopped_writes_the_tail_of_whole_binlogs_and_refuses_an_open_branch(cluster, tmp_path):
    # whole binlogs: the same bytes as the plain build (every DN ended past the last transaction)
    whole = tmp_path / "whole"
    r = build(cluster["full"], whole, "--cluster-stopped")
    assert r.returncode == 0, r.stderr
    assert [p.read_bytes() for p in binlog_files(whole)] == [p.read_bytes() for p in binlog_files(cluster["ref"])]
    # dn1 cut between two of its transactions: said complete, its end passes everything, so the
    # tail past it is written (what the operator asked for), after the held build's bytes
    cut = tmp_path / "cut"
    cut_dn1(cluster["full"], cut)
    held, tail = tmp_path / "held", tmp_path / "tail"
    assert build(cut, held).returncode == EXIT_HELD
    r = build(cut, tail, "--cluster-stopped")
    assert r.returncode == 0, r.stderr
    assert_prefix_of(held, tail)
    assert len(cts_markers(tail)) > len(cts_markers(held))
    # dn1 cut right after a prepare: a branch open at its end, so it is not a stopped cluster's
    file, offset = cut_after_last_prepare(cut)
    r = build(cut, tmp_path / "refused", "--cluster-stopped")
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert re.search(rf"DN dn1: {file}: offset \d+: \d+ branch\(es\) prepared and not committed", r.stderr), r.stderr
    assert "--cluster-stopped" in r.stderr
    # without it the same input is held below the open branch, as any build
    assert build(cut, tmp_path / "plain").returncode == EXIT_HELD


@pytest.mark.slow
def test_spark_holds_where_the_local_engine_holds(cluster, tmp_path):
    """``--engine spark``, 3 windows: the short DN ends inside one window; that window stops
    where the local build stops and the windows above write nothing. With ``--cluster-stopped``
    both engines write the tail."""
    cut = tmp_path / "cut"
    cut_dn1(cluster["full"], cut)
    local = tmp_path / "local"
    r = build(cut, local)
    assert r.returncode == EXIT_HELD, r.stderr
    for ranges in (3,):     # the short DN ends inside a middle range; the one above holds at once
        out = tmp_path / f"spark{ranges}"
        r = build(cut, out, "--engine=spark", "--master=local[2]", f"--conf=spark.gbinlog.ranges={ranges}")
        assert r.returncode == EXIT_HELD, r.stdout + r.stderr
        assert r.stderr.strip().splitlines()[-1] == build(cut, tmp_path / f"again{ranges}").stderr.strip() \
            .splitlines()[-1]
        assert [p.read_bytes() for p in binlog_files(out)] == [p.read_bytes() for p in binlog_files(local)]
        assert json.loads((out / "state.json").read_text()) == json.loads((local / "state.json").read_text())
    # --cluster-stopped: the short DN's end passes everything, both engines write the tail
    whole = tmp_path / "whole"
    assert build(cut, whole, "--cluster-stopped").returncode == 0
    out = tmp_path / "spark-whole"
    r = build(cut, out, "--cluster-stopped", "--engine=spark", "--master=local[2]", "--conf=spark.gbinlog.ranges=3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [p.read_bytes() for p in binlog_files(out)] == [p.read_bytes() for p in binlog_files(whole)]
    assert len(binlog_files(whole)) > len(binlog_files(local))
    assert json.loads((out / "state.json").read_text()) == json.loads((whole / "state.json").read_text())


@pytest.mark.slow
def test_a_run_stopped_while_dn1_lags_then_finished_by_build_is_one_build(cluster, tmp_path):
    """``gbinlog run`` following the DN directories while dn1's copy lags: it writes what the held
    build writes and waits for dn1; stopped, then finished by ``gbinlog build`` once dn1's files
    are there: the complete build's bytes."""
    from tests.test_live_support import Service, wait_for

    cut = tmp_path / "cut"
    gone = cut_dn1(cluster["full"], cut)
    held = tmp_path / "held"
    assert build(cut, held).returncode == EXIT_HELD
    expected = len(cts_markers(held))
    out = tmp_path / "out"
    config = tmp_path / "run.toml"
    config.write_text(f'[output]\ndir = "{out}"\nrotate_size = "128KB"\n\n[server]\nport = 0\n\n[metrics]\nport = 0\n\n'
                      + "".join(f'[[dn]]\nid = "{dn}"\ndir = "{cut / dn}"\n\n' for dn in DNS))
    svc = Service(config, tmp_path / "run.log")
    try:
        svc.start()

        def written() -> int:
            try:
                return json.loads((out / "status.json").read_text()).get("written", 0)
            except (OSError, ValueError):
                return 0

        # it catches up to the held point and stands still there, waiting for dn1
        seen: list[int] = []
        wait_for(lambda: seen.append(written()) or (len(seen) > 40 and seen[-1] == seen[-40] > 0), 90,
                 "the run to stand still", interval=0.1)
        assert svc.alive(), svc.log_text()[-3000:]
        assert svc.terminate() == 0, svc.log_text()[-3000:]
    finally:
        svc.ensure_stopped()
    # what the held build wrote, but for its last transactions: a live merge takes a group only
    # once the DN it came from has a newer transaction, and dn1 has none yet
    got = cts_markers(out)
    assert got == cts_markers(held)[:len(got)] and expected - 5 <= len(got) <= expected
    finish_with_the_rest(cluster, cut, gone, out)
