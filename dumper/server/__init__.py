"""Replication endpoint: serves a directory of binlog files to MySQL/MariaDB replicas,
``mariadb-binlog --read-from-remote-server`` and python-mysql-replication (issue 6).

Public API::

    from dumper.server import ServerConfig, start_in_thread, serve, BinlogServer
    handle = start_in_thread(ServerConfig(dir=d, users={"repl": "pw"}))   # .port .notify() .stop()
    await serve(d, ServerConfig(users={"repl": "pw"}, port=3307))         # until cancelled
"""

from dumper.server.config import ConfigError, ServerConfig, load_config, parse_user
from dumper.server.server import BinlogServer, ServerHandle, serve, start_in_thread

__all__ = ["BinlogServer", "ConfigError", "ServerConfig", "ServerHandle", "load_config", "parse_user",
           "serve", "start_in_thread"]
