"""``cluster.toml``, the file itself: a typed model, strict keys,
one-line errors that name the file and the key; relative paths from the file's directory."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gbinlog.config import (
    DEFAULT_ROTATE_SIZE,
    Config,
    ConfigError,
    DnConfig,
    from_dict,
    load,
    parse_size,
    to_toml,
)

GOOD = """
metadb = "sqlite:///var/lib/gbinlog/meta.db"

[output]
dir = "global"
rotate_size = "64MB"

[server]
port = 3310
users = [{ name = "repl", password = "replpw" }, { name = "boss", password = "b", admin = true }]

[heartbeat]
interval_ms = 200
stall_ms = 3000

[metrics]
port = 9108

[[dn]]
id = "dn0"
host = "10.0.0.1"
port = 3306
user = "cdc"
password = "pw0"

[[dn]]
id = "dn1"
dir = "binlogs/dn1"

[[dn]]
id = "dn2"
host = "10.0.0.3"
user = "cdc"
standby = true
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "cluster.toml"
    p.write_text(text)
    return p


def test_good_config_parses_to_the_typed_model(tmp_path):
    cfg = load(write(tmp_path, GOOD))
    assert isinstance(cfg, Config)
    assert cfg.output.dir == tmp_path / "global"
    assert cfg.output.rotate_size == 64 << 20
    assert [d.id for d in cfg.dn] == ["dn0", "dn1", "dn2"]
    assert cfg.dn[0] == DnConfig(id="dn0", host="10.0.0.1", port=3306, user="cdc", password="pw0")
    assert cfg.dn[1].dir == tmp_path / "binlogs" / "dn1" and not cfg.dn[1].is_remote
    assert cfg.dn[2].standby and cfg.dn[2].port == 3306
    assert [d.id for d in cfg.active_dns] == ["dn0", "dn1"]
    assert cfg.server.port == 3310 and [(u.name, u.admin) for u in cfg.server.users] == [("repl", False),
                                                                                         ("boss", True)]
    assert cfg.heartbeat.stall_ms == 3000 and cfg.metrics.port == 9108
    assert cfg.metadb_url == "sqlite:///var/lib/gbinlog/meta.db"


def test_output_defaults_are_the_batch_builds():
    """``gbinlog run`` and ``gbinlog build`` with defaults write the same bytes."""
    from dumper.global_binlog import DEFAULT_MAX_FILE_SIZE, DEFAULT_SERVER_VERSION
    from gbinlog.config import DEFAULT_OUTPUT_VERSION
    assert DEFAULT_OUTPUT_VERSION == DEFAULT_SERVER_VERSION and DEFAULT_ROTATE_SIZE == DEFAULT_MAX_FILE_SIZE


def test_defaults_and_round_trip(tmp_path):
    cfg = load(write(tmp_path, '[output]\ndir = "/o"\n[server]\nusers = [{name = "r", password = "p"}]\n'
                                '[[dn]]\nid = "dn0"\ndir = "/d"\n'))
    assert cfg.output.rotate_size == DEFAULT_ROTATE_SIZE == 524288000
    assert cfg.server.port == 3307 and cfg.server.version == "5.7.44-log"
    assert cfg.metrics.port == 0 and cfg.heartbeat.interval_ms == 200
    assert cfg.metadb_url == "sqlite:////o/meta.db"
    full = load(write(tmp_path, GOOD))
    again = from_dict(tomllib.loads(to_toml(full)), base=tmp_path)
    assert again == Config(**{**{f: getattr(full, f) for f in full.__dataclass_fields__}, "path": None})


@pytest.mark.parametrize(("text", "message"), [
    (GOOD.replace('port = 3310', 'prot = 3310'), "server.prot: unknown key (known here: allow_empty_password, failed_login_max_delay, "),
    (GOOD.replace('stall_ms = 3000', 'stall_ms = 3000\nwobble = 1'), "heartbeat.wobble: unknown key"),
    (GOOD + '\n[extra]\nx = 1\n', "extra: unknown key"),
    (GOOD.replace('user = "cdc"\npassword = "pw0"', 'usr = "cdc"'), "dn[0].usr: unknown key"),
    (GOOD.replace('{ name = "repl", password = "replpw" }', '{ name = "repl", pass = "x" }'),
     "server.users[0].pass: unknown key"),
    (GOOD.replace('port = 3310', 'port = "3310"'), "server.port: expected an integer, got '3310'"),
    (GOOD.replace('port = 3310', 'port = 70000'), "server.port: port must be 0..65535, got 70000"),
    (GOOD.replace('standby = true', 'standby = "yes"'), "dn[2].standby: expected true or false"),
    (GOOD.replace('rotate_size = "64MB"', 'rotate_size = "big"'), "output.rotate_size: expected a size"),
    (GOOD.replace('dir = "global"\n', ''), "output.dir: required key is missing"),
    (GOOD.replace('id = "dn1"\ndir = "binlogs/dn1"', 'id = "dn1"'), "dn[1] (dn1): give either host"),
    (GOOD.replace('id = "dn1"\ndir = "binlogs/dn1"', 'id = "dn1"\ndir = "x"\nhost = "h"\nuser = "u"'),
     "dn[1] (dn1): give either host (with port/user/password) or dir, not both"),
    (GOOD.replace('id = "dn1"', 'id = "dn0"'), "dn[1].id: 'dn0' appears twice"),
    (GOOD.replace('id = "dn2"\nhost = "10.0.0.3"\nuser = "cdc"', 'id = "dn2"\nhost = "10.0.0.3"'),
     "dn[2] (dn2): user is required with host"),
    (GOOD.replace('users = [{ name = "repl", password = "replpw" }, { name = "boss", password = "b", '
                  'admin = true }]', 'users = []'), "server.users: the endpoint needs at least one user"),
    (GOOD.replace('[server]', '[server]\nversion = "8.0.36"'), "server.version: must start with 5."),
    (GOOD.replace('metadb = "sqlite:///var/lib/gbinlog/meta.db"', 'metadb = "postgres://x"'), "metadb: expected"),
    ('[output\ndir = "x"', "not valid TOML"),
])
def test_bad_config_is_one_line_naming_file_and_key(tmp_path, text, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load(p)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"{p}: ") and message in line, line


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nowhere\.toml: no such config file"):
        load(tmp_path / "nowhere.toml")


@pytest.mark.parametrize(("value", "size"), [(4096, 4096), ("1MB", 1 << 20), ("1 GiB", 1 << 30), ("64k", 65536),
                                            ("500MB", 524288000), ("8192", 8192)])
def test_sizes(value, size):
    assert parse_size(value, "x") == size


@pytest.mark.parametrize("value", [100, "1TB", True, "-5MB", 1.5])
def test_bad_sizes(value):
    with pytest.raises(ConfigError, match="x: "):
        parse_size(value, "x")
