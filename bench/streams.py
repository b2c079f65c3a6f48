"""Stream groups (docs/streams.md, docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/streams.py [--events 1000000] [--dns 4] [--streams 4] [--repeat 3]
                                      [--dir /tmp/gbinlog-bench] [--apply-events 200000] [--no-apply]

* **CPU of a build into N streams vs one.** The simulator's ``bank`` workload (``--events`` DN
  events on ``--dns`` DNs, cached in ``--dir``) built in a fresh process per build, ``--repeat``
  rounds of one stream, ``--streams`` streams hashed by table and by record, one after the other.
  CPU seconds (user + system, ``getrusage``), min and median, and the median over the rounds of
  each build's ratio to that round's single-stream build (the host's speed drifts between runs).
* ``--instructions``: the same builds once each under ``valgrind --tool=callgrind``, instructions
  executed less start-up: a measure this host's drifting speed does not move.
* **Apply time, 1 replica vs N.** A smaller ``bank`` input (``--apply-events``) built as one
  stream and as ``--streams`` streams by record; one endpoint serves each; throwaway MariaDB
  replicas (``CHANGE MASTER TO`` the stream's first file, one SQL thread each) apply it from the
  start: the wall seconds until the one replica, and until the last of the N, has executed its
  stream to the end; with replicas that flush InnoDB's log at each commit and with ones that do
  not (``innodb_flush_log_at_trx_commit`` 1 and 2).
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
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.order import compile_project, dn_dirs, make_input  # noqa: E402


def cpu_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def measure(root: Path, out: Path, count: int, level: str) -> None:
    """Child process: one build, its CPU and wall seconds."""
    from gbinlog.local_engine import Settings, build

    shutil.rmtree(out, ignore_errors=True)
    # checkpoints by time would follow the host's speed (many more under a profiler): by size only
    settings = Settings(streams={"count": count, "hash": level} if count > 1 else None, checkpoint_seconds=3600)
    c0, t0 = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    result = build([str(d) for d in dn_dirs(root)], out, settings=settings)
    print(json.dumps({"cpu": cpu_seconds(resource.RUSAGE_SELF) - c0, "wall": time.perf_counter() - t0,
                      "dn_events": result.dn_events, "written": result.written, "bytes": result.bytes}))


def child(root: Path, out: Path, count: int, level: str) -> dict:
    res = subprocess.run([sys.executable, __file__, "--measure", str(root), "--out", str(out), "--streams",
                          str(count), "--hash", level], check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def cpu_table(root: Path, work: Path, count: int, repeat: int) -> None:
    kinds = ((1, "table"), (count, "table"), (count, "record"))
    runs: dict[tuple[int, str], list[dict]] = {kind: [] for kind in kinds}
    for _ in range(repeat):                 # interleaved: a slow spell of the host hits every kind
        for n, level in kinds:
            runs[(n, level)].append(child(root, work / "out", n, level))
    rows = []
    ones = [r["cpu"] for r in runs[kinds[0]]]
    for n, level in kinds:
        cpus = [r["cpu"] for r in runs[(n, level)]]
        # this host's speed drifts by ±30 % between runs: the ratio is the median of the ratios of
        # each round's runs, made one after the other
        ratio = statistics.median(c / one for c, one in zip(cpus, ones, strict=True))
        rows.append((n, level if n > 1 else "-", min(cpus), statistics.median(cpus), ratio, runs[(n, level)][0]))
    shutil.rmtree(work / "out", ignore_errors=True)
    events = rows[0][5]["dn_events"]
    print(f"build CPU, {events:,} DN events ({len(dn_dirs(root))} DNs), {repeat} fresh processes each, "
          "interleaved:")
    print(f"{'streams':>8} {'hash':>7} {'CPU min':>9} {'median':>9} {'× one*':>7} {'txns written':>13} {'MB out':>8}")
    for n, level, lo, med, ratio, r in rows:
        print(f"{n:>8} {level:>7} {lo:>8.2f}s {med:>8.2f}s {ratio:>6.2f}× {r['written']:>13,} {r['bytes'] / 1e6:>8.1f}")
    print("* the median over the rounds of (this build's CPU ÷ the one-stream build's CPU of the same round)")


def instruction_counts(root: Path, work: Path, count: int) -> None:
    """Each build once under ``valgrind --tool=callgrind`` (``--instructions``): instructions executed,
    less those of the same build of an 83-transaction input (start-up and imports) — a count the
    host's drifting speed does not move."""
    import re

    tiny = make_input(root.parent, 2000, len(dn_dirs(root)))
    env = {**os.environ, "PYTHONHASHSEED": "0"}

    def count_of(input_dir: Path, n: int, level: str) -> int:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / 'callgrind.out'}", sys.executable,
               __file__, "--measure", str(input_dir), "--out", str(work / "out"), "--streams", str(n), "--hash", level]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        return int(re.search(r"Collected : (\d+)", res.stderr).group(1))

    base = count_of(tiny, 1, "table")
    one = count_of(root, 1, "table") - base
    print(f"instructions (callgrind), less start-up ({base / 1e9:.2f} G): 1 stream {one / 1e9:.3f} G", end="")
    for level in ("table", "record"):
        n = count_of(root, count, level) - base
        print(f"; {count} streams by {level} {n / 1e9:.3f} G = {n / one:.2f}×", end="")
    print()
    shutil.rmtree(work / "out", ignore_errors=True)


def apply_times(root: Path, work: Path, count: int, flush_each_commit: bool) -> None:
    from dumper.server import ServerConfig, start_in_thread
    from gbinlog.local_engine import Settings, build
    from tests.mariadb import MariaDB
    from tests.test_server_support import USERS, change_master, wait_caught_up

    dns = [str(d) for d in dn_dirs(root)]
    single, group = work / "single", work / "group"
    for d in (single, group):
        shutil.rmtree(d, ignore_errors=True)
    txns = build(dns, single, settings=Settings()).written
    build(dns, group, settings=Settings(streams={"count": count, "hash": "record"}))
    flush = f"--innodb-flush-log-at-trx-commit={1 if flush_each_commit else 2}"
    replicas = [MariaDB.start(work / f"replica{k}-{flush_each_commit}", server_id=10 + k, extra_args=(flush,))
                for k in range(count)]

    def ends(d: Path, base: str) -> tuple[str, Path]:
        names = [line.strip()[2:] for line in (d / f"{base}.index").read_text().splitlines()]
        return names[0], d / names[-1]

    def apply(out: Path, pairs: list) -> float:
        """Seconds until every (replica, (first file, last file)) pair has applied its stream."""
        for r in replicas:
            r.query("STOP SLAVE")
            r.query("RESET SLAVE ALL")
            r.query("DROP DATABASE IF EXISTS bank")
        with start_in_thread(ServerConfig(dir=out, users=USERS, server_id=100)) as h:
            t0 = time.perf_counter()
            for r, (first, _last) in pairs:
                change_master(r, h.port, first, 4)
                r.query("START SLAVE")
            for r, (_first, last) in pairs:
                wait_caught_up(r, last.name, last.stat().st_size, timeout=1800)
            return time.perf_counter() - t0

    try:
        one = apply(single, [(replicas[0], ends(single, "binlog"))])
        targets = [ends(group / f"stream{k}", f"group1_stream_{k}_binlog") for k in range(count)]
        many = apply(group, list(zip(replicas, targets, strict=True)))
        # each stream applied alone, one after the other: what N replicas with a core each take
        alone = [apply(group, [(replicas[k], targets[k])]) for k in range(count)]
    finally:
        for r in replicas:
            r.stop()
    print(f"apply ({flush}; {len(dns)} DNs' bank workload, {txns:,} transactions): 1 replica on the 1 stream "
          f"{one:.1f} s; {count} replicas on {count} streams (record hashing) at once on this host {many:.1f} s "
          f"({one / many:.2f}×); each stream alone {' / '.join(f'{a:.1f}' for a in alone)} s: with a core per "
          f"replica {max(alone):.1f} s ({one / max(alone):.2f}×)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--apply-events", type=int, default=200_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/gbinlog-bench")
    ap.add_argument("--no-apply", action="store_true")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions under callgrind instead (needs valgrind; use --events 200000)")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--hash", default="table", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(Path(args.measure), Path(args.out), args.streams, args.hash)
        return
    compile_project()
    root = make_input(Path(args.dir), args.events, args.dns)
    with tempfile.TemporaryDirectory(prefix="gbinlog-streams-") as tmp:
        if args.instructions:
            instruction_counts(root, Path(tmp), args.streams)
            return
        cpu_table(root, Path(tmp), args.streams, args.repeat)
        if not args.no_apply:
            small = make_input(Path(args.dir), args.apply_events, args.dns)
            for flush_each_commit in (True, False):
                apply_times(small, Path(tmp), args.streams, flush_each_commit)


if __name__ == "__main__":
    main()
