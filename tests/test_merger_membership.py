"""The merge owns membership: a DN joins at the ``StorageInstChange`` instruction that
lists it, a DN the instruction does not list leaves after its branch, and a stop ends the merge
between two whole transactions.

Real DN binlogs: the ``scale-2dn`` fixture, where dn2 joins mid-run (its instruction lists dn0, dn1,
dn2). A batch merge of all three DNs is the reference.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from extractor import TxnKind, extract, storage_sequences
from merger import IDLE, Membership, merge, storage_change

pytestmark = pytest.mark.usefixtures("both_merge_loops")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "scale-2dn"
DNS = ["dn0", "dn1", "dn2"]
SEQS = storage_sequences(DNS)


def stream(dn: str, as_dn: str | None = None):
    for t in extract(FIXTURE / dn, dn_id=dn, storage_seq=SEQS[dn]):
        yield t if as_dn is None else dataclasses.replace(t, dn=as_dn)


def shape(gs) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(g.vtso, g.kind.value, tuple(b.dn for b in g.branches)) for g in gs]


def instruction_vtso() -> str:
    return next(t.vtso for t in stream("dn0") if storage_change(t) == DNS)


def test_a_dn_joins_at_the_instruction_that_lists_it():
    batch = shape(merge({dn: stream(dn) for dn in DNS}))
    at = instruction_vtso()
    m = Membership()
    joined = shape(merge({"dn0": stream("dn0"), "dn1": stream("dn1")}, ranks={dn: i for i, dn in enumerate(DNS)},
                         join=lambda dn, vtso: (2, stream(dn)) if dn == "dn2" else None, membership=m))
    assert m.joined == {"dn2": at}
    # dn2's history before it joined is set aside (not merged), everything else is the batch merge
    assert [t.vtso for t in m.prejoin] == [t.vtso for t in stream("dn2") if t.vtso < at]
    assert m.prejoin and all(t.dn == "dn2" for t in m.prejoin)
    assert joined == [g for g in batch if g[2] != ("dn2",) or g[0] >= at]
    instr = next(g for g in joined if g[0] == at)
    assert instr[1] == "instruction" and instr[2] == ("dn0", "dn1", "dn2")


def test_a_dn_the_instruction_drops_leaves_after_its_branch():
    """dn1's binlog presented as DN ``dnX``: the instruction does not list dnX, so dnX leaves after
    its branch of it; nothing of dnX is merged after that, and the merge does not wait for it."""
    at = instruction_vtso()
    m = Membership()
    out = shape(merge({"dn0": stream("dn0"), "dnX": stream("dn1", as_dn="dnX"), "dn2": stream("dn2")}, membership=m))
    assert m.left == {"dnX": at}
    instr = next(g for g in out if g[0] == at)
    assert "dnX" in instr[2]                                      # its branch of the instruction
    after = [g for g in out if g[0] > at]
    assert after and all("dnX" not in g[2] for g in after)
    assert any(t.vtso > at and t.kind is TxnKind.HEARTBEAT for t in stream("dn1"))   # there was more


def test_a_stop_ends_between_whole_transactions_when_a_stream_idles():
    """A live stream yields IDLE while a stop is pending and it has nothing newer: the merge ends
    there, after a whole transaction (a broadcast group is completed from the other DNs' heads)."""
    stop = {"now": False}

    def live(dn: str, cut: int):
        """The DN's stream; from its ``cut``-th transaction on, a stop is pending and it idles a
        while before delivering again (a DN the merge may have to wait for)."""
        for i, t in enumerate(stream(dn)):
            if i == cut:
                stop["now"] = True
                yield from [IDLE] * 5
            yield t

    full = shape(merge({"dn0": stream("dn0"), "dn1": stream("dn1")}))
    n0 = sum(1 for _ in stream("dn0"))
    for cut in (1, 40, 41, n0 // 2, n0 - 3):
        stop["now"] = False
        out = shape(merge({"dn0": live("dn0", cut), "dn1": stream("dn1")}, should_stop=lambda: stop["now"]))
        assert 0 < len(out) < len(full), cut
        assert out == full[:len(out)], cut                         # a prefix of whole transactions


def test_scale_in_dn1_leaves_at_the_instruction_that_drops_it():
    """The fixture's own scale-in: dn1's groups moved away, then a StorageInstChange lists dn0, dn2
    (on all three DNs). dn1 leaves after its branch; every later transaction is dn0's and dn2's."""
    (leave,) = [t.vtso for t in stream("dn0") if storage_change(t) == ["dn0", "dn2"]]
    m = Membership()
    out = shape(merge({dn: stream(dn) for dn in DNS}, membership=m))
    assert m.left == {"dn1": leave} and m.joined == {}
    instr = next(g for g in out if g[0] == leave)
    assert instr[1] == "instruction" and instr[2] == ("dn0", "dn1", "dn2")
    after = [g for g in out if g[0] > leave]
    assert len(after) > 20 and all("dn1" not in g[2] for g in after)
    assert {dn for g in after for dn in g[2]} == {"dn0", "dn2"}
