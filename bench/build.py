"""End-to-end build speed and memory (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/build.py [--events 5000000] [--dns 4] [--dir /tmp/gbinlog-bench] [--repeat 3]
                                    [--workers auto|on|off] [--profile N] [--extract]

Input: the simulator's ``bank`` workload on ``--dns`` DNs, ``--events`` DN events in all, cached in
``--dir`` (generated once; ~4 s per million events). Measured, each build in a fresh process, by
CPU seconds (user + system, ``getrusage``) because wall time on a shared machine is noise:

* ``cat`` of the same input bytes to /dev/null (reading the bytes once; page cache warm), its CPU
  and wall seconds,
* ``gbinlog build`` (local engine) of the 1× input (``--events``/5) and of the 5× input
  (``--events``), ``--repeat`` times each: DN events per CPU-second (min and median), output events
  per CPU-second, build ÷ ``cat`` (CPU and wall), peak RSS — which must stay flat from 1× to 5×.
  With extraction workers (``--workers on``) the RSS is the main process's and, separately, the
  largest worker's, and the CPU seconds include the workers'.
* ``--profile N``: one more build of the 1× input in this process under cProfile, the top ``N``
  functions by own time with their share of the total (README's before/after profile).
* ``--extract``: instead of the builds, extraction alone (scan + assembler + first-level sort of
  every DN of the 1× input, no merge / shape / write), ``--repeat`` fresh processes, CPU min/median.

The kernel in use (compiled ``binlog._kernel`` or pure Python) is printed; ``GBINLOG_PURE_PYTHON=1``
measures the pure-Python one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import compile_project, dn_dirs, make_input, peak_rss_mb  # noqa: E402


def input_files(root: Path) -> list[Path]:
    from extractor import list_binlog_files

    return [d / n for d in dn_dirs(root) for n in list_binlog_files(d)]


def cpu_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cat_seconds(root: Path) -> tuple[float, float]:
    """(CPU, wall) seconds of one ``cat`` of every input file to /dev/null."""
    files = [str(p) for p in input_files(root)]
    c0, t0 = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    return cpu_seconds(resource.RUSAGE_CHILDREN) - c0, time.perf_counter() - t0


def measure(root: Path, out: Path, workers: str) -> None:
    """Child process: one build, its CPU and wall seconds, then its own peak RSS (and its workers')."""
    from gbinlog.local_engine import Settings, build

    shutil.rmtree(out, ignore_errors=True)
    settings = Settings(workers={"auto": None, "on": True, "off": False}[workers])
    c0, t0 = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    r = build(dn_dirs(root), out, settings=settings)
    secs = time.perf_counter() - t0
    cpu = cpu_seconds(resource.RUSAGE_SELF) - c0 + cpu_seconds(resource.RUSAGE_CHILDREN)
    worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": secs, "cpu": cpu, "txns": r.txns, "written": r.written, "out_events": r.events,
                      "dn_events": r.dn_events, "out_bytes": r.bytes, "files": len(r.files),
                      "maxrss_mb": peak_rss_mb(), "worker_rss_mb": worker_rss}))


def child(root: Path, out: Path, workers: str) -> dict:
    res = subprocess.run([sys.executable, __file__, "--measure", str(root), "--out", str(out),
                          "--workers", workers], check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def builds(root: Path, out: Path, workers: str, repeat: int) -> list[dict]:
    runs = [child(root, out, workers) for _ in range(repeat)]
    shutil.rmtree(out, ignore_errors=True)
    return runs


def report(label: str, root: Path, out: Path, workers: str, repeat: int) -> dict:
    events = int((root / "events.txt").read_text())
    in_bytes = sum(p.stat().st_size for p in input_files(root))
    cats = [cat_seconds(root) for _ in range(5)]
    cat_cpu, cat_wall = min(c for c, _ in cats), min(w for _, w in cats)
    runs = builds(root, out, workers, repeat)
    r = runs[0]
    cpus = sorted(x["cpu"] for x in runs)
    walls = sorted(x["seconds"] for x in runs)
    cpu_min, cpu_med = cpus[0], statistics.median(cpus)
    rss = max(x["maxrss_mb"] for x in runs)
    print(f"{label}: {events:,} DN events, {in_bytes / 1e6:,.0f} MB in → {r['txns']:,} txns, "
          f"{r['out_events']:,} events, {r['out_bytes'] / 1e6:,.0f} MB out in {r['files']} files")
    print(f"  build CPU {cpu_min:.2f} s min / {cpu_med:.2f} s median of {len(runs)} (wall {walls[0]:.2f} s min): "
          f"{events / cpu_min:,.0f} DN events/s (median {events / cpu_med:,.0f}), "
          f"{r['out_events'] / cpu_min:,.0f} output events/s, {in_bytes / 1e6 / cpu_min:,.1f} MB/s in")
    print(f"  cat CPU {cat_cpu:.3f} s, wall {cat_wall:.3f} s ({in_bytes / 1e6 / cat_wall:,.0f} MB/s): "
          f"build/cat = {cpu_min / cat_cpu:,.0f}× by CPU, {walls[0] / cat_wall:,.0f}× by wall; "
          f"peak RSS {rss:.0f} MB"
          + (f" (+ largest worker {r['worker_rss_mb']:.0f} MB)" if r["worker_rss_mb"] > 1 else ""))
    if r["dn_events"] is not None and r["dn_events"] != events:
        print(f"  note: the build counted {r['dn_events']:,} DN events")
    return {"events": events, "cpu": cpu_min, "rss": rss, "cat_cpu": cat_cpu}


def measure_extract(root: Path) -> None:
    """Child process: extraction alone (scan + assembler + first-level sort, every DN, the build's GC
    setting), its CPU seconds and the DN branches it gave."""
    import gc

    from extractor import extract, storage_sequences

    dirs = dn_dirs(root)
    seqs = storage_sequences(d.name for d in dirs)
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    c0 = cpu_seconds(resource.RUSAGE_SELF)
    n = sum(1 for d in dirs for _ in extract(d, storage_seq=seqs[d.name]))
    print(json.dumps({"cpu": cpu_seconds(resource.RUSAGE_SELF) - c0, "branches": n}))


def report_extract(root: Path, repeat: int) -> None:
    """``--extract``: extraction alone on ``root``, ``repeat`` fresh processes, min / median CPU."""
    events = int((root / "events.txt").read_text())
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--measure-extract", str(root)], check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1])
            for _ in range(repeat)]
    cpus = sorted(r["cpu"] for r in runs)
    branches = runs[0]["branches"]
    print(f"extract: {events:,} DN events → {branches:,} DN branches; CPU {cpus[0]:.3f} s min / "
          f"{statistics.median(cpus):.3f} s median of {repeat} = {events / cpus[0]:,.0f} DN events/s, "
          f"{cpus[0] / branches * 1e6:.1f} µs per branch")


def profile(root: Path, out: Path, top: int) -> None:
    """One build under cProfile in this process: the top functions by own time, share of the total."""
    import cProfile
    import pstats

    from gbinlog.local_engine import Settings, build

    shutil.rmtree(out, ignore_errors=True)
    prof = cProfile.Profile()
    prof.enable()
    build(dn_dirs(root), out, settings=Settings(workers=False))
    prof.disable()
    shutil.rmtree(out, ignore_errors=True)
    stats = pstats.Stats(prof).stats
    total = sum(v[2] for v in stats.values())
    print(f"profile of one 1× build ({total:.2f} s own time under cProfile), top {top} by own time:")
    for (file, line, func), (_cc, calls, own, cum, _callers) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]:
        where = f"{Path(file).parent.name}/{Path(file).name}:{func}" if line else func
        print(f"  {own / total:6.1%}  own {own:6.2f} s  cum {cum:6.2f} s  {calls:>9,} calls  {where}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", choices=["auto", "on", "off"], default="off",
                    help="extract each DN in a worker process (auto: with more than one CPU)")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="also print the top N of a profiled build")
    ap.add_argument("--extract", action="store_true",
                    help="measure extraction alone (scan + assembler + sort) on the 1× input, not the build")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--measure-extract", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(args.measure, args.out, args.workers)
        return
    if args.measure_extract:
        measure_extract(args.measure_extract)
        return
    from binlog import kernel

    compile_project()
    print(f"kernel: {'compiled binlog._kernel' if kernel.COMPILED else 'pure Python (binlog.kernel_py)'}")
    small = make_input(args.dir, args.events // 5, args.dns)
    if args.extract:
        report_extract(small, args.repeat)
        return
    big = make_input(args.dir, args.events, args.dns)
    out = args.dir / f"build-out-{os.getpid()}"  # per run: two benches at once must not share it
    one = report("1×", small, out, args.workers, args.repeat)
    five = report("5×", big, out, args.workers, args.repeat)
    eps = five["events"] / five["cpu"]
    print(f"end to end: {eps:,.0f} DN events per CPU-second on 5× ({'meets' if eps >= 1_000_000 else 'BELOW'} "
          f"the 1M target); build/cat {five['cpu'] / five['cat_cpu']:,.0f}× by CPU "
          f"({'meets' if five['cpu'] / five['cat_cpu'] <= 40 else 'above'} the 40× target); "
          f"peak RSS 1× {one['rss']:.0f} MB vs 5× {five['rss']:.0f} MB (ratio {five['rss'] / one['rss']:.2f})")
    if args.profile:
        profile(small, out, args.profile)


if __name__ == "__main__":
    main()
