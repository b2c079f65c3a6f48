"""The emission rule (docs/architecture.md, "The global merge"): a global transaction leaves the
merge only when every DN of the cluster at its vtso has passed that vtso.

A DN that is still being read passes a vtso by delivering a later transaction (or heartbeat): the
merge is blocking, so that holds by construction. The end of a DN's input is different: a DN's
files may end only because the rest is not copied yet. So the end counts only up to what the DN
has passed — its last transaction, which the Sorter released only once no prepared branch below
it was open — never beyond. A stream may say it passed more when it ends: one cut at a range
boundary passed the boundary; a DN of a cluster the operator says has stopped passed everything
(``PASSED_ALL``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from extractor.model import DnTxn, Pos

#: Sorts above every vtso (vtsos are digits): the DN has passed everything.
PASSED_ALL = "~"


@dataclass(slots=True)
class Held:
    """Where the merge stopped by the emission rule: ``dn``'s input ended at ``at`` having passed
    ``passed``, so the transaction of vtso ``first_held`` and everything after it stay unwritten.
    ``txns``: how many global transactions are held back (counted over the other DNs' rest)."""

    dn: str
    passed: str
    at: Pos | None
    first_held: str
    txns: int = 0

    def describe(self) -> str:
        where = f"{self.at.file}:{self.at.offset}" if self.at is not None else "its start"
        return (f"held back {self.txns} transaction(s) from vtso {self.first_held} on: DN {self.dn}'s input "
                f"ends at {where} (it passed vtso {self.passed or '(none)'})")


class EndsPassing:
    """A DN stream that, when it ends, has passed ``passed`` (a range boundary, ``PASSED_ALL``)."""

    __slots__ = ("stream", "passed")

    def __init__(self, stream: Iterable[DnTxn], passed: str) -> None:
        self.stream = stream
        self.passed = passed

    def __iter__(self) -> Iterator[DnTxn]:
        return iter(self.stream)


def passed_at_end(stream: object, last: DnTxn | None, floor: str | None) -> str:
    """Emission rule, the end of a DN's input: the vtso the DN has passed when its stream ends.

    What the stream says (``EndsPassing``), else its last transaction's vtso, else ``floor`` (what
    every DN had passed where the merge resumed), else nothing ("")."""
    said = getattr(stream, "passed", None)
    if said is not None:
        return said
    if last is not None:
        return last.vtso
    return floor or ""
