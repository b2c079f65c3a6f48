"""CLI commands: serve (issue 6)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click

from dumper.server import ConfigError, ServerConfig, load_config, parse_user, serve


@click.command("serve")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Directory of binlog files (<base>.NNNNNN + <base>.index); required unless in --config.")
@click.option("--port", type=int, help="TCP port (default 3306 without --config; 0 = any free port).")
@click.option("--host", help="Address to listen on (default 127.0.0.1).")
@click.option("--user", "users", multiple=True, metavar="NAME:PASSWORD",
              help="A user allowed to connect (repeatable). Without users the server refuses to start.")
@click.option("--admin", "admins", multiple=True, metavar="NAME", help="A user allowed to PURGE BINARY LOGS.")
@click.option("--server-id", type=int, help="This server's id (default 1; must differ from replicas').")
@click.option("--version-string", "version", help="Handshake / SELECT VERSION() (default 5.7.44-log).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML file (keys at top level or under [serve]); options given here win.")
@click.option("-v", "--verbose", is_flag=True, help="Log connections.")
def serve_command(directory: Path | None, port: int | None, host: str | None, users: tuple[str, ...],
                  admins: tuple[str, ...], server_id: int | None, version: str | None,
                  config_file: Path | None, verbose: bool) -> None:
    """Serve a directory of binlog files over the MySQL replication protocol: replicas attach with
    CHANGE MASTER TO ... MASTER_LOG_FILE='binlog.000001', MASTER_LOG_POS=4, MASTER_USE_GTID=no;
    mysqlbinlog --read-from-remote-server and python-mysql-replication read it too."""
    try:
        user_map = dict(parse_user(u) for u in users)
        overrides = dict(dir=directory, port=port, host=host, users=user_map or None,
                         admins=frozenset(admins) or None, server_id=server_id, version=version)
        if config_file is not None:
            cfg = load_config(config_file, **overrides)
        else:
            cfg = ServerConfig(**{k: v for k, v in overrides.items() if v is not None})
            if port is None:
                cfg.port = 3306
        if directory is None and config_file is None:
            raise ConfigError("--dir is required (or dir in --config)")
        if not cfg.dir.is_dir():
            raise ConfigError(f"{cfg.dir}: not a directory")
        cfg.validate()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    def ready(server) -> None:
        click.echo(f"gbinlog serve: {cfg.dir} listening on {cfg.host}:{server.port}", err=True)

    try:
        asyncio.run(serve(cfg.dir, cfg, on_ready=ready))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {cfg.host}:{cfg.port}: {exc}") from None


COMMANDS: list[click.Command] = [serve_command]
