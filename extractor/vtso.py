"""Virtual TSO (docs/formats.md): 54 digits ``tso(19) txnId(19) seq(10) storageSeq(6)``.

``vtso_for_commit`` is the one place a vtso is made (``Transaction.generateTSO``); ``VtsoState`` is
the per-DN ``maxTso`` segment (``TsoSegment``) it advances. Its fields are read only through the
small functions below (``vtso_tso``, ``vtso_actual_tso``, ``vtso_is_tso``, ``vtso_timestamp``,
``tso_physical_ms``), never sliced by hand elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from binlog.kernel import compiled_twin
from extractor.xid import java_string_hash

TSO_ZEROS = "0000000000000000"  # seq(10) + storageSeq(6) of a TSO transaction
NO_STORAGE_SEQ = "000000"
ZERO_SEQ = "0000000000"  # the seq(10) field of a TSO transaction
_TSO, _ACTUAL, _SEQ = slice(0, 19), slice(0, 38), slice(38, 48)


def vtso_tso(vtso: str) -> int:
    """The commit TSO (first 19 digits)."""
    return int(vtso[_TSO])


def vtso_actual_tso(vtso: str) -> str:
    """tso + txnId (38 digits): the same on every branch of a TSO transaction (MergeBarrier key)."""
    return vtso[_ACTUAL]


def vtso_is_tso(vtso: str) -> bool:
    """A TSO transaction: its sequence part is zero."""
    return vtso[_SEQ] == ZERO_SEQ


def tso_physical_ms(tso: int) -> int:
    """The TSO's physical part: epoch milliseconds (the low 22 bits are the logical counter)."""
    return tso >> 22


def py_vtso_timestamp(vtso: str) -> int:
    """The event timestamp (epoch seconds) of a transaction with this vtso."""
    return (int(vtso[_TSO]) >> 22) // 1000


@dataclass(slots=True)
class VtsoState:
    """The DN's ``maxTso = (tso, txnId, sequence)``; persisted with restart positions."""

    tso: int = 0
    txn_id: int = 0
    seq: int = 0

    def try_set(self, tso: int, txn_id: int) -> None:
        """Replace iff ``tso`` is larger, or equal with a larger txnId; the sequence restarts."""
        if tso > self.tso:
            self.tso, self.txn_id, self.seq = tso, txn_id, 0
        elif tso == self.tso and txn_id > self.txn_id:
            self.txn_id, self.seq = txn_id, 0


def py_tso_vtso(tso: int, txn_id: int) -> str:
    """The vtso of a TSO transaction: ``pad19(tso) + pad19(txnId)`` and 16 zeros."""
    return f"{tso:019d}{txn_id:019d}{TSO_ZEROS}"


def py_seq_vtso(tso: int, txn_id: int, seq: int, storage_seq: str) -> str:
    """The vtso of a transaction that sorts after the DN's last TSO one: ``pad19(tso) + pad19(txnId)
    + pad10(seq) + storageSeq``."""
    return f"{tso:019d}{txn_id:019d}{seq:010d}{storage_seq}"


# extractor/_sort.pyx's twins when built (the same text; the same seconds, one per global txn written)
tso_vtso = compiled_twin("extractor._sort", "tso_vtso") or py_tso_vtso
vtso_timestamp = compiled_twin("extractor._sort", "vtso_timestamp") or py_vtso_timestamp
seq_vtso = compiled_twin("extractor._sort", "seq_vtso") or py_seq_vtso


def vtso_for_commit(state: VtsoState, commit_tso: int | None, txn_id: int, storage_seq: str) -> str:
    """The vtso of a transaction at its commit (or rollback) in the DN's binlog order.

    A TSO transaction (an XA COMMIT that saw a commit TSO) gets ``pad19(tso) + pad19(txnId)`` and
    16 zeros — identical on every branch — and advances ``maxTso``. Anything else (1PC, one-phase
    XA, XA without commit TSO, rollback, physical DDL) sorts right after the last TSO transaction
    of this DN: ``maxTso.tso, maxTso.txnId, ++seq`` and ``storage_seq`` (pass ``"000000"`` for DDL
    marks and instructions, as the CDC does).
    """
    if commit_tso is not None:
        state.try_set(commit_tso, txn_id)
        return tso_vtso(commit_tso, txn_id)
    state.seq += 1
    return seq_vtso(state.tso, state.txn_id, state.seq, storage_seq)


def _storage_seq_of(text: str) -> str:
    # abs(Objects.hash(id)) = abs(31 + id.hashCode()) in 32-bit ints, cut to its first 6 digits.
    h = (31 + java_string_hash(text)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return str(abs(h))[:6].rjust(6, "0")


def storage_sequence(dn_id: str) -> str:
    """The DN's 6-digit storage sequence, stable per DN id (``StorageSequence``): the first 6
    decimal digits of ``abs(Objects.hash(dn_id))``, left-padded. The CDC re-draws on a collision
    between DNs (``dn10`` and ``dn11`` collide) with a random seed kept in its metadb;
    ``storage_sequences`` resolves collisions deterministically instead."""
    return _storage_seq_of(dn_id)


def _natural(dn_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", dn_id))


def storage_sequences(dn_ids: Iterable[str]) -> dict[str, str]:
    """Distinct storage sequences for a set of DNs: in natural id order (dn2 before dn10), each
    takes ``storage_sequence(id)`` or, when taken, the next free number (mod 10^6, never 000000) —
    the simulator's rule, so both agree on every vtso."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for dn in sorted(set(dn_ids), key=_natural):
        seq = _storage_seq_of(dn)
        while seq in used or seq == NO_STORAGE_SEQ:
            seq = f"{(int(seq) + 1) % 1_000_000:06d}"
        out[dn] = seq
        used.add(seq)
    return out
