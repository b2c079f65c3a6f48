"""The live DN source (public APIs only): a DN read over the replication
protocol by the project's own client (``extractor.replication_client``), events kept raw.

Peers: the project's replication endpoint serving a DN binlog directory (a fixture, and a directory
the live simulator grows in real time), and a real MariaDB master. What counts: the transactions
extracted live equal ``extract(dir)`` exactly (vtso, kind, positions, every event's bytes), also
from a restart point, across a server outage, and the raw events equal the master's files.
"""

from __future__ import annotations

import shutil
import threading
import time
from itertools import pairwise
from pathlib import Path

import pytest

from binlog import read_events
from binlog.wire import unframe_run_py
from dumper.server import ServerConfig, start_in_thread
from extractor import extract, replication_client
from extractor.live_source import LiveSourceError, ReplicationSource
from extractor.replication_client import ReplicationClient, ServerError
from extractor.source import DnSource
from simulator.live import LiveSimulation, ServeOptions
from tests.mariadb import MariaDB

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "fixtures" / "bank-4dn"
USER, PASSWORD = "cdc", "cdc-pw"


def fingerprint(txns) -> list[tuple]:
    return [(t.vtso, t.kind.value, t.xid, tuple(t.start), tuple(t.end),
             [(b.trace_id, b.db, b.table, [bytes(e.raw) for e in b.events]) for b in t.blocks])
            for t in txns]


def serve(directory: Path, port: int = 0):
    return start_in_thread(ServerConfig(dir=directory, port=port, users={USER: PASSWORD}, poll_interval=0.01))


def source(dn: str, port: int, **kw) -> ReplicationSource:
    kw.setdefault("backoff_initial", 0.05)
    kw.setdefault("backoff_max", 0.4)
    return ReplicationSource(dn, "127.0.0.1", port, USER, PASSWORD, **kw)


class Collector:
    """Runs ``extract(source)`` in a thread, collecting what it yields."""

    def __init__(self, src: ReplicationSource, **extract_kw) -> None:
        self.src = src
        self.txns: list = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(extract_kw,), daemon=True)
        self.thread.start()

    def _run(self, kw) -> None:
        try:
            for t in extract(self.src, **kw):
                self.txns.append(t)
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            self.error = exc

    def wait_for(self, n: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.txns) < n and self.error is None:
            assert time.monotonic() < deadline, f"only {len(self.txns)} of {n} txns after {timeout} s"
            time.sleep(0.02)

    def stop(self) -> None:
        self.src.stop()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def dn0(tmp_path) -> Path:
    d = tmp_path / "dn0"
    shutil.copytree(BANK / "dn0", d)
    return d


class _EventsOnly(DnSource):
    """A source whose files hide the scan path (``records``): the assembler reads Event by Event."""

    def __init__(self, src: ReplicationSource) -> None:
        self.src, self.dn_id = src, src.dn_id

    def files(self):
        for name, events in self.src.files():
            yield name, iter(events)

    def stop(self) -> None:
        self.src.stop()


@pytest.mark.parametrize("path", ["kernel scan", "kernel scan, Python unframing", "events"])
def test_fixture_dn_over_the_protocol_equals_extract_dir(dn0, path, monkeypatch):
    """Both ways the assembler reads a live file — the kernel's scan over runs of the stream's
    events (``records``; the runs unframed by the compiled loop or its Python twin) and event by
    event — give exactly ``extract(dir)``."""
    if path == "kernel scan, Python unframing":
        monkeypatch.setattr(replication_client, "unframe_run", unframe_run_py)
    want = fingerprint(extract(dn0))
    assert len(want) > 100 and len({e[3][0] for e in want}) == 2  # two files: the switch is covered
    with serve(dn0) as server:
        src = source("dn0", server.port)
        c = Collector(src if path == "kernel scan" else _EventsOnly(src))
        c.wait_for(len(want))
        time.sleep(0.3)  # nothing more may come
        c.stop()
    assert c.error is None
    assert fingerprint(c.txns) == want
    assert src.reconnects == 0 and src.gaps == 0
    assert src.file == "mysql-bin.000002" and src.pos == (dn0 / "mysql-bin.000002").stat().st_size
    assert src.events == sum(1 for f in ("mysql-bin.000001", "mysql-bin.000002") for _ in read_events(dn0 / f))


def test_restart_point_resumes_with_identical_vtsos(dn0):
    full = list(extract(dn0))
    want = fingerprint(full)
    # restart points in both files, one of them right at the first file's end
    picks = [i for i, t in enumerate(full) if t.restart is not None]
    picks = [picks[len(picks) // 5], picks[len(picks) // 2], picks[-3]]
    with serve(dn0) as server:
        for i in picks:
            rp = full[i].restart
            c = Collector(source("dn0", server.port, start_file=rp.file, start_pos=rp.offset),
                          state=rp.vtso_state())
            c.wait_for(len(want) - i - 1)
            time.sleep(0.2)
            c.stop()
            assert c.error is None
            assert fingerprint(c.txns) == want[i + 1:], f"restart at {rp}"


@pytest.mark.slow
def test_server_outage_reconnects_and_loses_nothing(dn0, tmp_path):
    """The DN's endpoint goes away mid-stream (and comes back on the same port 1 s later): the source
    backs off, reconnects at the end of the last event it handed out, no txn lost or repeated."""
    growing = tmp_path / "growing"
    growing.mkdir()
    files = sorted(p.name for p in dn0.glob("mysql-bin.0*"))
    first = (dn0 / files[0]).read_bytes()
    (growing / files[0]).write_bytes(first[: len(first) // 2])   # half of the first file for now
    (growing / "mysql-bin.index").write_text(f"./{files[0]}\n")
    server = serve(growing)
    port = server.port
    c = Collector(source("dn0", port))
    c.wait_for(20)
    server.stop()
    n_before = len(c.txns)
    time.sleep(1.0)
    assert c.src.state in ("backoff", "connecting") and c.src.reconnects >= 1
    with open(growing / files[0], "ab") as fh:                     # the DN went on writing meanwhile
        fh.write(first[len(first) // 2:])
    for name in files[1:]:
        shutil.copy(dn0 / name, growing / name)
    (growing / "mysql-bin.index").write_text("".join(f"./{n}\n" for n in files))
    server = serve(growing, port)
    want = fingerprint(extract(dn0))
    try:
        c.wait_for(len(want))
        time.sleep(0.3)
    finally:
        c.stop()
        server.stop()
    assert c.error is None and n_before < len(want)
    assert fingerprint(c.txns) == want
    assert c.src.last_error


@pytest.mark.slow
def test_growing_dn_dirs_of_the_live_simulator(tmp_path):
    """Two DNs written in real time and served by the endpoint: what comes out live equals
    ``extract(dir)`` of the finished directories."""
    sim = LiveSimulation("bank", 2, tmp_path / "sim", tps=300, duration=3, serve=ServeOptions(user=USER,
                                                                                              password=PASSWORD))
    runner = threading.Thread(target=sim.run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 10
    while len(sim.ports) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    cs = {dn: Collector(source(dn, port)) for dn, port in sim.ports.items()}
    runner.join(60)
    assert not runner.is_alive() and sim.error is None
    try:
        for dn, c in cs.items():
            want = fingerprint(extract(tmp_path / "sim" / dn))
            c.wait_for(len(want))
            time.sleep(0.3)
            c.stop()
            assert c.error is None
            assert fingerprint(c.txns) == want and len(want) > 200
    finally:
        sim.stop_servers()


def test_wrong_password_and_bad_position_are_fatal(dn0):
    with serve(dn0) as server:
        bad = ReplicationSource("dn0", "127.0.0.1", server.port, USER, "nope")
        with pytest.raises(LiveSourceError, match=r"DN dn0: .*refused: \(1045\)"):
            list(extract(bad))
        wrong = source("dn0", server.port, start_file="mysql-bin.000009", start_pos=4)
        with pytest.raises(LiveSourceError, match=r"DN dn0: mysql-bin.000009: offset 4: .*1236"):
            list(extract(wrong))


def test_corrupt_event_names_dn_file_offset(dn0):
    """A flipped bit inside an event: the CRC32 check names the DN, file and the event's offset."""
    events = list(read_events(dn0 / "mysql-bin.000001"))
    victim = events[len(events) // 2]
    data = bytearray((dn0 / "mysql-bin.000001").read_bytes())
    data[victim.pos + 25] ^= 0x10
    (dn0 / "mysql-bin.000001").write_bytes(bytes(data))
    with serve(dn0) as server:
        src = source("dn0", server.port)
        with pytest.raises(LiveSourceError, match=rf"DN dn0: mysql-bin.000001: offset {victim.pos}: CRC32"):
            list(extract(src))


@pytest.mark.slow
def test_raw_events_from_a_real_mariadb_master(tmp_path):
    """A real MariaDB master streams its own binlog (two rotations, writes while we follow): every
    event we hand out is byte-identical to the event at that position in the master's files
    (the server clears the in-use flag of the active file's FDE; it skips ANNOTATE_ROWS)."""
    m = MariaDB.start(tmp_path / "m", log_bin=True)
    try:
        m.run_sql("CREATE USER 'repl'@'%' IDENTIFIED BY 'pw'; GRANT REPLICATION SLAVE, REPLICATION CLIENT "
                  "ON *.* TO 'repl'@'%'; CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v MEDIUMTEXT);"
                  "INSERT INTO d.t VALUES (1,'a'),(2,'b'); FLUSH BINARY LOGS; UPDATE d.t SET v='c' WHERE id=1;")
        src = ReplicationSource("m", "127.0.0.1", m.port, "repl", "pw")
        got: list[tuple[str, int, bytes]] = []
        # The same stream through the scan path, every event type accepted (FDEs are not records).
        scanned_src = ReplicationSource("m2", "127.0.0.1", m.port, "repl", "pw", server_id=4_200_001)
        scanned: list[tuple[str, int, bytes]] = []

        def consume() -> None:
            for name, evs in src.files():
                got.extend((name, ev.pos, bytes(ev.raw)) for ev in evs)

        def consume_records() -> None:
            for name, evs in scanned_src.files():
                for recs in evs.records(bytes([1]) * 256):
                    scanned.extend((name, ev.pos, bytes(ev.raw)) for _, ev, _ in recs)
        threads = [threading.Thread(target=consume, daemon=True), threading.Thread(target=consume_records, daemon=True)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        m.run_sql("INSERT INTO d.t VALUES (3, REPEAT('x', 70000)); FLUSH BINARY LOGS; DELETE FROM d.t WHERE id=2;")
        files = m.binlog_files()
        want = {(f.name, ev.pos): bytes(ev.raw) for f in files for ev in read_events(f)}
        deadline = time.monotonic() + 15
        while (not got or got[-1][:2] != max(want) or not scanned or scanned[-1][:2] != max(want)) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        src.stop()
        scanned_src.stop()
        for t in threads:
            t.join(10)
    finally:
        m.stop()
    assert scanned == [g for g in got if g[2][4] != 15] and scanned_src.gaps == src.gaps > 0
    assert got and got[-1][:2] == max(want)
    assert [g[0] for g in got] == sorted(g[0] for g in got) and {g[0] for g in got} == {f.name for f in files}
    for name, pos, raw in got:
        expect = want[(name, pos)]
        if raw[4] == 15 and name == files[-1].name:
            expect = expect[:17] + bytes([expect[17] & ~1]) + expect[18:]
        assert raw == expect, (name, pos)
    missing = {want[k][4] for k in want if k not in {g[:2] for g in got}}
    assert missing == {160}  # ANNOTATE_ROWS only


@pytest.mark.parametrize("plugin", ["mysql_native_password", "caching_sha2_password"])
def test_own_client_logs_in_with_either_plugin_and_streams_every_file_byte_exact(dn0, plugin):
    """The endpoint offers mysql_native_password and switches to the user's plugin; for
    caching_sha2 the first login is the full exchange (RSA with the server's key), the next one the
    fast path. Then a non-blocking dump from the first file: fake ROTATE + FDE per file and every
    event byte for byte; a wrong password is ERR 1045."""
    files = sorted(p.name for p in dn0.glob("mysql-bin.0*"))
    want = [bytes(e.raw) for f in files for e in read_events(dn0 / f)]
    cfg = ServerConfig(dir=dn0, users={USER: PASSWORD}, user_plugins={USER: plugin}, poll_interval=0.01)
    with start_in_thread(cfg) as server:
        for _ in range(2):
            c = ReplicationClient("127.0.0.1", server.port, USER, PASSWORD, read_timeout=10)
            assert c.prepare_dump(server_id=77, heartbeat=0.5) is True   # CRC32 asked for and granted
            c.dump(files[0], 4, server_id=77, blocking=False)
            got = list(c.events())
            c.close()
            rotates = [e for e in got if e[4] == 4 and e[13:17] == bytes(4)]
            assert [e[27:-4].decode() for e in rotates] == files
            assert [e for e in got if e not in rotates] == want and len(want) > 1000
        with pytest.raises(ServerError) as err:
            ReplicationClient("127.0.0.1", server.port, USER, "wrong")
        assert err.value.code == 1045


def _grouped_fingerprint(txns) -> list[tuple]:
    """``fingerprint`` and every event's position (the grouped scan makes them from the run's offset)."""
    txns = list(txns)
    return [(f, [[e.pos for e in b.events] for b in t.blocks]) for f, t in zip(fingerprint(txns), txns, strict=True)]


def test_live_runs_cut_at_every_event_give_the_whole_files_transactions(tmp_path):
    """The live source's runs go through the kernel's grouped scan (``scan_txns`` with the run's file
    offset as base; ``replay`` from the run). A run may end inside an XA branch or between a GCN and
    its XA COMMIT: those come as plain records. Two runs cut at every event boundary of a DN file's
    first 400 events give the transactions of the whole file (vtsos, positions, bytes), and the
    uncut run is grouped (compiled kernel; the pure-Python path checks the plain records)."""
    from binlog import kernel
    from binlog.reader import BinlogFile
    from extractor.assembler import _KINDS, Assembler
    from extractor.live_source import _LiveFile

    events = list(read_events(BANK / "dn0" / "mysql-bin.000001"))
    assert events[0].h[1] == 15   # the FDE: the stream hands it apart, the runs start after it
    body = events[1:401]
    data = (BANK / "dn0" / "mysql-bin.000001").read_bytes()[:body[-1].pos + body[-1].h[3]]
    (tmp_path / "mysql-bin.000001").write_bytes(data)
    cut_file = BinlogFile(tmp_path / "mysql-bin.000001")
    want = _grouped_fingerprint(Assembler("dn0").feed("mysql-bin.000001", iter(cut_file)))  # event by event
    assert len(want) > 10
    assert _grouped_fingerprint(Assembler("dn0").feed("mysql-bin.000001", cut_file)) == want
    ctx = body[0].ctx

    def live_file(cuts: list[int]) -> _LiveFile:
        src = ReplicationSource("dn0", "127.0.0.1", 1, USER, PASSWORD)
        bounds = [0, *cuts, len(body)]
        runs = [(b"".join(e.raw for e in body[a:b]), body[a].pos, ctx) for a, b in pairwise(bounds)]
        src._begin = lambda name: None
        src._stream_runs = lambda: iter(runs)
        return _LiveFile(src, "mysql-bin.000001")

    if kernel.Maker is not None:   # compiled: the uncut run is grouped (GBINLOG_PURE_PYTHON: plain records)
        maker = Assembler("dn0")._maker("mysql-bin.000001")
        kinds = [r[0] for recs in live_file([]).records(_KINDS, 128, grouped=maker) for r in recs]
        assert kinds.count(kernel.K_BRANCH) > 10 and kinds.count(kernel.K_TSO_COMMIT) > 10
    assert _grouped_fingerprint(Assembler("dn0").feed("mysql-bin.000001", live_file([]))) == want
    every = list(range(1, len(body)))   # a run per event: every group cut
    assert _grouped_fingerprint(Assembler("dn0").feed("mysql-bin.000001", live_file(every))) == want
    for cut in range(1, len(body)):
        got = _grouped_fingerprint(Assembler("dn0").feed("mysql-bin.000001", live_file([cut])))
        assert got == want, f"runs cut before event {cut} (offset {body[cut].pos})"
    # the pure-Python twin takes the run's file offset too (it groups nothing)
    from binlog import kernel_py
    from binlog.event import Event
    run = b"".join(e.raw for e in body[1:])
    plain = kernel_py.scan_txns(run, 0, ctx.checksum, _KINDS, ctx.post_header_len[1], Event, ctx, len(body), 6,
                                None, body[1].pos)[0]
    at = {e.pos: e.raw for e in body}
    assert len(plain) > 100 and all(at[r[1].pos] == r[1].raw for r in plain)
