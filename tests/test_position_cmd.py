"""``gbinlog position``: the file:pos (and GTID) to start a consumer from, by GTID
set, TSO and time — checked against the files themselves, and by starting python-mysql-replication at
the answer: it reads exactly the transactions after the ones the GTID set names."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from binlog import EventType, read_all
from dumper.server import ServerConfig, start_in_thread
from tests.test_build import run_cli
from tests.test_server_support import PASSWORD, USER, USERS

ROOT = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pos") / "g"
    run_cli("build", *[f"--dn={d}" for d in sorted((ROOT / "ddl-3dn").iterdir()) if d.is_dir()], f"--out={out}",
            "--max-file-size=24KB", "--no-progress", check=True)
    return out


def transactions(out: Path) -> list[tuple[str, int, int, str]]:
    """(file, start, gno, vtso) of every written transaction, from the files."""
    names = [ln.strip()[2:] for ln in (out / "binlog.index").read_text().splitlines()]
    txns, pending = [], None
    for name in names:
        for ev in read_all(out / name):
            if ev.header.type_code == EventType.GTID:
                pending = (name, ev.pos, ev.body.gno)
            elif ev.header.type_code == 29 and bytes(ev.raw[19:25]) == b"\x01CTS::":
                txns.append((*pending, bytes(ev.raw[25:79]).decode()))
    return txns


def position(out: Path, *args: str) -> dict:
    r = run_cli("position", str(out), *args, "--json", check=True)
    return json.loads(r.stdout)


@pytest.mark.slow
def test_by_gtid_set_tso_and_time(built):
    txns = transactions(built)
    uuid = read_all(built / "binlog.000001")[2].body.uuid
    for k in (1, 57, len(txns) // 2, len(txns) - 1):
        got = position(built, "--gtid", f"{uuid}:1-{k}")
        want = txns[k]                  # gno k + 1
        assert (got["file"], got["pos"], got["gtid"], got["vtso"]) == (want[0], want[1], f"{uuid}:{want[2]}", want[3])
    end = position(built, "--gtid", f"{uuid}:1-{len(txns)}")
    assert end["at_end"] and end["file"] == txns[-1][0]
    for i in (0, 10, len(txns) // 3, len(txns) - 1):
        tso = int(txns[i][3][:19])
        got = position(built, "--tso", str(tso))
        first = next(t for t in txns if int(t[3][:19]) >= tso)
        assert (got["file"], got["pos"]) == (first[0], first[1])
        when = dt.datetime.fromtimestamp((tso >> 22) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        at_ms = position(built, "--time", when)
        first_ms = next(t for t in txns if int(t[3][:19]) >= (tso >> 22) << 22)
        assert (at_ms["file"], at_ms["pos"]) == (first_ms[0], first_ms[1])
    assert position(built, "--time", "2999-01-01 00:00:00")["at_end"]


def test_a_consumer_started_at_the_answer_reads_exactly_what_the_set_lacks(built):
    txns = transactions(built)
    uuid = read_all(built / "binlog.000001")[2].body.uuid
    k = 150
    got = position(built, "--gtid", f"{uuid}:1-{k}")
    with start_in_thread(ServerConfig(dir=built, users=USERS)) as h:
        stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": h.port, "user": USER,
                                                         "password": PASSWORD},
                                    server_id=416, blocking=False, log_file=got["file"], log_pos=got["pos"],
                                    resume_stream=True, only_events=[GtidEvent])
        gnos = [int(ev.gtid.rsplit(":", 1)[1]) for ev in stream]
        stream.close()
    assert gnos == list(range(k + 1, len(txns) + 1))


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_1(built, tmp_path):
    uuid = read_all(built / "binlog.000001")[2].body.uuid
    for args, text in [(["--gtid", "nope"], "malformed GTID set"),
                       (["--gtid", f"{uuid}:1-100000"], "more GTIDs than the source"),
                       (["--tso", "x"], "expected a number"), (["--time", "yesterday"], "expected 'YYYY-MM-DD")]:
        r = run_cli("position", str(built), *args)
        assert r.returncode == 1 and text in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    r = run_cli("position", str(tmp_path), "--tso", "1")
    assert r.returncode == 1 and "no binlog files" in r.stderr
    r = run_cli("position", str(built), "--tso", "1", "--time", "2024-01-01 00:00:00")
    assert r.returncode == 2 and "exactly one" in r.stderr
