"""Bad input stops with a typed error naming the DN, the file and the offset."""

from __future__ import annotations

import pytest

from binlog.constants import EventType as E
from binlog.errors import TruncatedEvent
from binlog.events import encode_body
from extractor import (
    BytesSource,
    CommitWithoutPrepare,
    OrphanCommitTso,
    TraceIdRegression,
    UnexpectedEvent,
    UnfinishedTransaction,
    extract,
)
from tests import REAL_DN
from tests.test_ordering_dn_writer import GCN_COMMIT, INT_COLUMNS, DnWriter, Stmt, hint, xid_text

DB = "d_p00000"
TSO = (1_700_000_000_000 << 22) | 1


def extract_all(tmp_path, build, strict=True):
    w = DnWriter(tmp_path, "dn3")
    build(w)
    w.close()
    return list(extract(tmp_path / "dn3", strict=strict))


def check(err, offset, file="mysql-bin.000001"):
    assert err.dn == "dn3" and err.file == file and err.offset == offset
    assert f"DN dn3: {file}: offset {offset}: " in str(err)


def test_commit_with_no_prepare(tmp_path):
    xid = xid_text(42, "D_P00000_GROUP")
    at = {}

    def build(w):
        w.local([Stmt(DB, "t")])
        at["commit"] = w.commit(xid, TSO)

    with pytest.raises(CommitWithoutPrepare) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["commit"])
    assert xid in str(ei.value)


def test_xid_with_no_begin(tmp_path):
    at = {}

    def build(w):
        w.gtid()
        at["xid"] = w.append(16, (5).to_bytes(8, "little"))

    with pytest.raises(CommitWithoutPrepare) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["xid"])


def test_non_strict_skips_a_commit_with_no_prepare_but_keeps_the_rest(tmp_path):
    def build(w):
        w.commit(xid_text(42, "D_P00000_GROUP"), TSO)
        w.local([Stmt(DB, "t")])

    assert [t.kind.value for t in extract_all(tmp_path, build, strict=False)] == ["dml"]


@pytest.mark.parametrize("then", ["gcn", "ddl", "end"])
def test_commit_tso_followed_by_no_xa_commit(tmp_path, then):
    at = {}

    def build(w):
        at["gcn"] = w.gcn(GCN_COMMIT, TSO)
        w.gtid()
        if then == "gcn":
            w.gcn(GCN_COMMIT, TSO + 1)
            w.gtid()
            w.query(f"XA COMMIT {xid_text(1, 'G')}", DB)
        elif then == "ddl":
            w.query("CREATE TABLE t (a INT)", DB)

    with pytest.raises(OrphanCommitTso) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["gcn"])
    assert str(TSO) in str(ei.value)


def test_trace_id_going_backwards_in_a_branch(tmp_path):
    xid = xid_text(1, "D_P00000_GROUP")
    at = {}

    def build(w):
        w.gcn(3, 1)
        w.gtid()
        w.query(f"XA START {xid}", DB)
        w.statement(Stmt(DB, "a", hint=hint(5)))
        w.rows_query(hint(4))
        at["tm"] = w.w.position
        w.statement(Stmt(DB, "b"))

    with pytest.raises(TraceIdRegression) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["tm"])
    assert "00000000040000000000 after 00000000050000000000" in str(ei.value)


def test_start_inside_an_open_transaction(tmp_path):
    at = {}

    def build(w):
        w.query("BEGIN", DB)
        w.statement(Stmt(DB, "t"))
        at["begin"] = w.query(f"XA START {xid_text(1, 'G')}", DB)

    with pytest.raises(UnfinishedTransaction) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["begin"])


def test_rows_outside_a_transaction(tmp_path):
    at = {}

    def build(w):
        at["tm"] = w.w.position
        w.statement(Stmt(DB, "t"))

    with pytest.raises(UnexpectedEvent) as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["tm"])


def test_rows_after_a_prepare_are_outside_any_transaction(tmp_path):
    at = {}

    def build(w):
        w.prepare(xid_text(1, "G"), [Stmt(DB, "t")])
        at["rows"] = w.w.position
        w.append(E.WRITE_ROWS, encode_body(E.WRITE_ROWS, table_id=w.table_ids[(DB, "t")],
                                           columns=INT_COLUMNS, rows=[[1, 1]]))

    with pytest.raises(UnexpectedEvent, match="outside a transaction") as ei:
        extract_all(tmp_path, build)
    check(ei.value, at["rows"])


def test_truncated_finished_file_is_an_error_naming_file_and_offset():
    """dn57_sequence.bin ends with one stray byte after its last event: a finished file that ends
    inside an event is bad input, not a silent stop."""
    data = (REAL_DN / "dn57_sequence.bin").read_bytes()
    with pytest.raises(TruncatedEvent) as ei:
        list(extract(BytesSource("dn57", {"mysql-bin.000009": data})))
    assert ei.value.offset == 1182 and ei.value.source == "mysql-bin.000009"
