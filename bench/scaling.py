"""Build cost against the number of DNs at equal total events (docs/performance.md). Not a test.

    .venv/bin/python bench/scaling.py [--events 1000000] [--dns 2,4,8,16,32] [--dir /tmp/gbinlog-bench] [--repeat 3]

Per DN count: the simulator's ``bank`` workload with ``--events`` DN events in all (cached in
``--dir``), built ``--repeat`` times in fresh processes (``bench/build.py``'s child); DN events per
CPU-second (min of the CPU seconds, and the median), the ratio to the 4-DN rate (target: 32 DNs
within 1.5× of it, i.e. ratio ≥ 0.67), peak RSS and what an added DN costs of it. The repeats are interleaved (one
build of every DN count, then the next round), so a busy phase of a shared machine weighs on every
DN count alike instead of on the one that happened to run then.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.build import child  # noqa: E402
from bench.order import FILE_SIZE, compile_project  # noqa: E402


def make_input(root: Path, events: int, dns: int) -> Path:
    """``bank`` on ``dns`` DNs with ``events`` DN events (within 3 %): more DNs write more heartbeat
    events per transaction, so the transaction count is fitted to the event count."""
    from simulator.run import simulate

    out = root / f"bank-{dns}dn-eq{events}"
    marker = out / "events.txt"
    if marker.exists():
        return out
    txns = max(1, events // 24)
    while True:
        print(f"# generating {out} ({txns} txns) …", flush=True)
        got = simulate("bank", dns, txns, 11, out, truth=False, max_file_size=FILE_SIZE, force=True)["events"]
        if abs(got - events) <= 0.03 * events:
            marker.write_text(str(got))
            return out
        txns = max(1, int(txns * events / got))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dns", default="2,4,8,16,32")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    counts = [int(x) for x in args.dns.split(",")]
    compile_project()
    roots = {n: make_input(args.dir, args.events, n) for n in counts}
    out = args.dir / "scaling-out"
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    for _ in range(args.repeat):
        for n in counts:
            runs[n].append(child(roots[n], out, "off"))
    shutil.rmtree(out, ignore_errors=True)
    rows = {}
    for n in counts:
        events = int((roots[n] / "events.txt").read_text())
        cpus = sorted(r["cpu"] for r in runs[n])
        rss = max(r["maxrss_mb"] for r in runs[n])
        rows[n] = (events / cpus[0], events / statistics.median(cpus), rss, events, runs[n][0]["txns"])
    base = rows.get(4, next(iter(rows.values())))[0]
    first = min(rows)
    print(f"{'DNs':>4} {'DN events':>10} {'txns':>8} {'events/CPU-s (min)':>19} {'median':>10} {'÷ 4-DN':>7} "
          f"{'peak RSS':>9} {'per added DN':>13}")
    for n, (best, med, rss, events, txns) in rows.items():
        # the RSS an added DN costs: over the smallest DN count's (which is mostly the interpreter's)
        added = f"{(rss - rows[first][2]) / (n - first):>10.2f} MB" if n > first else f"{'':>13}"
        print(f"{n:>4} {events:>10,} {txns:>8,} {best:>19,.0f} {med:>10,.0f} {best / base:>7.2f} {rss:>7.0f} MB "
              f"{added}")
    if 32 in rows and 4 in rows:
        ratio = rows[32][0] / base
        print(f"32 DNs at {ratio:.2f}× the 4-DN rate: {'meets' if ratio >= 1 / 1.5 else 'BELOW'} the "
              "'within 1.5×' target")


if __name__ == "__main__":
    main()
