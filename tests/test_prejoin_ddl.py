"""A joining DN's physical DDLs from before its join reach the shaper.

The ``scale-2dn`` fixture: before the ``StorageInstChange`` that adds dn2, dn2 gets a copy of group
``scale_p00000`` (``CREATE DATABASE`` + ``CREATE TABLE kv_…``); after the join the group switches to
dn2 and dn0 drops its old copy (``DROP TABLE kv_…``, ``DROP DATABASE scale_p00000``). With DNs that
log TABLE_MAPs without column names (``binlog_row_metadata=MINIMAL``) the shaper names the columns
of dn2's rows from its physical model: only dn2's ``CREATE TABLE`` says the table lives on dn2 now
(so dn0's drop is its old copy's). ``gbinlog run`` opens a standby dn2 only at the join: the
merge sets dn2's earlier history aside (``Membership.prejoin``) and the pipeline hands its
physical DDLs to the shaper at the join. Without that the rows of dn2 after the join are refused.
A batch build reads dn2 from its start, so (as the Spark batch build) it applies those DDLs at
their own vtsos, before the cluster's history: right with column names in the TABLE_MAPs (the
simulator's, the bytes are the same), refused with MINIMAL ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gbinlog.local_engine import DirDn, Pipeline, Settings, build
from schema_shaper import UnknownPhysicalSchema
from tests.test_shape_util import without_column_names

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "fixtures" / "scale-2dn"
DNS = ["dn0", "dn1", "dn2"]
SETTINGS = dict(max_file_size=64 << 10, checkpoint_seconds=3600)


def minimal(txn):
    """The transaction as a DN with ``binlog_row_metadata=MINIMAL`` logs it (no column names)."""
    txn.blocks = without_column_names(txn.blocks)
    return txn


class MinimalDn(DirDn):
    """A DN directory whose TABLE_MAPs are read as a MINIMAL-metadata DN writes them."""

    def __init__(self, dn: str, standby: bool = False) -> None:
        super().__init__(SCALE / dn, standby=standby)

    def stream(self, restart, storage_seq, should_stop=None):
        return (minimal(t) for t in super().stream(restart, storage_seq, should_stop))


def run(out: Path, standby: bool, **kw) -> Pipeline:
    p = Pipeline([MinimalDn(dn, standby=standby and dn == "dn2") for dn in DNS], out, Settings(**SETTINGS), **kw)
    p.run()
    return p


def files_of(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("binlog.[0-9]*"))}


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Path:
    """``gbinlog build`` of the fixture as written (TABLE_MAPs with column names)."""
    out = tmp_path_factory.mktemp("batch")
    build([SCALE / dn for dn in DNS], out, settings=Settings(**SETTINGS))
    return out


def test_the_fixture_moves_a_group_onto_the_joining_dn():
    prejoin = [t.sql for t in MinimalDn("dn2").stream(None, "000001") if t.sql]
    assert any(q.startswith("CREATE TABLE `kv_") for q in prejoin)
    dropped = [t.sql for t in MinimalDn("dn0").stream(None, "000001") if t.sql and t.sql.startswith("DROP")]
    assert dropped and dropped[0].startswith("DROP TABLE IF EXISTS `kv_")


def test_a_standby_dn_brings_its_physical_ddl_at_the_join(batch, tmp_path):
    p = run(tmp_path / "out", standby=True)
    assert list(p.membership.joined) == ["dn2"] and p.membership.prejoin == []
    assert files_of(tmp_path / "out") == files_of(batch)       # the same bytes as with column names


@pytest.mark.parametrize("how", ["dropped at the join", "read in vtso order from the start"])
def test_without_them_the_joined_dns_rows_are_refused(tmp_path, monkeypatch, how):
    """Dropped, or dn2 read from its start as a batch build does (its pre-join DDLs then carry
    vtsos from before the cluster's own history: dn0's CREATE, the mark and dn0's DROP of its copy
    all come after; a build of MINIMAL-metadata DNs stops there with this error)."""
    if how.startswith("dropped"):
        monkeypatch.setattr(Pipeline, "prejoin", lambda self, g: self.membership.prejoin.clear())
    with pytest.raises(UnknownPhysicalSchema) as info:
        run(tmp_path / "out", standby=how.startswith("dropped"))
    assert info.value.dn == "dn2" and info.value.table.startswith("scale_p00000.kv_")


def test_stop_right_after_the_join_then_resume(batch, tmp_path):
    """The pre-join DDLs are in the meta store at the join's vtso: a resumed run has them."""
    out = tmp_path / "out"
    first = Pipeline([MinimalDn(dn, standby=dn == "dn2") for dn in DNS], out, Settings(**SETTINGS),
                     should_stop=lambda: "dn2" in first.membership.joined)
    first.run()
    assert first.result.txns < 400
    run(out, standby=True)
    assert files_of(out) == files_of(batch)
