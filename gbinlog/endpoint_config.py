"""One config dialect for the endpoint: ``gbinlog serve`` reads the ``[server]`` (and ``[output]``) tables
of ``gbinlog run``'s config, checked by the same schema (``gbinlog/config.py``).

A serve config is either a whole ``cluster.toml`` (only its ``[server]``/``[output]`` are used) or just
those two tables::

    [output]
    dir = "/var/lib/gbinlog"
    expire_logs_seconds = 604800        # retention, run by the endpoint
    max_total_size = "50GB"

    [server]
    port = 3307
    tls_cert = "tls/cert.pem"           # relative to this file
    tls_key = "tls/key.pem"
    tls_generate = true
    users = [{ name = "repl", password = "*6BB4837EB74329105EE4568DDA7DC67ED2CA2AD9" },
             { name = "app", password = "$A$005$…", admin = true }]

The old serve dialect (keys at the top level or under ``[serve]``, ``[users] name = "pw"``) is still
read: it is translated to these tables and checked by the same schema; errors name the old key.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from gbinlog.config import (
    ConfigError,
    MetricsConfig,
    OutputConfig,
    ServerConfig,
    UserConfig,
    _table,
    from_dict,
    read_toml,
    user_password,
    validate_retention,
    validate_server,
)

PASSWORD_ENV_PREFIX = "GBINLOG_PASSWORD_"

_LEGACY_SERVER_KEYS = {"host", "port", "server_id", "version", "heartbeat_period"}
_LEGACY_KEYS = _LEGACY_SERVER_KEYS | {"dir", "users", "admin", "admins", "serve"}


def _legacy(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The old dialect as ``{"server": …, "output": …}`` and new key → old key (for messages)."""
    section = data.get("serve", data)
    if not isinstance(section, dict):
        raise ConfigError(f"serve: expected a table, got {section!r}")
    unknown = sorted(set(section) - _LEGACY_KEYS - ({"users"} if "users" in data else set()))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key (the serve keys are {', '.join(sorted(_LEGACY_KEYS - {'serve'}))}"
                          f"; see the [server] table of gbinlog run)")
    users = section.get("users", data.get("users", {}))
    admins = section.get("admins", section.get("admin", []))
    if isinstance(admins, str):
        admins = [admins]
    if not isinstance(admins, list) or not all(isinstance(a, str) for a in admins):
        raise ConfigError(f"admin: expected a user name or a list of names, got {admins!r}")
    if isinstance(users, list) and all(isinstance(u, str) for u in users):
        users = dict(u.partition(":")[::2] for u in users)
    if not isinstance(users, dict):
        raise ConfigError(f"users: expected a table of name = \"password\", got {users!r}")
    user_list = []
    for name, pw in users.items():
        if not isinstance(pw, str):
            raise ConfigError(f"users.{name}: expected a password string, got {pw!r}")
        user_list.append({"name": name, "password": pw, "admin": name in admins})
    missing = sorted(set(admins) - set(users))
    if missing:
        raise ConfigError(f"admin: {missing[0]!r} is not among the users")
    server = {k: v for k, v in section.items() if k in _LEGACY_SERVER_KEYS}
    server["users"] = user_list
    new = {"server": server}
    if "dir" in section:
        new["output"] = {"dir": section["dir"]}
    names = {f"server.{k}": k for k in _LEGACY_SERVER_KEYS} | {"output.dir": "dir", "server.users": "users"}
    return new, names


def _is_legacy(data: dict[str, Any]) -> bool:
    return "server" not in data and "output" not in data and "dn" not in data and bool(data)


def load_serve_file(path: Path, directory: Path | None = None) -> tuple[ServerConfig, OutputConfig, MetricsConfig]:
    """The ``[server]``, ``[output]`` and ``[metrics]`` tables of ``path`` (``directory`` stands in for
    output.dir)."""
    data = read_toml(path)
    base = path.resolve().parent
    try:
        if "dn" in data:
            if directory is not None:
                data.setdefault("output", {})["dir"] = str(directory)
            cfg = from_dict(data, base=base, path=path)
            return cfg.server, cfg.output, cfg.metrics
        names: dict[str, str] = {}
        if _is_legacy(data):
            data, names = _legacy(data)
        unknown = sorted(set(data) - {"server", "output", "metrics", "heartbeat", "source", "metadb"})
        if unknown:
            raise ConfigError(f"{unknown[0]}: unknown key (a serve config has [server] and [output] "
                              f"tables, or is a gbinlog run cluster.toml)")
        try:
            out_data = dict(data.get("output", {})) if isinstance(data.get("output", {}), dict) else data["output"]
            if directory is not None and isinstance(out_data, dict):
                out_data["dir"] = str(directory)
            elif isinstance(out_data, dict) and "dir" not in out_data:
                raise ConfigError("output.dir: required (or give --dir)")
            server = _table(_as_table(data.get("server", {}), "server"), ServerConfig, "server", base)
            output = _table(_as_table(out_data, "output"), OutputConfig, "output", base)
            metrics = _table(_as_table(data.get("metrics", {}), "metrics"), MetricsConfig, "metrics", base)
        except ConfigError as exc:
            raise ConfigError(_old_name(str(exc), names)) from None
        validate_retention(output)
        if not 0 <= metrics.port <= 65535:
            raise ConfigError(f"metrics.port: port must be 0..65535, got {metrics.port}")
        return server, output, metrics
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _as_table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table, got {value!r}")
    return value


def _old_name(message: str, names: dict[str, str]) -> str:
    """A schema message about a translated key, told in the old key's name."""
    for new, old in sorted(names.items(), key=lambda kv: -len(kv[0])):
        if message.startswith(new):
            return f"{old}{message[len(new):]}"
    return message


def password_env_name(user: str) -> str:
    """The environment variable ``serve --user NAME`` reads NAME's password from:
    ``GBINLOG_PASSWORD_`` + the name in upper case, each character other than A-Z, 0-9 and _ as _."""
    return PASSWORD_ENV_PREFIX + "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_"
                                         for c in user.upper())


def read_users_file(path: Path) -> list[UserConfig]:
    """``serve --users-file``: one ``name:password`` per line (the password plain, ``*HEX`` or
    ``$A$005$…``; everything after the first ``:``); blank lines and lines starting with ``#`` are
    skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"--users-file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--users-file {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    users = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, password = line.partition(":")
        if not sep or not name:
            raise ConfigError(f"--users-file {path}: line {number}: expected name:password")
        users.append(UserConfig(name, password))
    return users


def cli_user(text: str, from_file: set[str]) -> UserConfig | None:
    """One ``--user``: ``NAME`` (the password from ``GBINLOG_PASSWORD_<NAME>``, or a user of
    ``--users-file``: None) or the old ``NAME:PASSWORD``."""
    name, sep, password = text.partition(":")
    if not name:
        raise ConfigError(f"--user {name!r}: expected NAME (password from "
                          f"{PASSWORD_ENV_PREFIX}<NAME> or --users-file)")
    if sep:
        return UserConfig(name, password)
    env = password_env_name(name)
    if env in os.environ:
        return UserConfig(name, password_env=env)
    if name in from_file:
        return None
    raise ConfigError(f"--user {name}: no password: set the environment variable {env} or give the user "
                      "in --users-file")


def apply_cli(server: ServerConfig, *, port: int | None = None, host: str | None = None,
              server_id: int | None = None, version: str | None = None, users: tuple[str, ...] = (),
              admins: tuple[str, ...] = (), users_file: Path | None = None) -> ServerConfig:
    """``serve``'s options over the file's ``[server]`` (options win; --users-file and --user add users,
    replacing those of the same name)."""
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError(f"--port: must be 0..65535, got {port}")
    if server_id is not None and not 1 <= server_id < 1 << 32:
        raise ConfigError(f"--server-id: must be 1..4294967295, got {server_id}")
    changes: dict[str, Any] = {k: v for k, v in (("port", port), ("host", host), ("server_id", server_id),
                                                 ("version", version)) if v is not None}
    added = read_users_file(users_file) if users_file is not None else []
    from_file = {u.name for u in added}
    added += [u for u in (cli_user(text, from_file) for text in users) if u is not None]
    user_list = list(server.users)
    for user in added:
        user_list = [u for u in user_list if u.name != user.name] + [user]
    known = {u.name for u in user_list}
    for name in admins:
        if name not in known:
            raise ConfigError(f"--admin {name!r}: not among the users")
    user_list = [dataclasses.replace(u, admin=True) if u.name in admins else u for u in user_list]
    changes["users"] = tuple(user_list)
    srv = dataclasses.replace(server, **changes)
    if not srv.users:
        raise ConfigError("no users configured: the server never accepts anonymous clients "
                          "(give --users-file, --user NAME with GBINLOG_PASSWORD_<NAME>, or server.users "
                          "in the config)")
    validate_server(srv)
    return srv


def endpoint_config(srv: ServerConfig, out: OutputConfig, *, directory: Path | None = None,
                    base: str | None = None, poll_interval: float = 0.05, streams: dict | None = None):
    """The ``dumper.server.ServerConfig`` the endpoint runs with (``run`` and ``serve`` alike)."""
    from dumper.server import ServerConfig as EndpointConfig
    return EndpointConfig(
        dir=directory or out.dir, host=srv.host, port=srv.port, server_id=srv.server_id, version=srv.version,
        users={u.name: user_password(u, f"server.users ({u.name})") for u in srv.users},
        user_plugins={u.name: u.auth_plugin for u in srv.users if u.auth_plugin},
        admins=frozenset(u.name for u in srv.users if u.admin),
        tls_cert=srv.tls_cert, tls_key=srv.tls_key, tls_generate=srv.tls_generate,
        require_secure_transport=srv.require_secure_transport, max_connections=srv.max_connections,
        allow_empty_password=srv.allow_empty_password, failed_login_threshold=srv.failed_login_threshold,
        failed_login_min_delay=srv.failed_login_min_delay, failed_login_max_delay=srv.failed_login_max_delay,
        max_allowed_packet=srv.max_allowed_packet, net_read_timeout=srv.net_read_timeout,
        wait_timeout=srv.wait_timeout, heartbeat_period=srv.heartbeat_period, write_buffer=srv.write_buffer,
        max_execution_time=srv.max_execution_time, max_result_rows=srv.max_result_rows,
        expire_logs_seconds=out.expire_logs_seconds, max_total_size=out.max_total_size,
        poll_interval=poll_interval, base=base, streams=streams)
