"""CLI commands: serve (one config dialect with ``run``).

Errors in the options or the config file print one line ``gbinlog serve: error: …`` and exit 2 (as
``run``); a port that cannot be listened on exits 2 too.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from logging.handlers import WatchedFileHandler
from pathlib import Path

import click

from gbinlog.run_cmd import OneLineErrors, fail

SESSION_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Options whose value may hold a password (``--user NAME:PASSWORD``, ``hash-password --password P``).
_SECRET_OPTIONS = ("--user", "--password")


def _masked_arg(option: str, value: str) -> str:
    if option == "--user":
        name, sep, _ = value.partition(":")
        return f"{name}:***" if sep else value
    return "***"


def masked_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the password of every ``--user NAME:PASSWORD`` / ``--password P`` (either as two
    arguments or as ``--option=value``) replaced by ``***``."""
    out: list[str] = []
    secret_next: str | None = None
    for arg in argv:
        option, eq, value = arg.partition("=")
        if secret_next is not None:
            out.append(_masked_arg(secret_next, arg))
            secret_next = None
        elif arg in _SECRET_OPTIONS:
            out.append(arg)
            secret_next = arg
        elif eq and option in _SECRET_OPTIONS:
            out.append(f"{option}={_masked_arg(option, value)}")
        else:
            out.append(arg)
    return out


def hide_passwords_from_ps() -> None:
    """Rewrite the process title (``/proc/<pid>/cmdline``, what ``ps`` shows every local user) without
    the passwords given on the command line. The old ``--user NAME:PASSWORD`` form is visible from
    the process start until this runs: ``--users-file`` and ``GBINLOG_PASSWORD_<NAME>`` never are."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    masked = masked_argv(argv)
    if masked != argv:
        import setproctitle
        setproctitle.setproctitle(" ".join(masked))


def setup_logging(verbose: int, log_file: Path | None, cmd: str = "serve") -> None:
    """``-v``: the session log (logins, dumps, PURGE) at info; ``-vv`` debug; ``--log-file`` also
    writes it to a file (info and up, even without ``-v``)."""
    level = logging.WARNING if verbose == 0 else (logging.INFO if verbose == 1 else logging.DEBUG)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    handlers[0].setLevel(level)
    if log_file is not None:
        try:
            fh = WatchedFileHandler(log_file)     # reopened at its path after logrotate moves it
        except OSError as exc:
            fail(cmd, f"--log-file {log_file}: {exc.strerror or exc}")
            raise
        fh.setLevel(min(level, logging.INFO))
        handlers.append(fh)
    root = logging.getLogger()
    for h in handlers:
        h.setFormatter(logging.Formatter(SESSION_FORMAT))
        root.addHandler(h)
    root.setLevel(min(h.level for h in handlers))


@click.command("serve", cls=OneLineErrors)
@click.option("--dir", "directory", type=click.Path(path_type=Path),
              help="Directory of binlog files (<base>.NNNNNN + <base>.index); or output.dir in --config.")
@click.option("--port", type=int, help="TCP port (default 3306 without --config; 0 = any free port).")
@click.option("--host", help="Address to listen on (default 127.0.0.1).")
@click.option("--user", "users", multiple=True, metavar="NAME",
              help="A user allowed to connect (repeatable); its password from the environment variable "
                   "GBINLOG_PASSWORD_<NAME> (or --users-file). Without users the server refuses to start.")
@click.option("--users-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Users allowed to connect: one name:password per line (plain, *HEX or $A$005$...).")
@click.option("--admin", "admins", multiple=True, metavar="NAME", help="A user allowed to PURGE BINARY LOGS.")
@click.option("--server-id", type=int, help="This server's id (default 1; must differ from replicas').")
@click.option("--version-string", "version", help="Handshake / SELECT VERSION() (default 5.7.44-log).")
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="TOML with the [server] (and [output]) tables of gbinlog run's config; options win.")
@click.option("--metrics-port", type=int, help="Prometheus /metrics of the replicas on this port (0 = off; "
              "or [metrics] port in --config).")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the session log (logins, dumps, PURGE) to this file.")
@click.option("-v", "--verbose", count=True, help="-v: session log on stderr (info); -vv debug.")
def serve_command(directory: Path | None, port: int | None, host: str | None, users: tuple[str, ...],
                  users_file: Path | None, admins: tuple[str, ...], server_id: int | None, version: str | None,
                  config_file: Path | None, metrics_port: int | None, log_file: Path | None, verbose: int) -> None:
    """Serve a directory of binlog files over the MySQL replication protocol: replicas attach with
    CHANGE MASTER TO ... MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no;
    mysqlbinlog --read-from-remote-server and python-mysql-replication read it too."""
    hide_passwords_from_ps()
    from dumper.server import ConfigError as EndpointConfigError
    from dumper.server import serve
    from gbinlog.config import ConfigError, MetricsConfig, OutputConfig, ServerConfig
    from gbinlog.endpoint_config import apply_cli, endpoint_config, load_serve_file
    from gbinlog.process import parse_file_mode, reopen_logs_on_sighup, set_file_mode

    try:
        if config_file is not None:
            srv, out, metrics = load_serve_file(config_file, directory)
        else:
            if directory is None:
                raise ConfigError("--dir is required (or output.dir in --config)")
            srv, out, metrics = ServerConfig(port=3306), OutputConfig(dir=directory), MetricsConfig()
        if metrics_port is not None:
            if not 0 <= metrics_port <= 65535:
                raise ConfigError(f"--metrics-port: must be 0..65535, got {metrics_port}")
            metrics = MetricsConfig(host=metrics.host, port=metrics_port)
        srv = apply_cli(srv, port=port, host=host, server_id=server_id, version=version, users=users,
                        admins=admins, users_file=users_file)
        cfg = endpoint_config(srv, out).validate()
        file_mode = parse_file_mode(out.file_mode, "output.file_mode")
    except (ConfigError, EndpointConfigError) as exc:
        fail("serve", str(exc))
        return
    if not out.dir.is_dir():
        # A path error (exit 1, as the other commands): serving nothing would look like a working server.
        fail("serve", f"{out.dir}: not a directory", 1)
    set_file_mode(file_mode)        # the index it rewrites, the log, a generated TLS pair
    setup_logging(verbose, log_file)
    reopen_logs_on_sighup()
    # A directory without an index yet (a build or run about to write it): replicas wait for its first file.
    waiting = "" if any(out.dir.glob("*.index")) else " (no binlog here yet: replicas wait for the first file)"
    from dumper.stream_group import is_stream_group

    if is_stream_group(out.dir):
        waiting = " (a stream group: a replica names its stream's file; SHOW BINARY STREAMS lists them)"

    def ready(server) -> None:
        if metrics.port:
            from prometheus_client import CollectorRegistry, Gauge

            from gbinlog.metrics import serve_http
            from gbinlog.replica_metrics import register
            registry = CollectorRegistry()
            register(registry, server)
            healthy = Gauge("gbinlog_healthy", "1 when /healthz answers 200", registry=registry)

            def health() -> tuple[bool, str]:
                ok, reason = server.health()
                healthy.set(1 if ok else 0)
                return ok, reason

            serve_http(metrics.host, metrics.port, registry, health)
        click.echo(f"gbinlog serve: {cfg.dir}{waiting} listening on {cfg.host}:{server.port}", err=True)

    try:
        asyncio.run(serve(cfg.dir, cfg, on_ready=ready))
    except KeyboardInterrupt:
        pass
    except EndpointConfigError as exc:   # e.g. a TLS pair that cannot be loaded
        fail("serve", str(exc))
    except OSError as exc:
        fail("serve", f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}")


COMMANDS: list[click.Command] = [serve_command]


@click.command("hash-password", cls=OneLineErrors)
@click.option("--plugin", type=click.Choice(["caching_sha2_password", "mysql_native_password"]),
              default="caching_sha2_password", show_default=True)
@click.password_option("--password", prompt="Password", help="Read from a prompt when not given.")
def hash_password_command(plugin: str, password: str) -> None:
    """Print the stored form of a password for server.users (MySQL's authentication_string:
    $A$005$… for caching_sha2_password, *HEX for mysql_native_password)."""
    hide_passwords_from_ps()
    from dumper.server.auth import caching_sha2_hash, native_hash
    click.echo(caching_sha2_hash(password) if plugin == "caching_sha2_password" else native_hash(password))


COMMANDS.append(hash_password_command)
