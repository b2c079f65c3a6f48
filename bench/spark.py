"""The Spark engine against the local engine (issue 8, Must show 4). Not a test: prints numbers.

    .venv/bin/python bench/spark.py [--events 2000000] [--dns 4] [--dir /tmp/gbinlog-bench]
                                    [--ranges 4] [--stream-seconds 20] [--tps 300]

Input: the simulator's ``bank`` workload on ``--dns`` DNs, ``--events`` DN events (cached in
``--dir``, shared with bench/order.py and bench/build.py). Each run is a fresh process:

* ``gbinlog build`` with the local engine (extraction in worker processes, as the CLI runs it);
* ``build --engine spark`` on ``local[1]`` and ``local[2]`` with ``--ranges`` output ranges: the
  whole command (JVM start included) and, in the same session, a second build (warm JVM and Python
  workers — what a long-lived cluster session sees); the phases of the warm one;
* every Spark output must be byte-identical to the local engine's (files, index);
* the streaming service (``run --engine spark``, default trigger) and the local one on a live
  bank cluster of ``--stream-seconds`` at ``--tps``: how far the newest written transaction is
  behind its commit TSO (sampled every 50 ms; p50/p99), and the micro-batch durations.

Ratios: spark events/s ÷ local events/s, and local[2] ÷ local[1] (scaling from 1 to 2 executor
cores). The machine has 2 cores (shared): Spark cannot beat one well-fed process here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import dn_dirs, make_input, peak_rss_mb  # noqa: E402


def _child(args: list[str]) -> dict:
    run = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def child_local(root: Path, out: Path) -> dict:
    from gbinlog.local_engine import build

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    r = build(dn_dirs(root), out)
    return {"seconds": time.perf_counter() - t0, "events_in": int((root / "events.txt").read_text()),
            "events_out": r.events, "files": r.files, "rss_mb": peak_rss_mb()}


def child_spark(root: Path, out: Path, master: str, ranges: int, warm: bool) -> dict:
    from gbinlog.spark_engine.batch import build
    from gbinlog.spark_engine.session import spark_session

    t0 = time.perf_counter()
    spark = spark_session(master, {"spark.driver.memory": "4g"})
    t_session = time.perf_counter() - t0
    runs = []
    for i in range(2 if warm else 1):
        dest = out if i == 0 else out.with_name(out.name + "-warm")
        shutil.rmtree(dest, ignore_errors=True)
        t1 = time.perf_counter()
        r = build(dn_dirs(root), dest, spark=spark, ranges=ranges)
        runs.append({"seconds": time.perf_counter() - t1, "timings": r.timings, "files": r.files,
                     "range_seconds": r.range_seconds, "events_out": r.events})
    spark.stop()
    return {"session": t_session, "cold_total": t_session + runs[0]["seconds"], "runs": runs,
            "events_in": int((root / "events.txt").read_text()), "rss_mb": peak_rss_mb()}


def child_stream(root: Path, engine: str, seconds: float, tps: int, dns: int) -> dict:
    """A live bank cluster for ``seconds``; the service follows it; lag samples of the newest written
    transaction (now − its commit TSO)."""
    from gbinlog.config import load
    from simulator.live import LiveSimulation

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    cfg_path = root / "cluster.toml"
    cfg_path.write_text(f'[output]\ndir = "{root / "out"}"\n[server]\nport = 0\n'
                        + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{root / "cluster" / f"dn{i}"}"\n' for i in range(dns)))
    if engine == "spark":
        from gbinlog.spark_engine.streaming import SparkLiveRunner
        runner = SparkLiveRunner(load(cfg_path), master="local[2]")
    else:
        from gbinlog.live import LiveRunner
        runner = LiveRunner(load(cfg_path))
    lags: list[float] = []
    measuring = threading.Event()
    done = threading.Event()

    def sample() -> None:  # every 50 ms: how far the newest written transaction is behind its TSO
        while not done.wait(0.05):
            p = runner.progress
            if measuring.is_set() and p is not None and p.last_vtso:
                lags.append(time.time() * 1000 - (int(p.last_vtso[:19]) >> 22))

    threading.Thread(target=sample, daemon=True).start()
    sim = LiveSimulation("bank", dns, root / "cluster", seed=5, tps=tps, max_file_size=4 << 20, truth=False)
    sim_thread = threading.Thread(target=sim.run, daemon=True)
    sim_thread.start()
    while not all((root / "cluster" / f"dn{i}").is_dir() for i in range(dns)):
        time.sleep(0.05)
    runner.start()
    worker = threading.Thread(target=runner.run, daemon=True)
    worker.start()
    while not (root / "out" / "binlog.000001").exists():
        time.sleep(0.1)
    time.sleep(4)                    # past the start-up backlog
    measuring.set()
    time.sleep(seconds)
    measuring.clear()
    done.set()
    runner.stop()
    worker.join(60)
    runner.close()
    sim.stop()
    sim_thread.join(30)
    lags.sort()
    out = {"samples": len(lags), "p50_ms": lags[len(lags) // 2] if lags else None,
           "p99_ms": lags[int(len(lags) * 0.99)] if lags else None, "max_ms": lags[-1] if lags else None}
    batches = getattr(runner, "batches", [])
    if batches:
        secs = sorted(b["seconds"] for b in batches)
        out.update(batches=len(batches), batch_p50_s=statistics.median(secs),
                   rows_p50=statistics.median(b["rows"] for b in batches))
    return out


def same_files(a: Path, b: Path) -> bool:
    fa = sorted(p.name for p in a.glob("binlog.0*"))
    return fa == sorted(p.name for p in b.glob("binlog.0*")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in fa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--ranges", type=int, default=4)
    ap.add_argument("--stream-seconds", type=float, default=20)
    ap.add_argument("--tps", type=int, default=300)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "local":
            res = child_local(Path(rest[0]), Path(rest[1]))
        elif kind == "spark":
            res = child_spark(Path(rest[0]), Path(rest[1]), rest[2], int(rest[3]), rest[4] == "warm")
        else:
            res = child_stream(Path(rest[0]), rest[1], float(rest[2]), int(rest[3]), int(rest[4]))
        print(json.dumps(res))
        return

    root = make_input(args.dir, args.events, args.dns)
    outs = args.dir / "spark-bench"
    outs.mkdir(exist_ok=True)
    events = int((root / "events.txt").read_text())
    print(f"input: {root} — {events:,} DN events on {args.dns} DNs")
    local = _child(["--child", "local", str(root), str(outs / "local")])
    local_eps = events / local["seconds"]
    print(f"local engine: {local['seconds']:.1f} s = {local_eps:,.0f} events/s, {len(local['files'])} file(s), "
          f"peak RSS {local['rss_mb']:.0f} MB")
    rates = {}
    for master in ("local[1]", "local[2]"):
        r = _child(["--child", "spark", str(root), str(outs / f"spark-{master[6]}"), master, str(args.ranges), "warm"])
        cold, warm = r["runs"]
        rates[master] = (events / r["cold_total"], events / warm["seconds"])
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in warm["timings"].items())
        print(f"spark {master}, {args.ranges} ranges: whole command {r['cold_total']:.1f} s "
              f"(session {r['session']:.1f} s) = {rates[master][0]:,.0f} events/s ({rates[master][0] / local_eps:.2f}× local); "
              f"warm session {warm['seconds']:.1f} s = {rates[master][1]:,.0f} events/s "
              f"({rates[master][1] / local_eps:.2f}× local) [{phases}]; driver RSS {r['rss_mb']:.0f} MB")
        print(f"  files byte-identical to the local engine's: {same_files(outs / f'spark-{master[6]}', outs / 'local')}"
              f" (warm run: {same_files(outs / f'spark-{master[6]}-warm', outs / 'local')})")
    print(f"scaling local[1] → local[2]: whole command {rates['local[2]'][0] / rates['local[1]'][0]:.2f}×, "
          f"warm {rates['local[2]'][1] / rates['local[1]'][1]:.2f}×")
    for engine in ("local", "spark"):
        s = _child(["--child", "stream", str(args.dir / f"stream-{engine}"), engine, str(args.stream_seconds),
                    str(args.tps), str(args.dns)])
        extra = (f"; {s['batches']} micro-batches, p50 {s['batch_p50_s'] * 1000:.0f} ms, "
                 f"{s['rows_p50']:.0f} DN txns each" if "batches" in s else "")
        print(f"streaming, {engine} engine, {args.tps} client txns/s on {args.dns} DNs: newest written txn behind "
              f"its commit TSO p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, max {s['max_ms']:.0f} ms "
              f"({s['samples']} samples){extra}")


if __name__ == "__main__":
    main()
