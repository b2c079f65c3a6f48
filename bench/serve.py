"""Serving speed: our endpoint vs a real MariaDB master sending the same binlog bytes
(docs/performance.md). Not a test: prints numbers.

    .venv/bin/python bench/serve.py [--txns 200000] [--runs 9] [--keep DIR] [--strace]

A throwaway MariaDB master writes a binlog of 1-row autocommit transactions (GTID, BEGIN, TABLE_MAP,
WRITE_ROWS, XID: the shape of the global binlog); then ``gbinlog serve`` (its own process) serves the
master's own binlog directory, so both send exactly the same files. Timed, alternating, ``--runs``
times each: `mariadb-binlog --read-from-remote-server --to-last-log` (text mode, output to /dev/null)
and the same with `--raw` (files written, no decoding).

Per run: wall time, the client's CPU time and the *server's* CPU time (``/proc/<pid>/task/*/schedstat`` of
``mariadbd`` and of ``gbinlog serve`` around the run). The client (single-threaded, one write and
one lseek per event with --raw, printing every event without) needs about as much CPU as the
whole wall time against either server, so the wall ratio is capped near 1.0 by the client; the
server's CPU per byte served is what the server controls: the "server CPU ratio" is MariaDB's CPU
seconds ÷ ours for the same bytes (≥ 1.5 = we serve 1.5× more bytes per CPU-second), per pair of
reads. The result is the median over the runs (the minimum beside it): one read can cost either
server 2× the next for the same bytes, the same system calls (``--strace``), and the extra time is
the kernel's copy into the socket's buffers (``perf``: 160 samples of ``_copy_from_iter`` under
``sendto`` in a 0.057 s read of ours, 1,156 in a 0.111 s one, everything else unchanged), on
either server (MariaDB's ``--raw`` reads of the same bytes: 0.12–0.32 s). One untimed read per
server and mode first (both warm), and the order of the two servers alternates from run to run.
A third mode, ``sink``, is a client that is not the bound (the own DN client's login and dump
request, then the stream into a buffer, no per-event work): there the wall ratio is the servers'
own speed. ``--strace``: one more read per server and mode under
``strace -c -f``: the client's system calls (how many reads it needs for the same bytes from either
server, and its one write + one lseek per event with --raw).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extractor.replication_client import ReplicationClient  # noqa: E402
from tests.mariadb import MariaDB, _binary, _free_port  # noqa: E402

USER, PASSWORD = "bench", "bench-pw"

FILL = """
CREATE USER '{user}'@'%' IDENTIFIED BY '{pw}';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%';
CREATE DATABASE bench;
CREATE TABLE bench.t (id INT PRIMARY KEY, amount BIGINT, note VARCHAR(64), created DATETIME,
  balance DECIMAL(10,2));
DELIMITER //
CREATE PROCEDURE bench.fill(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    INSERT INTO bench.t VALUES (i, i * 7, CONCAT('note ', i), '2026-01-01 00:00:00' + INTERVAL i SECOND,
      (i % 100000) / 100);
    SET i = i + 1;
  END WHILE;
END //
DELIMITER ;
CALL bench.fill({txns});
"""


def cpu_seconds(pid: int) -> float:
    """CPU time of a process's threads so far, in ns resolution: the sum of
    ``/proc/<pid>/task/*/schedstat`` (both servers keep their connection threads, MariaDB in its
    thread cache); the clock ticks of ``/proc/<pid>/stat`` (10 ms) are too coarse for 0.05 s runs."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass   # a thread that just ended
    return total / 1e9


def read_remote(port: int, first: str, out_dir: Path, raw: bool) -> float:
    args = [_binary("mariadb-binlog"), "--no-defaults", "--read-from-remote-server", "--to-last-log",
            "-h127.0.0.1", f"-P{port}", f"-u{USER}", f"-p{PASSWORD}"]
    if raw:
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        args += ["--raw", f"--result-file={out_dir}/"]
    t0 = time.perf_counter()
    with open("/dev/null", "wb") as null:
        subprocess.run([*args, first], stdout=null, check=True)
    return time.perf_counter() - t0


def read_sink(port: int, first: str) -> float:
    """A client that is not the bound: the replica's login and COM_BINLOG_DUMP (non-blocking) of the
    own DN client, then the stream into one buffer until the server closes the session after its
    EOF packet (both servers do); no per-event work. Returns the wall seconds from the dump command;
    notes the bytes received (both servers must send the same stream)."""
    client = ReplicationClient("127.0.0.1", port, USER, PASSWORD)
    try:
        client.prepare_dump(server_id=0, heartbeat=0)
        buf = bytearray(1 << 20)
        tail = b""
        received = 0
        t0 = time.perf_counter()
        # COM_BINLOG_DUMP as mariadb-binlog sends it: NON_BLOCK, and BINLOG_SEND_ANNOTATE_ROWS_EVENT
        # (without it a MariaDB master leaves its ANNOTATE_ROWS events out: less than half the bytes).
        client.seq = 0
        client.write_packet(bytes((0x12,)) + struct.pack("<IHI", 4, 0x01 | 0x02, 0) + first.encode())
        while n := client.sock.recv_into(buf):
            received += n
            tail = (tail + buf[max(0, n - 9):n])[-9:]
        wall = time.perf_counter() - t0
    finally:
        client.close()
    if tail[-5:-4] != b"\xfe" or tail[-9:-6] != b"\x05\x00\x00":   # the EOF packet ends the stream
        raise SystemExit(f"the stream from port {port} did not end with an EOF packet: {tail.hex()}")
    SINK_BYTES.setdefault(port, set()).add(received)
    return wall


SINK_BYTES: dict[int, set[int]] = {}   # port → the stream sizes the sink received (one value per server)


def timed_run(port: int, pid: int, first: str, out_dir: Path, raw: bool | None) -> tuple[float, float, float]:
    """(wall, client CPU, server CPU) seconds of one remote read (``raw`` None: the sink client)."""
    server0 = cpu_seconds(pid)
    if raw is None:
        c0 = time.process_time()
        wall = read_sink(port, first)
        return wall, time.process_time() - c0, cpu_seconds(pid) - server0
    client0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = read_remote(port, first, out_dir, raw)
    client1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = client1.ru_utime - client0.ru_utime + client1.ru_stime - client0.ru_stime
    return wall, client, cpu_seconds(pid) - server0


def start_ours(datadir: Path, root: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    log = open(root / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "serve", "--dir", str(datadir), "--port",
                             str(port), "--user", f"{USER}:{PASSWORD}", "--server-id", "100"],
                            stdout=log, stderr=log, cwd=Path(__file__).resolve().parents[1])
    deadline = time.monotonic() + 30
    while b"listening" not in (root / "serve.log").read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"gbinlog serve did not start: {(root / 'serve.log').read_text()}")
        time.sleep(0.05)
    return proc, port


def report(mode: str, size: int, runs: dict[str, list[tuple[float, float, float]]]) -> None:
    for name, rs in runs.items():
        walls = [r[0] for r in rs]
        busy = statistics.median(r[1] / r[0] for r in rs)
        bound = "the client's own bound" if mode != "sink" else "the sink"
        print(f"  {mode:5} {name:8} wall best {size / min(walls) / 1e6:6.1f} MB/s median "
              f"{size / statistics.median(walls) / 1e6:6.1f} MB/s; client CPU "
              f"{', '.join(f'{r[1]:.2f}' for r in rs)} s (= {busy:.0%} of the wall: {bound}); "
              f"server CPU {', '.join(f'{r[2]:.3f}' for r in rs)} s (walls {', '.join(f'{w:.2f}' for w in walls)} s)")
    ours, theirs = runs["gbinlog"], runs["mariadb"]
    wall = [t[0] / o[0] for o, t in zip(ours, theirs, strict=True)]
    cpu = [t[2] / max(o[2], 1e-6) for o, t in zip(ours, theirs, strict=True)]
    print(f"  {mode:5} RESULT wall ratio (mariadb wall / ours): min {min(wall):.2f} median "
          f"{statistics.median(wall):.2f}; server CPU ratio (mariadb CPU / ours, same bytes): min {min(cpu):.2f} "
          f"median {statistics.median(cpu):.2f} (target >= 1.5); server CPU per 100 MB: mariadb "
          f"{statistics.median(t[2] for t in theirs) / size * 1e11:.0f} ms, gbinlog "
          f"{statistics.median(o[2] for o in ours) / size * 1e11:.0f} ms")


def client_syscalls(port: int, first: str, out_dir: Path, raw: bool, trace: Path) -> dict[str, int]:
    """One read under ``strace -c -f``: the client's system calls by name → count."""
    args = [_binary("mariadb-binlog"), "--no-defaults", "--read-from-remote-server", "--to-last-log",
            "-h127.0.0.1", f"-P{port}", f"-u{USER}", f"-p{PASSWORD}"]
    if raw:
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        args += ["--raw", f"--result-file={out_dir}/"]
    with open("/dev/null", "wb") as null:
        subprocess.run(["strace", "-c", "-f", "-o", str(trace), *args, first], stdout=null, check=True)
    counts = {}
    for line in trace.read_text().splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0][0].isdigit() and cols[-1] != "total":
            counts[cols[-1]] = int(cols[3])
    return counts


def report_syscalls(mode: str, size: int, counts: dict[str, dict[str, int]]) -> None:
    for name, c in counts.items():
        top = sorted(c.items(), key=lambda kv: -kv[1])[:5]
        reads = c.get("read", 0) + c.get("recvfrom", 0)
        print(f"  {mode:5} {name:8} client syscalls {sum(c.values())}: "
              f"{', '.join(f'{k} {v}' for k, v in top)}; socket reads per MB {reads / size * 1e6:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txns", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--strace", action="store_true", help="also count the client's system calls (strace -c)")
    ap.add_argument("--keep", type=Path, help="work directory to keep (default: a temp dir, removed)")
    opts = ap.parse_args()
    root = opts.keep or Path(tempfile.mkdtemp(prefix="gbinlog-bench-serve-"))
    master = MariaDB.start(root / "master", log_bin=True, extra_args=(
        "--sync-binlog=0", "--innodb-flush-log-at-trx-commit=0", "--max-binlog-size=64M"))
    ours = None
    try:
        t0 = time.perf_counter()
        master.run_sql(FILL.format(user=USER, pw=PASSWORD, txns=opts.txns))
        files = master.binlog_files()
        size = sum(f.stat().st_size for f in files)
        print(f"master wrote {len(files)} file(s), {size / 1e6:.1f} MB, {opts.txns} txns "
              f"in {time.perf_counter() - t0:.1f} s")
        ours, port = start_ours(master.datadir, root)
        servers = (("mariadb", master.port, master.pid), ("gbinlog", port, ours.pid))
        for raw in (False, True, None):
            mode = {False: "text", True: "--raw", None: "sink"}[raw]
            runs: dict[str, list[tuple[float, float, float]]] = {"mariadb": [], "gbinlog": []}
            for _name, p, pid in servers:   # warm: both servers' first read is not timed
                timed_run(p, pid, files[0].name, root / "raw", raw)
            for i in range(opts.runs):
                for name, p, pid in servers[::-1] if i % 2 else servers:
                    runs[name].append(timed_run(p, pid, files[0].name, root / "raw", raw))
            report(mode, size, runs)
            if raw is None:
                got = {name: sorted(SINK_BYTES[p]) for name, p, _pid in servers}
                print(f"  sink  stream bytes received: {got} (each server one value; both equal within their "
                      "fake ROTATE/FDE events)")
            if opts.strace and raw is not None:
                report_syscalls(mode, size, {name: client_syscalls(p, files[0].name, root / "raw", raw,
                                                                   root / f"strace-{name}.txt")
                                             for name, p, _pid in servers})
    finally:
        if ours is not None:
            ours.terminate()
            ours.wait(10)
        master.stop()
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
