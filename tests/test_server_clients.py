"""Real clients against the replication endpoint:
`mariadb-binlog --read-from-remote-server` (default and --stop-never) prints the same events as reading
the files locally — and exactly what it prints against a real MariaDB master serving the same files;
python-mysql-replication's BinLogStreamReader (blocking and not, resume_stream) reads every event with
the row values that were written."""

from __future__ import annotations

import re
import subprocess
import threading
import time

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import FormatDescriptionEvent, HeartbeatLogEvent, RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from binlog import read_all
from dumper.server import ServerConfig, start_in_thread
from tests.mariadb import MariaDB, _binary, mariadb_binlog
from tests.test_server_support import PASSWORD, USER, USERS, Grower, write_sample_binlog

CONN = {"host": "127.0.0.1", "user": USER, "passwd": PASSWORD}


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return write_sample_binlog(tmp_path_factory.mktemp("sample"), txns=45, files=3)


@pytest.fixture(scope="module")
def server(sample):
    handle = start_in_thread(ServerConfig(dir=sample.dir, users=USERS, server_id=1))
    yield handle
    handle.stop()


def remote_args(port: int) -> list[str]:
    return ["--read-from-remote-server", "-h127.0.0.1", f"-P{port}", f"-u{USER}", f"-p{PASSWORD}"]


def stop_never(port: int, first_file: str, until: str, timeout: float = 20) -> str:
    """Run `mariadb-binlog --stop-never` until its output contains ``until``, then stop it (it blocks)."""
    proc = subprocess.Popen([_binary("mariadb-binlog"), "--no-defaults", *remote_args(port), "--stop-never",
                             first_file], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = bytearray()
    done = threading.Event()

    def pump() -> None:
        while chunk := proc.stdout.read1(65536):
            out.extend(chunk)
            if until.encode() in out:
                done.set()
        done.set()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    done.wait(timeout)
    running = proc.poll() is None
    proc.terminate()
    t.join(5)
    proc.wait(5)
    assert running, f"--stop-never exited by itself: {proc.stderr.read().decode()}"
    text = out.decode("utf-8", "surrogateescape")
    assert until in text, f"--stop-never did not print {until!r} within {timeout} s"
    return text


def last_event_line(path) -> str:
    """What mariadb-binlog prints for the last event of ``path``: end position and CRC32 (unique)."""
    last = read_all(path)[-1]
    return f"end_log_pos {last.end_pos} CRC32 0x{int.from_bytes(last.raw[-4:], 'little'):08x}"


_EVENT_LINE = re.compile(r"^#\d{6} [ \d]\d:\d\d:\d\d server id .*$", re.M)
_BINLOG_BLOCK = re.compile(r"^BINLOG '\n(.*?)\n'", re.M | re.S)


def events_printed(text: str) -> tuple[list[str], list[str]]:
    """The event header lines (time, server id, end_log_pos, CRC, type, info) minus artificial ones
    (timestamp 0 = fake ROTATE), and the BINLOG base64 payloads, in order."""
    lines = [ln for ln in _EVENT_LINE.findall(text) if not ln.startswith("#700101")]
    return lines, _BINLOG_BLOCK.findall(text)


def test_mariadb_binlog_remote_default_equals_local_read_for_every_file(server, sample):
    for name in sample.files:
        local = mariadb_binlog(str(sample.dir / name))
        remote = mariadb_binlog(*remote_args(server.port), name)
        assert remote == local, name
        assert local.count("Write_rows") + local.count("Update_rows") + local.count("Delete_rows") > 5
    # Verbose row decoding too, for a mid-file start (patched FDE).
    events = read_all(sample.dir / sample.files[1])
    start = events[6].pos
    args = ("-v", "--base64-output=DECODE-ROWS", f"--start-position={start}")
    local = mariadb_binlog(*args, str(sample.dir / sample.files[1]))
    remote = mariadb_binlog(*args, *remote_args(server.port), sample.files[1])
    # Remote, the patched FDE (log_pos 0) is printed; locally it is read silently. Everything else equal.
    got_lines, _ = events_printed(remote)
    assert "Start: binlog v 4" in got_lines[0] and "end_log_pos 0 " in got_lines[0]
    assert got_lines[1:] == events_printed(local)[0]
    rows = [ln for ln in local.splitlines() if ln.startswith("###")]
    assert [ln for ln in remote.splitlines() if ln.startswith("###")] == rows
    assert "### INSERT INTO `sample`.`t`" in rows


def test_mariadb_binlog_stop_never_prints_every_event_of_every_file(server, sample):
    out = stop_never(server.port, sample.files[0], last_event_line(sample.dir / sample.files[-1]))
    local = mariadb_binlog(*(str(sample.dir / f) for f in sample.files))
    got_lines, got_blocks = events_printed(out)
    want_lines, want_blocks = events_printed(local)
    assert got_lines == want_lines
    assert got_blocks == want_blocks
    assert len(want_lines) == sum(len(read_all(sample.dir / f)) for f in sample.files)


def test_mariadb_binlog_output_is_identical_to_a_real_master_serving_the_same_files(tmp_path):
    master = MariaDB.start(tmp_path / "master", log_bin=True)
    try:
        master.run_sql(
            f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';"
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{USER}'@'%';"
            "CREATE DATABASE d1; CREATE TABLE d1.t (id INT PRIMARY KEY, v VARCHAR(20), d DATETIME(3));"
            "INSERT INTO d1.t VALUES (1,'a','2020-01-02 03:04:05.678'),(2,'b',NULL);"
            "UPDATE d1.t SET v='c' WHERE id=1; FLUSH BINARY LOGS; DELETE FROM d1.t WHERE id=2;"
            "ALTER TABLE d1.t ADD COLUMN w INT DEFAULT 7; FLUSH BINARY LOGS;"
            "INSERT INTO d1.t (id, v) VALUES (9, 'z');")
        files = [p.name for p in master.binlog_files()]
        assert len(files) == 3
        with start_in_thread(ServerConfig(dir=master.datadir, users=USERS, server_id=1)) as ours:
            for name in files:
                real = mariadb_binlog(*remote_args(master.port), name)
                assert mariadb_binlog(*remote_args(ours.port), name) == real
                if name != files[-1]:  # the newest is in use: only a local read warns about that
                    assert real == mariadb_binlog(str(master.datadir / name))
                # A mid-file start: the real master's patched FDE and ours print the same.
                mid = f"--start-position={read_all(master.datadir / name)[3].pos}"
                real = mariadb_binlog("-v", mid, *remote_args(master.port), name)
                assert mariadb_binlog("-v", mid, *remote_args(ours.port), name) == real
            until = last_event_line(master.datadir / files[-1])
            real = stop_never(master.port, files[0], until)
            assert stop_never(ours.port, files[0], until) == real
            assert "INSERT INTO d1.t (id, v) VALUES (9, 'z')" in real or "Write_rows" in real
    finally:
        master.stop()


# -- python-mysql-replication -------------------------------------------------------------------------

ROW_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


def row_changes(events) -> list[tuple[str, list]]:
    """The (kind, values) list of row changes in the order pmr gave them, values in column order."""
    out = []
    for ev in events:
        for row in ev.rows:
            if isinstance(ev, UpdateRowsEvent):
                out.append(("update", [pmr_values(row["before_values"]), pmr_values(row["after_values"])]))
            else:
                out.append(("insert" if isinstance(ev, WriteRowsEvent) else "delete", pmr_values(row["values"])))
    return out


def pmr_values(values: dict) -> list:
    v, b = values["v"], values["b"]
    # pmr gives an empty BLOB as '' (str) but every other BLOB as bytes.
    return [values["id"], v.encode() if isinstance(v, str) else v, values["n"], b"" if b == "" else b]


def test_pmr_non_blocking_reads_every_event_with_the_written_row_values(server, sample):
    stream = BinLogStreamReader(connection_settings={**CONN, "port": server.port}, server_id=301,
                                blocking=False, log_file=sample.files[0], log_pos=4)
    events = list(stream)
    stream.close()
    # Every event of every file, in order: pmr yields the fake ROTATE, the FDE and each file event.
    want = []
    for name in sample.files:
        file_events = read_all(sample.dir / name)
        want.append((4, 0))
        want += [(e.h[1], e.h[4]) for e in file_events]
    assert [(e.event_type, e.packet.log_pos) for e in events] == want
    assert row_changes([e for e in events if type(e) in ROW_EVENTS]) == sample.changes
    assert [e.next_binlog for e in events if isinstance(e, RotateEvent)][::2] == sample.files


def test_pmr_resume_stream_from_a_saved_position_mid_file(server, sample):
    first = BinLogStreamReader(connection_settings={**CONN, "port": server.port}, server_id=302,
                               blocking=False, log_file=sample.files[0], log_pos=4, only_events=ROW_EVENTS)
    head = []
    for ev in first:
        head.append(ev)
        if len(head) == 20:
            break
    saved = (first.log_file, first.log_pos)
    first.close()
    assert saved[0] == sample.files[1] and saved[1] > 4  # mid-file in the second file
    rest = BinLogStreamReader(connection_settings={**CONN, "port": server.port}, server_id=303,
                              blocking=False, resume_stream=True, log_file=saved[0], log_pos=saved[1],
                              only_events=ROW_EVENTS + [FormatDescriptionEvent])
    tail = list(rest)
    rest.close()
    # The patched FDE (log_pos 0) comes first; the next file's FDE keeps its position.
    assert [(type(e), e.packet.log_pos) for e in tail if isinstance(e, FormatDescriptionEvent)] == [
        (FormatDescriptionEvent, 0), (FormatDescriptionEvent, read_all(sample.dir / sample.files[2])[0].h[4])]
    assert row_changes(head) + row_changes([e for e in tail if type(e) in ROW_EVENTS]) == sample.changes


def test_pmr_blocking_follows_a_growing_directory_and_gets_heartbeats(tmp_path):
    src = write_sample_binlog(tmp_path / "src", txns=45, files=3)
    live = tmp_path / "live"
    grower = Grower(src.dir, live, steps=60)
    grower.advance()  # the first file and the index exist before the reader asks for them
    with start_in_thread(ServerConfig(dir=live, users=USERS, poll_interval=0.02)) as h:
        t = threading.Thread(target=grower.run, kwargs={"delay": 0.01})
        t.start()
        stream = BinLogStreamReader(connection_settings={**CONN, "port": h.port}, server_id=304,
                                    blocking=True, log_file="binlog.000001", log_pos=4,
                                    slave_heartbeat=0.2, only_events=ROW_EVENTS + [HeartbeatLogEvent])
        rows, beats = [], []
        deadline = time.monotonic() + 30
        for ev in stream:
            if isinstance(ev, HeartbeatLogEvent):
                beats.append(ev)
                if len(rows) == len(src.changes) and len(beats) >= 2:
                    break
            else:
                rows += row_changes([ev])
            assert time.monotonic() < deadline, "blocking reader stalled"
        stream.close()
        t.join()
    assert rows == src.changes
    last = read_all(src.dir / src.files[-1])[-1]
    assert beats[-1].ident == src.files[-1] and beats[-1].packet.log_pos == last.end_pos


def test_global_binlog_through_the_endpoint_pmr_rows_equal_the_truth_and_mariadb_binlog_equals_local(tmp_path):
    """The global binlog of bank-4dn (built by `gbinlog build`), read through the endpoint by pmr: every
    row change, in order, equals the truth's logical changes. The global binlog's table maps carry the
    logical column names (binlog_row_metadata=FULL), so pmr names every column as the table does."""
    import json
    from pathlib import Path

    from gbinlog.local_engine import Settings, build

    root = Path(__file__).resolve().parents[1] / "fixtures" / "bank-4dn"
    truth = json.loads((root / "truth.json").read_text())
    out = tmp_path / "global"
    build(sorted(p for p in root.iterdir() if p.is_dir()), out, settings=Settings(max_file_size=32 << 10))
    cols = [c["name"] for c in truth["tables"]["bank.accounts"]["columns"]]
    want = []
    for txn in truth["txns"]:
        for change in txn.get("changes", []):
            if (change["db"], change["table"]) == ("bank", "accounts"):
                want += [(change["op"], row) for row in change["rows"]]
    with start_in_thread(ServerConfig(dir=out, users=USERS)) as h:
        stream = BinLogStreamReader(connection_settings={**CONN, "port": h.port}, server_id=305,
                                    blocking=False, log_file="binlog.000001", log_pos=4,
                                    only_events=ROW_EVENTS, only_schemas=["bank"], only_tables=["accounts"])
        got = []
        for ev in stream:
            assert (ev.schema, ev.table) == ("bank", "accounts")
            for row in ev.rows:
                if isinstance(ev, UpdateRowsEvent):
                    got.append(("update", [[row[k][c] for c in cols] for k in ("before_values", "after_values")]))
                else:
                    got.append(("insert" if isinstance(ev, WriteRowsEvent) else "delete",
                                [row["values"][c] for c in cols]))
        stream.close()
        # mariadb-binlog prints the same for every global binlog file, remote and local.
        files = [ln.strip()[2:] for ln in (out / "binlog.index").read_text().splitlines()]
        assert len(files) >= 2
        for name in files:
            assert mariadb_binlog(*remote_args(h.port), name) == mariadb_binlog(str(out / name))
    assert len(want) > 500
    assert got == want
