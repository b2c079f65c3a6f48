"""Damaged commit TSOs are named as what they are, with the DN, the file and an event's start, and
nothing wrong is written:

* a commit TSO moved an hour back, or an hour ahead: ``TsoWentBack`` (the Sorter's check: a TSO
  fetched after a transaction's prepare is above every commit the DN wrote before it);
* two branches of one distributed transaction with different commit TSOs: ``BranchTsoMismatch``
  naming both DNs (the merge's branch consistency check), instead of one transaction split into
  two global ones that ``verify`` passed.

Each input is the ``bank-4dn`` fixture with one GCN event's commit TSO changed (CRC32 fixed, so
the reader accepts the bytes), built by the compiled kernels and by the pure-Python path.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from binlog import read_events
from extractor import extract, storage_sequences

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "bank-4dn"
DNS = ["dn0", "dn1", "dn2", "dn3"]
HOUR = 3_600_000 << 22          # an hour of TSO (physical milliseconds above 22 logical bits)


def set_commit_tso(cluster: Path, dn: str, old: int, new: int) -> tuple[str, int]:
    """The GCN (flag 0x04) carrying commit TSO ``old`` on ``dn`` carries ``new``; its CRC32 fixed."""
    for path in sorted((cluster / dn).glob("mysql-bin.0*")):
        data = bytearray(path.read_bytes())
        for ev in read_events(bytes(data)):
            if ev.header.type_code == 105 and ev.raw[19] & 0x04 and struct.unpack_from("<Q", ev.raw, 20)[0] == old:
                struct.pack_into("<Q", data, ev.pos + 20, new)
                end = ev.pos + len(ev.raw)
                struct.pack_into("<I", data, end - 4, zlib.crc32(bytes(data[ev.pos:end - 4])))
                path.write_bytes(bytes(data))
                return path.name, ev.pos
    raise AssertionError(f"no GCN with commit TSO {old} on {dn}")


def build(cluster: Path, out: Path, pure: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"GBINLOG_PURE_PYTHON": "1"} if pure else {})}
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *[f"--dn={cluster / d}" for d in DNS],
                           f"--out={out}", "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env)


def event_starts(path: Path) -> set[int]:
    return {ev.pos for ev in read_events(path)}


def dn_txns(dn: str) -> list:
    return list(extract(FIXTURE / dn, storage_seq=storage_sequences(DNS)[dn]))


@pytest.fixture
def cluster(tmp_path) -> Path:
    copy = tmp_path / "cluster"
    shutil.copytree(FIXTURE, copy)
    return copy


WENT_BACK = re.compile(r"Error: DN dn0: (mysql-bin\.\d{6}): offset (\d+): commit TSO (\d+) of the transaction begun "
                       r"here goes back below TSO (\d+), which this DN committed before that transaction's "
                       r"prepare \(([\d,.]+) s higher\): a commit TSO went back here or jumped ahead before")
JUMPED = re.compile(r"Error: DN dn0: (mysql-bin\.\d{6}): offset (\d+): the transaction begun here commits with TSO "
                    r"(\d+), ([\d,.]+) s above (heartbeat|ddl_mark|instruction) (\d+) that every other DN has and "
                    r"this DN lacks below it: its commit TSO jumped ahead")


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
@pytest.mark.parametrize("shift", [-HOUR, HOUR], ids=["an-hour-back", "an-hour-ahead"])
def test_a_commit_tso_moved_is_named_with_dn_file_and_offset(cluster, tmp_path, shift, pure):
    victim = [t for t in dn_txns("dn0") if t.tso and t.kind.value == "dml"][40]
    set_commit_tso(cluster, "dn0", victim.tso, victim.tso + shift)
    r = build(cluster, tmp_path / "out", pure)
    assert r.returncode == 1, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    back, jumped = WENT_BACK.match(line), JUMPED.match(line)
    assert back or (jumped and shift > 0), line
    m = back or jumped
    file, offset = m[1], int(m[2])
    assert offset in event_starts(cluster / "dn0" / file)      # an event's start
    if back:
        low, high, gap = int(m[3]), int(m[4]), float(m[5].replace(",", ""))
        assert 3590 < gap < 3610 and high - low > HOUR - (10_000 << 22)
        if shift < 0:       # the moved transaction is named, where it began
            assert low == victim.tso + shift and (file, offset) == (victim.start.file, victim.start.offset)
        else:               # the jumped one is the TSO the next commit went below
            assert high == victim.tso + shift
    else:                   # the jumped transaction itself, where it began
        assert int(m[3]) == victim.tso + shift and (file, offset) == (victim.start.file, victim.start.offset)
        assert 3590 < float(m[4].replace(",", "")) < 3610


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "python"])
def test_branches_with_two_commit_tsos_are_an_error_naming_both(cluster, tmp_path, pure):
    others = {t.txn_id: (d, t) for d in DNS[1:] for t in dn_txns(d) if t.tso}
    ours = next(t for t in dn_txns("dn0")[30:] if t.tso and t.txn_id in others)
    theirs_dn, theirs = others[ours.txn_id]
    assert theirs.tso == ours.tso
    set_commit_tso(cluster, "dn0", ours.tso, ours.tso + 1)      # one logical tick: order kept, TSOs differ
    r = build(cluster, tmp_path / "out", pure)
    assert r.returncode == 1, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    names = {"dn0": (ours.tso + 1, ours.start), theirs_dn: (theirs.tso, theirs.start)}
    m = re.match(r"Error: DN (dn\d): (mysql-bin\.\d{6}): offset (\d+): distributed transaction (\d+) commits with "
                 r"TSO (\d+) here and with TSO (\d+) on DN (dn\d) \(its branch begun at (mysql-bin\.\d{6}):(\d+)\)",
                 line)
    assert m, line
    assert int(m[4]) == ours.txn_id and {m[1], m[7]} == {"dn0", theirs_dn}
    here_tso, here_start = names[m[1]]
    there_tso, there_start = names[m[7]]
    assert (int(m[5]), m[2], int(m[3])) == (here_tso, here_start.file, here_start.offset)
    assert (int(m[6]), m[8], int(m[9])) == (there_tso, there_start.file, there_start.offset)


def test_a_dn_missing_from_a_heartbeat_behind_a_jumped_commit_is_named_as_a_jump():
    """The membership rule with the merge's heads: dn0 lacks heartbeat H while its next transaction
    commits an hour above H, so its TSO jumped; without the heads it stays "not one cluster"."""
    from dumper.cluster import ClusterMismatch, check_broadcast_members
    from extractor import DnTxn, Pos, TxnKind
    from merger import GlobalTxn, TsoJumpedAhead

    tso = 7_202_458_831_000_000_000
    hb = f"{tso:019d}{7:019d}{'0' * 16}"
    branch = DnTxn(TxnKind.HEARTBEAT, "dn1", 7, "b", Pos("mysql-bin.000003", 4), xid="x", vtso=hb, tso=tso)
    g = GlobalTxn(hb, TxnKind.HEARTBEAT, [], [branch])
    jumped = DnTxn(TxnKind.DML, "dn0", 9, "b", Pos("mysql-bin.000002", 1234), xid="y", tso=tso + HOUR,
                   vtso=f"{tso + HOUR:019d}{9:019d}{'0' * 16}")
    with pytest.raises(TsoJumpedAhead) as err:
        check_broadcast_members(g, {"dn0", "dn1"}, set(), {"dn0": jumped}.get)
    assert (err.value.dn, err.value.file, err.value.offset) == ("dn0", "mysql-bin.000002", 1234)
    assert "3,600.000 s above heartbeat" in str(err.value)
    with pytest.raises(ClusterMismatch, match="not from dn0"):
        check_broadcast_members(g, {"dn0", "dn1"}, set())
