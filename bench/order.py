"""Ordering speed and memory (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/order.py [--events 2000000] [--dns 4] [--dir /tmp/gbinlog-bench]

Input: the simulator's ``bank`` workload on ``--dns`` DNs (holes, 1PC, rollbacks, heartbeats),
``--events`` events in all, cached in ``--dir``. Timed on one core, each against a baseline run in
the same process (``read_events`` over the same files, CRC32 checked):

* extract+sort per DN (txns/s, events/s),
* the merge alone over already extracted streams (txns/s),
* extract+sort+merge streaming end to end (events/s; target ≥ 500k events/s),
* peak RSS of the end-to-end run, each in a fresh process, on a 1× input (``--events``/10) and on
  the 10× input (``--events``): memory must stay flat as the input grows.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from binlog import read_events  # noqa: E402
from extractor import extract, list_binlog_files, storage_sequences  # noqa: E402
from merger import merge  # noqa: E402

EVENTS_PER_TXN = 24  # bank on 4 DNs writes ~24 DN events per logical txn (heartbeats included)
FILE_SIZE = 4 << 20  # small files so the reader's mmap of the current file does not mask growth


def make_input(root: Path, events: int, dns: int) -> Path:
    from simulator.run import simulate

    out = root / f"bank-{dns}dn-{events}"
    marker = out / "events.txt"
    if marker.exists() and int(marker.read_text()) >= events:
        return out
    txns = max(1, events // EVENTS_PER_TXN)
    while True:
        print(f"# generating {out} ({txns} txns) …", flush=True)
        summary = simulate("bank", dns, txns, 11, out, truth=False, max_file_size=FILE_SIZE, force=True)
        if summary["events"] >= events:
            marker.write_text(str(summary["events"]))
            return out
        txns = int(txns * events / summary["events"] * 1.02) + 1


def compile_project() -> None:
    """Write the project's bytecode caches before anything is timed: with ``PYTHONDONTWRITEBYTECODE``
    set (as in some shells), every fresh process would compile the modules it imports lazily from
    source again (0.2–0.3 s of a build's CPU), which is Python's compiler, not the build. Import
    reads existing caches whatever that variable says; this writes them regardless of it."""
    import compileall

    root = Path(__file__).resolve().parents[1]
    for package in (p for p in root.iterdir() if (p / "__init__.py").is_file() or p.name == "bench"):
        compileall.compile_dir(package, quiet=2)


def dn_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: (len(p.name), p.name))


def read_only(dirs: list[Path]) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = 0
    for d in dirs:
        for name in list_binlog_files(d):
            for _ in read_events(d / name):
                n += 1
    return n, time.perf_counter() - t0


def end_to_end(dirs: list[Path]) -> tuple[int, int, float]:
    seqs = storage_sequences(d.name for d in dirs)
    t0 = time.perf_counter()
    n_txn = n_branches = 0
    for g in merge([extract(d, storage_seq=seqs[d.name]) for d in dirs]):
        n_txn += 1
        n_branches += len(g.branches)
    return n_txn, n_branches, time.perf_counter() - t0


def measure(root: Path) -> None:
    """Child process: one end-to-end run, then its own peak RSS."""
    dirs = dn_dirs(root)
    n_txn, _, secs = end_to_end(dirs)
    events = int((root / "events.txt").read_text())
    print(json.dumps({"events": events, "txns": n_txn, "seconds": secs, "maxrss_mb": peak_rss_mb()}))


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec, so
    a child would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(root: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", str(root)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.measure)
        return
    big = make_input(args.dir, args.events, args.dns)
    small = make_input(args.dir, args.events // 10, args.dns)
    dirs = dn_dirs(big)
    seqs = storage_sequences(d.name for d in dirs)

    n_events, t_read = read_only(dirs)
    base = n_events / t_read
    print(f"input: {big} — {n_events:,} events on {len(dirs)} DNs")
    print(f"baseline read_events (CRC32 checked): {base:,.0f} events/s")

    print("extract+sort per DN (streamed, as the pipeline runs it):")
    t_extract = 0.0
    n_dn_txns = 0
    for d in dirs:
        n_dn = sum(1 for name in list_binlog_files(d) for _ in read_events(d / name))
        t0 = time.perf_counter()
        n = sum(1 for _ in extract(d, storage_seq=seqs[d.name]))
        dt = time.perf_counter() - t0
        t_extract += dt
        n_dn_txns += n
        print(f"  {d.name}: {n:,} txns in {dt:.2f} s = {n / dt:,.0f} txns/s, "
              f"{n_dn / dt:,.0f} events/s ({n_dn / dt / base:.2f}× read_events)")
    print(f"  all DNs: {n_dn_txns / t_extract:,.0f} txns/s, {n_events / t_extract:,.0f} events/s")

    # The merge alone, over streams extracted beforehand (held in memory and frozen out of the
    # cyclic GC, whose full scans of a large live set would otherwise be what is measured).
    gc.disable()
    streams = [list(extract(d, storage_seq=seqs[d.name])) for d in dirs]
    gc.freeze()
    gc.enable()
    t0 = time.perf_counter()
    n_global = sum(1 for _ in merge(streams))
    t_merge = time.perf_counter() - t0
    gc.unfreeze()
    print(f"merge alone: {n_global:,} txns from {n_dn_txns:,} DN txns in {t_merge:.2f} s = "
          f"{n_global / t_merge:,.0f} txns/s ({n_dn_txns / t_merge:,.0f} DN txns/s, "
          f"{n_events / t_merge:,.0f} events/s equivalent)")
    del streams

    n_txn, n_br, t_all = end_to_end(dirs)
    eps = n_events / t_all
    verdict = "meets" if eps >= 500_000 else "BELOW"
    print(f"extract+sort+merge end to end: {n_txn:,} txns ({n_br:,} branches) in {t_all:.2f} s = "
          f"{n_txn / t_all:,.0f} txns/s, {eps:,.0f} events/s ({eps / base:.2f}× read_events) — "
          f"{verdict} the 500k events/s target")

    one, ten = child(small), child(big)
    print(f"peak RSS end to end: 1× ({one['events']:,} events) {one['maxrss_mb']:.0f} MB, "
          f"10× ({ten['events']:,} events) {ten['maxrss_mb']:.0f} MB "
          f"(ratio {ten['maxrss_mb'] / one['maxrss_mb']:.2f})")


if __name__ == "__main__":
    main()
