"""Retention run by the endpoint: ``expire_logs_seconds`` and ``max_total_size``
purge the oldest files in order, never the newest, never one a connected replica reads — a stuck replica
holds them, then completes, and the purge goes on; every purge is logged with its reason."""

from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from gbinlog.replica import free_port
from simulator.live import LiveSimulation
from tests.test_live_support import Service, wait_for
from tests.test_server_support import PASSWORD, USER, USERS, RawClient, header, write_sample_binlog

ROOT = Path(__file__).resolve().parents[1]


def index(d: Path) -> list[str]:
    return [ln.strip().rsplit("/", 1)[-1] for ln in (d / "binlog.index").read_text().splitlines() if ln.strip()]


def listed_size(d: Path) -> int:
    """Bytes of the files the index lists; one being purged right now (already unlinked, the index not
    yet rewritten) counts 0."""
    total = 0
    for n in index(d):
        try:
            total += (d / n).stat().st_size
        except FileNotFoundError:
            pass
    return total


def wait_until(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def purge_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gbinlog.session" and "PURGE" in r.getMessage()]


def small_window_client(port: int) -> RawClient:
    """A client whose receive buffer is 4 KiB from the start (set before connecting), so a dump it does
    not read stops within a few KiB instead of filling the kernel's auto-tuned buffers."""
    real = socket.create_connection

    def connect(addr, timeout=None):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(timeout)
        s.connect(addr)
        return s

    socket.create_connection = connect
    try:
        return RawClient(port)
    finally:
        socket.create_connection = real


def test_expire_logs_seconds_purges_old_files_in_order_never_the_newest(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gbinlog.session")
    sample = write_sample_binlog(tmp_path, txns=40, files=4)
    files = sample.files
    old = time.time() - 7200
    for name in files:          # every file is old: all but the newest go
        os.utime(tmp_path / name, (old, old))
    cfg = ServerConfig(dir=tmp_path, users=USERS, expire_logs_seconds=3600, retention_interval=0.05)
    with start_in_thread(cfg):
        assert wait_until(lambda: index(tmp_path) == files[-1:])
    assert [n for n in files if (tmp_path / n).exists()] == files[-1:]
    lines = purge_lines(caplog)
    assert len(lines) == 1 and f"PURGE BINARY LOGS TO '{files[-1]}' by retention (expire_logs_seconds): " \
                               f"removed {files[0]}..{files[-2]} (3 files" in lines[0], lines


def test_max_total_size_never_purges_what_a_stuck_replica_reads_and_it_then_completes(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gbinlog.session")
    src = write_sample_binlog(tmp_path / "src", txns=120, files=12, pad=40000)   # ~9 MB in 12 files
    expected = {n: [e.end_pos for e in read_all(src.dir / n)] for n in src.files}
    out = tmp_path / "served"
    out.mkdir()

    def publish(n: int) -> None:
        """A writer in another process, as seen by the endpoint: file n appears, then the index names it."""
        shutil.copyfile(src.dir / src.files[n], out / src.files[n])
        names = [f for f in src.files[:n + 1] if (out / f).exists()]
        (out / "binlog.index.tmp").write_text("".join(f"./{f}\n" for f in names))
        os.replace(out / "binlog.index.tmp", out / "binlog.index")

    publish(0)
    limit = 2 << 20
    cfg = ServerConfig(dir=out, users=USERS, max_total_size=limit, retention_interval=0.05, write_buffer=4096)
    with start_in_thread(cfg) as h:
        stuck = small_window_client(h.port)
        stuck.query("SET @master_binlog_checksum = 'CRC32'")
        events = stuck.dump(src.files[0], 4, flags=0)
        received = [next(events) for _ in range(3)]          # then it stops reading
        for n in range(1, len(src.files)):                   # the output grows past the budget
            publish(n)
            time.sleep(0.05)
        time.sleep(0.5)                                     # ten retention rounds
        (dump,) = h.server.dumps()
        for _ in range(50):
            # The stuck dump can still creep on while the kernel grows its send buffer: look at a
            # moment where it stayed in one file for the whole look.
            held_from = dump.file
            kept = src.files[src.files.index(held_from):]
            present = all((out / n).exists() for n in kept)       # nothing from its file on went
            total = sum((out / n).stat().st_size for n in kept) if present else 0
            files = index(out)
            if dump.file == held_from:
                break
            time.sleep(0.05)
        assert present and src.files.index(held_from) < 4 and total > 2 * limit, (held_from, total)
        assert files == src.files[src.files.index(files[0]):] and files[0] <= held_from and set(kept) <= set(files)
        assert any("kept, still read by connected replica(s) repl@127.0.0.1" in r.getMessage()
                   for r in caplog.records)
        # The replica reads again and completes: every event of every file, in order, to the end.
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        last = src.files[-1]
        cur, got = None, {}
        for ev in itertools.chain(received, events):
            hd = header(ev)
            if hd[1] == 4 and hd[5] & 0x20:                  # fake ROTATE: the file that follows
                cur = ev[19 + 8:-4].decode()
                continue
            if hd[5] & 0x20 or hd[1] == 15:                  # artificial, or the FDE resent after ROTATE
                continue
            got.setdefault(cur, []).append(hd[4])
            if (cur, hd[4]) == (last, expected[last][-1]):
                break
        assert got == {n: positions[1:] for n, positions in expected.items()}
        # Now nobody holds the old files: the purge goes on, in order, down to the budget.
        assert wait_until(lambda: listed_size(out) <= limit)
        stuck.close()
    left = index(out)
    assert left == src.files[len(src.files) - len(left):]
    assert sum((out / n).stat().st_size for n in left) <= limit < sum((src.dir / n).stat().st_size
                                                                      for n in src.files[-len(left) - 1:])
    lines = purge_lines(caplog)
    assert lines and all("by retention (max_total_size)" in line for line in lines)
    tos = [re.search(r"TO '([^']+)'", line)[1] for line in lines]
    assert tos == sorted(tos) and tos[-1] == left[0]


class LoggingService(Service):
    """``gbinlog run -v --log-file F``."""

    session_log: Path

    def start(self) -> None:
        self.starts += 1
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen([sys.executable, "-m", "gbinlog.cli", "run", "--config", str(self.config),
                                          "--log-file", str(self.session_log)],
                                         cwd=ROOT, stdout=fh, stderr=fh, start_new_session=True)


@pytest.mark.slow
def test_run_purges_its_own_growing_output_and_resumes_after(tmp_path):
    """The same retention inside ``gbinlog run`` (its endpoint's task): the output stays within
    max_total_size while the pipeline writes, the index never names a removed file, a replica reads
    what is left to the end, and a restart resumes on the purged directory."""
    sim = LiveSimulation("bank", 2, tmp_path / "cluster", tps=150, duration=8, seed=11)
    sim_thread = threading.Thread(target=sim.run, daemon=True)
    sim_thread.start()
    out = tmp_path / "global"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\nrotate_size = "16KB"\nmax_total_size = "64KB"\n'
                   f'[server]\nport = {free_port()}\nusers = [{{ name = "{USER}", password = "{PASSWORD}" }}]\n'
                   + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{tmp_path / "cluster" / f"dn{i}"}"\npoll_ms = 10\n'
                             for i in range(2)))
    svc = LoggingService(cfg, tmp_path / "run.log")
    svc.session_log = tmp_path / "session.log"
    try:
        svc.start()
        wait_for(lambda: (out / "binlog.index").exists(), 20, "the first global binlog file")
        missing_twice, last_missing = [], set()
        while sim_thread.is_alive():
            missing = {n for n in index(out) if not (out / n).exists()}
            missing_twice += sorted(missing & last_missing)   # a name listed but gone on two looks
            last_missing = missing
            time.sleep(0.1)
        assert not missing_twice, missing_twice

        def settled() -> bool:   # the run caught up and retention is done: index = files on disk, in budget
            files = index(out)
            return (sorted(p.name for p in out.glob("binlog.0*")) == files
                    and listed_size(out) - (out / files[-1]).stat().st_size <= 64 << 10)

        assert wait_until(settled, 30)
        files = index(out)
        assert int(files[0].rsplit(".", 1)[1]) > 3
        port = int(re.search(r"port = (\d+)", cfg.read_text())[1])
        c = RawClient(port)
        c.query("SET @master_binlog_checksum = 'CRC32'")
        n = sum(1 for _ in c.dump(files[0], 4, flags=1))      # non-blocking: to the end, then EOF
        assert n > 20
        c.close()
        assert svc.terminate() == 0, svc.log.read_text()
        svc.start()                                           # resume on the purged directory
        time.sleep(3)
        assert svc.alive(), svc.log.read_text()
        assert svc.terminate() == 0
        assert "Traceback" not in svc.log.read_text()
        text = svc.session_log.read_text()          # run --log-file: the endpoint's session log
        assert f"login ok user={USER} from=127.0.0.1" in text and "dump start" in text
        purges = re.findall(r"PURGE BINARY LOGS TO '(binlog\.\d+)' by retention \(max_total_size\)", text)
        assert purges == sorted(purges) and purges[-1] <= files[0] and len(purges) >= 2
    finally:
        svc.ensure_stopped()
        sim.stop()
        sim_thread.join(30)


def test_a_purge_racing_the_writers_new_file_never_drops_it_from_the_index(tmp_path):
    """The writer starting a file (``write_index(…, drop_missing=True)``) and a purge (``BinlogDir.purge``)
    both rewrite ``binlog.index``; started together from two threads 150 times, the index must name
    the writer's newest file after every round, and no removed file."""
    import threading

    from dumper.global_binlog import write_index
    from dumper.server.binlogdir import BinlogDir

    listed = ["binlog.000001"]
    (tmp_path / listed[0]).write_bytes(b"x")
    write_index(tmp_path, listed)
    bdir = BinlogDir(tmp_path)
    for seq in range(2, 152):
        name = f"binlog.{seq:06d}"
        (tmp_path / name).write_bytes(b"x")
        keep_from = bdir.files()[-1]
        start = threading.Barrier(2)
        purged: list[str] = []

        def rotate(name=name, start=start) -> None:
            start.wait()
            listed[:] = write_index(tmp_path, [*listed, name], drop_missing=True)

        def purge(keep_from=keep_from, start=start, purged=purged) -> None:
            start.wait()
            purged.extend(bdir.purge(keep_from))

        threads = [threading.Thread(target=rotate), threading.Thread(target=purge)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        index = [line[2:] for line in (tmp_path / "binlog.index").read_text().splitlines()]
        on_disk = sorted(p.name for p in tmp_path.glob("binlog.0*"))
        assert index == on_disk, f"round {seq}"
        assert index[-1] == name and not set(purged) & set(index)
