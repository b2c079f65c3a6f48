"""The batch build's plan, without Spark: DNs, their input byte ranges (``PartSpec``) and the
output's vtso window bounds; ``part_txns`` extracts one input partition. Kept free of pyspark and
pyarrow imports, so the Python workers that run the build's tasks (``windows``) do not load them
(about 0.4 s of CPU per worker process)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field


@dataclass
class DnSpec:
    """One DN: its id, binlog directory and 6-digit storage sequence (fixed for the whole run)."""

    dn: str
    dir: str
    storage_seq: str


@dataclass
class PartSpec:
    """A byte range of one DN: the transactions that *start* in ``[start, end)`` (``None`` = the
    beginning / the end of the input). ``state`` is the extractor's (tso, txn_id, seq) at ``start``."""

    dn_idx: int
    start: tuple[str, int] | None = None
    end: tuple[str, int] | None = None
    state: tuple[int, int, int] | None = None


@dataclass
class ReadPlan:
    """What the driver decided: DNs, their byte ranges, and the bounds of the output's vtso windows
    (window ``i`` holds the transactions in ``(bounds[i - 1], bounds[i]]``)."""

    dns: list[DnSpec]
    parts: list[PartSpec]
    bounds: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ReadPlan:
        d = json.loads(text)
        parts = [PartSpec(p["dn_idx"], tuple(p["start"]) if p["start"] else None,
                          tuple(p["end"]) if p["end"] else None, tuple(p["state"]) if p["state"] else None)
                 for p in d["parts"]]
        return cls([DnSpec(**x) for x in d["dns"]], parts, d["bounds"])


# -- reading one partition (runs in the executor's Python worker) ----------------------------------

def part_txns(plan: ReadPlan, index: int) -> Iterator:
    """The transactions of input partition ``index`` (one DN byte range), ascending vtso.

    A range starts and ends at restart points (quiet points: nothing open), so it holds exactly the
    transactions begun in it, and ``extract`` from its start with the saved state gives them the
    vtsos a whole-DN extraction gives."""
    part = plan.parts[index]
    return dn_txns(plan.dns[part.dn_idx], part.start, part.end, part.state)


def dn_txns(dn: DnSpec, start: Sequence | None, end: Sequence | None, state: Sequence | None) -> Iterator:
    """DN ``dn``'s transactions from restart position ``start`` (file, offset; None: its first
    event) to ``end`` (None: its last), extracted with the vtso ``state`` saved at ``start``."""
    from extractor import extract
    from extractor.model import Pos
    from extractor.vtso import VtsoState
    from gbinlog.spark_engine.ranges import RangeSource

    source = RangeSource(dn.dir, dn.dn, Pos(*start) if start else None, Pos(*end) if end else None)
    return extract(source, dn_id=dn.dn, storage_seq=dn.storage_seq, state=VtsoState(*state) if state else None)
