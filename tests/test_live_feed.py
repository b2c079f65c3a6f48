"""``gbinlog run``'s DN feeds and its writes (the live ceiling): a DN over the replication
protocol is read in the merge's own thread, and what the pipeline appended is written out when the
merge is about to wait for a DN (one write for all that were ready) instead of after every
transaction.

Peers: the project's replication endpoint serving the bank fixture's DN directories (one server per
DN), the batch build of the same directories. What counts: while the service waits for the DNs, the
global binlog file already holds every transaction it consumed (the flush period is set far above
the test's length, so only the write before a wait can put them there), its bytes are the batch
build's; a stop while every DN is silent ends at once and cleanly (the merge told ``IDLE``), and
no feed thread runs.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from dumper.server import ServerConfig, start_in_thread
from extractor import extract
from extractor.live_source import ReplicationSource
from extractor.model import TxnKind
from gbinlog import live
from gbinlog.config import from_dict
from gbinlog.live import LiveRunner
from gbinlog.live_feed import DnFeed, FeedStopped
from gbinlog.local_engine import Settings, build
from merger import IDLE

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "fixtures" / "bank-4dn"
DNS = ["dn0", "dn1", "dn2", "dn3"]
USER, PASSWORD = "cdc", "cdc-pw"


@pytest.fixture
def servers():
    handles = [start_in_thread(ServerConfig(dir=BANK / dn, port=0, users={USER: PASSWORD}, poll_interval=0.01))
               for dn in DNS]
    yield {dn: h.port for dn, h in zip(DNS, handles, strict=True)}
    for h in handles:
        h.stop()


def test_a_dn_feed_reads_in_the_merge_thread_and_says_idle_when_a_stop_is_pending(tmp_path):
    # dn0 cut after its last DML transaction (its last one is a heartbeat, which the merge never holds)
    dn0 = tmp_path / "dn0"
    shutil.copytree(BANK / "dn0", dn0)
    last_dml = [t for t in extract(dn0, storage_seq="000000") if t.kind is TxnKind.DML][-1]
    with open(dn0 / last_dml.end.file, "r+b") as fh:
        fh.truncate(last_dml.end.offset)
    want = [(t.vtso, t.kind, t.end) for t in extract(dn0, storage_seq="000000")]
    assert want[-1][1] is TxnKind.DML and len(want) > 20
    server = start_in_thread(ServerConfig(dir=dn0, port=0, users={USER: PASSWORD}, poll_interval=0.01))
    try:
        _pull_then_stop(server.port, want)
    finally:
        server.stop()


def _pull_then_stop(port: int, want: list) -> None:
    src = ReplicationSource("dn0", "127.0.0.1", port, USER, PASSWORD, backoff_initial=0.05)
    feed = DnFeed("dn0", src, storage_seq="000000").begin()
    assert not feed.thread.is_alive()                  # no feed thread: the merge's thread reads
    stopping, waits, emitted = threading.Event(), [], [None]
    stream = feed.stream(stopping.is_set, lambda: waits.append(threading.get_ident()), lambda: emitted[0])
    got = [next(stream) for _ in want]
    assert [(t.vtso, t.kind, t.end) for t in got] == want
    assert feed.txns == len(want) and feed.last_vtso == want[-1][0] and feed.status()["merge_waits"] is False
    assert waits and set(waits) == {threading.get_ident()}     # before each network wait, in this thread
    # The DN has nothing newer and a stop is pending. While the merge holds the DN's last
    # transaction (not emitted: it waits for the DN's next one) the feed waits for the DN ...
    stopping.set()
    emitted[0] = want[-2][0]
    nxt: list = []
    waiter = threading.Thread(target=lambda: nxt.append(next(stream)), daemon=True)
    waiter.start()
    time.sleep(0.5)
    assert nxt == [] and feed.status()["merge_waits"] is True
    # ... once it was emitted, the feed says IDLE (the merge may end there) within a tick or two
    emitted[0] = want[-1][0]
    waiter.join(2)
    assert nxt == [IDLE]
    assert next(stream) is IDLE
    feed.stop()
    with pytest.raises(FeedStopped):
        next(stream)


def test_run_writes_what_it_consumed_before_waiting_and_stops_cleanly_when_dns_are_silent(tmp_path, servers,
                                                                                         monkeypatch):
    monkeypatch.setattr(live, "FLUSH_BOUND_S", 3600.0)   # only the write before a wait may put bytes out
    out = tmp_path / "global"
    cfg = from_dict({"output": {"dir": str(out)}, "server": {"port": 0},
                     "source": {"backoff_initial_ms": 50, "backoff_max_ms": 500},
                     "dn": [{"id": dn, "host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD}
                            for dn, port in servers.items()]})
    runner = LiveRunner(cfg)
    runner.start()
    thread = threading.Thread(target=runner.run, daemon=True)
    try:
        thread.start()
        # the DNs' files are whole and no DN writes more: the merge ends up waiting for them
        seen: list = []

        def settled() -> bool:
            p = runner.pipeline
            now = (p.result.txns, p.binlog.bytes_written) if p is not None and p.binlog is not None else None
            seen.append(now)
            return now is not None and now[0] > 0 and seen[-8:] == [now] * 8
        deadline = time.monotonic() + 60
        while not settled():
            assert time.monotonic() < deadline and thread.is_alive(), "gbinlog run did not settle"
            time.sleep(0.05)
        assert not any(f.thread.is_alive() for f in runner.feeds.values())
        binlog = runner.pipeline.binlog
        on_disk = (out / binlog.files[-1]).read_bytes()
        assert len(on_disk) == binlog.position         # everything appended is in the file while it waits
        cts = on_disk.rfind(b"\x01CTS::")
        assert on_disk[cts + 6:cts + 60].decode() == binlog.last_written_vtso
        # SIGTERM's path while every DN is silent: the merge is told IDLE and ends at once, cleanly
        t0 = time.monotonic()
        runner.stop()
        thread.join(10)
        assert not thread.is_alive() and runner.error is None and runner.result is not None
        assert time.monotonic() - t0 < live.SHUTDOWN_GRACE_S
    finally:
        runner.stop()
        thread.join(10)
        runner.close()
    batch = tmp_path / "batch"
    build([BANK / dn for dn in DNS], batch, settings=Settings())
    written = sorted(out.glob("binlog.0*"))
    assert written and [f.read_bytes() for f in written[:-1]] == [(batch / f.name).read_bytes() for f in written[:-1]]
    last = written[-1].read_bytes()                    # the batch build goes on where the merge stopped
    assert len(last) > 4 and (batch / written[-1].name).read_bytes()[:len(last)] == last


def test_a_failure_of_the_pipelines_own_write_before_a_wait_is_not_the_dns(tmp_path, servers, caplog):
    """``before_wait`` is the pipeline writing out what it appended: when it fails (a full disk) the
    error comes out of the stream as it is, and the DN is not marked failed nor logged as the cause."""
    from dumper.global_binlog import DiskFull

    src = ReplicationSource("dn0", "127.0.0.1", servers["dn0"], USER, PASSWORD, backoff_initial=0.05)
    feed = DnFeed("dn0", src, storage_seq="000000").begin()

    def full() -> None:
        raise DiskFull("/out/binlog.000001: cannot write: No space left on device")
    stream = feed.stream(lambda: False, full, lambda: None)
    with caplog.at_level("ERROR", logger="gbinlog.live_feed"), pytest.raises(DiskFull, match="No space left"):
        for _ in range(100_000):
            next(stream)
    assert feed.error is None
    assert not [r for r in caplog.records if "DN dn0" in r.getMessage()]
    feed.stop()
