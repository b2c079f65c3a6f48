"""Replication endpoint: serves a directory of binlog files to MySQL/MariaDB replicas,
``mariadb-binlog --read-from-remote-server`` and python-mysql-replication.

Public API::

    from dumper.server import ServerConfig, start_in_thread, serve, BinlogServer
    handle = start_in_thread(ServerConfig(dir=d, users={"repl": "pw"}))   # .port .notify() .stop()
    await serve(d, ServerConfig(users={"repl": "pw"}, port=3307))         # until cancelled

Own protocol code, not mysql-mimic: mysql-mimic's command loop answers only COM_QUERY, prepared
statements, PING, INIT_DB, CHANGE_USER, FIELD_LIST and QUIT — COM_BINLOG_DUMP and COM_REGISTER_SLAVE
end as "Unsupported Command", and it writes one awaited packet at a time, where a dump must frame
thousands of events per write. The subset binlog clients need (handshake v10, native password, OK/ERR/
EOF, text result sets) is ~250 lines in ``protocol.py``; the replica queries are a fixed dialect
(``queries.py``), not general SQL.
"""

from dumper.server.config import ConfigError, ServerConfig
from dumper.server.server import BinlogServer, ServerHandle, serve, start_in_thread

__all__ = ["BinlogServer", "ConfigError", "ServerConfig", "ServerHandle", "serve", "start_in_thread"]
