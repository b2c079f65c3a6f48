"""The batch build's data exchange through the output directory's file system, not the JVM.

Measured on 1.1 M DN events (bench/spark.py): with a Spark shuffle, the DN transactions went
Python → Arrow → JVM rows → shuffle files → persisted rows → Arrow → Python, and the JVM side of
that (plus the Python DataSource's planning) cost more than the extraction itself. Here they never
enter the JVM: Spark schedules two waves of Python tasks and carries only small summaries.

1. ``extract_part`` (one task per input partition, a DN byte range): ``extract`` → for every
   transaction its output range (by the plan's vtso bounds) → appended to the file
   ``x-<part>-<range>.<attempt>`` in the build's temporary directory as records (``xkernel.encode_record``:
   the scalar fields packed, then the worker pipe's body frame, ``extractor.txn_codec``). Returns its counts, the
   few transactions the schema history needs (DDL marks, physical DDLs) and its ``StorageInstChange``
   instructions with its last vtso (``scale_in``: which DNs left, and where).
2. ``range_streams`` (in each range's writer task): per DN, its partitions' files for that range
   in order, decoded lazily — the inputs of ``merger.merge``.

Like the range files the writers already produce, this needs the temporary directory (inside the
output directory) on a file system every executor shares with the driver.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from extractor.model import DnTxn, TxnKind
from extractor.txn_codec import BodyDecoder, CodecError, txn_fields, txn_from_fields
from gbinlog.spark_engine.errors import in_task
from gbinlog.spark_engine.plan import ReadPlan, part_txns
from gbinlog.spark_engine.xkernel import RecordReader, decode_body, encode_body, encode_record
from merger.membership import storage_change

BATCH = 512
HISTORY_KINDS = (TxnKind.DDL_MARK, TxnKind.PHYSICAL_DDL)   # the rows the driver needs before shaping


def history_entry(t: DnTxn) -> tuple:
    """A history transaction as it travels to the driver: its scalar fields and its body frame
    (``decode_txns`` turns it back)."""
    return txn_fields(t), encode_body(t)
CHUNK = 4 << 20


def part_file(tmp_dir: str, part: int, rng: int, attempt: str) -> Path:
    """Partition ``part``'s exchange file for range ``rng``, of one extraction attempt (as the range
    files, ``layout.range_file_name``: a duplicate attempt never truncates the collected one's)."""
    return Path(tmp_dir, f"x-{part:05d}-{rng:05d}.{attempt}")


def decode_txns(encoded: Iterable[tuple], decoder: BodyDecoder) -> Iterator[DnTxn]:
    for fields, body in encoded:
        t = txn_from_fields(fields)
        decode_body(body, t, decoder)
        yield t


@in_task
def extract_part(plan: ReadPlan, tmp_dir: str, index: int) -> Iterator[dict]:
    """Task: input partition ``index`` → one exchange file per output range it reaches; yields one
    summary ``{"part", "attempt", "txns": {range: count}, "history": [encoded txns]}``."""
    bounds = plan.bounds
    attempt = uuid.uuid4().hex[:16]
    files: dict[int, object] = {}
    pending: dict[int, list] = {}
    counts: dict[int, int] = {}
    history: list[tuple] = []
    instructions: list[list] = []
    last = ""
    record = encode_record
    cpu = time.process_time()
    try:
        rng, lo, hi = 0, "", bounds[0] if bounds else None
        for t in part_txns(plan, index):
            v = t.vtso
            if v < lo or hi is not None and v >= hi:   # into the next range (a DN's vtsos ascend)
                rng = bisect.bisect_right(bounds, v)
                lo, hi = bounds[rng - 1] if rng else "", bounds[rng] if rng < len(bounds) else None
            last = v
            kind = t.kind
            if kind in HISTORY_KINDS:
                history.append(history_entry(t))
            elif kind is TxnKind.INSTRUCTION and (storage := storage_change(t)) is not None:
                instructions.append([v, storage])
            batch = pending.get(rng)
            if batch is None:
                batch = pending[rng] = []
                files[rng] = open(part_file(tmp_dir, index, rng, attempt), "xb")  # noqa: SIM115 - closed below
            batch.append(record(t))
            counts[rng] = counts.get(rng, 0) + 1
            if len(batch) >= BATCH:
                files[rng].write(b"".join(batch))
                batch.clear()
        for r, batch in pending.items():
            if batch:
                files[r].write(b"".join(batch))
    finally:
        for fh in files.values():
            fh.close()
    yield {"part": index, "attempt": attempt, "dn": plan.dns[plan.parts[index].dn_idx].dn, "txns": counts,
           "history": history,
           "instructions": instructions, "last": last, "cpu": time.process_time() - cpu}


def dn_ends(parts: list[dict]) -> dict[str, str]:
    """DN id → the vtso of its last transaction (the extraction wave's ``last`` per partition)."""
    last: dict[str, str] = {}
    for p in parts:
        last[p["dn"]] = max(last.get(p["dn"], ""), p["last"])
    return last


def scale_in(parts: list[dict], dns: list[str]) -> dict[str, str]:
    """DN id → the vtso of the ``StorageInstChange`` instruction it left the cluster at (scale-in),
    as ``merger.merge`` decides it when it reads every DN from its start (``gbinlog build``): a DN
    not in an instruction's list whose stream is still open there (it carries a branch of the
    instruction, or has transactions after it). Its later transactions are not merged (``until``)."""
    changes = sorted({v: storage for p in parts for v, storage in p["instructions"]}.items())
    last: dict[str, str] = {}
    carries: set[tuple[str, str]] = set()
    for p in parts:
        last[p["dn"]] = max(last.get(p["dn"], ""), p["last"])
        carries.update((p["dn"], v) for v, _ in p["instructions"])
    left: dict[str, str] = {}
    for vtso, storage in changes:
        for dn in dns:
            if dn not in storage and dn not in left and ((dn, vtso) in carries or last.get(dn, "") > vtso):
                left[dn] = vtso
    return left


def until(txns: Iterable[DnTxn], vtso: str | None) -> Iterator[DnTxn]:
    """``txns`` up to ``vtso`` (its branch of the instruction it left at) included."""
    if vtso is None:
        yield from txns
        return
    for t in txns:
        if t.vtso > vtso:
            return
        yield t


def before_leaving(txns: Iterable[DnTxn], left: Mapping[str, str]) -> Iterator[DnTxn]:
    """``txns`` without those a DN wrote after it left the cluster (``left``: ``scale_in``'s DN →
    instruction vtso). The local merge never reads them (``until``), so their physical DDLs must
    not reach the schema history that the engines gather before they shape (``meta.db``)."""
    for t in txns:
        at = left.get(t.dn)
        if at is None or t.vtso <= at:
            yield t


def read_exchange(path: Path, reader) -> Iterator[DnTxn]:
    """The transactions of one exchange file, in the order they were written (none if absent)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - a generator's file, closed in finally
    except FileNotFoundError:
        return
    try:
        buf = b""
        out: list[DnTxn] = []
        while True:
            chunk = fh.read(CHUNK)
            if not chunk:
                if buf:
                    raise CodecError(f"exchange file {path}: {len(buf)} bytes of an incomplete record at its end")
                return
            buf = buf + chunk if buf else chunk
            off = reader.decode(buf, 0, out)
            buf = buf[off:]
            yield from out
            out.clear()
    finally:
        fh.close()


def range_streams(plan: ReadPlan, tmp_dir: str, rng: int, attempts: list[str]) -> list[Iterator[DnTxn]]:
    """Per DN (in the plan's DN order), its transactions in output range ``rng``: its partitions'
    exchange files (those of ``attempts[part]``, the collected extraction attempt) in partition
    order (partitions of a DN are planned in position order)."""
    reader = RecordReader()

    def stream(parts: list[int]) -> Iterator[DnTxn]:
        for p in parts:
            yield from read_exchange(part_file(tmp_dir, p, rng, attempts[p]), reader)

    by_dn: list[list[int]] = [[] for _ in plan.dns]
    for i, part in enumerate(plan.parts):
        by_dn[part.dn_idx].append(i)
    return [stream(parts) for parts in by_dn]
