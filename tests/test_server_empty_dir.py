"""A replica that attaches before the first global binlog file exists waits for it (heartbeats, no
ERR 1236 "Binary log is not open"), then replicates: ``gbinlog serve`` on an empty directory, a real
MariaDB replica at binlog.000001:4, then ``gbinlog build`` writes a fixture into that directory and the
replica ends with the truth's tables."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dumper.server import ServerConfig, start_in_thread
from tests.mariadb import MariaDB
from tests.test_server_support import (
    PASSWORD,
    USER,
    RawClient,
    change_master,
    header,
    replica_checksums,
    slave_status,
    start_serve_process,
    truth_checksums,
    wait_caught_up,
    write_sample_binlog,
)

ROOT = Path(__file__).resolve().parents[1]
EXE = os.path.join(os.path.dirname(sys.executable), "gbinlog")
FIXTURE = "bank-4dn"
HEARTBEAT_TYPE = 27


def start_serve(directory: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    return start_serve_process(directory, USER, PASSWORD, *extra)


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    return err


def test_a_dump_of_an_empty_directory_gets_heartbeats_then_the_first_file(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    proc, port = start_serve(served, "-v")
    try:
        client = RawClient(port)
        client.query("SET @master_binlog_checksum = 'CRC32'")
        client.query("SET @master_heartbeat_period = 100000000")      # 0.1 s
        events = client.dump("binlog.000001", 4, flags=0, server_id=5)
        beats = [header(next(events)) for _ in range(3)]
        assert [(h[1], h[4]) for h in beats] == [(HEARTBEAT_TYPE, 4)] * 3
        sample = write_sample_binlog(served, txns=2, files=1)
        first = header(next(events))
        while first[1] == HEARTBEAT_TYPE:
            first = header(next(events))
        rotate = first
        assert (rotate[1], rotate[4]) == (4, 0)          # the fake ROTATE to binlog.000001 …
        fde = header(next(events))
        assert fde[1] == 15                               # … and its FORMAT_DESCRIPTION
        assert sample.files == ["binlog.000001"]
        client.close()
    finally:
        err = stop(proc)
    assert "waits for the first binlog file of" in err and "the first binlog file appeared after" in err


@pytest.mark.parametrize("by_gtid", [False, True])
def test_a_client_that_leaves_while_waiting_for_the_first_file_ends_its_session(tmp_path, by_gtid):
    with start_in_thread(ServerConfig(dir=tmp_path, users={USER: PASSWORD})) as handle:
        client = RawClient(handle.port)
        if by_gtid:
            client.command(b"\x1e" + struct.pack("<HII", 0, 5, 0) + struct.pack("<QI", 4, 8) + b"\0" * 8)
        else:
            client.command(b"\x12" + struct.pack("<IHI", 4, 0, 5) + b"binlog.000001")
        deadline = time.monotonic() + 10
        while not handle.server.connections() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        assert len(handle.server.connections()) == 1          # it waits, connected
        client.close()
        while handle.server.connections() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert handle.server.connections() == []               # its session ended with it


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    server = MariaDB.start(tmp_path_factory.mktemp("replica"), server_id=2)
    yield server
    server.stop()


@pytest.mark.slow
def test_mariadb_replica_attached_to_an_empty_directory_waits_then_replicates_to_the_truth(replica, tmp_path):
    truth = json.loads((ROOT / "fixtures" / FIXTURE / "truth.json").read_text())
    served = tmp_path / "global"
    served.mkdir()
    proc, port = start_serve(served)
    try:
        replica.query("STOP SLAVE")
        replica.query("RESET SLAVE ALL")
        change_master(replica, port, "binlog.000001", 4, heartbeat=0.2)
        replica.query("START SLAVE")
        time.sleep(3)     # the IO thread is connected and waits: heartbeats, no error
        st = slave_status(replica)
        assert (st["Slave_IO_Running"], st["Last_IO_Errno"], st["Last_IO_Error"]) == ("Yes", 0, ""), st
        beats = int(replica.query("SHOW GLOBAL STATUS LIKE 'Slave_received_heartbeats'")[0][1])
        assert beats >= 5, beats
        dns = sorted(str(p) for p in (ROOT / "fixtures" / FIXTURE).iterdir() if p.is_dir())
        built = subprocess.run([EXE, "build", *[f"--dn={d}" for d in dns], f"--out={served}",
                                "--max-file-size=32768"], capture_output=True, text=True, timeout=300)
        assert built.returncode == 0, built.stderr
        files = [line.strip().rsplit("/", 1)[-1] for line in (served / "binlog.index").read_text().splitlines()]
        assert len(files) >= 2, files
        st = wait_caught_up(replica, files[-1], (served / files[-1]).stat().st_size, timeout=120)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
        assert replica_checksums(replica, truth) == truth_checksums(replica, truth)
        replica.query("STOP SLAVE")
    finally:
        stop(proc)
