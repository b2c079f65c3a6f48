"""A real MariaDB replica replicating the *global* binlog through the endpoint:
every fixture is built with `gbinlog build` (local engine, small files so it rotates), served,
and replicated with CHANGE MASTER … MASTER_USE_GTID=no; the replica ends with the truth's tables
(BIT_XOR(CRC32(CONCAT_WS(...))) per table), its threads stay Yes, Seconds_Behind_Master reaches 0, and a
restart at a mid-file position after STOP SLAVE works. Then a build writes into the served directory
while the replica follows it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.mariadb import MariaDB
from tests.test_server_support import (
    USERS,
    change_master,
    replica_checksums,
    slave_status,
    truth_checksums,
    wait_caught_up,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures").glob("*/truth.json"))


def dn_dirs(name: str) -> list[Path]:
    return sorted(p for p in (ROOT / "fixtures" / name).iterdir() if p.is_dir())


def index(d: Path) -> list[str]:
    return [line.strip().rsplit("/", 1)[-1] for line in (d / "binlog.index").read_text().splitlines()]


def end_of(d: Path) -> tuple[str, int]:
    last = index(d)[-1]
    return last, (d / last).stat().st_size


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    server = MariaDB.start(tmp_path_factory.mktemp("replica"), server_id=2)
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_replica_of_each_fixtures_global_binlog_ends_with_the_truths_tables(replica, tmp_path, name):
    truth = json.loads((ROOT / "fixtures" / name / "truth.json").read_text())
    out = tmp_path / "global"
    build(dn_dirs(name), out, settings=Settings(max_file_size=16 << 10))
    files = index(out)
    replica.query("STOP SLAVE")
    replica.query("RESET SLAVE ALL")
    with start_in_thread(ServerConfig(dir=out, users=USERS, server_id=100)) as h:
        # First up to a commit in the middle of a middle file, then STOP SLAVE and CHANGE MASTER to
        # exactly there: the second dump starts mid-file (patched FDE); nothing lost, nothing twice.
        mid_file = files[len(files) // 2]
        xids = [e for e in read_all(out / mid_file) if e.h[1] == 16]
        mid = xids[len(xids) // 2].end_pos
        change_master(replica, h.port, "binlog.000001", 4)
        replica.query(f"START SLAVE UNTIL MASTER_LOG_FILE='{mid_file}', MASTER_LOG_POS={mid}")
        deadline = time.monotonic() + 30
        while slave_status(replica)["Slave_SQL_Running"] == "Yes" and time.monotonic() < deadline:
            time.sleep(0.05)
        st = slave_status(replica)
        assert (st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"], st["Last_SQL_Error"]) == (mid_file, mid, "")
        replica.query("STOP SLAVE")
        change_master(replica, h.port, mid_file, mid)
        replica.query("START SLAVE")
        st = wait_caught_up(replica, *end_of(out), timeout=60)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Seconds_Behind_Master"]) == ("Yes", "Yes", 0)
        assert [d.request.position for d in h.server.dumps()] == [mid]
        assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
        if "bank" in truth:
            b = truth["bank"]
            total = replica.query(f"SELECT SUM(balance), COUNT(*) FROM `{b['db']}`.`{b['table']}`")[0]
            assert (int(total[0]), total[1]) == (b["expected_total"], b["accounts"])
        replica.query("STOP SLAVE")
    assert len(files) >= 2, files  # rotation happened, so the dump crossed files


@pytest.mark.slow
def test_replica_keeps_up_while_a_build_grows_the_served_directory(replica, tmp_path):
    name = "bank-4dn"
    truth = json.loads((ROOT / "fixtures" / name / "truth.json").read_text())
    out = tmp_path / "global"
    replica.query("STOP SLAVE")
    replica.query("RESET SLAVE ALL")
    replica.query("DROP DATABASE IF EXISTS bank")
    # The build writes each txn to the file as it goes (flush_seconds=0), slowed to ~8 ms a txn so
    # that it runs for a few seconds with the replica attached (a loaded host samples slowly).
    slow = threading.Event()

    def throttle() -> bool:
        time.sleep(0.008)
        return False

    result: dict = {}

    def run() -> None:
        try:
            result["build"] = build(dn_dirs(name), out, should_stop=throttle,
                                    settings=Settings(max_file_size=32 << 10, flush_seconds=0))
        except Exception as exc:  # reported below
            result["error"] = exc
        slow.set()

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 10
    while not (out / "binlog.index").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    bad, seen = [], []
    with start_in_thread(ServerConfig(dir=out, users=USERS, server_id=100, poll_interval=0.02)) as h:
        change_master(replica, h.port, "binlog.000001", 4, heartbeat=0.5)
        replica.query("START SLAVE")
        while not slow.is_set():
            st = slave_status(replica)
            if st["Slave_IO_Running"] != "Yes" or st["Slave_SQL_Running"] != "Yes":
                bad.append(st)
            seen.append((st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"]))
            try:  # the bank invariant holds after every applied txn
                total, count = replica.query("SELECT SUM(balance), COUNT(*) FROM bank.accounts")[0]
                if count and int(total) != count * 1000:
                    bad.append(("bank", total, count))
            except Exception:  # noqa: BLE001 - the table comes with the first DDL
                pass
            time.sleep(0.02)
        t.join()
        assert "error" not in result, result
        st = wait_caught_up(replica, *end_of(out), timeout=60)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
        assert bad == []
        # It followed while the build ran: several distinct positions over several files, not one jump.
        assert len(set(seen)) >= 5 and len({f for f, _ in seen}) >= 2, seen
        assert len(index(out)) >= 3
        assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
        replica.query("STOP SLAVE")
