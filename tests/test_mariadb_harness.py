"""The throwaway MariaDB starts, answers, writes a binlog our reader parses, and stops by pid."""

import os

from binlog import EventType, read_events


def test_throwaway_server_lifecycle(mariadb_binlogged):
    srv = mariadb_binlogged
    assert srv.query("SELECT 1 + 1") == [(2,)]
    srv.run_sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY); INSERT INTO d.t VALUES (7);")
    assert srv.query("SELECT id FROM d.t") == [(7,)]
    srv.query("FLUSH BINARY LOGS")
    files = srv.binlog_files()
    assert len(files) == 2
    types = [ev.type_code for ev in read_events(files[0])]
    assert types[0] == EventType.FORMAT_DESCRIPTION
    assert EventType.TABLE_MAP in types
    assert EventType.WRITE_ROWS_V1 in types or EventType.WRITE_ROWS in types
    assert types[-1] == EventType.ROTATE
    srv.stop()
    try:
        os.kill(srv.pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
