"""The Spark engine against the local engine (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/spark.py [--events 2000000] [--dns 4] [--dir /tmp/gbinlog-bench]
                                    [--ranges N] [--repeat 3] [--no-warm] [--no-whole] [--no-guess]
                                    [--cluster] [--before DIR] [--stream-seconds 20] [--tps 300]

The three measurements, one command each (the Spark rows of docs/performance.md):
    bench/spark.py --events 1000000 --repeat 3 --no-whole      # local[2] ÷ local[1], warm
    bench/spark.py --events 21000000 --repeat 3 --no-warm --cluster   # the whole command vs local, 2.35 GB;
                                                                      # 1 vs 2 standalone workers
    bench/spark.py --events 70000000 --repeat 2 --no-warm      # the same on 7.8 GB

Input: the simulator's ``bank`` workload on ``--dns`` DNs, ``--events`` DN events (cached in
``--dir``, shared with bench/order.py and bench/build.py; ``--events 21000000`` is ≈ 2 GB). The
machine is shared and noisy, so every timing is repeated (``--repeat``; min and median) and CPU
seconds of the whole process tree (driver, JVM, Python workers) are reported next to wall time, and
the 1-minute load average next to each line (other work on the machine shows there).

* the whole command, as a user runs it (``--no-whole``: skipped): ``gbinlog build`` (local engine) and ``gbinlog build
  --engine spark --master local[2]`` (JVM start included), wall and CPU;
* warm sessions (what a long-lived cluster session sees): in one process per master (``local[1]``,
  ``local[2]``), session start, the first build, then ``--repeat`` builds; the phases of the best
  (plan; start points + schema history; the windows; file layout and copies; state) and the
  window tasks' seconds; ``local[2] ÷ local[1]`` is the scaling;
* ``--no-guess``: every Spark build with ``spark.gbinlog.guess=false`` (the scan job first);
* ``--cluster``: a Spark standalone master and two 1-core workers on this box (``spark-class``,
  stopped by pid): the build with 1 and with 2 executor cores;
* ``--before DIR``: a checkout of another revision (its extensions built in place: ``python
  setup.py build_ext --inplace``): its ``gbinlog build --engine spark`` runs interleaved with this
  one's in the whole commands and on the standalone cluster (before/after in one run);
* every Spark output is compared byte for byte with the local engine's (files and index);
* ``--stream-seconds`` > 0: the streaming service (``run --engine spark``) and the local one on a
  live bank cluster at ``--tps``: how far the newest written transaction is behind its commit TSO.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import compile_project, dn_dirs, make_input, peak_rss_mb  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _child(args: list[str]) -> dict:
    run = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _proc_table() -> dict[int, tuple[int, float, float]]:
    """pid → (ppid, own CPU seconds, CPU of its reaped children) from ``/proc/<pid>/stat``."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                f = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(proc.name)] = (int(f[1]), (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick)
    return table


def _tree(table: dict, pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, row in table.items() if row[0] == p)
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and every live descendant (the JVM, pyspark's daemon and workers),
    their reaped children included."""
    table = _proc_table()
    return sum(table[p][1] + table[p][2] for p in _tree(table, pid) if p in table)


def whole_command(args: list[str], out: Path, code: Path = ROOT) -> dict:
    """One ``gbinlog`` command as a process: wall, and CPU of it and every process it started
    (sampled every 0.1 s per pid: the JVM is not always reaped by the driver, so rusage misses it)."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", *args, "--out", str(out), "--no-progress"],
                            cwd=code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(code)})
    seen: dict[int, float] = {}
    while proc.poll() is None:
        table = _proc_table()
        for p in _tree(table, proc.pid):
            if p in table:
                seen[p] = max(seen.get(p, 0.0), table[p][1])
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed:\n{err[-3000:]}")
    return {"wall": wall, "cpu": sum(seen.values())}


def child_spark(root: Path, out: Path, master: str, ranges: int, repeat: int, confs: str) -> dict:
    from gbinlog.spark_engine.batch import build
    from gbinlog.spark_engine.session import spark_session

    t0 = time.perf_counter()
    spark = spark_session(master, dict(c.split("=", 1) for c in confs.split(",")))
    t_session = time.perf_counter() - t0
    runs = []
    for i in range(1 + repeat):
        dest = out if i == 0 else out.with_name(f"{out.name}-warm{i}")
        shutil.rmtree(dest, ignore_errors=True)
        cpu0, t1 = tree_cpu(os.getpid()), time.perf_counter()
        r = build(dn_dirs(root), dest, spark=spark, ranges=ranges or None)
        runs.append({"seconds": time.perf_counter() - t1, "cpu": tree_cpu(os.getpid()) - cpu0, "timings": r.timings,
                     "range_seconds": r.range_seconds, "dest": str(dest)})
    spark.stop()
    return {"session": t_session, "runs": runs, "rss_mb": peak_rss_mb()}


def child_cluster(root: Path, out: Path, ranges: int, before: Path | None) -> dict:
    """A standalone master + two 1-core workers; the build on 1 and on 2 executor cores (and
    ``before``'s, interleaved)."""
    from tests.spark_support import StandaloneCluster

    cluster = StandaloneCluster(out.parent / "standalone", workers=2, cores=1, memory="1g")
    res = {}
    try:
        cluster.wait_workers()
        for cores, code in [(c, code) for c in (1, 2, 1, 2) for code in (ROOT, before) if code is not None]:
            dest = out.with_name(f"{out.name}-{cores}{'' if code == ROOT else '-before'}")
            r = whole_command(["build", "--engine", "spark", "--master", cluster.url,
                               "--conf", "spark.executor.cores=1", "--conf", f"spark.cores.max={cores}",
                               "--conf", "spark.executor.memory=768m", "--conf", f"spark.executorEnv.PYTHONPATH={code}",
                               "--conf", f"spark.scheduler.minRegisteredResourcesRatio={1.0 if cores == 2 else 0.5}",
                               # 0 = the engine's default (as many ranges as the cluster's cores: 2 here,
                               # Spark's minimum default parallelism, on 1 core too)
                               *(["--conf", f"spark.gbinlog.ranges={ranges}"] if ranges else []),
                               *[a for d in dn_dirs(root) for a in ("--dn", str(d))]], dest, code)
            res.setdefault(f"{cores}{'' if code == ROOT else '-before'}", []).append(r["wall"])
        res["dest"] = str(out.with_name(f"{out.name}-2"))
    finally:
        cluster.stop()
        shutil.rmtree(out.parent / "standalone", ignore_errors=True)
    return res


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
    return bool(fa) and fa == sorted(p.name for p in b.glob("binlog.0*")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in [*fa, "binlog.index"])


def _mm(values: list[float]) -> str:
    return f"min {min(values):.1f} / median {statistics.median(values):.1f}"


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def whole_commands(root: Path, outs: Path, events: int, dn_args: list[str], repeat: int, confs: str,
                   before: Path | None) -> None:
    """``gbinlog build`` and ``gbinlog build --engine spark --master local[2]`` (and ``before``'s),
    interleaved (the machine's load hits them alike), ``repeat`` times each."""
    local, spark_cmd, old = [], [], []
    spark_args = ["build", "--engine", "spark", "--master", "local[2]",
                  *(a for c in confs.split(",") for a in ("--conf", c)), *dn_args]
    for _ in range(repeat):
        local.append(whole_command(["build", *dn_args], outs / "local"))
        spark_cmd.append(whole_command(spark_args, outs / "spark-cmd"))
        if before is not None:
            old.append(whole_command(spark_args, outs / "spark-before", before))
        print(f"  run: local {local[-1]['wall']:.1f} s wall / {local[-1]['cpu']:.1f} s CPU, spark "
              f"{spark_cmd[-1]['wall']:.1f} s / {spark_cmd[-1]['cpu']:.1f} s CPU"
              + (f", spark before {old[-1]['wall']:.1f} s / {old[-1]['cpu']:.1f} s CPU" if old else "")
              + f" ({_load()})", flush=True)
    lw, sw = [r["wall"] for r in local], [r["wall"] for r in spark_cmd]
    print(f"whole command, local engine: wall {_mm(lw)} s = {events / min(lw):,.0f} events/s; "
          f"CPU {_mm([r['cpu'] for r in local])} s")
    print(f"whole command, --engine spark local[2]: wall {_mm(sw)} s = {events / min(sw):,.0f} events/s; "
          f"CPU {_mm([r['cpu'] for r in spark_cmd])} s; spark ÷ local wall (min) {min(lw) / min(sw):.2f}×, "
          f"median {statistics.median(lw) / statistics.median(sw):.2f}× ({_load()})")
    print(f"  byte-identical to the local engine: {same_files(outs / 'spark-cmd', outs / 'local')}")
    if old:
        ow = [r["wall"] for r in old]
        print(f"whole command, --engine spark local[2] before ({before}): wall {_mm(ow)} s; CPU "
              f"{_mm([r['cpu'] for r in old])} s; spark ÷ local wall (min) {min(lw) / min(ow):.2f}×, median "
              f"{statistics.median(lw) / statistics.median(ow):.2f}×; byte-identical: "
              f"{same_files(outs / 'spark-before', outs / 'local')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"))
    ap.add_argument("--ranges", type=int, default=0, help="output ranges of the warm builds (0: the engine's default)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True,
                    help="the in-session local[1]/local[2] builds (--no-warm: whole commands only)")
    ap.add_argument("--whole", action=argparse.BooleanOptionalAction, default=True,
                    help="the whole commands, local engine vs --engine spark (--no-whole: warm sessions only)")
    ap.add_argument("--guess", action=argparse.BooleanOptionalAction, default=True,
                    help="spark.gbinlog.guess of every Spark build (--no-guess: the scan first)")
    ap.add_argument("--cluster", action="store_true")
    ap.add_argument("--before", type=Path, help="a checkout of another revision to run beside this one")
    ap.add_argument("--stream-seconds", type=float, default=0)
    ap.add_argument("--tps", type=int, default=300)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "spark":
            res = child_spark(Path(rest[0]), Path(rest[1]), rest[2], int(rest[3]), int(rest[4]), rest[5])
        elif kind == "cluster":
            res = child_cluster(Path(rest[0]), Path(rest[1]), int(rest[2]), Path(rest[3]) if rest[3] else None)
        else:
            res = child_stream(Path(rest[0]), rest[1], float(rest[2]), int(rest[3]), int(rest[4]))
        print(json.dumps(res))
        return

    compile_project()
    confs = f"spark.gbinlog.guess={str(args.guess).lower()}"
    before = args.before.resolve() if args.before else None
    root = make_input(args.dir, args.events, args.dns)
    outs = args.dir / "spark-bench"
    outs.mkdir(exist_ok=True)
    events = int((root / "events.txt").read_text())
    size = sum(f.stat().st_size for d in dn_dirs(root) for f in d.iterdir())
    print(f"input: {root} — {events:,} DN events, {size / 1e9:.2f} GB on {args.dns} DNs")
    dn_args = [a for d in dn_dirs(root) for a in ("--dn", str(d))]
    if args.whole:
        whole_commands(root, outs, events, dn_args, args.repeat, confs, before)
    elif args.warm:   # the reference bytes for the warm builds
        whole_command(["build", *dn_args], outs / "local")
    warm = {}
    for master in ("local[1]", "local[2]") if args.warm else ():
        name = f"spark-{master[6]}"
        r = _child(["--child", "spark", str(root), str(outs / name), master, str(args.ranges), str(args.repeat), confs])
        first, rest = r["runs"][0], r["runs"][1:]
        best = min(rest, key=lambda x: x["seconds"])
        warm[master] = best["seconds"]
        warm[(master, "median")] = statistics.median(x["seconds"] for x in rest)
        phases = ", ".join(f"{k} {v:.2f}" for k, v in best["timings"].items())
        print(f"{master}, {args.ranges or 'default'} windows: session {r['session']:.1f} s, first build "
              f"{first['seconds']:.1f} s; warm {_mm([x['seconds'] for x in rest])} s = "
              f"{events / best['seconds']:,.0f} events/s, CPU {_mm([x['cpu'] for x in rest])} s ({_load()}) "
              f"[best: {phases}; window tasks {', '.join(f'{x:.2f}' for x in best['range_seconds'])} s]")
        print(f"  byte-identical to the local engine: "
              f"{all(same_files(Path(x['dest']), outs / 'local') for x in r['runs'])}")
    if args.warm:
        print(f"scaling local[1] → local[2], warm: best of each {warm['local[1]'] / warm['local[2]']:.2f}×, "
              f"median of each {warm[('local[1]', 'median')] / warm[('local[2]', 'median')]:.2f}× ({_load()})")
    if args.cluster:
        c = _child(["--child", "cluster", str(root), str(outs / "standalone"), str(args.ranges), str(before or "")])
        print(f"standalone master + 2 workers: 1 executor core {_mm(c['1'])} s, 2 cores {_mm(c['2'])} s "
              f"({min(c['1']) / min(c['2']):.2f}×, median {statistics.median(c['1']) / statistics.median(c['2']):.2f}×); "
              f"byte-identical: {same_files(Path(c['dest']), outs / 'local')}")
        if before is not None:
            print(f"  before: 1 executor core {_mm(c['1-before'])} s, 2 cores {_mm(c['2-before'])} s "
                  f"({min(c['1-before']) / min(c['2-before']):.2f}×)")
    for engine in ("local", "spark") if args.stream_seconds > 0 else ():
        s = _child(["--child", "stream", str(args.dir / f"stream-{engine}"), engine, str(args.stream_seconds),
                    str(args.tps), str(args.dns)])
        extra = (f"; {s['batches']} micro-batches, p50 {s['batch_p50_s'] * 1000:.0f} ms, "
                 f"{s['rows_p50']:.0f} DN txns each" if "batches" in s else "")
        print(f"streaming, {engine} engine, {args.tps} client txns/s on {args.dns} DNs: newest written txn behind "
              f"its commit TSO p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, max {s['max_ms']:.0f} ms "
              f"({s['samples']} samples){extra}")
    shutil.rmtree(outs, ignore_errors=True)


if __name__ == "__main__":
    main()
