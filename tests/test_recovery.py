"""Recovery of the global binlog on open (docs/architecture.md).

Every way a crash can leave the files — a cut at any byte, a torn last event, a flipped bit in the
tail, a ROTATE without its next file, a next file with half an FDE, a full file not yet rotated, an
index that does not list the newest file — is repaired on open so that appending the remaining
transactions gives exactly the bytes of an uninterrupted run. Corruption before the last marker or
in an older file is refused, not "repaired".
"""

from __future__ import annotations

import random

import pytest

from binlog import EventType, read_all
from dumper.global_binlog import DumperError, GlobalBinlog, writes
from dumper.recovery import MARKER_SIZE
from tests.test_global_binlog import binlog_files, workload, write_all

E = EventType
MAX = 3000


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: 160 txns in files of ~3 KB."""
    txns = workload(160)
    d = tmp_path_factory.mktemp("ref")
    write_all(d, txns, max_file_size=MAX)
    return txns, binlog_files(d)


def resume(directory, txns, **kw) -> GlobalBinlog:
    """Reopen (recover) and append what is missing, as the runner does: vtso > last."""
    w = GlobalBinlog(directory, max_file_size=MAX, **kw)
    last = w.last_vtso
    for t in txns:
        if last is None or t.vtso > last:
            w.append(t)
    w.close()
    return w


def materialize(directory, files: dict[str, bytes], index: list[str] | None = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    names = list(files) if index is None else index
    (directory / "binlog.index").write_text("".join(f"./{n}\n" for n in names))


@pytest.mark.slow
def test_cut_anywhere_then_resume_gives_identical_bytes(tmp_path, reference):
    """The crash stopped the writer after N bytes of the whole output (files written in order):
    every prefix of the last file, incl. mid-FDE, mid-event and mid-ROTATE, at 60 random cuts and
    every event boundary of one file."""
    txns, ref = reference
    names = list(ref)
    rng = random.Random(5)
    cuts = [(rng.randrange(len(names)), None) for _ in range(60)]
    k = len(names) // 2
    cuts += [(k, e.end_pos) for e in read_all(ref[names[k]])] + [(k, e.pos + 7) for e in read_all(ref[names[k]])]
    cuts += [(0, 0), (0, 3), (0, 30), (len(names) - 1, len(ref[names[-1]]))]
    for n, (fi, at) in enumerate(cuts):
        cut = rng.randrange(len(ref[names[fi]]) + 1) if at is None else at
        files = {name: ref[name] for name in names[:fi]}
        files[names[fi]] = ref[names[fi]][:cut]
        # the index is rewritten right after a file is created, so it may or may not list it yet
        index = list(files) if n % 2 else list(files)[:-1]
        d = tmp_path / f"c{n}"
        materialize(d, files, index)
        resume(d, txns)
        assert binlog_files(d) == ref, (names[fi], cut)
        assert (d / "binlog.index").read_text() == "".join(f"./{x}\n" for x in names)


def test_torn_last_event_is_cut_and_reported(tmp_path, reference):
    txns, ref = reference
    names = list(ref)
    files = {n: ref[n] for n in names[:3]}
    evs = read_all(files[names[2]])
    xid = next(e for e in reversed(evs) if e.type_code == E.XID)
    files[names[2]] = files[names[2]][:xid.pos + 10]  # the file ends 10 bytes into an XID
    materialize(tmp_path, files)
    w = GlobalBinlog(tmp_path, max_file_size=MAX)
    marker = next(e for e in reversed(evs) if e.pos < xid.pos and e.type_code == E.ROWS_QUERY
                  and e.body.query.startswith(b"CTS::"))
    assert w.position == marker.end_pos and w.last_vtso == marker.body.query[5:].decode()
    assert any("torn event at" in a for a in w.recovery.actions), w.recovery.actions
    assert (tmp_path / names[2]).stat().st_size == marker.end_pos
    w.close()
    resume(tmp_path, txns)
    assert binlog_files(tmp_path) == ref


def test_flipped_bit_in_the_unfinished_tail_is_cut(tmp_path, reference):
    txns, ref = reference
    names = list(ref)
    data = bytearray(ref[names[1]])
    evs = read_all(bytes(data))
    rotate = evs[-1]
    data[rotate.pos + 25] ^= 0x10  # a torn write left garbage in the ROTATE
    materialize(tmp_path, {names[0]: ref[names[0]], names[1]: bytes(data)})
    w = GlobalBinlog(tmp_path, max_file_size=MAX)
    assert any("CRC32 mismatch" in a for a in w.recovery.actions)
    assert w.file_name == names[2]  # re-rotated: the file was full
    w.close()
    resume(tmp_path, txns)
    assert binlog_files(tmp_path) == ref


def test_rotate_written_next_file_missing(tmp_path, reference):
    txns, ref = reference
    names = list(ref)
    materialize(tmp_path, {n: ref[n] for n in names[:4]})
    w = GlobalBinlog(tmp_path, max_file_size=MAX)
    # binlog.000004 is complete and ends with ROTATE: the writer continues in binlog.000005
    assert w.file_name == names[4] and any("ends with ROTATE" in a for a in w.recovery.actions)
    w.close()
    resume(tmp_path, txns)
    assert binlog_files(tmp_path) == ref


def test_checkpoint_hint_skips_the_scan_and_a_wrong_hint_is_ignored(tmp_path, reference):
    txns, ref = reference
    names = list(ref)
    last = names[-2]
    evs = read_all(ref[last])
    markers = [e for e in evs if e.type_code == E.ROWS_QUERY and e.body.query.startswith(b"CTS::")]
    assert len(markers) >= 3
    files = {n: ref[n] for n in names[:-1]}
    files[last] = ref[last][:markers[1].end_pos + 30]
    for hint in [(last, markers[0].end_pos), (last, markers[0].end_pos + 5), (names[0], 400), (last, 10**9)]:
        d = tmp_path / f"h{hint[1]}{hint[0]}"
        materialize(d, files)
        w = GlobalBinlog(d, max_file_size=MAX, hint=hint)
        assert w.position == markers[1].end_pos and w.last_vtso == markers[1].body.query[5:].decode()
        w.close()
        resume(d, txns)
        assert binlog_files(d) == ref
    assert MARKER_SIZE == markers[0].h[3]


def test_damaged_older_file_is_refused_not_repaired(tmp_path, reference):
    """Only the last file can hold a crash's leftovers. When the last file holds no transaction,
    the previous one must end ``CTS ROTATE``; if it does not, that is corruption: refused, files
    untouched. (A damaged byte deep inside an older file is ``gbinlog verify``'s job.)"""
    txns, ref = reference
    names = list(ref)
    files = {n: ref[n] for n in names[:2]}
    files[names[1]] = ref[names[1]][:200]        # FDE + part of a first txn: cut back to the FDE
    damaged = bytearray(ref[names[0]])
    damaged[-30] ^= 1                            # inside binlog.000001's ROTATE
    files[names[0]] = bytes(damaged)
    materialize(tmp_path / "a", files)
    with pytest.raises(DumperError, match=r"binlog\.000001: offset \d+: .*not the last file: corruption"):
        GlobalBinlog(tmp_path / "a", max_file_size=MAX)
    assert (tmp_path / "a" / names[0]).read_bytes() == bytes(damaged)
    assert (tmp_path / "a" / names[1]).read_bytes() == ref[names[1]][:200]
    # the index names a file that is gone
    materialize(tmp_path / "c", {names[0]: ref[names[0]]}, index=names[:2])
    with pytest.raises(DumperError, match="binlog.000002, which do not exist"):
        GlobalBinlog(tmp_path / "c", max_file_size=MAX)


def test_empty_first_file_is_removed_and_restarted(tmp_path, reference):
    txns, ref = reference
    materialize(tmp_path, {"binlog.000001": b"\xfebin\x00\x00"})
    w = GlobalBinlog(tmp_path, max_file_size=MAX)
    assert w.files == [] and w.last_vtso is None
    w.close()
    resume(tmp_path, txns)
    assert binlog_files(tmp_path) == ref
    assert sum(1 for t in txns if writes(t)) > 100


@pytest.mark.parametrize("damage", ["torn", "missing", "bad_fde"])
def test_damaged_middle_file_stops_the_build_naming_it_and_nothing_is_written(tmp_path, damage):
    """Recovery checks every file the index lists, not only the last. A middle
    file cut short (its ROTATE gone), deleted while still listed, or with a broken FDE: ``gbinlog
    build`` resuming the directory says so in one line naming the file, exit 1, and changes nothing."""
    from tests.test_build import ROOT, dn_dirs, run_cli

    dns = [f"--dn={d}" for d in dn_dirs(ROOT / "fixtures" / "bank-4dn")]
    out = tmp_path / "out"
    run_cli("build", *dns, f"--out={out}", "--max-file-size=32KB", "--no-progress", check=True)
    names = sorted(p.name for p in out.glob("binlog.0*"))
    assert len(names) >= 3
    victim = out / names[1]
    if damage == "torn":
        victim.write_bytes(victim.read_bytes()[:victim.stat().st_size // 2])
    elif damage == "missing":
        victim.unlink()
    else:
        data = bytearray(victim.read_bytes())
        data[30] ^= 0xFF                      # inside the FDE's server version
        victim.write_bytes(bytes(data))
    def contents() -> dict[str, bytes]:     # (the lock file names its last holder's pid)
        return {p.name: p.read_bytes() for p in out.iterdir() if p.name != "gbinlog.lock"}

    before = contents()
    r = run_cli("build", *dns, f"--out={out}", "--max-file-size=32KB", "--no-progress")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert names[1] in lines[0], lines[0]
    assert contents() == before
