"""``[ha]`` in cluster.toml: the keys, their one-line errors, the status lines, the lag in
bytes between two members' positions, and the retention gate (only the leader purges)."""

from __future__ import annotations

import pytest

from dumper.server import retention
from gbinlog.config import ConfigError, from_dict
from gbinlog.ha import bytes_behind, format_ha, output_position, settings_of

BASE = {"output": {"dir": "/tmp/out"}, "server": {"port": 0}, "dn": [{"id": "dn0", "dir": "/tmp/dn0"}]}


def cfg(**ha):
    data = dict(BASE, ha=ha) if ha else dict(BASE)
    return from_dict(data)


def test_ha_keys_and_defaults():
    assert not cfg().ha.member
    c = cfg(member="m1", store="sqlite:///tmp/ha.db", address="10.0.0.5:3307")
    assert (c.ha.member, c.ha.lease_ms, c.ha.store) == ("m1", 3000, "sqlite:///tmp/ha.db")
    s = settings_of(c, 3307)
    assert (s.member, s.address, s.lease_ms, s.store) == ("m1", "10.0.0.5:3307", 3000, "sqlite:///tmp/ha.db")
    c = from_dict(dict(BASE, metadb="mysql://u:p@db:3306/meta", ha={"member": "m2", "address": "h:1"}))
    assert settings_of(c, None).store == "mysql://u:p@db:3306/meta"     # the meta store by default


@pytest.mark.parametrize("ha, message", [
    ({"lease_ms": 2000}, "ha.member: required when [ha] is given"),
    ({"member": "a b", "store": "sqlite:///x", "address": "h:1"}, "ha.member: 'a b' is not a name"),
    ({"member": "m1", "store": "sqlite:///x", "address": "h:1", "lease_ms": 100}, "ha.lease_ms: must be at least 300"),
    ({"member": "m1", "address": "h:1"}, "ha.store: the members share the lease"),
    ({"member": "m1", "store": "redis://x", "address": "h:1"}, "ha.store: expected sqlite:///path or mysql://"),
    ({"member": "m1", "store": "sqlite:///x"}, "ha.address: required when server.port is 0"),
    ({"member": "m1", "leader": "x"}, "ha.leader: unknown key"),
    ({"member": "m1", "lease_ms": "long"}, "ha.lease_ms"),
])
def test_ha_bad_config(ha, message):
    with pytest.raises(ConfigError) as e:
        cfg(**ha)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_lag_in_bytes(tmp_path):
    (tmp_path / "binlog.000001").write_bytes(b"x" * 1000)
    (tmp_path / "binlog.000002").write_bytes(b"x" * 700)
    (tmp_path / "binlog.index").write_text("./binlog.000001\n./binlog.000002\n")
    assert output_position(tmp_path) == ("binlog.000002", 700)
    assert bytes_behind(tmp_path, ("binlog.000002", 700), ("binlog.000002", 900), 4096) == 200
    # my current file counts as at least rotate_size (it has not rotated yet); finished files as they are
    assert bytes_behind(tmp_path, ("binlog.000001", 400), ("binlog.000002", 100), 4096) == (4096 - 400) + 100
    assert bytes_behind(tmp_path, ("binlog.000001", 400), ("binlog.000002", 100), 500) == (1000 - 400) + 100
    assert bytes_behind(tmp_path, ("binlog.000002", 700), ("binlog.000004", 50), 4096) == (4096 - 700) + 4096 + 50
    assert bytes_behind(tmp_path, ("binlog.000002", 700), ("binlog.000001", 50), 4096) == 0   # ahead
    assert bytes_behind(tmp_path, ("binlog.000002", 700), ("", 0), 4096) == 0                 # no leader


def test_status_lines():
    lines = format_ha({"member": "m1", "address": "h:1", "role": "follower", "epoch": 3, "leader": "m2",
                       "leader_address": "h:2", "leader_epoch": 4, "lag_bytes": 1234, "store_error": None,
                       "members": [{"member": "m2", "address": "h:2", "role": "leader", "epoch": 4,
                                    "file": "binlog.000002", "pos": 99, "vtso": "7"}]})
    assert lines[0] == "  HA member m1 (h:1): follower, epoch 3; leader m2 at h:2 (epoch 4); lag 1,234 bytes"
    assert "member m2" in lines[1] and "leader" in lines[1] and "binlog.000002:99" in lines[1]


def test_endpoint_retention_stands_aside_when_ha_drives_it(monkeypatch):
    server = type("S", (), {})()
    monkeypatch.setattr(retention, "purge_plan", lambda s, now: ("binlog.000002", "size", []))
    monkeypatch.setattr(retention, "purge_to", lambda s, keep_from, why: [keep_from])
    server.retention_elsewhere = True                 # an HA member: dumper.ha.purge drives its rounds
    assert retention.purge_once(server) == []
    server.retention_elsewhere = False
    assert retention.purge_once(server) == ["binlog.000002"]


def _cli(*args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "gbinlog.cli", *args], capture_output=True, text=True)


@pytest.mark.slow
def test_step_down_command_errors(tmp_path):
    plain = tmp_path / "plain.toml"
    plain.write_text(f'[output]\ndir = "{tmp_path / "out"}"\n[server]\nport = 0\n[[dn]]\nid = "dn0"\ndir = "{tmp_path}"\n')
    p = _cli("ha", "step-down", "--config", str(plain))
    assert p.returncode == 2 and p.stderr == "gbinlog ha step-down: error: the config has no [ha] table (ha.member)\n"
    member = tmp_path / "m.toml"
    member.write_text(plain.read_text() + f'[ha]\nmember = "m1"\naddress = "h:1"\nstore = "sqlite:///{tmp_path / "ha.db"}"\n')
    p = _cli("ha", "step-down", "--config", str(member))
    assert p.returncode == 1, p.stderr
    assert p.stderr == "gbinlog ha step-down: error: no member holds the lease now (no leader to step down)\n"
    from dumper.ha import LeaseStore
    with_leader = LeaseStore.open(tmp_path / "ha.db")
    with_leader.acquire("m9", "h:9", 60_000, with_leader.now_ms())
    p = _cli("ha", "step-down", "--config", str(member), "--timeout", "0.3")     # nobody there to take over
    assert p.returncode == 1 and "no new leader within the timeout (m9 still leads)" in p.stderr, p.stderr
    assert with_leader.step_down_requested(1)
    with_leader.close()
