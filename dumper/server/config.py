"""The endpoint's runtime configuration: the dataclass ``BinlogServer`` runs with.

Config files are read by ``gbinlog`` (the ``[server]``/``[output]`` tables of ``gbinlog run``'s config,
``gbinlog/endpoint_config.py``), which builds this; tests and the live runner build it directly.
``users`` maps a name to a plain password (hashed at once), ``*HEX`` (mysql_native_password) or
``$A$005$…`` (caching_sha2_password); the plain text is never kept (``credentials()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dumper.server.auth import PLUGINS, AuthConfigError, Credential

DEFAULT_VERSION = "5.7.44-log"


class ConfigError(ValueError):
    """A configuration that cannot run (no users, bad version string, unknown key)."""


@dataclass
class ServerConfig:
    dir: Path = Path(".")
    host: str = "127.0.0.1"
    port: int = 0                      # 0: any free port (tests read BinlogServer.port)
    users: dict[str, str] = field(default_factory=dict)   # name -> password (or "*HASH")
    admins: frozenset[str] = frozenset()
    server_id: int = 1
    server_uuid: str | None = None
    version: str = DEFAULT_VERSION
    heartbeat_period: float = 0.0      # default period when the client sets none; 0 = no heartbeats
    poll_interval: float = 0.05
    write_buffer: int = 4 << 20
    read_chunk: int = 256 << 10        # bytes per file read: one framed write; larger chunks cost page faults
    binlog_row_metadata: str = "FULL"
    gtid_mode: str = "OFF"
    handshake_timeout: float = 10.0
    base: str | None = None            # binlog base name; default: from the directory's *.index
    # a stream group's [streams] (dumper.streams); None: read from the directory's state.json
    streams: dict | None = None
    # Auth and TLS (auth.py, tls.py): users' plugins (name -> plugin; default: what the stored hash
    # says, else mysql_native_password), a certificate pair, made self-signed when tls_generate.
    user_plugins: dict[str, str] = field(default_factory=dict)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_generate: bool = False
    require_secure_transport: bool = False
    allow_empty_password: bool = False   # a user without a password is refused at start unless this is set
    # Failed logins (login_throttle.py): past this many consecutive failures of one user from one host,
    # each further attempt waits min_delay more, at most max_delay; 0 = never delay.
    failed_login_threshold: int = 3
    failed_login_min_delay: float = 1.0
    failed_login_max_delay: float = 30.0
    # Limits (MySQL's names and errors; limits.py).
    max_connections: int = 151
    max_allowed_packet: int = 16 << 20
    net_read_timeout: float = 30.0     # a packet started must be complete within this
    wait_timeout: float = 28800.0      # an idle logged-in session (not a dump) is closed after this
    query_workers: int = 1             # queries answered by at most this many threads at once
    # A statement that reads tables runs at most this long (MySQL's max_execution_time; a session may
    # lower it) and returns at most this many rows: ERR 3024 / ERR 1104 past them.
    max_execution_time: float = 10.0
    max_result_rows: int = 100_000
    # Retention (retention.py): 0 = off. The newest file and files a connected replica reads stay.
    expire_logs_seconds: float = 0.0
    max_total_size: int = 0
    retention_interval: float = 2.0
    stats_interval: float = 1.0        # per-replica figures (replicas.py) are sampled this often

    def __post_init__(self) -> None:
        self.dir = Path(self.dir)
        self.admins = frozenset(self.admins)

    def validate(self) -> ServerConfig:
        if not self.users:
            raise ConfigError("no users configured: the server never accepts anonymous clients "
                              "(give --users-file, --user NAME with GBINLOG_PASSWORD_<NAME>, or [users] in the config)")
        if "" in self.users:
            raise ConfigError("a user needs a non-empty name")
        self._refuse_empty_passwords()
        unknown_admins = self.admins - set(self.users)
        if unknown_admins:
            raise ConfigError(f"admin user(s) not among the users: {', '.join(sorted(unknown_admins))}")
        major = self.version.split(".", 1)[0]
        if not (major.isdigit() and int(major) in (5, 10)):
            # mariadb-binlog 10.11 refuses other majors; MariaDB replicas try GTIDs at >= 10.
            raise ConfigError(f"version {self.version!r} must start with '5.' or '10.'")
        if not 0 < self.server_id < 1 << 32:
            raise ConfigError("server_id must be in 1..4294967295 (replicas refuse a master id of 0)")
        for name, plugin in self.user_plugins.items():
            if plugin not in PLUGINS:
                raise ConfigError(f"user {name!r}: unknown auth plugin {plugin!r} (known: {', '.join(PLUGINS)})")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("tls_cert and tls_key go together")
        if self.require_secure_transport and self.tls_cert is None:
            raise ConfigError("require_secure_transport needs tls_cert and tls_key (or tls_generate)")
        for name, low in (("max_connections", 1), ("max_allowed_packet", 1024), ("query_workers", 1),
                          ("max_result_rows", 1)):
            if getattr(self, name) < low:
                raise ConfigError(f"{name} must be at least {low}, got {getattr(self, name)}")
        for name in ("net_read_timeout", "wait_timeout", "retention_interval", "stats_interval",
                     "max_execution_time"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        if self.failed_login_threshold < 0 or not 0 < self.failed_login_min_delay <= self.failed_login_max_delay:
            raise ConfigError("failed_login_threshold must be >= 0 and 0 < failed_login_min_delay <= "
                              "failed_login_max_delay")
        if self.expire_logs_seconds < 0 or self.max_total_size < 0:
            raise ConfigError("expire_logs_seconds and max_total_size must be >= 0 (0 = off)")
        self.credentials()
        return self

    def _refuse_empty_passwords(self) -> None:
        """A user anyone can log in as, without a password, only when the operator said so."""
        if self.allow_empty_password:
            return
        for name in sorted(self.users):
            if self.users[name] == "":
                raise ConfigError(f"user {name!r} has an empty password: refused (set [server] "
                                  "allow_empty_password = true to allow it)")

    @property
    def uuid(self) -> str:
        return self.server_uuid or f"00000000-0000-4000-8000-{self.server_id:012x}"

    def credentials(self) -> dict[str, Credential]:
        """name -> what the server checks a login against (hashes only; see auth.py)."""
        out = {}
        for name, secret in self.users.items():
            try:
                out[name] = Credential.from_config(secret, self.user_plugins.get(name))
            except AuthConfigError as exc:
                raise ConfigError(f"user {name!r}: {exc}") from None
        return out
