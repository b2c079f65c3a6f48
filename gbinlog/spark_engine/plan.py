"""The batch build's plan, without Spark: DNs, their input byte ranges (``PartSpec``), the output
vtso range boundaries and the partition keys that land each range in its own Spark partition;
``part_txns`` extracts one input partition. Kept free of pyspark and pyarrow imports, so the
Python workers that run the build's tasks (``exchange``, ``batch``) do not load them (about 0.4 s
of CPU per worker process)."""

from __future__ import annotations

import bisect
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
    """What the driver decided: DNs, their byte ranges, and the vtso range boundaries of the output
    (``bounds[i]`` is the first vtso of range ``i + 1``) with one partition key per range."""

    dns: list[DnSpec]
    parts: list[PartSpec]
    bounds: list[str] = field(default_factory=list)
    pkeys: list[int] = field(default_factory=lambda: [0])

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ReadPlan:
        d = json.loads(text)
        parts = [PartSpec(p["dn_idx"], tuple(p["start"]) if p["start"] else None,
                          tuple(p["end"]) if p["end"] else None, tuple(p["state"]) if p["state"] else None)
                 for p in d["parts"]]
        return cls([DnSpec(**x) for x in d["dns"]], parts, d["bounds"], d["pkeys"])


# -- exact range partitioning through Spark's hash partitioner ------------------------------------

def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def spark_int_hash(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3Hash`` of an int column (``Murmur3_x86_32.hashInt``), signed 32 bit."""
    k1 = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k1 = _rotl32(k1, 15) * 0x1B873593 & 0xFFFFFFFF
    h1 = seed ^ k1
    h1 = (_rotl32(h1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & 0xFFFFFFFF
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def partition_keys(n: int) -> list[int]:
    """For each partition ``i < n`` the smallest int ``k`` with ``pmod(hash(k), n) == i``:
    ``repartition(n, "pkey")`` then sends range ``i`` to partition ``i`` exactly."""
    keys: dict[int, int] = {}
    k = 0
    while len(keys) < n:
        keys.setdefault(spark_int_hash(k) % n, k)
        k += 1
    return [keys[i] for i in range(n)]


class RangeOf:
    """``vtso -> (range, pkey)`` for a plan's boundaries."""

    def __init__(self, bounds: list[str], pkeys: list[int]) -> None:
        self.bounds, self.pkeys = bounds, pkeys

    def __call__(self, vtso: str) -> tuple[int, int]:
        r = bisect.bisect_right(self.bounds, vtso)
        return r, self.pkeys[r]


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
