"""``cluster.toml``: the configuration of ``gbinlog run`` (and ``status``), parsed strictly.

Every table and key is declared once as a dataclass field; anything else (a typo, a key in the
wrong table, a value of the wrong type, a DN with neither an address nor a directory) is a
``ConfigError`` with one line naming the file and the key, and the CLI exits 2. Relative paths are
relative to the config file's directory. Example::

    metadb = "sqlite:///var/lib/gbinlog/meta.db"   # optional: default <output.dir>/meta.db

    [output]
    dir = "/var/lib/gbinlog"        # binlog.NNNNNN, binlog.index, state.json, status.json
    rotate_size = "500MB"           # bytes, or a number with KB/MB/GB
    gtids = true                    # GTID events (auto-position); false for consumers that cannot take them

    [server]                        # the replication endpoint replicas attach to
    host = "127.0.0.1"
    port = 3307
    users = [{ name = "repl", password = "replpw" },
             { name = "admin", password = "adminpw", admin = true }]

    [heartbeat]
    interval_ms = 200               # the cluster's TSO heartbeat period
    stall_ms = 5000                 # a DN silent this long is reported as stalled

    [metrics]
    port = 9108                     # Prometheus /metrics; 0 = off

    [[dn]]
    id = "dn0"                      # the storage instance id
    host = "10.0.0.1"
    port = 3306
    user = "cdc"
    password = "..."

    [[dn]]
    id = "dn1"
    dir = "/data/dn1/binlog"         # or follow a binlog directory

    [[dn]]
    id = "dn2"
    host = "10.0.0.3"
    port = 3306
    user = "cdc"
    password = "..."
    standby = true                  # joins when a StorageInstChange instruction lists it
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SERVER_VERSION = "5.7.44-log"            # the endpoint's handshake / SELECT VERSION()
DEFAULT_OUTPUT_VERSION = "5.7.44-gbinlog"        # the files' FDE: dumper's default, as gbinlog build
DEFAULT_ROTATE_SIZE = 500 * 1024 * 1024     # polardbx-cdc's binlog_file_size 524288000
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_DN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ConfigError(Exception):
    """A bad configuration: ``str()`` is one line naming the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class DnConfig:
    """One DN: over the replication protocol (host/port/user/password) or a binlog directory."""

    id: str
    host: str | None = None
    port: int = 3306
    user: str | None = None
    password: str = ""
    dir: Path | None = None
    standby: bool = False        # not read until a StorageInstChange instruction lists it
    poll_ms: int = 100           # dir DNs: how often a followed file is polled
    tls: bool = False            # host DNs: TLS to the DN (refused if the DN does not offer it)
    tls_ca: Path | None = None   # the CA (PEM) the DN's certificate is checked against; default: the system's
    tls_verify: bool = True      # false: encrypt without checking the DN's certificate and host name

    @property
    def is_remote(self) -> bool:
        return self.host is not None

    def describe(self) -> str:
        return f"{self.host}:{self.port}" if self.is_remote else str(self.dir)

    def tls_context(self) -> Any:
        """The ``ssl.SSLContext`` to reach this DN with (None without ``tls``)."""
        if not self.tls:
            return None
        from extractor.replication_client import client_tls_context
        return client_tls_context(self.tls_ca, verify=self.tls_verify)


@dataclass(frozen=True, slots=True)
class UserConfig:
    name: str
    password: str = ""           # plain, "*HEX" (native) or "$A$005$…" (caching_sha2): MySQL's forms
    admin: bool = False
    auth_plugin: str | None = None   # mysql_native_password | caching_sha2_password; default: the hash's
    password_file: Path | None = None   # … or the password (any form) read from this file
    password_env: str | None = None     # … or from this environment variable


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The ``[server]`` table: the replication endpoint, the same for ``gbinlog run`` and ``serve``."""

    host: str = "127.0.0.1"
    port: int = 3307             # run: 0 = no endpoint (files only); serve: 0 = any free port
    server_id: int = 1           # the endpoint's server id (a replica's must differ)
    version: str = DEFAULT_SERVER_VERSION
    users: tuple[UserConfig, ...] = ()
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_generate: bool = False   # make a self-signed pair at tls_cert/tls_key when neither exists
    require_secure_transport: bool = False
    allow_empty_password: bool = False   # a user with an empty password is refused unless this is set
    failed_login_threshold: int = 3      # consecutive failed logins of a user from a host before delays; 0 = off
    failed_login_min_delay: float = 1.0  # the first delay, and its growth per further failure (seconds)
    failed_login_max_delay: float = 30.0
    max_connections: int = 151
    max_allowed_packet: int = 16 << 20
    net_read_timeout: float = 30.0
    wait_timeout: float = 28800.0
    heartbeat_period: float = 0.0     # seconds, for clients that set no @master_heartbeat_period
    write_buffer: int = 4 << 20       # bytes a dump may queue for one slow replica before it waits
    max_execution_time: float = 10.0  # seconds a statement that reads tables may run (ERR 3024 past it)
    max_result_rows: int = 100_000    # rows a statement may return (ERR 1104 past it)


@dataclass(frozen=True, slots=True)
class OutputConfig:
    dir: Path
    rotate_size: int = DEFAULT_ROTATE_SIZE
    server_version: str = DEFAULT_OUTPUT_VERSION
    gtids: bool = True
    ddl_comments: bool = True          # the # POLARX_* lines before each DDL statement
    expire_logs_seconds: float = 0.0   # purge files older than this (0 = keep); see dumper/server/retention.py
    max_total_size: int = 0            # purge oldest files while the total is above this (0 = no limit)
    file_mode: str = "0640"            # mode of the files written (directories: + x where r); gbinlog.process


@dataclass(frozen=True, slots=True)
class HeartbeatConfig:
    interval_ms: int = 200       # what the cluster's heartbeat timer does (CN TsoHeartbeatTimer)
    stall_ms: int = 5000         # a DN with no new transaction for this long is "stalled"


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    host: str = "127.0.0.1"
    port: int = 0                # 0: no metrics endpoint


@dataclass(frozen=True, slots=True)
class HaConfig:
    """``[ha]``: this ``gbinlog run`` is one member of a leader + followers group (dumper.ha)."""

    member: str = ""             # this member's name, unique in the group; "" = no HA
    address: str = ""            # host:port replicas reach this member's endpoint at [default server host:port]
    lease_ms: int = 3000         # the leader lease; a dead leader is replaced within about this long
    store: str | None = None     # the lease store URL, shared by every member [default: metadb]
    lag_gate_ms: int = 2000      # a follower further behind the leader refuses new dumps (ERR naming the leader)
    lag_gate_bytes: int = 20 << 20
    catch_up_ms: int = 5000      # … within it, a dump asking for what it has not written yet waits this long


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """How DNs are read over the replication protocol."""

    server_id: int = 4_200_000   # our server id towards the DNs (COM_BINLOG_DUMP)
    connect_timeout_s: float = 5.0
    backoff_initial_ms: int = 100
    backoff_max_ms: int = 5000


@dataclass(frozen=True, slots=True)
class FilterConfig:
    """``[filter]``: databases/tables the global binlog carries (schema_shaper.filters)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def settings(self) -> dict | None:
        return {"include": list(self.include), "exclude": list(self.exclude)} if self.include or self.exclude \
            else None


@dataclass(frozen=True, slots=True)
class StreamsConfig:
    """``[streams]``: a stream group (docs/streams.md): ``count`` streams hashed at ``hash`` level."""

    count: int = 1
    hash: str = "table"          # database | table | record
    group: str = "group1"        # files: <group>_stream_<k>_binlog.NNNNNN

    def settings(self) -> dict | None:
        """The pipeline's ``Settings.streams`` (None: the single global binlog)."""
        return {"count": self.count, "hash": self.hash, "group": self.group} if self.count > 1 else None


@dataclass(frozen=True, slots=True)
class Config:
    dn: tuple[DnConfig, ...]
    output: OutputConfig
    server: ServerConfig = field(default_factory=ServerConfig)
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    source: SourceConfig = field(default_factory=SourceConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    streams: StreamsConfig = field(default_factory=StreamsConfig)
    ha: HaConfig = field(default_factory=HaConfig)
    metadb: str | None = None    # meta store URL (sqlite:///path or mysql://…); default <out>/meta.db
    path: Path | None = None     # the file it was read from (not a key)

    @property
    def active_dns(self) -> list[DnConfig]:
        return [d for d in self.dn if not d.standby]

    def dn_by_id(self, dn_id: str) -> DnConfig | None:
        return next((d for d in self.dn if d.id == dn_id), None)

    @property
    def metadb_url(self) -> str:
        return self.metadb or f"sqlite:///{self.output.dir / 'meta.db'}"


def parse_size(value: Any, where: str) -> int:
    """Bytes from an int or ``"500MB"`` / ``"1 GiB"`` / ``"64K"``."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a size, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        n = int(m[1]) * _UNITS[(m[2] or "")[:1].upper()]
    else:
        raise ConfigError(f"{where}: expected a size like 500MB or a number of bytes, got {value!r}")
    if n < 4096:
        raise ConfigError(f"{where}: must be at least 4096 bytes, got {n}")
    return n


def parse_size_or_zero(value: Any, where: str) -> int:
    """A size, or 0 (off)."""
    return 0 if value == 0 and not isinstance(value, bool) else parse_size(value, where)


# -- the generic strict reader: TOML tables → dataclasses -------------------------------------------
_SPECIAL = {("OutputConfig", "rotate_size"): parse_size,
            ("OutputConfig", "max_total_size"): parse_size_or_zero,
            ("ServerConfig", "max_allowed_packet"): parse_size,
            ("ServerConfig", "write_buffer"): parse_size,
            ("HaConfig", "lag_gate_bytes"): parse_size}


def _type_name(tp: Any) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
             Path: "a path"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(value: Any, tp: Any, where: str, base: Path) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(value, args[0], where, base)
    if origin is tuple:
        (item_tp, _) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(_convert(v, item_tp, f"{where}[{i}]", base) for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table, got {value!r}")
        return _table(value, tp, where, base)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if tp is Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: expected a path, got {value!r}")
        p = Path(value).expanduser()
        return p if p.is_absolute() else (base / p)
    raise TypeError(f"config field type {tp!r} not handled")


def _table(data: dict[str, Any], cls: type, where: str, base: Path) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "path"}
    for key in data:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{where + '.' if where else ''}{key}: unknown key (known here: {known})")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        key_where = f"{where}.{name}" if where else name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(f"{key_where}: required key is missing")
            continue
        special = _SPECIAL.get((cls.__name__, name))
        kwargs[name] = special(data[name], key_where) if special else \
            _convert(data[name], hints[name], key_where, base)
    return cls(**kwargs)


# -- semantic checks ----------------------------------------------------------------------------------
def _check_port(port: int, where: str, allow_zero: bool) -> None:
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise ConfigError(f"{where}: port must be {'0..' if allow_zero else '1..'}65535, got {port}")


def validate(cfg: Config) -> None:
    from schema_shaper.filters import FilterError, compile_pattern
    from schema_shaper.meta_store import mask_url
    for where, patterns in (("filter.include", cfg.filter.include), ("filter.exclude", cfg.filter.exclude)):
        for p in patterns:
            try:
                compile_pattern(p)
            except FilterError as exc:
                raise ConfigError(f"{where}: {exc}") from None
    """Rules across keys; raises ``ConfigError`` (one line)."""
    if not cfg.dn:
        raise ConfigError("dn: at least one [[dn]] is required")
    seen: set[str] = set()
    for i, d in enumerate(cfg.dn):
        where = f"dn[{i}] ({d.id})"
        if not _DN_ID.match(d.id):
            raise ConfigError(f"dn[{i}].id: {d.id!r} is not a storage instance id (letters, digits, _ . -)")
        if d.id in seen:
            raise ConfigError(f"dn[{i}].id: {d.id!r} appears twice")
        seen.add(d.id)
        if (d.host is None) == (d.dir is None):
            raise ConfigError(f"{where}: give either host (with port/user/password) or dir, not "
                              f"{'both' if d.host else 'neither'}")
        if d.host is not None:
            _check_port(d.port, f"dn[{i}].port", False)
            if not d.user:
                raise ConfigError(f"{where}: user is required with host")
        if d.poll_ms < 1:
            raise ConfigError(f"dn[{i}].poll_ms: must be at least 1, got {d.poll_ms}")
        if (d.tls_ca is not None or not d.tls_verify) and not d.tls:
            raise ConfigError(f"{where}: tls_ca / tls_verify need tls = true")
        if d.tls and d.host is None:
            raise ConfigError(f"{where}: tls is for a DN read over the network (host), not a dir")
        if d.tls_ca is not None and not Path(d.tls_ca).is_file():
            raise ConfigError(f"dn[{i}].tls_ca: {d.tls_ca}: no such file")
        if d.tls:
            import ssl
            try:
                d.tls_context()
            except (ssl.SSLError, OSError) as exc:
                raise ConfigError(f"dn[{i}].tls_ca: {d.tls_ca}: not a PEM certificate ({exc})") from None
    if not cfg.active_dns:
        raise ConfigError("dn: every DN is standby; at least one must be read from the start")
    _check_port(cfg.metrics.port, "metrics.port", True)
    validate_server(cfg.server, need_users=bool(cfg.server.port))
    if not cfg.output.server_version.startswith(("5.", "8.")):
        raise ConfigError(f"output.server_version: must start with 5. or 8. (the FDE dialect), "
                          f"got {cfg.output.server_version!r}")
    validate_retention(cfg.output)
    from gbinlog.process import parse_file_mode
    parse_file_mode(cfg.output.file_mode, "output.file_mode")
    if not 1 <= cfg.source.server_id < 1 << 32:
        raise ConfigError("source.server_id: must be 1..4294967295")
    if cfg.server.server_id == cfg.source.server_id:
        raise ConfigError("source.server_id: must differ from server.server_id")
    if cfg.heartbeat.interval_ms < 1 or cfg.heartbeat.stall_ms < cfg.heartbeat.interval_ms:
        raise ConfigError("heartbeat: interval_ms must be ≥ 1 and stall_ms ≥ interval_ms")
    if cfg.source.backoff_initial_ms < 1 or cfg.source.backoff_max_ms < cfg.source.backoff_initial_ms:
        raise ConfigError("source: backoff_initial_ms must be ≥ 1 and backoff_max_ms ≥ backoff_initial_ms")
    if cfg.metadb is not None and not re.match(r"^(sqlite|mysql|mariadb)(\+\w+)?://", cfg.metadb):
        raise ConfigError(f"metadb: expected sqlite:///path or mysql://user:pw@host:port/db, "
                          f"got {mask_url(cfg.metadb)!r}")
    validate_ha(cfg)
    from dumper.streams import StreamsError, StreamSpec
    try:
        StreamSpec(cfg.streams.count, cfg.streams.hash, cfg.streams.group)
    except StreamsError as exc:
        raise ConfigError(str(exc)) from None
    if cfg.streams.count > 32 and cfg.ha.member:
        raise ConfigError(f"streams.count: at most 32 streams in an [ha] group (the purge horizon of every "
                          f"stream is recorded in one row), got {cfg.streams.count}")


def validate_ha(cfg: Config) -> None:
    """``[ha]``: a member name, a lease of at least 300 ms, and a lease store every member shares."""
    from schema_shaper.meta_store import mask_url
    ha = cfg.ha
    if not ha.member:
        if ha != HaConfig():
            raise ConfigError("ha.member: required when [ha] is given (this member's name)")
        return
    if not _DN_ID.match(ha.member):
        raise ConfigError(f"ha.member: {ha.member!r} is not a name (letters, digits, _ . -)")
    if ha.lag_gate_ms < 0:
        raise ConfigError(f"ha.lag_gate_ms: must be ≥ 0, got {ha.lag_gate_ms}")
    if ha.catch_up_ms < 0:
        raise ConfigError(f"ha.catch_up_ms: must be ≥ 0, got {ha.catch_up_ms}")
    if ha.lease_ms < 300:
        raise ConfigError(f"ha.lease_ms: must be at least 300, got {ha.lease_ms}")
    store = ha.store or cfg.metadb
    if store is None:
        raise ConfigError("ha.store: the members share the lease: give ha.store or metadb (sqlite:///path on one "
                          "host, mysql://… across hosts)")
    if not re.match(r"^(sqlite|mysql|mariadb)(\+\w+)?://", store):
        raise ConfigError(f"ha.store: expected sqlite:///path or mysql://user:pw@host:port/db, got {mask_url(store)!r}")
    if not cfg.server.port and not ha.address:
        raise ConfigError("ha.address: required when server.port is 0 (where replicas reach this member)")


def validate_server(srv: ServerConfig, *, need_users: bool = True) -> None:
    """The ``[server]`` table's rules (``run`` and ``serve`` alike); raises ``ConfigError``."""
    from dumper.server.auth import PLUGINS, AuthConfigError, Credential
    _check_port(srv.port, "server.port", True)
    if need_users and not srv.users:
        raise ConfigError("server.users: the endpoint needs at least one user (no anonymous access)")
    names = [u.name for u in srv.users]
    for i, u in enumerate(srv.users):
        if not u.name:
            raise ConfigError(f"server.users[{i}].name: must not be empty")
        if u.name in names[:i]:
            raise ConfigError(f"server.users[{i}].name: {u.name!r} appears twice")
        if u.auth_plugin is not None and u.auth_plugin not in PLUGINS:
            raise ConfigError(f"server.users[{i}].auth_plugin: {u.auth_plugin!r} is not one of {', '.join(PLUGINS)}")
        password = user_password(u, f"server.users[{i}]")
        try:
            Credential.from_config(password, u.auth_plugin)
        except AuthConfigError as exc:
            raise ConfigError(f"server.users[{i}].password: {exc}") from None
        if password == "" and not srv.allow_empty_password:
            raise ConfigError(f"server.users[{i}] ({u.name}): empty password: refused (set [server] "
                              "allow_empty_password = true to allow it)")
    if srv.failed_login_threshold < 0:
        raise ConfigError(f"server.failed_login_threshold: must be >= 0 (0 = no delay), got {srv.failed_login_threshold}")
    if not 0 < srv.failed_login_min_delay <= srv.failed_login_max_delay:
        raise ConfigError("server.failed_login_min_delay: must be > 0 and at most failed_login_max_delay, got "
                          f"{srv.failed_login_min_delay} and {srv.failed_login_max_delay}")
    if not (srv.version.startswith("5.") or srv.version.startswith("10.")):
        raise ConfigError(f"server.version: must start with 5. (mariadb-binlog rejects others), got {srv.version!r}")
    if not 1 <= srv.server_id < 1 << 32:
        raise ConfigError(f"server.server_id: must be 1..4294967295, got {srv.server_id}")
    if (srv.tls_cert is None) != (srv.tls_key is None):
        raise ConfigError("server.tls_cert / server.tls_key: give both or neither")
    if srv.require_secure_transport and srv.tls_cert is None:
        raise ConfigError("server.require_secure_transport: needs tls_cert and tls_key (tls_generate makes them)")
    if srv.max_connections < 1:
        raise ConfigError(f"server.max_connections: must be at least 1, got {srv.max_connections}")
    for name in ("net_read_timeout", "wait_timeout"):
        if not getattr(srv, name) > 0:
            raise ConfigError(f"server.{name}: must be > 0 seconds, got {getattr(srv, name)}")
    if srv.heartbeat_period < 0:
        raise ConfigError(f"server.heartbeat_period: must be >= 0 seconds, got {srv.heartbeat_period}")
    if not srv.max_execution_time > 0:
        raise ConfigError(f"server.max_execution_time: must be > 0 seconds, got {srv.max_execution_time}")
    if srv.max_result_rows < 1:
        raise ConfigError(f"server.max_result_rows: must be at least 1, got {srv.max_result_rows}")


def user_password(user: UserConfig, where: str) -> str:
    """The password of ``user`` (any stored form) from ``password``, ``password_file`` (the file's text
    without its final newline) or ``password_env``; at most one of them may be given."""
    given = [key for key, value in (("password", user.password), ("password_file", user.password_file),
                                    ("password_env", user.password_env)) if value]
    if len(given) > 1:
        raise ConfigError(f"{where}: give one of password, password_file and password_env, not {' and '.join(given)}")
    if user.password_file is not None:
        try:
            text = user.password_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{where}.password_file: {user.password_file}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}.password_file: {user.password_file}: cannot read: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        return text.removesuffix("\n").removesuffix("\r")
    if user.password_env:
        value = os.environ.get(user.password_env)
        if value is None:
            raise ConfigError(f"{where}.password_env: the environment variable {user.password_env} is not set")
        return value
    return user.password


def validate_retention(out: OutputConfig) -> None:
    if out.expire_logs_seconds < 0:
        raise ConfigError(f"output.expire_logs_seconds: must be >= 0 (0 = keep), got {out.expire_logs_seconds}")


def from_dict(data: dict[str, Any], *, base: Path = Path("."), path: Path | None = None) -> Config:
    """A checked ``Config`` from parsed TOML (``base``: where relative paths start)."""
    cfg = _table(data, Config, "", base)
    cfg = dataclasses.replace(cfg, path=path)
    validate(cfg)
    return cfg


def read_toml(p: Path) -> dict[str, Any]:
    """The parsed TOML of ``p``; a missing/unreadable file or a syntax error is one ``ConfigError`` line."""
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory, not a config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None


def load(path: str | Path) -> Config:
    """Read and check ``path``; every problem is a one-line ``ConfigError`` naming the file."""
    p = Path(path)
    data = read_toml(p)
    try:
        return from_dict(data, base=p.resolve().parent, path=p)
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def to_toml(cfg: Config) -> str:
    """The TOML text of ``cfg`` (``gbinlog demo`` writes its embedded defaults with it)."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, Path):
            v = str(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    def table(obj: Any, skip: tuple[str, ...] = ()) -> list[str]:
        lines = []
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            if f.name in skip or v is None or v == f.default:
                continue
            lines.append(f"{f.name} = {value(v)}")
        return lines

    out: list[str] = []
    if cfg.metadb:
        out.append(f"metadb = {value(cfg.metadb)}")
    out += ["", "[output]", *table(cfg.output)]
    out += ["", "[server]", *table(cfg.server, ("users",))]
    users = ", ".join("{ " + ", ".join(f"{k} = {value(getattr(u, k))}"
                                       for k in ("name", "password", "admin", "auth_plugin", "password_file",
                                                 "password_env")
                                       if k in ("name", "password") or getattr(u, k))
                      + " }" for u in cfg.server.users)
    out.append(f"users = [{users}]")
    for name in ("heartbeat", "metrics", "source"):
        lines = table(getattr(cfg, name))
        if lines:
            out += ["", f"[{name}]", *lines]
    for d in cfg.dn:
        out += ["", "[[dn]]", *table(d)]
    return "\n".join(out).lstrip() + "\n"
