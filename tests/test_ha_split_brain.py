"""Split brain: three ``gbinlog run`` members with retention (the leader
purges and records its horizon, the others follow it) on a live 4-DN bank cluster and a MariaDB
lease store. The leader is SIGSTOPped past its lease: a follower becomes leader with the next epoch,
purges and records its horizon under that epoch; the old leader is SIGCONTed: it is a follower at
once (its fence ran out while it was stopped: never two leaders at any sample), never records a
horizon again and never purges past the new leader's — it only follows it — while its own copy goes
on. At the end no member's files diverge: each holds a run of ``gbinlog build``'s files,
byte-identical.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_ha_run import batch_build_files, files_of, role_of, wait_for_roles
from tests.test_live_support import (
    DN_PASSWORD,
    DN_USER,
    REPL_PASSWORD,
    REPL_USER,
    Cluster,
    Service,
    wait_for,
)

pytestmark = pytest.mark.slow

DURATION = 24
MEMBERS = ("m1", "m2", "m3")
DNS = ("dn0", "dn1", "dn2", "dn3")
LEASE_MS = 1500


def member_config(path, out, cluster, name, store, metrics_port):
    lines = [f'[output]\ndir = "{out}"\nrotate_size = "16KB"\nmax_total_size = "48KB"\n',
             f'[server]\nport = {free_port()}\nusers = [{{ name = "{REPL_USER}", password = "{REPL_PASSWORD}" }}]\n',
             f"[metrics]\nport = {metrics_port}\n", "[source]\nbackoff_initial_ms = 50\nbackoff_max_ms = 500\n",
             f'[ha]\nmember = "{name}"\nlease_ms = {LEASE_MS}\nstore = "{store}"\n']
    for dn in DNS:
        lines.append(f'[[dn]]\nid = "{dn}"\nhost = "127.0.0.1"\nport = {cluster.dn_port(int(dn[2:]))}\n'
                     f'user = "{DN_USER}"\npassword = "{DN_PASSWORD}"\n')
    path.write_text("\n".join(lines))
    return path


def first_file(out) -> str | None:
    try:
        return (out / "binlog.index").read_text().split()[0].rsplit("/", 1)[-1]
    except (OSError, IndexError):
        return None


def seq(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def horizon(meta) -> tuple[str, str, int]:
    keep_from, member, epoch = meta.query("SELECT keep_from, member, epoch FROM gbinlog_ha.gbinlog_ha_purge")[0]
    return keep_from, member, int(epoch)


def within_horizon(meta, out) -> bool:
    """The member's first file is not past the recorded horizon (read first: the horizon only rises)."""
    first = first_file(out)
    return first is None or seq(first) <= seq(horizon(meta)[0] or "binlog.000001")


def leaders(members) -> list[str]:
    return [n for n, (_, port, _) in members.items() if role_of(port) == 1]


def test_split_brain_sigstop_sigcont(tmp_path):
    cluster = Cluster(tmp_path, "bank", 4, duration=DURATION, tps=120)
    meta = MariaDB.start(tmp_path / "meta")
    store = f"mysql://root@/gbinlog_ha?unix_socket={meta.socket}"
    members: dict[str, tuple[Service, int, object]] = {}
    stopped_pid = None
    try:
        for name in MEMBERS:
            mport = free_port()
            cfg = member_config(tmp_path / f"{name}.toml", tmp_path / name, cluster, name, store, mport)
            svc = Service(cfg, tmp_path / f"{name}.log")
            svc.start()
            members[name] = (svc, mport, tmp_path / name)
        wait_for_roles([(m[0], m[1]) for m in members.values()])
        old = wait_for(lambda: (lambda ls: ls[0] if len(ls) == 1 else None)(leaders(members)), 10, "a leader")
        epoch = int(meta.query("SELECT epoch FROM gbinlog_ha.gbinlog_ha_lease")[0][0])
        old_svc, _, old_out = members[old]
        # the leader purges (retention) and records it; the followers purge no further than that
        wait_for(lambda: first_file(old_out) not in (None, "binlog.000001"), 30, "the leader's first purge", 0.2)
        wait_for(lambda: all(first_file(m[2]) for m in members.values()), 30, "every member's first file")
        assert horizon(meta)[1:] == (old, epoch)
        assert all(within_horizon(meta, m[2]) for n, m in members.items() if n != old)

        os.kill(old_svc.proc.pid, signal.SIGSTOP)
        stopped_pid = old_svc.proc.pid
        stopped_at = time.monotonic()
        kept = first_file(old_out)
        new = wait_for(lambda: (lambda ls: ls[0] if ls else None)([n for n in leaders(members) if n != old]),
                       10, "a new leader", 0.05)
        took = time.monotonic() - stopped_at
        holder, new_epoch = meta.query("SELECT holder, epoch FROM gbinlog_ha.gbinlog_ha_lease")[0]
        assert (holder, int(new_epoch)) == (new, epoch + 1)
        print(f"old leader {old} stopped; {new} leader (epoch {new_epoch}) after {took:.2f} s")
        wait_for(lambda: horizon(meta)[1:] == (new, epoch + 1), 30, "the new leader's first recorded purge", 0.2)

        os.kill(stopped_pid, signal.SIGCONT)
        stopped_pid = None
        samples, fenced = [], []
        end = time.monotonic() + 6
        while time.monotonic() < end:
            samples.append(leaders(members))
            fenced.append((within_horizon(meta, old_out), horizon(meta)[1:]))
            time.sleep(0.05)
        assert samples and all(s == [new] for s in samples), [s for s in samples if s != [new]][:5]
        # the old leader records nothing and purges nothing past the new leader's horizon
        assert all(f == (True, (new, epoch + 1)) for f in fenced), [f for f in fenced if f != (True, (new, epoch + 1))]
        print(f"old leader's first file: {kept} when stopped, {first_file(old_out)} now (following the new leader)")
        wait_for(lambda: f"HA member {old}: follower" in old_svc.log_text(), 10, "the step-down log line")
        cluster.wait_done(DURATION + 30)
        time.sleep(3)
        holder, last_epoch = meta.query("SELECT holder, epoch FROM gbinlog_ha.gbinlog_ha_lease")[0]
        if int(last_epoch) == int(new_epoch):      # the new leader's term still runs: only it recorded purges
            assert horizon(meta)[1:] == (new, epoch + 1) and within_horizon(meta, old_out)
        # the old leader first: once the new leader releases the lease on its way out, any member may
        # legitimately take over and purge
        for svc, *_ in sorted(members.values(), key=lambda m: m[0] is not old_svc):
            assert svc.terminate() == 0, svc.log_text()[-3000:]
    finally:
        if stopped_pid is not None:
            os.kill(stopped_pid, signal.SIGCONT)
        for svc, *_ in members.values():
            svc.ensure_stopped()
        cluster.close()
        meta.stop()
    want = batch_build_files([cluster.dir / d for d in DNS], tmp_path / "batch", "16KB")
    names = list(want)
    for name in MEMBERS:
        got = files_of(tmp_path / name)
        assert got, name
        start = names.index(next(iter(got)))
        assert list(got) == names[start:start + len(got)], name      # a run of the build's files
        for f, data in got.items():
            assert data == want[f], (name, f)
        assert list(got)[-1] == names[-1], name                     # and to the end
