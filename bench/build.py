"""End-to-end build speed and memory (issue 5, Must show 6). Not a test: prints numbers.

    .venv/bin/python bench/build.py [--events 5000000] [--dns 4] [--dir /tmp/gbinlog-bench] [--workers auto|on|off]

Input: the simulator's ``bank`` workload on ``--dns`` DNs, ``--events`` DN events in all, cached in
``--dir`` (generated once, a few minutes for 5M). Measured, each run in a fresh process:

* ``cat`` of the same input bytes to /dev/null (the physical limit: reading the bytes once),
* ``gbinlog build`` (local engine) of the 1× input (``--events``/5) and of the 5× input
  (``--events``): input events/s, input MB/s, output MB/s, the ratio to ``cat`` and peak RSS — which
  must stay flat from 1× to 5×. With extraction workers (``--workers on``; ``auto`` = on with more
  than one CPU; the build's default is off) the RSS is the main process's and, separately, the
  largest worker's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import dn_dirs, make_input, peak_rss_mb  # noqa: E402


def input_files(root: Path) -> list[Path]:
    from extractor import list_binlog_files

    return [d / n for d in dn_dirs(root) for n in list_binlog_files(d)]


def cat_seconds(root: Path) -> float:
    files = [str(p) for p in input_files(root)]
    t0 = time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def measure(root: Path, out: Path, workers: str) -> None:
    """Child process: one build, then its own peak RSS (and its workers' largest)."""
    import resource

    from gbinlog.local_engine import Settings, build

    shutil.rmtree(out, ignore_errors=True)
    settings = Settings(workers={"auto": None, "on": True, "off": False}[workers])
    t0 = time.perf_counter()
    r = build(dn_dirs(root), out, settings=settings)
    secs = time.perf_counter() - t0
    worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": secs, "txns": r.txns, "written": r.written, "out_events": r.events,
                      "out_bytes": r.bytes, "files": len(r.files), "maxrss_mb": peak_rss_mb(),
                      "worker_rss_mb": worker_rss}))


def child(root: Path, out: Path, workers: str) -> dict:
    res = subprocess.run([sys.executable, __file__, "--measure", str(root), "--out", str(out),
                          "--workers", workers], check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def report(label: str, root: Path, out: Path, workers: str) -> dict:
    events = int((root / "events.txt").read_text())
    in_bytes = sum(p.stat().st_size for p in input_files(root))
    t_cat = min(cat_seconds(root) for _ in range(3))
    r = child(root, out, workers)
    secs = r["seconds"]
    print(f"{label}: {events:,} DN events, {in_bytes / 1e6:,.0f} MB in → {r['txns']:,} txns, "
          f"{r['out_events']:,} events, {r['out_bytes'] / 1e6:,.0f} MB out in {r['files']} files")
    print(f"  build {secs:.2f} s = {events / secs:,.0f} events/s, {in_bytes / 1e6 / secs:,.1f} MB/s in, "
          f"{r['out_bytes'] / 1e6 / secs:,.1f} MB/s out; cat {t_cat:.3f} s ({in_bytes / 1e6 / t_cat:,.0f} MB/s): "
          f"build/cat = {secs / t_cat:,.0f}×; peak RSS {r['maxrss_mb']:.0f} MB"
          + (f" (+ largest worker {r['worker_rss_mb']:.0f} MB)" if r["worker_rss_mb"] > 1 else ""))
    return {"events": events, "seconds": secs, "rss": r["maxrss_mb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--workers", choices=["auto", "on", "off"], default="off",
                    help="extract each DN in a worker process (auto: with more than one CPU)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.measure, args.out, args.workers)
        return
    big = make_input(args.dir, args.events, args.dns)
    small = make_input(args.dir, args.events // 5, args.dns)
    out = args.dir / "build-out"
    one = report("1×", small, out, args.workers)
    five = report("5×", big, out, args.workers)
    shutil.rmtree(out, ignore_errors=True)
    eps = five["events"] / five["seconds"]
    print(f"end to end: {eps:,.0f} events/s on 5× ({'meets' if eps >= 500_000 else 'BELOW'} the 500k target); "
          f"peak RSS 1× {one['rss']:.0f} MB vs 5× {five['rss']:.0f} MB (ratio {five['rss'] / one['rss']:.2f})")


if __name__ == "__main__":
    main()
