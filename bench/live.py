"""Live latency (docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/live.py [--seconds 30] [--events-per-s 10000] [--dns 4] [--no-replica]
    .venv/bin/python bench/live.py --ceiling 50000,100000,200000 [--seconds 20] [--warmup 3] [--profile DIR]
    .venv/bin/python bench/live.py --catch-up 1000000 [--repeat 3]

A live simulated bank cluster (``--dns`` DNs served over the replication protocol, heartbeats every
200 ms) writes about ``--events-per-s`` DN events per second; ``gbinlog run`` (its own process)
reads the DNs, writes and serves the global binlog; a MariaDB replica applies it. For every
distributed (TSO) transaction, from its commit TSO's physical time (the simulator's TSO oracle
follows the wall clock):

* **to the global binlog**: the moment its ``CTS::<vtso>`` marker is in the file (this process
  follows the files, polling every 2 ms);
* **to the replica**: the moment the replica's SQL thread has executed past it (``SHOW SLAVE
  STATUS`` ``Exec_Master_Log_Pos`` polled every 10 ms).

Printed: p50 / p90 / p99 / max of both, against the target p99 ≤ 1 s, and the input rate reached.
The heartbeat period (200 ms) is the baseline: a transaction can leave the merge only once every
DN has a newer transaction, which the next heartbeat guarantees.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from binlog import read_events  # noqa: E402
from gbinlog.replica import Replica, free_port, mariadb_available  # noqa: E402
from simulator.live import LiveSimulation, ServeOptions  # noqa: E402

EVENTS_PER_TXN_PER_DN = 4.9   # bank: ~19.6 DN events per client txn on 4 DNs, heartbeats included
CTS = b"\x01CTS::"


def percentiles(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    if not v:
        return {}

    def p(q: float) -> float:
        return v[min(len(v) - 1, int(q * len(v)))]
    return {"n": len(v), "p50": p(0.50), "p90": p(0.90), "p99": p(0.99), "max": v[-1]}


class BinlogWatcher:
    """Follows the global binlog files; notes when each CTS marker appears and where its
    transaction ends (file, end of the marker)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: dict[str, tuple[float, str, int]] = {}   # vtso -> (time, file, end pos)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 1
        while not self.stop.is_set():
            name = f"binlog.{n:06d}"
            path = self.out / name
            if not path.exists():
                time.sleep(0.002)
                continue
            for ev in read_events(path, follow=True, poll_interval=0.002, should_stop=self.stop.is_set):
                if ev.h[1] == 29 and ev.raw[19:25] == CTS:
                    vtso = bytes(ev.raw[25:79]).decode()
                    self.seen[vtso] = (time.time(), name, ev.pos + ev.h[3])
            n += 1   # a ROTATE ended the file


class ReplicaWatcher:
    """Polls the replica's executed position every 10 ms: (time, file, pos) samples."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.samples: list[tuple[float, str, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import pymysql
        conn = self.replica.connect(cursorclass=pymysql.cursors.DictCursor)
        with conn.cursor() as cur:
            while not self.stop.is_set():
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone()
                if row and row["Relay_Master_Log_File"]:
                    self.samples.append((time.time(), row["Relay_Master_Log_File"], int(row["Exec_Master_Log_Pos"])))
                time.sleep(0.01)
        conn.close()

    def applied_at(self, file: str, pos: int) -> float | None:
        """First sample at or past (file, pos)."""
        for t, f, p in self.samples:
            if (f, p) >= (file, pos):
                return t
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--events-per-s", type=int, default=10_500)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--replica", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="seconds at the start left out (gbinlog run starting and catching up)")
    ap.add_argument("--dump", type=Path, default=None, help="write (commit ms, to-binlog ms, to-replica ms) rows")
    ap.add_argument("--ceiling", metavar="RATE[,RATE…]", help="measure the live ceiling instead "
                    "(bench/live_ceiling.py): replayed DNs at these total DN event rates, --seconds each")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gbinlog-bench"), help="input cache for --ceiling")
    ap.add_argument("--profile", type=Path, default=None, metavar="DIR",
                    help="with --ceiling: py-spy samples gbinlog run at each rate into DIR (collapsed stacks)")
    ap.add_argument("--catch-up", type=int, metavar="EVENTS", default=0,
                    help="measure gbinlog run's CPU per DN event catching up on this many DN events instead")
    ap.add_argument("--repeat", type=int, default=3, help="with --catch-up: runs")
    args = ap.parse_args()
    if args.catch_up:
        from bench.live_ceiling import catch_up
        work = Path(tempfile.mkdtemp(prefix="gbinlog-bench-catch-up-"))
        try:
            catch_up(args.dir, work, args.dns, args.catch_up, args.repeat)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.ceiling:
        from bench.live_ceiling import ceiling
        work = Path(tempfile.mkdtemp(prefix="gbinlog-bench-ceiling-"))
        try:
            ceiling([float(r) for r in args.ceiling.split(",")], args.seconds, args.warmup, args.dir, work, args.dns,
                    args.profile)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        return
    tps = max(1, int(args.events_per_s / (EVENTS_PER_TXN_PER_DN * args.dns)))
    work = Path(tempfile.mkdtemp(prefix="gbinlog-bench-live-"))
    sim = LiveSimulation("bank", args.dns, work / "cluster", tps=tps, duration=args.seconds, truth=False,
                         serve=ServeOptions(port=0, user="cdc", password="cdc"))
    sim_thread = threading.Thread(target=sim.run, daemon=True)
    sim_thread.start()
    while len(sim.ports) < args.dns:
        time.sleep(0.01)
    out = work / "global"
    port = free_port()
    cfg = work / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {port}\nusers = [{{ name = "repl", password = "r" }}]\n'
                   + "".join(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {p}\nuser = "cdc"\npassword = "cdc"\n'
                             for dn, p in sorted(sim.ports.items(), key=lambda kv: int(kv[0][2:]))))
    log = open(work / "run.log", "wb")
    svc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(cfg)], cwd=ROOT,
                           stdout=log, stderr=log, start_new_session=True)
    replica = rwatch = None
    watcher = BinlogWatcher(out)
    try:
        if args.replica and mariadb_available():
            replica = Replica.start(work / "replica")
            while not (out / "binlog.000001").exists():
                time.sleep(0.01)
            replica.attach("127.0.0.1", port, "repl", "r", heartbeat=0.2)
            rwatch = ReplicaWatcher(replica)
        sim_thread.join(args.seconds + 60)
        summary = sim.summary
        time.sleep(3.0)                      # let the pipeline and the replica drain
        watcher.stop.set()
        if rwatch is not None:
            rwatch.stop.set()
            rwatch.thread.join(5)
    finally:
        svc.send_signal(signal.SIGTERM)
        try:
            svc.wait(30)
        except subprocess.TimeoutExpired:
            svc.kill()
        if replica is not None:
            replica.stop()
        sim.stop()
        sim.stop_servers()
    status = json.loads((out / "status.json").read_text()) if (out / "status.json").exists() else {}
    # TSO transactions only: their vtso's first 19 digits are the commit TSO (a local txn's are
    # the DN's last TSO, not its commit time). Heartbeats are not written unless on the 30 s grid.
    to_binlog, to_replica, rows = [], [], []
    first_ms = min((int(v[:19]) >> 22 for v in watcher.seen), default=0)
    for vtso, (t, file, end) in watcher.seen.items():
        if vtso[38:48] != "0000000000":
            continue
        tso_ms = int(vtso[:19]) >> 22
        if tso_ms < first_ms + args.warmup * 1000:
            continue
        to_binlog.append(t * 1000 - tso_ms)
        at = rwatch.applied_at(file, end) if rwatch is not None else None
        if at is not None:
            to_replica.append(at * 1000 - tso_ms)
        rows.append((tso_ms, t * 1000 - tso_ms, None if at is None else at * 1000 - tso_ms))
    if args.dump:
        args.dump.write_text("".join(f"{a} {b:.1f} {'' if c is None else f'{c:.1f}'}\n" for a, b, c in sorted(rows)))
    events_in = summary.get("events", 0)
    seconds = summary.get("seconds", args.seconds)
    print(f"input: {args.dns} DNs, bank at {tps} txns/s → {events_in / seconds:,.0f} DN events/s "
          f"({events_in:,} events in {seconds:.1f} s; simulator behind wall clock at the end: "
          f"{summary.get('lag_ms', 0):.0f} ms)")
    print(f"output: {len(watcher.seen):,} transactions in the global binlog "
          f"({status.get('events_out', 0):,} events)")
    print(f"latency of the distributed transactions committed after the first {args.warmup:g} s "
          "(gbinlog run starting and catching up before that):")
    for name, values in (("commit TSO → CTS in global binlog", to_binlog),
                         ("commit TSO → applied on replica", to_replica)):
        p = percentiles(values)
        if not p:
            print(f"{name}: no samples")
            continue
        verdict = "meets" if p["p99"] <= 1000 else "MISSES"
        print(f"{name}: n={p['n']:,}  p50 {p['p50']:.0f} ms  p90 {p['p90']:.0f} ms  p99 {p['p99']:.0f} ms  "
              f"max {p['max']:.0f} ms  ({verdict} p99 ≤ 1000 ms; heartbeat period 200 ms = "
              f"{p['p99'] / 200:.1f}× of it)")
    if args.keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
