"""The live ceiling: the highest DN event rate ``gbinlog run`` sustains with
p99 commit → global binlog ≤ 1 s. Run through ``bench/live.py --ceiling RATE[,RATE…]``.

The live simulator cannot write hundreds of thousands of events per second, so the DNs replay a
pre-generated bank cluster (``bench/order.py``'s input, cached in ``--dir``): a paced copier appends
each DN's binlog bytes, whole events, at the asked total rate into a directory that a
``gbinlog serve`` process per DN serves over the replication protocol (the DN's role). ``gbinlog run``
(its own process) reads the four, merges and writes the global binlog.

Latency of each distributed (TSO) transaction: from the moment its last DN commit event was in the
DN's file (the copier notes when each byte range went out) to the moment its ``CTS`` marker is in
the global binlog (followed by byte search every 5 ms). Also printed: ``gbinlog run``'s CPU seconds
over the run, i.e. DN events per CPU-second of the service (its threads share one GIL: one core),
and its share of a core over the fed seconds with the load average: on a shared machine a missed
rate with the service well under a whole core means it waited for a CPU (the machine's ceiling, not
the service's); the per-CPU rate against the batch build's is the number the machine does not move.
"""

from __future__ import annotations

import bisect
import os
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.order import dn_dirs, make_input
from extractor import extract, list_binlog_files, storage_sequences
from extractor.model import TxnKind
from tests.mariadb import _free_port

CTS = b"\x01CTS::"
_SIZE = struct.Struct("<I")
TICK = 0.002


def event_ends(data: bytes) -> list[int]:
    """End offsets of the events of a binlog file (after the 4-byte magic)."""
    ends, off, n = [], 4, len(data)
    unpack = _SIZE.unpack_from
    while off + 19 <= n:
        off += unpack(data, off + 9)[0]
        ends.append(off)
    return ends


def commit_points(dirs: list[Path]) -> dict[int, list[tuple[str, str, int]]]:
    """commit TSO → [(DN, file, end of its commit event)] of every TSO DML transaction (heartbeats
    are not written to the global binlog)."""
    seqs = storage_sequences(d.name for d in dirs)
    points: dict[int, list[tuple[str, str, int]]] = {}
    for d in dirs:
        for t in extract(d, storage_seq=seqs[d.name]):
            if t.tso is not None and t.end is not None and t.kind == TxnKind.DML:
                points.setdefault(t.tso, []).append((d.name, t.end.file, t.end.offset))
    return points


class PacedCopier:
    """Appends every DN's files into ``dst/<dn>`` at ``rate`` events/s in all (shared by DN in
    proportion to its events); notes (end offset, time) per DN file as it goes."""

    def __init__(self, dirs: list[Path], dst: Path, rate: float) -> None:
        self.dst, self.rate = dst, rate
        self.files = {d.name: [(n, (d / n).read_bytes()) for n in list_binlog_files(d)] for d in dirs}
        self.ends = {dn: [event_ends(data) for _, data in fl] for dn, fl in self.files.items()}
        self.total = sum(len(e) for fl in self.ends.values() for e in fl)
        self.share = {dn: sum(len(e) for e in fl) / self.total for dn, fl in self.ends.items()}
        self.written: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
        self.cursor = {dn: [0, 0] for dn in self.files}          # file index, events written in it
        self.done_events = 0
        self.stop = threading.Event()
        self.finished_at = 0.0
        self.fds: dict[str, int] = {}
        for dn in self.files:
            (dst / dn).mkdir(parents=True)
            self._advance(dn, 1, time.time())                      # magic + FDE: the server can start

    def _advance(self, dn: str, k: int, now: float) -> None:
        """Write ``k`` more events of ``dn`` (crossing into the next files as needed)."""
        files, ends, cur = self.files[dn], self.ends[dn], self.cursor[dn]
        while k > 0 and cur[0] < len(files):
            fi, done = cur
            name, data = files[fi]
            fe = ends[fi]
            take = min(k, len(fe) - done)
            start = fe[done - 1] if done else 0
            end = fe[done + take - 1]
            if done == 0:
                self._close(dn)
                self.fds[dn] = os.open(self.dst / dn / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                with open(self.dst / dn / "mysql-bin.index", "a") as ix:
                    ix.write(f"./{name}\n")
            os.write(self.fds[dn], memoryview(data)[start:end])   # (the file open: less CPU taken from the service)
            offs, times = self.written.setdefault((dn, name), ([], []))
            offs.append(end)
            times.append(now)
            cur[1] += take
            k -= take
            self.done_events += take
            if cur[1] == len(fe):
                cur[0], cur[1] = fi + 1, 0

    def run(self) -> None:
        t0 = time.time()
        sent = {dn: 1 for dn in self.files}
        while not self.stop.is_set() and self.done_events < self.total:
            now = time.time()
            for dn, share in self.share.items():
                want = int(self.rate * share * (now - t0))
                if want > sent[dn]:
                    self._advance(dn, want - sent[dn], now)
                    sent[dn] = want
            time.sleep(TICK)
        self.finished_at = time.time()
        for dn in list(self.fds):
            self._close(dn)

    def _close(self, dn: str) -> None:
        fd = self.fds.pop(dn, None)
        if fd is not None:
            os.close(fd)

    def committed_at(self, dn: str, file: str, end: int) -> float | None:
        got = self.written.get((dn, file))
        if got is None:
            return None
        i = bisect.bisect_left(got[0], end)
        return got[1][i] if i < len(got[1]) else None


class CtsWatcher:
    """Follows ``binlog.NNNNNN`` in ``out`` by byte search: vtso → time its CTS marker appeared."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n, off, tail = 1, 0, b""
        while not self.stop.is_set():
            path = self.out / f"binlog.{n:06d}"
            nxt = self.out / f"binlog.{n + 1:06d}"
            try:
                with open(path, "rb") as fh:
                    fh.seek(off)
                    data = fh.read()
            except FileNotFoundError:
                time.sleep(0.005)
                continue
            now = time.time()
            buf = tail + data
            off += len(data)
            at = buf.find(CTS)
            last = 0
            while at >= 0 and at + 60 <= len(buf):
                self.seen[buf[at + 6:at + 60].decode()] = now
                last = at + 60
                at = buf.find(CTS, last)
            tail = buf[max(last, len(buf) - 64):]
            if not data:
                if nxt.exists():
                    n, off, tail = n + 1, 0, b""
                    continue
                time.sleep(0.005)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_listening(ports: list[int], timeout: float = 30) -> None:
    import socket
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"gbinlog serve on port {port} did not start") from None
                time.sleep(0.05)


def start_services(copier: PacedCopier, work: Path, procs: list[subprocess.Popen]) -> subprocess.Popen:
    """A ``gbinlog serve`` per DN directory, then ``gbinlog run`` over them (all added to ``procs``)."""
    ports = {}
    for i, dn in enumerate(copier.files):
        ports[dn] = _free_port()
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gbinlog.cli", "serve", "--dir", str(work / "dns" / dn), "--port",
             str(ports[dn]), "--user", "cdc:cdc", "--server-id", str(100 + i)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    cfg = work / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{work / "global"}"\n[server]\nport = {_free_port()}\n'
                   'users = [{ name = "repl", password = "r" }]\n'
                   + "".join(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {p}\nuser = "cdc"\npassword = "cdc"\n'
                             for dn, p in ports.items()))
    wait_listening(list(ports.values()))
    run = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(cfg)],
                           stdout=open(work / "run.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    procs.append(run)
    return run


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM (the run first: it stops cleanly), then SIGKILL whatever is still there after 30 s."""
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def one_rate(dirs: list[Path], points: dict, work: Path, rate: float, seconds: float, warmup: float,
             profile: Path | None = None) -> dict:
    """One run at ``rate`` events/s for ``seconds``: latency percentiles, the run's CPU and that of
    the DN servers and of this process (the copier); ``profile``: py-spy samples ``gbinlog run``
    over the fed seconds into ``profile/rate-N.txt`` (collapsed stacks)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    copier = PacedCopier(dirs, work / "dns", rate)
    procs: list[subprocess.Popen] = []
    try:
        run = start_services(copier, work, procs)
        watcher = CtsWatcher(work / "global")
        time.sleep(1.0)
        if run.poll() is not None:
            raise SystemExit(f"gbinlog run exited: {(work / 'run.log').read_text()[-2000:]}")
        serves = [p.pid for p in procs if p is not run]
        cpu0, serve0, self0 = cpu_seconds(run.pid), sum(map(cpu_seconds, serves)), time.process_time()
        spy = None
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            spy_bin = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
            spy = subprocess.Popen([spy_bin, "record", "--nonblocking", "-r", "200", "-f", "raw", "-d", str(int(seconds)),
                                    "-o", str(profile / f"rate-{int(rate)}.txt"), "-p", str(run.pid)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.time()
        feeder = threading.Thread(target=copier.run, daemon=True)
        feeder.start()
        feeder.join(seconds)
        copier.stop.set()
        feeder.join()
        fed_seconds = time.time() - started
        serve_cpu, self_cpu = sum(map(cpu_seconds, serves)) - serve0, time.process_time() - self0
        time.sleep(2.0)                        # what was fed gets written
        cpu = cpu_seconds(run.pid) - cpu0
        watcher.stop.set()
        if spy is not None:
            spy.wait(30)
    finally:
        stop_all(procs)
    lat, missing = latencies(points, copier, watcher, started + warmup)
    pct = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    return {"rate": rate, "fed": copier.done_events, "fed_rate": copier.done_events / fed_seconds,
            "n": len(lat), "missing": missing, "p50": pct(0.5), "p99": pct(0.99), "max": lat[-1] if lat else float("nan"),
            "cpu": cpu, "events_per_cpu_s": copier.done_events / cpu if cpu else float("nan"),
            "cpu_share": cpu / fed_seconds, "load": os.getloadavg()[0],
            "serve_share": serve_cpu / fed_seconds, "copier_share": self_cpu / fed_seconds}


def latencies(points: dict, copier: PacedCopier, watcher: CtsWatcher, after: float) -> tuple[list[float], int]:
    """Sorted ms from each TSO transaction's last DN commit to its CTS in the global binlog, and how
    many that should be there are not."""
    by_tso = {int(v[:19]): t for v, t in watcher.seen.items() if v[38:48] == "0000000000"}
    lat, missing = [], 0
    for tso, pts in points.items():
        times = [copier.committed_at(*p) for p in pts]
        if any(t is None for t in times):
            continue                       # not fed in this run
        committed = max(times)             # type: ignore[type-var]
        if committed < after or committed > copier.finished_at - 1.0:
            continue  # warming up; or too late: the merge releases it once every DN has newer events
        seen = by_tso.get(tso)
        if seen is None:
            missing += 1
            continue
        lat.append((seen - committed) * 1000)
    lat.sort()
    return lat, missing


def batch_rate(dirs: list[Path], work: Path) -> tuple[int, float]:
    """(DN events, CPU seconds) of ``gbinlog build`` over the same DN directories (its own process)."""
    import resource
    events = sum(len(event_ends((d / n).read_bytes())) for d in dirs for n in list_binlog_files(d))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *[a for d in dirs for a in ("--dn", str(d))],
                    "--out", str(work / "batch")], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(work / "batch", ignore_errors=True)
    return events, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def cached_input(cache: Path, dns: int, events: int) -> Path:
    """The smallest bank input of ``dns`` DNs in ``cache`` with at least ``events`` DN events (made
    there if there is none)."""
    cached = sorted((p for p in cache.glob(f"bank-{dns}dn-*") if p.name.rsplit("-", 1)[1].isdigit()
                     and (p / "events.txt").exists() and int((p / "events.txt").read_text()) >= events),
                    key=lambda p: int(p.name.rsplit("-", 1)[1]))
    return cached[0] if cached else make_input(cache, events, dns)


def catch_up(cache: Path, work: Path, dns: int, events: int, repeat: int) -> None:
    """``gbinlog run`` started on empty DNs, then every DN's whole input appears at once: the
    service's CPU from then until it is idle again (no more CPU used), i.e. DN events per
    CPU-second while catching up (feed queues full, the merge never waiting), ``repeat`` times."""
    root = cached_input(cache, dns, events)
    dirs = dn_dirs(root)
    rates = []
    for i in range(repeat):
        run_dir = work / f"catch-up-{i}"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        copier = PacedCopier(dirs, run_dir / "dns", float("inf"))
        procs: list[subprocess.Popen] = []
        try:
            run = start_services(copier, run_dir, procs)
            time.sleep(1.5)
            if run.poll() is not None:
                raise SystemExit(f"gbinlog run exited: {(run_dir / 'run.log').read_text()[-2000:]}")
            cpu0, t0 = cpu_seconds(run.pid), time.time()
            for dn in copier.files:
                copier._advance(dn, copier.total, t0)
                copier._close(dn)
            last = cpu0
            while True:                      # idle: under 20 ms of CPU in a second
                time.sleep(1.0)
                now = cpu_seconds(run.pid)
                if now - last < 0.02:
                    break
                last = now
            cpu, wall = last - cpu0, time.time() - t0 - 1.0
            out_bytes = sum(f.stat().st_size for f in (run_dir / "global").glob("binlog.0*"))
        finally:
            stop_all(procs)
        rates.append(copier.total / cpu)
        print(f"  catch-up {i + 1}: {copier.total:,} DN events in {cpu:.2f} CPU s ({wall:.1f} s wall, "
              f"{out_bytes / 1e6:.0f} MB out) = {copier.total / cpu:,.0f} DN events per CPU-second "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        shutil.rmtree(run_dir, ignore_errors=True)
    print(f"catch-up ({root.name}): min {min(rates):,.0f} / median {statistics.median(rates):,.0f} / max "
          f"{max(rates):,.0f} DN events per CPU-second of gbinlog run")


def ceiling(rates: list[float], seconds: float, warmup: float, cache: Path, work: Path, dns: int,
            profile: Path | None = None) -> None:
    root = cached_input(cache, dns, int(max(rates) * seconds * 1.1))
    dirs = dn_dirs(root)
    t0 = time.perf_counter()
    points = commit_points(dirs)
    print(f"input: {root} ({dns} DNs), {len(points):,} TSO transactions indexed in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    results = []
    for rate in rates:
        r = one_rate(dirs, points, work / f"rate-{int(rate)}", rate, seconds, warmup, profile)
        results.append(r)
        verdict = "meets" if r["p99"] <= 1000 and r["missing"] == 0 else "MISSES"
        print(f"  asked {rate:>9,.0f} ev/s: fed {r['fed_rate']:>9,.0f} ev/s ({r['fed']:,} events); "
              f"commit → global binlog n={r['n']:,} p50 {r['p50']:.0f} ms p99 {r['p99']:.0f} ms "
              f"max {r['max']:.0f} ms, {r['missing']} not written; gbinlog run CPU {r['cpu']:.1f} s "
              f"= {r['events_per_cpu_s']:,.0f} DN events per CPU-second, {r['cpu_share']:.0%} of a core over "
              f"the fed seconds (DN servers {r['serve_share']:.0%}, copier + watcher {r['copier_share']:.0%}; load average "
              f"{r['load']:.1f}) "
              f"({verdict} p99 ≤ 1 s)", flush=True)
    ok = [r["fed_rate"] for r in results if r["p99"] <= 1000 and r["missing"] == 0]
    per_cpu = statistics.median(r["events_per_cpu_s"] for r in results)
    events, cpu = batch_rate(dirs, work)
    batch = events / cpu
    print(f"batch: gbinlog build of the same {events:,} DN events: {cpu:.1f} CPU s = {batch:,.0f} DN events "
          "per CPU-second")
    if ok:
        best = max((r for r in results if r["p99"] <= 1000 and r["missing"] == 0), key=lambda r: r["fed_rate"])
        print(f"live ceiling: {max(ok):,.0f} DN events/s with p99 ≤ 1 s = {max(ok) / batch:.2f}× the batch rate "
              f"(the service used {best['cpu_share']:.0%} of a core there; well below 100 %: it had room, the "
              "ceiling is higher than the rates met)")
    else:
        print("live ceiling: below every rate tried")
    missed = [r for r in results if not (r["p99"] <= 1000 and r["missing"] == 0)]
    if missed:
        low = min(missed, key=lambda r: r["fed_rate"])
        print(f"lowest rate missed: {low['fed_rate']:,.0f} DN events/s with the service at {low['cpu_share']:.0%} "
              "of a core (≥ ~90 %: the service's own ceiling; less: it waited for a CPU)")
    print(f"gbinlog run: median {per_cpu:,.0f} DN events per CPU-second over the runs = "
          f"{per_cpu / batch:.2f}× the batch build's per-CPU rate (target ≥ 0.5×)")
