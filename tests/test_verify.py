"""``gbinlog verify``: passes on a good build (with the truth too) and names the
file and offset of each kind of damage — a flipped bit, a file without its ROTATE, a vtso going
down, a transaction split across files, a marker that contradicts its hint, a system table, a
missing or altered transaction against the truth.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dumper.global_binlog import render_file, write_index
from dumper.verify import list_binlogs, verify
from gbinlog.local_engine import Settings, build
from schema_shaper.model import LogicalBlock, LogicalKind, LogicalTxn
from tests.test_global_binlog import T0, block, dml, workload, write_all

ROOT = Path(__file__).resolve().parents[1]


def files_of(d: Path) -> list[Path]:
    return sorted(d.glob("binlog.[0-9]*"))


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("good")
    write_all(d, workload(200), max_file_size=4000)
    return d


def damaged(tmp_path: Path, good: Path, edit) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    for p in good.iterdir():
        (d / p.name).write_bytes(p.read_bytes())
    edit(d)
    return d


def test_good_output_passes_and_lists(good):
    r = verify(good)
    assert r.ok, r.errors
    assert r.kinds["dml"] > 100 and r.kinds["ddl"] == 3 and len(r.files) == len(files_of(good)) > 5
    listing = list_binlogs(good)
    assert [f.name for f in listing] == [p.name for p in files_of(good)]
    assert sum(f.txns for f in listing) == r.txns
    assert all(a.last_vtso < b.first_vtso for a, b in zip(listing, listing[1:], strict=False))


def test_flipped_bit_in_an_older_file(tmp_path, good):
    def edit(d):
        p = files_of(d)[1]
        data = bytearray(p.read_bytes())
        data[700] ^= 4
        p.write_bytes(bytes(data))
    r = verify(damaged(tmp_path, good, edit))
    assert not r.ok and "binlog.000002: offset" in r.errors[0] and ("CRC32" in r.errors[0] or "log_pos" in r.errors[0])


def test_file_without_rotate(tmp_path, good):
    def edit(d):
        p = files_of(d)[0]
        data = p.read_bytes()
        p.write_bytes(data[:data.rindex(b"binlog.000002") - 27])  # the ROTATE cut off
    r = verify(damaged(tmp_path, good, edit))
    assert any("binlog.000001" in e and "does not end with ROTATE" in e for e in r.errors), r.errors


def test_vtso_going_down_and_txn_split_across_files(tmp_path):
    txns = [dml(T0, 1), dml(T0, 3), dml(T0, 2)]
    d = tmp_path / "down"
    d.mkdir()
    (d / "binlog.000001").write_bytes(render_file(txns, seq=1, server_id=1, rotate=False))
    write_index(d, ["binlog.000001"])
    r = verify(d)
    assert any("is not above the previous" in e and "binlog.000001: offset" in e for e in r.errors), r.errors
    # a transaction cut by a ROTATE: the first file ends inside it
    d = tmp_path / "split"
    d.mkdir()
    one = render_file([dml(T0, 1), dml(T0, 2)], seq=1, server_id=1, rotate=True)
    xid_at = one.rindex(b"\x01CTS::") - 19 - 31  # the second txn's XID
    cut = one[:xid_at]
    from dumper.global_binlog import rotate_event
    (d / "binlog.000001").write_bytes(cut + rotate_event(len(cut), "binlog.000002", timestamp=T0, server_id=1))
    (d / "binlog.000002").write_bytes(render_file([dml(T0, 3)], seq=2, server_id=1, rotate=False, fde_timestamp=T0))
    write_index(d, ["binlog.000001", "binlog.000002"])
    r = verify(d)
    assert any("ROTATE inside a transaction" in e for e in r.errors), r.errors


def test_system_table_and_marker_mismatch(tmp_path):
    sys_txn = LogicalTxn(dml(T0, 2).vtso, LogicalKind.DML, [block("__cdc__", "__cdc_heartbeat__", [(1, "x")])])
    d = tmp_path / "sys"
    d.mkdir()
    (d / "binlog.000001").write_bytes(render_file([dml(T0, 1), sys_txn], seq=1, server_id=1, rotate=False))
    write_index(d, ["binlog.000001"])
    r = verify(d)
    assert any("system table __cdc__.__cdc_heartbeat__" in e for e in r.errors), r.errors
    # the hint announces one vtso, the marker says another
    t = dml(T0, 1, [LogicalBlock("shop", "orders", block("shop", "orders", [(1, "a")]).table_map,
                                 block("shop", "orders", [(1, "a")]).rows, "/*DRDS x */")])
    data = render_file([t], seq=1, server_id=1, rotate=False)
    other = dml(T0, 7).vtso.encode()
    i = data.rindex(b"CTS::") + 5
    fixed = bytearray(data[:i] + other + data[i + 54:])
    import zlib
    start = data.rindex(b"\x01CTS::") - 19
    fixed[-4:] = zlib.crc32(bytes(fixed[start:-4])).to_bytes(4, "little")
    d2 = tmp_path / "mismatch"
    d2.mkdir()
    (d2 / "binlog.000001").write_bytes(bytes(fixed))
    write_index(d2, ["binlog.000001"])
    r = verify(d2)
    assert any("differs from the vtso" in e for e in r.errors), r.errors


# -- against the truth -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drift(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("drift")
    build(sorted((ROOT / "fixtures" / "drift-2dn").glob("dn*")), d, settings=Settings())
    return d


def test_verify_cli_with_truth(drift):
    out = subprocess.run([sys.executable, "-m", "gbinlog.cli", "verify", str(drift), "--truth",
                          str(ROOT / "fixtures/drift-2dn/truth.json")], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "truth: every transaction once" in out.stdout and out.stdout.strip().endswith("OK")


def test_truth_catches_a_missing_and_an_altered_transaction(drift, tmp_path):
    truth = json.loads((ROOT / "fixtures/drift-2dn/truth.json").read_text())
    assert verify(drift, truth).ok
    # the truth with one DML more than the files hold
    extra = json.loads(json.dumps(truth))
    dml_txns = [t for t in extra["txns"] if t["kind"] == "dml"]
    gone = dml_txns[40]
    extra["txns"].remove(gone)
    r = verify(drift, extra)
    assert not r.ok and gone["vtso"] in " ".join(r.errors)
    # one value changed in the truth: the row no longer matches
    changed = json.loads(json.dumps(truth))
    t = next(t for t in changed["txns"] if t["kind"] == "dml" and t["changes"][0]["op"] == "insert")
    t["changes"][0]["rows"][0][0] = 987654321
    r = verify(drift, changed)
    assert any(t["vtso"] in e and "the truth has 987654321" in e for e in r.errors), r.errors
    # a final state that differs
    final = json.loads(json.dumps(truth))
    table = next(iter(final["tables"].values()))
    table["rows"] = table["rows"][1:]
    r = verify(drift, final)
    assert any("final state" in e for e in r.errors), r.errors
