"""A real MariaDB 10.11 replica attached to the endpoint with CHANGE MASTER, for
binlogs other than the global one: files written by a real MariaDB master while it runs, and a MySQL
5.7-style binlog written by BinlogWriter. The replica ends with the source's tables (checksums as
polardbx-cdc's DataConsistencyTest computes them), its threads stay Yes, Seconds_Behind_Master reaches 0,
and it restarts from a mid-file position after STOP SLAVE."""

from __future__ import annotations

import time

import pytest

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from tests.mariadb import MariaDB
from tests.test_server_support import (
    USERS,
    change_master,
    slave_status,
    table_checksum,
    wait_caught_up,
    write_sample_binlog,
)

WORKLOAD_1 = """
CREATE DATABASE shop;
CREATE TABLE shop.item (id INT PRIMARY KEY, name VARCHAR(40) CHARACTER SET utf8mb4, price DECIMAL(10,2),
  at DATETIME(6), tags SET('a','b','c'), state ENUM('new','old'), raw VARBINARY(16), note TEXT);
CREATE TABLE shop.log (n BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, item INT, t TIMESTAMP(3) NULL, f DOUBLE);
INSERT INTO shop.item VALUES (1, 'Äpfel', 1.25, '2024-02-29 12:34:56.123456', 'a,c', 'new', 0x00ff10, 'x'),
  (2, 'pears', NULL, NULL, '', 'old', NULL, REPEAT('long text ', 300)), (3, '梨', 99999999.99, '1000-01-01', 'b', NULL, '', NULL);
BEGIN; INSERT INTO shop.log (item, t, f) VALUES (1, '2020-01-01 00:00:00.5', 1e300), (2, NULL, -0.0);
UPDATE shop.item SET price = price * 2 WHERE id = 1; COMMIT;
FLUSH BINARY LOGS;
ALTER TABLE shop.item ADD COLUMN stock INT NOT NULL DEFAULT 5 AFTER price;
UPDATE shop.item SET stock = id * 10, note = CONCAT(IFNULL(note, ''), '!');
DELETE FROM shop.item WHERE id = 2;
CREATE TABLE shop.tmp (k INT PRIMARY KEY);
INSERT INTO shop.tmp VALUES (1), (2);
RENAME TABLE shop.tmp TO shop.kept;
"""

WORKLOAD_2 = """
INSERT INTO shop.item (id, name, price) VALUES (10, 'later', 3.5);
BEGIN; UPDATE shop.log SET f = f / 3; INSERT INTO shop.log (item) VALUES (10); COMMIT;
FLUSH BINARY LOGS;
DROP TABLE shop.kept;
INSERT INTO shop.item (id, name) SELECT id + 100, CONCAT(name, '+') FROM shop.item;
"""


def checksums(server, tables) -> dict:
    return {t: table_checksum(server, "shop", t) for t in tables}


def newest_position(master) -> tuple[str, int]:
    last = master.binlog_files()[-1]
    return last.name, read_all(last)[-1].end_pos


@pytest.mark.slow
def test_replica_of_a_live_mariadb_masters_binlogs_through_the_endpoint(tmp_path):
    master = MariaDB.start(tmp_path / "master", log_bin=True)
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    try:
        master.run_sql(WORKLOAD_1)
        cfg = ServerConfig(dir=master.datadir, users=USERS, server_id=100, poll_interval=0.02)
        with start_in_thread(cfg) as h:
            change_master(replica, h.port, "mysql-bin.000001", 4, heartbeat=0.2)
            replica.query("START SLAVE")
            st = wait_caught_up(replica, *newest_position(master))
            assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
            tables = ["item", "log", "kept"]
            assert checksums(replica, tables) == checksums(master, tables)
            assert checksums(master, tables)["item"][0] == 2

            # Live: the master keeps writing into the served directory.
            master.query("INSERT INTO shop.item (id, name) VALUES (50, 'live')")
            st = wait_caught_up(replica, *newest_position(master))
            assert replica.query("SELECT name FROM shop.item WHERE id = 50") == [("live",)]

            # Idle: heartbeats at the replica's period keep the link up.
            time.sleep(0.7)
            beats = int(replica.query("SHOW GLOBAL STATUS LIKE 'Slave_received_heartbeats'")[0][1])
            assert beats >= 2
            assert slave_status(replica)["Slave_IO_Running"] == "Yes"

            # STOP SLAVE, more writes (two more files), START SLAVE: the dump resumes mid-file.
            replica.query("STOP SLAVE")
            stopped = slave_status(replica)
            resume = (stopped["Master_Log_File"], stopped["Read_Master_Log_Pos"])
            assert resume[1] > 4
            master.run_sql(WORKLOAD_2)
            replica.query("START SLAVE")
            deadline = time.monotonic() + 10
            while not h.server.dumps() and time.monotonic() < deadline:
                time.sleep(0.02)
            req = h.server.dumps()[0].request
            assert (req.file, req.position) == resume
            st = wait_caught_up(replica, *newest_position(master))
            assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
            assert st["Seconds_Behind_Master"] == 0
            assert checksums(replica, ["item", "log"]) == checksums(master, ["item", "log"])
            assert replica.query("SHOW TABLES FROM shop") == master.query("SHOW TABLES FROM shop")
            replica.query("STOP SLAVE")
    finally:
        replica.stop()
        master.stop()


def test_replica_applies_a_mysql57_style_binlog_written_by_binlog_writer(tmp_path):
    sample = write_sample_binlog(tmp_path / "bl", txns=80, files=3)
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    try:
        with start_in_thread(ServerConfig(dir=sample.dir, users=USERS, server_id=100)) as h:
            # Stop half-way through file 2 (after a commit), then CHANGE MASTER to exactly that
            # position: the new dump starts mid-file with a patched FDE; no txn lost or doubled.
            xids = [e for e in read_all(sample.dir / sample.files[1]) if e.h[1] == 16]
            mid = xids[len(xids) // 2].end_pos
            change_master(replica, h.port, sample.files[0], 4)
            replica.query(f"START SLAVE UNTIL MASTER_LOG_FILE='{sample.files[1]}', MASTER_LOG_POS={mid}")
            deadline = time.monotonic() + 20
            while slave_status(replica)["Slave_SQL_Running"] == "Yes" and time.monotonic() < deadline:
                time.sleep(0.05)
            st = slave_status(replica)
            assert (st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"]) == (sample.files[1], mid)
            replica.query("STOP SLAVE")
            change_master(replica, h.port, sample.files[1], mid)
            replica.query("START SLAVE")
            last = read_all(sample.dir / sample.files[-1])[-1]
            st = wait_caught_up(replica, sample.files[-1], last.end_pos)
            assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
            got = replica.query("SELECT id, v, n, b FROM sample.t ORDER BY id")
            want = [(i, v.decode(), n, b) for i, v, n, b in (sample.final[k] for k in sorted(sample.final))]
            assert got == want
            replica.query("STOP SLAVE")
    finally:
        replica.stop()
