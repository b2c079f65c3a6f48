"""How an HA follower should keep its copy: its own pipeline from the DNs, or a copy of
the leader's files over the replication endpoint. Not a test: prints numbers.

    .venv/bin/python bench/ha_follow.py [--events 1000000] [--dns 4] [--repeat 3] [--live-seconds 30] [--tps 150]

1. **Cost per member** (CPU seconds of the whole work, each measured in its own process by
   ``RUSAGE_CHILDREN`` / ``/proc``): the simulator's ``bank`` workload on ``--dns`` DNs, ``--events``
   DN events (cached in ``--dir``), then

   * own pipeline: ``gbinlog build`` of the DN directories (what every follower does today);
   * copy: ``gbinlog serve`` of the leader's files and the prototype copy client below reading them
     with COM_BINLOG_DUMP from ``binlog.000001:4``: the client's CPU, and the serving process's CPU
     for that dump (the leader pays it, per follower). The copy is compared byte for byte with the
     leader's files.

   ``--repeat`` runs each; min and median printed.

2. **Lag, live** (``--live-seconds``; 0 skips): a live simulated cluster at ``--tps``; a leader
   (``gbinlog run``), a follower running its own pipeline (another ``gbinlog run``) and a follower
   copying the leader's files (the copy client, following). For every transaction the moment its
   ``CTS::`` marker is in each directory: lag behind the leader p50/p99 for both kinds, and the CPU
   seconds of each process over the run.

The copy client (``copy`` subcommand; a prototype, not production): one COM_BINLOG_DUMP, every
event's CRC32 checked, ``log_pos`` checked to be the end of the event in the file it writes (no gap,
no overlap), the ``CTS::<vtso>`` markers checked to rise strictly; the fake ROTATE starts the next
file (magic + the events that follow, the leader's bytes), ``binlog.index`` is rewritten at each new
file and the file fsynced once a second, like the pipeline's checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.live import CTS, BinlogWatcher, percentiles  # noqa: E402
from bench.order import dn_dirs, make_input  # noqa: E402

MAGIC = b"\xfebin"
ROTATE, FDE, HEARTBEAT, ROWS_QUERY = 4, 15, 27, 29
ARTIFICIAL = 0x20
HEAD = struct.Struct("<IBIIIH")
USER, PASSWORD = "repl", "repl-pw"


# -- the copy client --------------------------------------------------------------------------------
class CopyError(Exception):
    """The stream is not a faithful copy: bad CRC, a gap, vtsos out of order."""


class Copier:
    """Writes what one COM_BINLOG_DUMP streams into ``out`` as binlog files + index."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.names: list[str] = []
        self.fh = None
        self.size = 0
        self.last_vtso = b""
        self.events = 0
        self.bytes = 0
        self.synced_at = time.monotonic()

    def event(self, ev: bytes) -> None:
        _, type_code, _, size, log_pos, flags = HEAD.unpack_from(ev)
        if size != len(ev):
            raise CopyError(f"event size {size} != packet {len(ev)}")
        if zlib.crc32(ev[:-4]) != int.from_bytes(ev[-4:], "little"):
            raise CopyError(f"CRC32 mismatch, type {type_code}, in {self.names[-1:]} at {self.size}")
        if type_code == HEARTBEAT:
            return
        if type_code == ROTATE and (flags & ARTIFICIAL or log_pos == 0):      # the fake ROTATE: a new file
            self._open(ev[19 + 8:-4].decode())
            return
        if self.fh is None:
            raise CopyError("an event before the first fake ROTATE")
        if log_pos != self.size + size:
            raise CopyError(f"log_pos {log_pos} is not the end of the event at {self.size} in {self.names[-1]}")
        if type_code == ROWS_QUERY and ev[19:25] == CTS:
            vtso = ev[25:-4]
            if vtso <= self.last_vtso:
                raise CopyError(f"vtso {vtso!r} after {self.last_vtso!r}")
            self.last_vtso = vtso
            self.fh.write(ev)
            self.fh.flush()                          # a whole transaction: written (as the pipeline does)
        else:
            self.fh.write(ev)
        self.size += size
        self.events += 1
        self.bytes += size
        if time.monotonic() - self.synced_at >= 1.0:
            self.sync()

    def _open(self, name: str) -> None:
        if self.names and self.names[-1] == name:
            return                                   # the fake ROTATE at the start names the first file
        self.close()
        self.fh = open(self.out / name, "wb")
        self.fh.write(MAGIC)
        self.size = 4
        self.names.append(name)
        (self.out / "binlog.index").write_text("".join(f"./{n}\n" for n in self.names))

    def sync(self) -> None:
        if self.fh is not None:
            self.fh.flush()
            os.fsync(self.fh.fileno())
        self.synced_at = time.monotonic()

    def close(self) -> None:
        if self.fh is not None:
            self.sync()
            self.fh.close()
            self.fh = None


def copy(port: int, out: Path, follow: bool) -> Copier:
    """Copy the endpoint's files from binlog.000001:4 (until its end, or until killed)."""
    import pymysql
    conn = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD)
    with conn.cursor() as cur:
        cur.execute("SET @master_binlog_checksum = 'CRC32'")
        cur.execute("SET @master_heartbeat_period = 1000000000")
    name = b"binlog.000001"
    payload = struct.pack("<BIHI", 0x12, 4, 0 if follow else 1, 4242) + name
    conn._write_bytes(struct.pack("<I", len(payload))[:3] + b"\0" + payload)
    conn._next_seq_id = 1
    copier = Copier(out)
    try:
        while True:
            pkt = conn._read_packet()
            data = pkt.get_all_data()
            if data[:1] == b"\xfe" and len(data) < 9:
                break
            copier.event(bytes(data[1:]))
    finally:
        copier.close()
        conn.close()
    return copier


# -- measuring --------------------------------------------------------------------------------------
def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def files_of(d: Path) -> dict[str, bytes]:
    names = [ln.strip().rsplit("/", 1)[-1] for ln in (d / "binlog.index").read_text().splitlines() if ln.strip()]
    return {n: (d / n).read_bytes() for n in names}


def run_cli(*args: str) -> float:
    """CPU seconds of one ``gbinlog`` command (run to completion)."""
    before = child_cpu()
    subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return child_cpu() - before


def wait_port(port: int, timeout: float = 30) -> None:
    import socket
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def cost(dirs: list[Path], work: Path, repeat: int) -> dict:
    from gbinlog.replica import free_port
    built = work / "leader"
    own, client, serving = [], [], []
    identical = True
    for _ in range(repeat):
        shutil.rmtree(built, ignore_errors=True)
        own.append(run_cli("build", *[a for d in dirs for a in ("--dn", str(d))], "--out", str(built),
                           "--no-progress"))
        port = free_port()
        srv = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "serve", "--dir", str(built), "--port",
                                str(port), "--user", f"{USER}:{PASSWORD}"], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            time.sleep(0.5)
            s0 = proc_cpu(srv.pid)
            copied = work / "copy"
            shutil.rmtree(copied, ignore_errors=True)
            before = child_cpu()
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "copy", "--port", str(port), "--out",
                            str(copied)], check=True)
            client.append(child_cpu() - before)
            serving.append(proc_cpu(srv.pid) - s0)
        finally:
            srv.send_signal(signal.SIGTERM)
            srv.wait(30)
        a, b = files_of(built), files_of(copied)
        identical = identical and list(a) == list(b) and all(a[n] == b[n] for n in a)
    size = sum(len(v) for v in files_of(built).values())
    return {"own": own, "client": client, "serving": serving, "identical": identical, "out_bytes": size}


def live(work: Path, dns: int, seconds: float, tps: int, warmup: float = 3.0) -> dict:
    from gbinlog.replica import free_port
    from simulator.live import LiveSimulation, ServeOptions
    sim = LiveSimulation("bank", dns, work / "cluster", tps=tps, duration=seconds, truth=False,
                         serve=ServeOptions(port=0, user="cdc", password="cdc"))
    sim_thread = threading.Thread(target=sim.run, daemon=True)
    sim_thread.start()
    while len(sim.ports) < dns:
        time.sleep(0.01)
    dn_tables = "".join(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {p}\nuser = "cdc"\npassword = "cdc"\n'
                        for dn, p in sorted(sim.ports.items(), key=lambda kv: int(kv[0][2:])))
    procs: dict[str, subprocess.Popen] = {}
    outs = {name: work / name for name in ("leader", "own", "copy")}
    port = free_port()
    for name, server_port in (("leader", port), ("own", 0)):
        cfg = work / f"{name}.toml"
        cfg.write_text(f'[output]\ndir = "{outs[name]}"\n[server]\nport = {server_port}\n'
                       f'users = [{{ name = "{USER}", password = "{PASSWORD}" }}]\n' + dn_tables)
        procs[name] = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(cfg)], cwd=ROOT,
                                       stdout=subprocess.DEVNULL, stderr=open(work / f"{name}.log", "wb"),
                                       start_new_session=True)
    watchers = {name: BinlogWatcher(out) for name, out in outs.items()}
    cpu: dict[str, float] = {}
    try:
        wait_port(port)
        while not (outs["leader"] / "binlog.000001").exists():
            time.sleep(0.01)
        procs["copy"] = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "copy", "--port", str(port),
                                          "--out", str(outs["copy"]), "--follow"], start_new_session=True)
        sim_thread.join(seconds + 60)
        time.sleep(3.0)                       # let both followers drain
        for name, proc in procs.items():
            cpu[name] = proc_cpu(proc.pid)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for w in watchers.values():
            w.stop.set()
        sim.stop()
        sim.stop_servers()
    # the first seconds left out: the copy client starts once the leader has a file, then catches up
    t0 = min((t for t, _, _ in watchers["copy"].seen.values()), default=0) + warmup
    lead = {v: s for v, s in watchers["leader"].seen.items() if s[0] >= t0}
    lags = {name: [(watchers[name].seen[v][0] - t) * 1000 for v, (t, _, _) in lead.items() if v in watchers[name].seen]
            for name in ("own", "copy")}
    return {"txns": len(lead), "cpu": cpu, "lag_ms": {k: percentiles(v) for k, v in lags.items()},
            "missing": {k: len(lead) - len(v) for k, v in lags.items()}}


def fmt(values: list[float]) -> str:
    return f"min {min(values):.2f} / median {statistics.median(values):.2f}"


def main() -> None:
    if sys.argv[1:2] == ["copy"]:
        ap = argparse.ArgumentParser()
        ap.add_argument("cmd")
        ap.add_argument("--port", type=int, required=True)
        ap.add_argument("--out", type=Path, required=True)
        ap.add_argument("--follow", action="store_true")
        a = ap.parse_args()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        c = copy(a.port, a.out, a.follow)
        print(json.dumps({"events": c.events, "bytes": c.bytes, "files": len(c.names)}), file=sys.stderr)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dns", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "gbinlog-bench")
    ap.add_argument("--live-seconds", type=float, default=30.0)
    ap.add_argument("--tps", type=int, default=150)
    args = ap.parse_args()
    root = make_input(args.dir, args.events, args.dns)
    work = Path(tempfile.mkdtemp(prefix="gbinlog-bench-ha-"))
    try:
        c = cost(dn_dirs(root), work / "cost", args.repeat)
        mb = c["out_bytes"] / 1e6
        print(f"input: {args.events:,} DN events on {args.dns} DNs ({root}); global binlog {mb:.1f} MB")
        print(f"own pipeline (gbinlog build), CPU s per member: {fmt(c['own'])}")
        print(f"copy over the endpoint, CPU s per follower: client {fmt(c['client'])}; the leader's serving "
              f"{fmt(c['serving'])}; copy byte-identical: {c['identical']}")
        both = [a + b for a, b in zip(c["client"], c["serving"], strict=True)]
        print(f"copy / own: {min(both) / min(c['own']):.2f} (min vs min, client + serving)")
        if args.live_seconds > 0:
            lv = live(work / "live", args.dns, args.live_seconds, args.tps)
            print(f"live: {args.dns} DNs, bank at {args.tps} txns/s for {args.live_seconds:g} s; "
                  f"{lv['txns']:,} transactions in the leader's binlog after the first 3 s")
            for name in ("own", "copy"):
                p = lv["lag_ms"][name]
                if p:
                    print(f"  {name}: lag behind the leader p50 {p['p50']:.0f} ms, p99 {p['p99']:.0f} ms, max "
                          f"{p['max']:.0f} ms (n={p['n']:,}, {lv['missing'][name]} not seen)")
            print("  CPU s over the run: " + ", ".join(f"{k} {v:.1f}" for k, v in lv["cpu"].items())
                  + " (the leader's includes serving the copy)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
