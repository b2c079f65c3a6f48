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


def test_template_datadir_removed_when_the_run_ends():
    """The ~114 MB template made by mariadb-install-db goes when the process that made it exits."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", "from tests.mariadb import _template_datadir; "
                        "p = _template_datadir(); print(p); assert (p / 'mysql').is_dir()"],
                       cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    made = Path(r.stdout.strip())
    assert made.name == "data" and not made.parent.exists()
