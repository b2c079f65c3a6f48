"""Simulator speed (docs/performance.md). Not a test: prints DN binlog events written per second.

    .venv/bin/python bench/simulate.py [--workload bank] [--dns 4] [--txns 50000] [--no-truth]

Runs ``simulate`` into a temp dir (removed afterwards) and prints events, seconds and events/s for
the simulation alone and with the truth built and written. Target: >= 200k events/s.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.run import simulate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="bank")
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--txns", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-truth", action="store_true", help="skip the truth run")
    args = ap.parse_args()
    runs = [("binlogs only", False)] + ([] if args.no_truth else [("binlogs + truth.json", True)])
    root = Path(tempfile.mkdtemp(prefix="gbinlog-bench-sim-"))
    try:
        for label, truth in runs:
            out = root / label.split()[0] / ("t" if truth else "n")
            s = simulate(args.workload, args.dns, args.txns, args.seed, out, truth=truth,
                         max_file_size=64 << 20)
            size = sum(f.stat().st_size for f in out.rglob("mysql-bin.0*"))
            print(f"{args.workload} {args.dns} DNs {args.txns} txns, {label}: {s['events']:,} events "
                  f"({size / 1e6:.1f} MB) in {s['seconds_total']:.2f} s = "
                  f"{s['events'] / s['seconds_total']:,.0f} events/s "
                  f"(simulation alone {s['events'] / s['seconds']:,.0f} events/s)")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
