"""The emission rule (``merger.emission``) in the merge, on both merge loops: a DN whose stream
ends has passed only its last transaction, so nothing above it leaves the merge; the merge says
where it stopped and how many transactions it holds back, without counting them as done."""

from __future__ import annotations

from itertools import takewhile

import pytest

from extractor import TxnKind
from merger import PASSED_ALL, EndsPassing, Membership, merge, storage_change
from tests.test_merger import TSO, blk, local_vtso, tso_vtso, txn

pytestmark = pytest.mark.usefixtures("both_merge_loops")
V1, V2, V3, V4 = (tso_vtso(TSO + k, k) for k in (10, 20, 30, 40))


def merged(streams, **kw) -> tuple[list[tuple[str, list[str]]], Membership]:
    membership = Membership()
    out = [(g.vtso, g.dns) for g in merge(streams, membership=membership, **kw)]
    return out, membership


def test_a_dn_that_ends_early_holds_everything_above_its_last_transaction():
    dn0 = [txn("dn0", V1, blk(1, "a")), txn("dn0", V2, blk(1, "b")), txn("dn0", V3, blk(1, "c"))]
    dn1 = [txn("dn1", V1, blk(2, "a"), offset=300)]                 # its files end here
    dn2 = [txn("dn2", V2, blk(2, "b")), txn("dn2", V4, blk(1, "d"))]
    out, m = merged([dn0, dn1, dn2])
    assert out == [(V1, ["dn0", "dn1"])]
    held = m.held
    assert (held.dn, held.passed, held.first_held) == ("dn1", V1, V2)
    assert (held.at.file, held.at.offset) == ("mysql-bin.000001", 350)    # the end of its last transaction
    # V2 (dn0 + dn2 joined: one transaction), V3, V4
    assert held.txns == 3
    assert "held back 3 transaction(s) from vtso " + V2 in held.describe()


def test_the_end_of_a_complete_dn_passes_everything():
    dn0 = [txn("dn0", V1, blk(1, "a")), txn("dn0", V3, blk(1, "c"))]
    dn1 = [txn("dn1", V1, blk(2, "a"))]
    out, m = merged([dn0, EndsPassing(dn1, PASSED_ALL)])
    assert out == [(V1, ["dn0", "dn1"]), (V3, ["dn0"])] and m.held is None


def test_a_stream_cut_at_a_boundary_passed_the_boundary_and_no_more():
    dn0 = [txn("dn0", V1, blk(1, "a")), txn("dn0", V2, blk(1, "b")), txn("dn0", V4, blk(1, "d"))]
    dn1 = EndsPassing([txn("dn1", V1, blk(2, "a"))], V3)    # nothing of dn1 in [V1, V3)
    out, m = merged([dn0, dn1])
    assert out == [(V1, ["dn0", "dn1"]), (V2, ["dn0"])]
    assert (m.held.dn, m.held.passed, m.held.first_held, m.held.txns) == ("dn1", V3, V4, 1)


def test_an_empty_stream_passed_what_the_merge_resumed_from():
    dn0 = [txn("dn0", V2, blk(1, "b")), txn("dn0", V3, blk(1, "c"))]
    out, m = merged([dn0, []], passed=V2)
    assert out == [(V2, ["dn0"])] and m.held.first_held == V3 and m.held.at is None
    # without a resume point, a DN with nothing at all has passed nothing
    out, m = merged([[txn("dn0", V2, blk(1, "b"))], []])
    assert out == [] and (m.held.passed, m.held.first_held, m.held.txns) == ("", V2, 1)


def test_local_transactions_above_an_ended_dns_heartbeat_are_held():
    """A local (non-TSO) commit after the last heartbeat: the ended DN could still write one
    that sorts below it, so it waits as a TSO transaction would."""
    hb = tso_vtso(TSO + 20, 6)
    local = local_vtso(TSO + 20, 6, 1)
    dn0 = [txn("dn0", hb, kind=TxnKind.HEARTBEAT), txn("dn0", local, blk(0, "l"), xid=None)]
    dn1 = [txn("dn1", hb, kind=TxnKind.HEARTBEAT)]
    out, m = merged([dn0, dn1])
    assert out == [(hb, ["dn0", "dn1"])] and m.held.first_held == local


def test_counting_what_is_held_changes_no_membership():
    """In the scale-2dn fixture dn1 leaves at a StorageInstChange. With dn2's input cut below
    that instruction the merge holds before it; counting the held transactions merges past it,
    but the membership the pipeline saves must not say dn1 left."""
    from tests.test_merger_membership import stream

    leave = next(t.vtso for t in stream("dn0") if storage_change(t) == ["dn0", "dn2"])
    whole = Membership()
    list(merge({dn: stream(dn) for dn in ("dn0", "dn1", "dn2")}, membership=whole))
    assert whole.left == {"dn1": leave} and whole.held is None          # the control
    short = takewhile(lambda t: t.vtso < leave, stream("dn2"))
    out, m = merged({"dn0": stream("dn0"), "dn1": stream("dn1"), "dn2": short})
    assert m.held.dn == "dn2" and m.held.first_held <= leave and m.held.txns > 0
    assert all(vtso <= m.held.passed for vtso, _ in out)
    assert m.left == {}
