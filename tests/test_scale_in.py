"""Scale-in: a DN leaves after its data moved away.

The ``scale-2dn`` fixture: dn2 joins at 40 %, and at 75 % dn1's groups move to dn0/dn2 and a
``StorageInstChange`` instruction lists only dn0, dn2 (on all three DNs). The merge lets dn1 go
after its branch of that instruction; ``state.json`` records it; a run stopped right after the
leave and resumed does not read dn1 again and ends with the bytes of an uninterrupted build, which
``verify --truth`` accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dumper.verify import verify
from extractor.members import ClusterIncomplete, check_dn_dirs
from gbinlog.local_engine import DirDn, Pipeline, Settings

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "fixtures" / "scale-2dn"
DNS = ["dn0", "dn1", "dn2"]
SETTINGS = dict(max_file_size=64 << 10, checkpoint_seconds=3600)


def truth() -> dict:
    return json.loads((SCALE / "truth.json").read_text())


def leave_vtso() -> str:
    (leave,) = [t for t in truth()["txns"] if t["kind"] == "instruction" and t["instruction"].get("left_dn")]
    assert leave["instruction"]["left_dn"] == "dn1" and leave["instruction"]["content"]["storageInstList"] == ["dn0", "dn2"]
    return leave["vtso"]


def files_of(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("binlog.[0-9]*"))}


def pipeline(out: Path, **kw) -> Pipeline:
    return Pipeline([DirDn(SCALE / dn) for dn in DNS], out, Settings(**SETTINGS), **kw)


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("whole")
    pipeline(out).run()
    return out


def test_the_leaving_dn_is_still_part_of_the_cluster_check():
    """dn1 left, but its binlog up to the leave is part of the cluster: it must be given."""
    check_dn_dirs({dn: SCALE / dn for dn in DNS})
    with pytest.raises(ClusterIncomplete, match="DN dn1 is missing"):
        check_dn_dirs({dn: SCALE / dn for dn in ("dn0", "dn2")})


def test_batch_build_records_the_leave_and_matches_the_truth(whole):
    state = json.loads((whole / "state.json").read_text())
    assert state["left"] == {"dn1": leave_vtso()}
    report = verify(whole, SCALE / "truth.json")
    assert report.ok, report.errors[:5]
    assert len(files_of(whole)) >= 2                                  # rotation across the leave too


def test_stop_right_after_the_leave_then_resume_gives_the_same_bytes(whole, tmp_path):
    out = tmp_path / "out"
    first = pipeline(out, should_stop=lambda: "dn1" in first.membership.left)
    first.run()
    state = json.loads((out / "state.json").read_text())
    assert state["left"] == {"dn1": leave_vtso()} and state["last_vtso"] == leave_vtso()
    second = pipeline(out)
    result = second.run()
    assert result.resumed and second.merged == ["dn0", "dn2"]      # dn1 is not read again
    assert files_of(out) == files_of(whole)
    assert json.loads((out / "state.json").read_text())["left"] == {"dn1": leave_vtso()}
