"""Per-DN extraction in worker processes (``gbinlog.dn_worker``): the same transactions as
``extract`` in-process (vtsos, kinds, positions, restart points, every event's bytes), from the
start and from a restart point; the worker's typed errors reach the main process unchanged; a
build with workers writes the same bytes as one without.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from binlog.errors import ChecksumMismatch
from extractor import extract, storage_sequences
from gbinlog.dn_worker import worker_stream
from gbinlog.local_engine import Settings, build
from tests.test_restart_points import signature

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["mixed-2dn", "scale-2dn"])
def test_worker_stream_equals_extract(name):
    root = ROOT / "fixtures" / name
    dns = sorted(p.name for p in root.iterdir() if p.is_dir())
    seqs = storage_sequences(dns)
    for dn in dns:
        want = list(extract(root / dn, storage_seq=seqs[dn]))
        got = list(worker_stream(root / dn, dn, seqs[dn]))
        assert [signature(t) for t in got] == [signature(t) for t in want]
        assert [(t.dn, t.db, t.sql, t.archive, t.server_id) for t in got] == \
            [(t.dn, t.db, t.sql, t.archive, t.server_id) for t in want]
        # decoded bodies agree too (the rebuilt events carry a usable format context)
        for a, b in zip(got, want, strict=True):
            for ba, bb in zip(a.blocks, b.blocks, strict=True):
                assert ba.events[0].body.table == bb.events[0].body.table
        point = next(t.restart for t in want[len(want) // 2:] if t.restart is not None)
        again = list(worker_stream(root / dn, dn, seqs[dn], point))
        direct = list(extract(root / dn, storage_seq=seqs[dn], start=point.pos, state=point.vtso_state()))
        assert [signature(t) for t in again] == [signature(t) for t in direct]


def test_worker_errors_keep_their_type_and_place(tmp_path):
    src = ROOT / "fixtures" / "bank-4dn" / "dn1"
    dn = tmp_path / "dn1"
    shutil.copytree(src, dn)
    f = dn / "mysql-bin.000001"
    data = bytearray(f.read_bytes())
    data[20000] ^= 0x40
    f.write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch) as in_process:
        list(extract(dn, storage_seq="000001"))
    with pytest.raises(ChecksumMismatch) as in_worker:
        list(worker_stream(dn, "dn1", "000001"))
    assert str(in_worker.value) == str(in_process.value)
    assert in_worker.value.offset == in_process.value.offset and "mysql-bin.000001" in in_worker.value.source


def test_closing_early_stops_the_worker():
    stream = worker_stream(ROOT / "fixtures" / "mixed-2dn" / "dn0", "dn0", "000001")
    first = next(stream)
    assert first.vtso
    stream.close()  # kills and reaps the worker; nothing left running
    import multiprocessing

    assert not [p for p in multiprocessing.active_children() if p.name.startswith("gbinlog-extract")]


def test_build_with_and_without_workers_same_bytes(tmp_path):
    dirs = sorted((ROOT / "fixtures" / "ddl-3dn").glob("dn*"))
    build(dirs, tmp_path / "w", settings=Settings(workers=True, max_file_size=64 << 10))
    build(dirs, tmp_path / "n", settings=Settings(workers=False, max_file_size=64 << 10))
    a = {p.name: p.read_bytes() for p in (tmp_path / "w").glob("binlog.*")}
    b = {p.name: p.read_bytes() for p in (tmp_path / "n").glob("binlog.*")}
    assert a == b and len(a) >= 3
