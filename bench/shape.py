"""Shaping speed (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/shape.py [--events 1000000] [--dns 4] [--dir /tmp/gbinlog-bench]

Input: the simulator's ``bank`` workload (as ``bench/order.py`` makes it, cached in ``--dir``),
extracted per DN beforehand and held in memory, so only the merge and the shaper are timed:

* merge alone over the extracted streams (the baseline), then merge + shape (pass-through: the
  physical columns equal the logical ones, only table ids and names change): the shaper's cost as a
  share of the merge (target ≤ 10 %);
* extract + sort + merge end to end from the files, with and without shaping (the pipeline's view
  of the same cost);
* shape alone over already merged transactions, pass-through (events/s);
* shape alone with every row reshaped: the same stream after a logical ``ADD COLUMN`` the shards have
  not made yet (each row decoded, the missing column filled with its default, re-encoded).

events = DN events of the input (what ``read_events`` yields), as in ``bench/order.py``. Times are
CPU time of this process (``time.process_time``), best of ``--runs``: the machine is shared, and wall
time there measures the neighbours.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import dn_dirs, make_input  # noqa: E402
from binlog import read_events  # noqa: E402
from extractor import TxnKind, extract, list_binlog_files, storage_sequences  # noqa: E402
from merger import merge  # noqa: E402
from schema_shaper import MarkEntry, Shaper  # noqa: E402


def best_of(n: int, fn) -> tuple[float, object]:
    """The fastest of ``n`` runs in CPU seconds (the machine is shared)."""
    best, result = float("inf"), None
    for _ in range(n):
        gc.collect()
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    root = make_input(args.dir, args.events, args.dns)
    dirs = dn_dirs(root)
    seqs = storage_sequences(d.name for d in dirs)
    n_events = sum(1 for d in dirs for name in list_binlog_files(d) for _ in read_events(d / name))

    gc.disable()
    streams = [list(extract(d, storage_seq=seqs[d.name])) for d in dirs]
    gc.freeze()
    gc.enable()
    print(f"input: {root} — {n_events:,} DN events on {len(dirs)} DNs")

    t_merge, merged = best_of(args.runs, lambda: list(merge(streams)))

    def merge_and_shape() -> int:
        shaper = Shaper()
        n = 0
        for g in merge(streams):
            shaper.shape_txn(g)
            n += 1
        return n

    t_both, n_txn = best_of(args.runs, merge_and_shape)
    rows_events = sum(len(b.events) - 1 for g in merged for b in g.blocks if g.kind is TxnKind.DML)
    print(f"merge alone: {n_txn:,} txns in {t_merge:.2f} s = {n_events / t_merge:,.0f} events/s")
    print(f"merge + shape (pass-through): {t_both:.2f} s = {n_events / t_both:,.0f} events/s; shaping costs "
          f"{(t_both - t_merge) / t_merge * 100:+.1f} % of the merge (target ≤ 10 %)")

    def end_to_end(shaping: bool) -> int:
        shaper = Shaper()
        n = 0
        for g in merge([extract(d, storage_seq=seqs[d.name]) for d in dirs]):
            if shaping:
                shaper.shape_txn(g)
            n += 1
        return n

    t_e2e, _ = best_of(args.runs, lambda: end_to_end(False))
    t_e2e_shape, _ = best_of(args.runs, lambda: end_to_end(True))
    print(f"extract+sort+merge end to end: {t_e2e:.2f} s = {n_events / t_e2e:,.0f} events/s; with shaping "
          f"{t_e2e_shape:.2f} s = {n_events / t_e2e_shape:,.0f} events/s "
          f"({(t_e2e_shape - t_e2e) / t_e2e * 100:+.1f} %)")

    gc.freeze()

    def shape_all(prepare=None) -> Shaper:
        shaper = Shaper()
        for g in merged:
            shaper.shape_txn(g)
            if prepare is not None and g.kind is TxnKind.DDL_MARK and shaper.tables:
                prepare(shaper)
                prepare = None
        return shaper

    t_pass, shaper = best_of(args.runs, shape_all)
    assert shaper.counts["reshape"] == 0
    print(f"shape alone, pass-through: {len(merged):,} txns, {rows_events:,} rows events in {t_pass:.2f} s = "
          f"{n_events / t_pass:,.0f} events/s ({len(merged) / t_pass:,.0f} txns/s)")

    def add_column(shaper: Shaper) -> None:
        # A logical ADD COLUMN whose physical DDLs never come: every later row is reshaped.
        table = next(iter(shaper.tables.values()))
        shaper.apply(MarkEntry(shaper.vtso, table.db, table.name, "ALTER_TABLE",
                               f"ALTER TABLE `{table.name}` ADD COLUMN `extra` varchar(16) DEFAULT 'x' AFTER `id`"),
                     store=False)

    t_reshape, shaper = best_of(args.runs, lambda: shape_all(add_column))
    print(f"shape alone, every row reshaped: {shaper.counts['reshape']:,} blocks in {t_reshape:.2f} s = "
          f"{n_events / t_reshape:,.0f} events/s ({len(merged) / t_reshape:,.0f} txns/s, "
          f"{t_reshape / t_pass:.1f}× the pass-through time)")
    gc.unfreeze()


if __name__ == "__main__":
    main()
