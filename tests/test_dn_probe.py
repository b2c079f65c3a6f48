"""A DN's probe (the look ahead of a fresh build: ``DirDn.probe``) and the stream that follows it
share one extraction: the stream goes on from where the probe stopped, with the transactions the
probe read first, and gives exactly what a stream of its own gives; a probe that read too far
to keep, a restart point or another storage sequence make the stream start afresh."""

from __future__ import annotations

from pathlib import Path

import pytest

import gbinlog.local_engine as local_engine
from dumper.cluster import broadcast_prefix
from extractor import RestartPoint, storage_sequences
from gbinlog.local_engine import DirDn

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bank-4dn"
DNS = sorted((d for d in FIXTURE.iterdir() if d.is_dir() and d.name.startswith("dn")), key=lambda d: int(d.name[2:]))
SEQS = storage_sequences(d.name for d in DNS)


def signature(txns) -> list[tuple]:
    return [(t.kind, t.dn, t.vtso, t.start, t.end, t.xid, t.tso, t.branch, t.server_id, t.db, t.sql, t.restart,
             [(b.db, b.table, [e.raw for e in b.events]) for b in t.blocks]) for t in txns]


@pytest.fixture
def extractions(monkeypatch):
    """How many extractions ``DirDn`` opened."""
    opened = []
    real = local_engine.extract

    def counting(*args, **kwargs):
        opened.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(local_engine, "extract", counting)
    return opened


@pytest.mark.parametrize("dn", DNS, ids=[d.name for d in DNS])
def test_the_stream_goes_on_from_the_probe(dn, extractions):
    lone = DirDn(dn)
    alone = signature(lone.stream(None, SEQS[dn.name]))
    assert len(alone) > 100 and len(extractions) == 1
    d = DirDn(dn)
    probe = d.probe(SEQS[dn.name])
    assert len(broadcast_prefix(probe, count=3)) == 3
    assert 3 < len(d._probed[3]) < len(alone) // 2        # it stopped early; what it read is kept
    assert signature(d.stream(None, SEQS[dn.name])) == alone
    assert len(extractions) == 2                  # the probe's extraction went on into the stream
    assert d.events_read == lone.events_read > 0
    assert signature(d.stream(None, SEQS[dn.name])) == alone   # a second stream reads afresh
    assert len(extractions) == 3


def test_a_probe_that_read_too_far_or_another_start_makes_a_fresh_stream(extractions, monkeypatch):
    dn, seq = DNS[0], SEQS[DNS[0].name]
    alone = signature(DirDn(dn).stream(None, seq))
    monkeypatch.setattr(local_engine, "PROBE_KEEP", 5)
    d = DirDn(dn)
    assert len(broadcast_prefix(d.probe(seq), count=3)) == 3      # read more than 5 transactions
    assert signature(d.stream(None, seq)) == alone
    assert len(extractions) == 3
    monkeypatch.setattr(local_engine, "PROBE_KEEP", 64)
    d = DirDn(dn)
    broadcast_prefix(d.probe(seq), count=3)
    other = next(s for s in SEQS.values() if s != seq)
    assert signature(d.stream(None, other)) != alone
    assert len(extractions) == 5
    d = DirDn(dn)
    broadcast_prefix(d.probe(seq), count=3)
    restart = next(t.restart for t in DirDn(dn).stream(None, seq) if t.restart is not None)
    assert isinstance(restart, RestartPoint)
    resumed = signature(d.stream(restart, seq))
    assert resumed and resumed == alone[len(alone) - len(resumed):]
    assert len(extractions) == 8
