"""``gbinlog run`` with ``[streams] count = 3`` (record hashing) on a live 4-DN bank cluster read over
the replication protocol: killed with SIGKILL mid-run and started again; once the cluster is done
a ``gbinlog build`` finishes the output (a live merge holds its last transactions), and every
stream is byte-identical to the batch build's stream. A python-mysql-replication client per
stream, logged in as the user bound to it, reads its stream before the kill and resumes with GTID
auto-position after it: every GTID of the stream exactly once, in order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import GtidEvent

from dumper.verify import verify
from gbinlog.replica import free_port
from tests.test_live_support import DN_PASSWORD, DN_USER, ROOT, Cluster, Service, wait_for

pytestmark = pytest.mark.slow
DNS = ["dn0", "dn1", "dn2", "dn3"]
N = 3
PASSWORD = "stream-pw"


def bound(k: int) -> str:
    return f"group1_stream_{k}_cdc_user"


def write_run_config(path: Path, out: Path, cluster: Cluster, port: int, extra: str = "") -> Path:
    users = ", ".join(f'{{ name = "{bound(k)}", password = "{PASSWORD}" }}' for k in range(N))
    text = (f'[output]\ndir = "{out}"\nrotate_size = "256KB"\n\n'
            f'[server]\nport = {port}\nusers = [{{ name = "repl", password = "{PASSWORD}" }}, {users}]\n\n'
            '[source]\nbackoff_initial_ms = 50\nbackoff_max_ms = 500\n\n'
            f'[streams]\ncount = {N}\nhash = "record"\n\n{extra}\n')
    for dn in DNS:
        text += (f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {cluster.dn_port(int(dn[2:]))}\n'
                 f'user = "{DN_USER}"\npassword = "{DN_PASSWORD}"\n\n')
    path.write_text(text)
    return path


def read_gtids(port: int, k: int, **where) -> list[str]:
    stream = BinLogStreamReader(connection_settings={"host": "127.0.0.1", "port": port, "user": bound(k),
                                                     "password": PASSWORD},
                                server_id=500 + k, blocking=False, only_events=[GtidEvent], **where)
    try:
        return [ev.gtid for ev in stream]
    finally:
        stream.close()


def stream_uuid(port: int, k: int) -> str:
    with pymysql.connect(host="127.0.0.1", port=port, user=bound(k), password=PASSWORD) as c, c.cursor() as cur:
        cur.execute("SELECT @@server_uuid")
        return cur.fetchone()[0]


def status(out: Path) -> dict:
    try:
        return json.loads((out / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def stream_bytes(out: Path) -> dict[str, bytes]:
    return {f"{p.parent.name}/{p.name}": p.read_bytes() for p in sorted(out.glob("stream*/group1_stream_*"))}


def test_run_into_three_streams_killed_resumes_every_stream_byte_for_byte(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=10, tps=150, seed=34)
    out = tmp_path / "out"
    port = free_port()
    svc = Service(write_run_config(tmp_path / "run.toml", out, cluster, port), tmp_path / "run.log")
    first: list[list[str]] = []
    try:
        svc.start()
        wait_for(lambda: status(out).get("written", 0) > 300, 40, "the run to write transactions")
        first = [read_gtids(port, k, log_file=f"group1_stream_{k}_binlog.000001", log_pos=4) for k in range(N)]
        assert all(first), [len(g) for g in first]
        svc.kill9()
        svc.start()
        truth = cluster.wait_done(90)
        # the run stands still once it wrote all a live merge lets out
        last = [None]

        def still() -> bool:
            now = status(out).get("written")
            done, last[0] = now is not None and now == last[0], now
            return done
        wait_for(still, 60, "the run to stand still", interval=2.0)
        for k in range(N):
            uuid = stream_uuid(port, k)
            gnos = [int(g.rsplit(":", 1)[1]) for g in first[k]]
            assert all(g.startswith(uuid + ":") for g in first[k]) and gnos == list(range(1, len(gnos) + 1))
            resumed = read_gtids(port, k, auto_position=f"{uuid}:1-{len(gnos)}")
            whole = read_gtids(port, k, log_file=f"group1_stream_{k}_binlog.000001", log_pos=4)
            assert first[k] + resumed == whole, (k, len(first[k]), len(resumed), len(whole))
        assert svc.terminate() == 0, svc.log_text()[-3000:]
    finally:
        svc.ensure_stopped()
        cluster.close()
    assert svc.starts == 2 and "--- start 2" in svc.log_text()
    assert truth["txns"]

    def build(into: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *[f"--dn={cluster.dir / dn}" for dn in DNS],
                               f"--out={into}", "--max-file-size=256KB", "--streams=3", "--stream-hash=record",
                               "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)

    ref = tmp_path / "ref"
    r = build(ref)
    assert r.returncode == 0, r.stderr
    run_part = stream_bytes(out)
    reference = stream_bytes(ref)
    # what the run wrote is the batch build's streams up to where each one ends
    for name, data in run_part.items():
        if name.endswith(".index"):
            continue
        assert reference[name][:len(data)] == data, name
    r = build(out)                     # the build finishes what the live merge held back
    assert r.returncode == 0, r.stderr
    assert stream_bytes(out) == reference
    report = verify(out, cluster.dir / "truth.json")
    assert report.ok and report.truth_checked, report.errors[:3]


def test_two_ha_members_write_and_serve_the_same_stream_group(tmp_path):
    """Two members of an HA group (SQLite lease store) each write the stream group from the DNs: one
    leader; the follower serves (its lag in bytes from the streams' positions); once the load ends
    both hold the same bytes in every stream, and a bound user's GTID dump from either is the same."""
    from tests.test_ha_run import role_of, wait_for_roles

    cluster = Cluster(tmp_path, "bank", 4, duration=8, tps=150, seed=35)
    store = f"sqlite:///{tmp_path / 'lease.db'}"
    members = {}
    try:
        for name in ("m1", "m2"):
            port, metrics = free_port(), free_port()
            extra = (f'[metrics]\nport = {metrics}\n\n[ha]\nmember = "{name}"\nlease_ms = 1500\n'
                     f'store = "{store}"\n')
            cfg = write_run_config(tmp_path / f"{name}.toml", tmp_path / name, cluster, port, extra)
            svc = Service(cfg, tmp_path / f"{name}.log")
            svc.start()
            members[name] = (svc, port, metrics)
        wait_for_roles([(svc, metrics) for svc, _, metrics in members.values()])
        roles = wait_for(lambda: (lambda r: r if sorted(r.values()) == [0, 1] else None)(
            {n: role_of(m[2]) for n, m in members.items()}), 20, "one leader and one follower")
        cluster.wait_done(90)
        outs = [tmp_path / n for n in members]
        wait_for(lambda: stream_bytes(outs[0]) and stream_bytes(outs[0]) == stream_bytes(outs[1]), 60,
                 "both members' streams to hold the same bytes", interval=1.0)
        leader = next(n for n, r in roles.items() if r == 1)
        follower = next(n for n, r in roles.items() if r == 0)
        for k in range(N):
            want = read_gtids(members[leader][1], k, log_file=f"group1_stream_{k}_binlog.000001", log_pos=4)
            assert want and read_gtids(members[follower][1], k, log_file=f"group1_stream_{k}_binlog.000001",
                                       log_pos=4) == want
        st = json.loads((tmp_path / follower / "status.json").read_text())["ha"]
        assert st["role"] == "follower" and st["leader"] == leader and st["lag_bytes"] == 0, st
        assert {r["file"] for r in st["members"]} == {"group1.000001"}
    finally:
        for svc, _, _ in members.values():
            svc.ensure_stopped()
        cluster.close()
