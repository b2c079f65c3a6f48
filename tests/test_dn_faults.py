"""One DN's fault never takes ``gbinlog run`` down: a DN stream error (a byte damaged in flight and
caught by the CRC, ERR 1236 for a file the DN lost) marks that DN failed, the service keeps serving
what it wrote, and the DN is read again from its last restart point after a backoff; what the merge
already took is not taken twice.

Peers: the project's replication endpoint serving the bank fixture's DN directories, a TCP proxy
(``FlipProxy``) between the reader and one DN endpoint that flips one byte of one event of the
binlog stream once, python-mysql-replication as a replica of the service, the batch build of the
same directories. What counts: the error names the damaged event's start offset (also when the
flipped byte is the header's log_pos); the transactions handed to the merge are exactly
``extract(dir)``'s, each once; the status, ``/healthz`` and ``gbinlog status`` name the failed DN
and the error, and call a fault that repeats at one place persistent; the files of a run that
healed are the batch build's bytes.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from binlog import read_events
from dumper.server import ServerConfig, start_in_thread
from extractor import extract
from extractor.assembler import Assembler
from extractor.live_source import LiveSourceError, ReplicationSource
from extractor.model import RestartPoint
from gbinlog.live_feed import PERSISTENT_AFTER, DnFeed
from gbinlog.local_engine import Settings, build
from gbinlog.metrics import health_of
from gbinlog.replica import free_port
from tests.test_live_support import REPL_PASSWORD, REPL_USER, ROOT, Cluster, Service, wait_for

BANK = ROOT / "fixtures" / "bank-4dn"
DNS = ["dn0", "dn1", "dn2", "dn3"]
USER, PASSWORD = "cdc", "cdc-pw"
COM_BINLOG_DUMP = 0x12
_FDE, _ROTATE, _HEARTBEAT, _TABLE_MAP = 15, 4, 27, 19
RUN_WORKLOAD_S = 25     # long enough for the checks while dn1 is failed, on a loaded machine


class FlipProxy:
    """A TCP proxy in front of a DN endpoint that damages the binlog stream once: one byte of the
    first event (not a stream-only one) of the ``in_file``-th file sent that starts at or past
    ``min_offset`` — in the middle of its body (``field="body"``) or in the third byte of its
    header's log_pos (``field="log_pos"``: the position it claims moves 1 MiB on, past the file's
    end; ``field="type"``: a TABLE_MAP's type byte, which makes it a HEARTBEAT). ``victim`` is
    (file position, type, size) of that event. With ``hold`` the DN then looks
    down (connections are closed at once) until ``release()``, so a test can watch the fault."""

    def __init__(self, target_port: int, *, field: str, min_offset: int, in_file: int = 1,
                 hold: bool = False) -> None:
        self.target_port, self.field, self.min_offset, self.in_file = target_port, field, min_offset, in_file
        self.victim: tuple[int, int, int] | None = None
        self.flipped = threading.Event()
        self.holding = hold
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="flip-proxy", daemon=True).start()

    def __enter__(self) -> FlipProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def release(self) -> None:
        self.holding = False

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.flipped.is_set() and self.holding:
                client.close()           # the DN is down for now
                continue
            self.connections += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._sockets += [client, upstream]
            dumping = threading.Event()
            threading.Thread(target=self._to_server, args=(client, upstream, dumping), daemon=True).start()
            threading.Thread(target=self._to_client, args=(upstream, client, dumping), daemon=True).start()

    def _to_server(self, src: socket.socket, dst: socket.socket, dumping: threading.Event) -> None:
        """Verbatim, watching the commands for COM_BINLOG_DUMP (marked before it reaches the DN)."""
        buf = b""
        try:
            while data := src.recv(65536):
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:3], "little"):
                    n = int.from_bytes(buf[:3], "little")
                    if buf[4:5] == bytes((COM_BINLOG_DUMP,)):
                        dumping.set()
                    buf = buf[4 + n:]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(dst)

    def _to_client(self, src: socket.socket, dst: socket.socket, dumping: threading.Event) -> None:
        """Whole packets; once the dump runs, the events are looked at until one is damaged."""
        buf = bytearray()
        files = 0
        try:
            while data := src.recv(65536):
                buf += data
                if not dumping.is_set() or self.flipped.is_set():
                    dst.sendall(buf)
                    buf.clear()
                    continue
                off = 0
                while len(buf) - off >= 4:
                    n = int.from_bytes(buf[off:off + 3], "little")
                    if len(buf) - off < 4 + n:
                        break
                    if n >= 20 and buf[off + 4] == 0 and not self.flipped.is_set():
                        files += self._look_at(buf, off + 5, files)
                    off += 4 + n
                dst.sendall(bytes(buf[:off]))
                del buf[:off]
        except OSError:
            pass
        finally:
            _shut(dst)

    def _look_at(self, buf: bytearray, at: int, files: int) -> int:
        """Damage the event at ``buf[at:]`` if it is the one; 1 when it is an FDE (a file starts)."""
        kind = buf[at + 4]
        size, log_pos = struct.unpack_from("<II", buf, at + 9)
        if kind == _FDE:
            return 1
        start = log_pos - size
        if kind in (_ROTATE, _HEARTBEAT) or not log_pos or files != self.in_file or start < self.min_offset:
            return 0
        if self.field == "type" and kind != _TABLE_MAP:
            return 0
        self.victim = (start, kind, size)
        if self.field == "type":            # TABLE_MAP (19) becomes a HEARTBEAT (27)
            buf[at + 4] ^= 0x08
        else:
            buf[at + 15 if self.field == "log_pos" else at + 19 + (size - 23) // 2] ^= 0x10
        self.flipped.set()
        return 0


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def fingerprint(txns) -> list[tuple]:
    return [(t.vtso, t.kind.value, t.xid, tuple(t.start), tuple(t.end),
             [(b.trace_id, b.db, b.table, [bytes(e.raw) for e in b.events]) for b in t.blocks])
            for t in txns]


def serve(directory: Path):
    return start_in_thread(ServerConfig(dir=directory, port=0, users={USER: PASSWORD}, poll_interval=0.01))


def source_factory(port: int):
    def source_at(at: RestartPoint | None) -> ReplicationSource:
        return ReplicationSource("dn0", "127.0.0.1", port, USER, PASSWORD, start_file=at.file if at else None,
                                 start_pos=at.offset if at else 4, backoff_initial=0.02, backoff_max=0.2)
    return source_at


class Puller:
    """What the merge would do: takes the feed's transactions, in a thread (a test never hangs)."""

    def __init__(self, feed: DnFeed) -> None:
        self.feed = feed
        self.txns: list = []
        self.error: BaseException | None = None
        self.stream = feed.stream(lambda: False, lambda: None, lambda: None)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for txn in self.stream:
                self.txns.append(txn)
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            self.error = exc

    def wait_for(self, n: int, timeout: float = 60) -> None:
        wait_for(lambda: len(self.txns) >= n or self.error is not None, timeout, f"{n} transactions")
        assert self.error is None, self.error

    def stop(self) -> None:
        self.feed.stop()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def dn0(tmp_path) -> Path:
    d = tmp_path / "dn0"
    shutil.copytree(BANK / "dn0", d)
    return d


# -- the error's offset ---------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["body", "log_pos", "type"])
def test_a_byte_flipped_in_flight_is_reported_at_the_events_start(dn0, field):
    """The CRC catches a byte damaged on the wire; the offset named is where the event starts in
    the DN's file, also when the damaged byte is the log_pos the position would be taken from, or
    the type byte that makes a TABLE_MAP look like a heartbeat (a stream-only event)."""
    size = (dn0 / "mysql-bin.000001").stat().st_size
    with serve(dn0) as server, FlipProxy(server.port, field=field, min_offset=size // 2) as proxy:
        with pytest.raises(LiveSourceError) as failed:
            list(extract(source_factory(proxy.port)(None), storage_seq="000000"))
    start, kind, _ = proxy.victim
    assert start in {e.pos for e in read_events(dn0 / "mysql-bin.000001")} and start >= size // 2
    assert (failed.value.file, failed.value.offset) == ("mysql-bin.000001", start)
    seen = _HEARTBEAT if field == "type" else kind
    assert str(failed.value) == f"DN dn0: mysql-bin.000001: offset {start}: CRC32 mismatch in event type {seen}"


# -- the feed reads the DN again ------------------------------------------------------------------------
def behind_a_restart_point(directory: Path, file: str, from_offset: int) -> tuple[int, int]:
    """(offset, n): the first event at or after ``from_offset`` in ``file`` before which the DN has
    released ``n`` > 0 transactions since its last restart point (a prepare was open meanwhile), so a
    re-read from that point gives ``n`` transactions the merge took already."""
    asm = Assembler("dn0", storage_seq="000000")
    since_restart = 0
    for ev in read_events(directory / file):
        if ev.pos >= from_offset and since_restart:
            return ev.pos, since_restart
        for txn in asm.feed(file, [ev]):
            since_restart = 0 if txn.restart is not None else since_restart + 1
    raise AssertionError(f"no transaction released without a restart point after {from_offset}")


@pytest.mark.parametrize(("field", "in_file", "where"), [("body", 1, "behind a restart point"),
                                                         ("log_pos", 1, "at 75 %"), ("body", 2, "at 50 %")])
def test_a_feed_reads_the_dn_again_after_a_flipped_byte_and_hands_out_each_transaction_once(
        dn0, field, in_file, where, caplog):
    """The fault's retry reads the DN again from the newest restart point it handed out: a
    transaction the merge took already comes again (when the fault is behind that point) and is
    dropped; nothing is lost."""
    want = fingerprint(extract(dn0, storage_seq="000000"))
    file = f"mysql-bin.00000{in_file}"
    size = (dn0 / file).stat().st_size
    regenerated = 0
    if where == "behind a restart point":
        min_offset, regenerated = behind_a_restart_point(dn0, file, size // 4)
    else:
        min_offset = size * int(where.split()[1]) // 100
    total_events = sum(1 for f in ("mysql-bin.000001", "mysql-bin.000002") for _ in read_events(dn0 / f))
    with serve(dn0) as server, FlipProxy(server.port, field=field, min_offset=min_offset, in_file=in_file) as proxy:
        source_at = source_factory(proxy.port)
        feed = DnFeed("dn0", source_at(None), storage_seq="000000", reopen=source_at, backoff_initial=0.05,
                      backoff_max=0.2).begin()
        with caplog.at_level(logging.ERROR, logger="gbinlog.live_feed"):
            puller = Puller(feed)
            puller.wait_for(len(want))
            time.sleep(0.3)                  # nothing more may come
            st = feed.status()
            puller.stop()
    assert proxy.flipped.is_set() and proxy.connections == 2
    start = proxy.victim[0]
    assert fingerprint(puller.txns) == want              # none lost, none twice
    assert feed.faults == 1 and feed.fault is None       # healed
    assert st["state"] == "streaming" and st["fault"] is None and st["reconnects"] >= 1
    assert st["events"] > total_events                   # the DN was read again from a restart point
    assert feed.regenerated == regenerated
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert re.fullmatch(rf"DN dn0: {re.escape(file)}: offset {start}: CRC32 mismatch in event type \d+; "
                        r"reading the DN again from (its first file|mysql-bin\.\d{6}:\d+ \(.*\)) in 0\.05 s",
                        errors[0]), errors[0]


def test_a_dn_that_lost_a_file_is_failed_persistently_retried_and_heals_when_it_is_back(dn0, tmp_path):
    """ERR 1236 for the file of the restart point: the DN is failed, the third time in a row at the
    same place persistent (status and health say so), retried at the longest backoff; it reads on
    once the file is back."""
    full = list(extract(dn0, storage_seq="000000"))
    i = next(i for i, t in enumerate(full) if t.restart is not None and t.restart.file == "mysql-bin.000002")
    rp = full[i].restart
    lost = tmp_path / "lost"
    lost.mkdir()
    shutil.copy(dn0 / "mysql-bin.000001", lost)
    (lost / "mysql-bin.index").write_text("./mysql-bin.000001\n")
    with serve(lost) as server:
        source_at = source_factory(server.port)
        feed = DnFeed("dn0", source_at(rp), storage_seq="000000", restart=rp, reopen=source_at,
                      backoff_initial=0.02, backoff_max=0.3).begin()
        puller = Puller(feed)
        try:
            wait_for(lambda: feed.fault is not None and feed.fault.persistent, 30, "a persistent fault")
            st = feed.status()
            fault = feed.fault
            assert st["state"] == "failed" and puller.txns == [] and puller.error is None
            assert (fault.file, fault.offset, fault.retry_in_s) == ("mysql-bin.000002", rp.offset, 0.3)
            assert fault.repeats >= PERSISTENT_AFTER and st["fault"]["persistent"] is True
            assert re.match(rf"DN dn0: mysql-bin\.000002: offset {rp.offset}: 127\.0\.0\.1:{server.port}: \(1236\) "
                            "Could not find first log file name", st["last_error"]), st["last_error"]
            assert re.search(r"\(persistent: \d+ times in a row at the same place; retrying every 0\.3 s\)$",
                             st["last_error"]), st["last_error"]
            doc = {"state": "running", "time": time.time(), "dns": [st], "endpoint_expected": False}
            ok, reason = health_of(doc)
            assert not ok and reason == "DN dn0 failed: " + st["last_error"].removeprefix("DN dn0: ")
            # the file is back (restored from a copy): the next retry reads on from the restart point
            shutil.copy(dn0 / "mysql-bin.000002", lost)
            (lost / "mysql-bin.index").write_text("./mysql-bin.000001\n./mysql-bin.000002\n")
            puller.wait_for(len(full) - i - 1, timeout=30)
            time.sleep(0.3)
            assert fingerprint(puller.txns) == fingerprint(full[i + 1:])
            assert feed.fault is None and feed.status()["state"] == "streaming"
            assert health_of({**doc, "dns": [feed.status()]}) == (True, "ok")
        finally:
            puller.stop()


def test_a_followed_directory_with_a_damaged_event_is_failed_then_read_on_once_it_is_repaired(dn0):
    """A ``dir`` DN (read by a thread of its own): a damaged event in its binlog fails the DN, the
    same error at the same place is persistent, and once the file is repaired (restored from a
    copy) the next retry reads on; the merge gets every transaction once."""
    from gbinlog.config import DnConfig
    from gbinlog.live_feed import dn_source

    want = fingerprint(extract(dn0, storage_seq="000000"))
    path = dn0 / "mysql-bin.000001"
    good = path.read_bytes()
    events = list(read_events(path))
    victim = events[len(events) // 2]
    damaged = bytearray(good)
    damaged[victim.pos + victim.h[3] // 2] ^= 0x10
    path.write_bytes(bytes(damaged))
    dn = DnConfig(id="dn0", dir=dn0, poll_ms=10)

    def source_at(at: RestartPoint | None):
        return dn_source(dn, start_file=at.file if at else None, start_pos=at.offset if at else 4, server_id=1,
                         backoff_initial=0.02, backoff_max=0.2, connect_timeout=1, heartbeat_s=0.5)
    feed = DnFeed("dn0", source_at(None), storage_seq="000000", reopen=source_at, backoff_initial=0.02,
                  backoff_max=0.2).begin()
    assert feed.thread.is_alive()
    puller = Puller(feed)
    try:
        wait_for(lambda: feed.fault is not None and feed.fault.persistent, 30, "a persistent fault")
        st = feed.status()
        assert st["state"] == "failed" and f"offset {victim.pos}" in st["last_error"] and "persistent" in st["last_error"]
        assert puller.error is None and 0 < len(puller.txns) < len(want)
        assert fingerprint(puller.txns) == want[:len(puller.txns)]
        path.write_bytes(good)
        puller.wait_for(len(want))
        time.sleep(0.3)
        assert fingerprint(puller.txns) == want
        assert feed.fault is None and feed.status()["state"] == "following"
    finally:
        puller.stop()


# -- gbinlog run --------------------------------------------------------------------------------------------
def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def status_cli(cfg: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", "--config", str(cfg)], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)


def status_json(out: Path) -> dict:
    try:
        return json.loads((out / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def run_config(tmp_path: Path, out: Path, dn_ports: dict[str, int], metrics_port: int) -> Path:
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {free_port()}\n'
                   f'users = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n'
                   f"[metrics]\nport = {metrics_port}\n[source]\nbackoff_initial_ms = 50\nbackoff_max_ms = 400\n"
                   + "".join(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {port}\nuser = "{USER}"\n'
                             f'password = "{PASSWORD}"\n' for dn, port in dn_ports.items()))
    return cfg


class Replica:
    """python-mysql-replication attached to the service's endpoint: the GTIDs it reads and where
    it is (file, position after the last event; the endpoint's heartbeats, every 0.2 s while it
    has nothing newer, say the end of what it sent)."""

    def __init__(self, port: int) -> None:
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import GtidEvent, HeartbeatLogEvent, RotateEvent
        self.gtids: list[int] = []
        self.at: tuple[str, int] | None = None
        self.error: BaseException | None = None
        self.stream = BinLogStreamReader(
            connection_settings={"host": "127.0.0.1", "port": port, "user": REPL_USER, "password": REPL_PASSWORD},
            server_id=4711, blocking=True, resume_stream=True, log_file="binlog.000001", log_pos=4,
            slave_heartbeat=0.2, only_events=[GtidEvent, HeartbeatLogEvent, RotateEvent])
        self._gtid = GtidEvent
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for ev in self.stream:
                if isinstance(ev, self._gtid):
                    self.gtids.append(ev.gno)
                self.at = (self.stream.log_file, self.stream.log_pos)
        except BaseException as exc:  # noqa: BLE001 - checked by the test (a closed stream ends it)
            self.error = exc

    def close(self) -> None:
        self.stream.close()
        self.thread.join(10)


def written_gtids(path: Path) -> list[int]:
    """The gnos of the GTID events of a global binlog file (sid 16 bytes after the flags byte)."""
    return [struct.unpack_from("<Q", e.raw, 19 + 17)[0] for e in read_events(path) if e.raw[4] == 33]


def settled(out: Path, seconds: float = 1.0):
    """A probe: the output file's size once it has not changed for ``seconds`` (else None)."""
    last: dict = {"size": None, "since": time.monotonic()}

    def probe() -> int | None:
        path = out / "binlog.000001"
        size = path.stat().st_size if path.exists() else None
        if size != last["size"]:
            last.update(size=size, since=time.monotonic())
            return None
        return size if size and time.monotonic() - last["since"] >= seconds else None
    return probe


@pytest.fixture
def dn_servers():
    handles = {dn: serve(BANK / dn) for dn in DNS}
    yield handles
    for h in handles.values():
        h.stop()


@pytest.mark.slow
@pytest.mark.parametrize("field", ["log_pos"])    # the body flip: the feed-level tests above
def test_run_keeps_serving_while_a_dn_is_failed_and_heals_to_the_builds_bytes(tmp_path, field):
    """A live cluster (TSO heartbeats every 200 ms, so a healthy service answers /healthz 200);
    ``gbinlog run`` reads dn1 through a proxy that flips one byte of one event once, then makes
    dn1 look down until the test has seen the fault."""
    cluster = Cluster(tmp_path, "bank", 2, duration=RUN_WORKLOAD_S, tps=60)
    proxy = FlipProxy(cluster.dn_port(1), field=field, min_offset=40_000, hold=True)
    out = tmp_path / "global"
    mport = free_port()
    cfg = run_config(tmp_path, out, {"dn0": cluster.dn_port(0), "dn1": proxy.port}, mport)
    healthz = f"http://127.0.0.1:{mport}/healthz"
    svc = Service(cfg, tmp_path / "run.log")
    replica = None
    try:
        svc.start()
        # the byte is flipped, and dn1 looks down after it: the service is up, dn1 failed
        wait_for(lambda: proxy.flipped.is_set(), 60, "the flipped byte")
        start, kind, _ = proxy.victim
        error = f"DN dn1: mysql-bin.000001: offset {start}: CRC32 mismatch in event type {kind}"
        wait_for(lambda: error in svc.log_text(), 30, "the error in the log")
        assert re.search(re.escape(error) + r"; reading the DN again from mysql-bin\.000001:\d+ .* in 0\.05 s",
                         svc.log_text())
        code, reason = wait_for(lambda: (r := http_get(healthz))[0] == 503 and "dn1" in r[1] and r, 30,
                                "/healthz 503")
        assert reason.startswith(f"DN dn1 failed: mysql-bin.000001: offset {start}: CRC32 mismatch"), reason
        r = status_cli(cfg)
        assert r.returncode == 3 and f"unhealthy: DN dn1 failed: mysql-bin.000001: offset {start}" in r.stderr, \
            (r.stdout, r.stderr)
        assert re.search(r"DN dn1 +failed\S* .*last error: DN dn1: mysql-bin\.000001: offset " + str(start), r.stdout)
        doc = status_json(out)
        assert doc["state"] == "running" and doc["endpoint_listening"] is True
        dn0, dn1 = doc["dns"]
        assert dn1["state"] == "failed" and dn1["fault"]["offset"] == start and dn1["fault"]["persistent"] is False
        assert dn0["state"] == "streaming"
        # the endpoint serves what was written: a replica reads all of it while dn1 is failed
        size_while_failed = wait_for(settled(out), 30, "the output to stop growing")
        replica = Replica(int(doc["endpoint"].rsplit(":", 1)[1]))
        wait_for(lambda: replica.at == ("binlog.000001", size_while_failed) or replica.error, 30,
                 "the replica at the end of what was written")
        assert replica.error is None
        assert replica.gtids == written_gtids(out / "binlog.000001") and len(replica.gtids) > 10
        assert status_json(out)["dns"][1]["state"] == "failed" and svc.alive()
        # the DN is back: the retry re-reads dn1 from its restart point and the service is healthy again
        proxy.release()
        wait_for(lambda: http_get(healthz) == (200, "ok\n"), 30, "/healthz 200 again")
        healed = status_json(out)["dns"][1]
        assert healed["state"] == "streaming" and healed["faults"] == 1 and healed["fault"] is None
        cluster.wait_done(RUN_WORKLOAD_S + 60)
        final_size = wait_for(settled(out, 2.0), 60, "the output to settle")
        assert final_size > size_while_failed
        wait_for(lambda: replica.at == ("binlog.000001", final_size) or replica.error, 30, "the replica reading on")
        assert replica.error is None
        assert svc.terminate() == 0, svc.log_text()
        assert "stopped cleanly" in svc.log_text()
    finally:
        if replica is not None:
            replica.close()
        svc.ensure_stopped()
        proxy.close()
        cluster.close()
    assert replica.gtids == written_gtids(out / "binlog.000001")
    assert sum(1 for line in svc.log_text().splitlines() if " ERROR " in line) == 1     # the one fault
    batch = tmp_path / "batch"
    build([cluster.dir / dn for dn in ("dn0", "dn1")], batch, settings=Settings())
    assert sorted(p.name for p in out.glob("binlog.0*")) == ["binlog.000001"]
    assert (out / "binlog.000001").read_bytes() == (batch / "binlog.000001").read_bytes()


@pytest.mark.slow
def test_run_stays_up_while_a_dn_answers_1236_and_status_names_it(tmp_path, dn_servers):
    """A DN lost the file its restart point is in: the service starts, serves what it wrote,
    and ``gbinlog status`` names the DN and ERR 1236, persistent; it reads on once the file is back.
    (The DNs are read when the merge asks for their next transaction, first dn0's; these DNs write
    nothing more, so the merge asks the others only once dn0 has answered.)"""
    out = tmp_path / "global"
    build([BANK / dn for dn in DNS], out, settings=Settings())
    state = json.loads((out / "state.json").read_text())
    lost_file, lost_pos = state["dns"]["dn0"]["file"], state["dns"]["dn0"]["pos"]
    lost = tmp_path / "dn0"
    shutil.copytree(BANK / "dn0", lost)
    (lost / lost_file).unlink()
    (lost / "mysql-bin.index").write_text("".join(f"./{p.name}\n" for p in sorted(lost.glob("mysql-bin.0*"))))
    lost_server = serve(lost)
    mport = free_port()
    cfg = run_config(tmp_path, out, {dn: h.port for dn, h in dn_servers.items()} | {"dn0": lost_server.port}, mport)
    svc = Service(cfg, tmp_path / "run.log")
    written = (out / "binlog.000001").read_bytes()
    replica = None
    try:
        svc.start()
        wait_for(lambda: (d := status_json(out).get("dns")) and d[0].get("fault") and d[0]["fault"]["persistent"],
                 60, "dn0 failed persistently")
        r = status_cli(cfg)
        assert r.returncode == 3, (r.stdout, r.stderr)
        assert re.search(rf"unhealthy: DN dn0 failed: {lost_file}: offset {lost_pos}: 127\.0\.0\.1:{lost_server.port}: "
                         r"\(1236\) .*\(persistent: \d+ times in a row at the same place; retrying every 0\.4 s\)",
                         r.stderr), r.stderr
        assert re.search(r"DN dn0 +failed\S* .*last error: DN dn0: .*\(1236\)", r.stdout), r.stdout
        assert svc.alive() and "1236" in svc.log_text() and "persistent" in svc.log_text()
        assert http_get(f"http://127.0.0.1:{mport}/healthz")[1].startswith("DN dn0 failed: ")
        port = int(status_json(out)["endpoint"].rsplit(":", 1)[1])
        replica = Replica(port)
        wait_for(lambda: replica.at == ("binlog.000001", len(written)) or replica.error, 30, "the replica")
        assert replica.error is None and replica.gtids == written_gtids(out / "binlog.000001")
        # the file is restored: the next retry (every 0.4 s) reads on
        shutil.copy(BANK / "dn0" / lost_file, lost)
        (lost / "mysql-bin.index").write_text((BANK / "dn0" / "mysql-bin.index").read_text())
        wait_for(lambda: (d := status_json(out).get("dns")) and d[0]["state"] == "streaming", 30, "dn0 reading on")
        assert status_json(out)["dns"][0]["fault"] is None and "failed" not in status_cli(cfg).stderr
        assert svc.terminate() == 0, svc.log_text()
    finally:
        if replica is not None:
            replica.close()
        svc.ensure_stopped()
        lost_server.stop()
    assert (out / "binlog.000001").read_bytes() == written       # nothing new: the build had written it all
