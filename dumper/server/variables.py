"""What the endpoint answers for ``@@variables`` and ``SELECT function()``: ``system_variables`` (GTID
ones read from the served files, ``dumper.server.gtid_dump``) and the functions clients call on
connect (``FUNCTIONS``; ``ARG_FUNCTIONS`` take arguments: GTID_SUBTRACT / GTID_SUBSET)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from dumper.gtid import GtidError, format_gtid_set, is_subset, parse_gtid_set, subtract

if TYPE_CHECKING:
    from dumper.server.queries import Session
    from dumper.server.server import BinlogServer


def system_variables(server: BinlogServer) -> dict[str, object]:
    cfg = server.config
    # GTIDs answer what the files hold (dumper.gtid): ON with the sid of their GTID events.
    gtids = server.queries.gtid_files
    files = server.bdir.files()
    gtid_uuid = gtids.server_uuid(files)
    gtid_mode = "ON" if gtid_uuid else cfg.gtid_mode
    return {
        "server_id": cfg.server_id,
        "server_uuid": gtid_uuid or cfg.uuid,
        "version": cfg.version,
        "version_comment": "gbinlog replication endpoint",
        "binlog_checksum": server.bdir.checksum_name(),
        "master_verify_checksum": "OFF",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": cfg.binlog_row_metadata,
        "gtid_mode": gtid_mode,
        "enforce_gtid_consistency": gtid_mode,
        "gtid_executed": gtids.text(files, "executed"),
        "gtid_purged": gtids.text(files, "purged"),
        "gtid_binlog_pos": "",
        "gtid_current_pos": "",
        "gtid_domain_id": 0,
        "log_bin": "ON",
        "log_bin_basename": str(server.bdir.path / (server.bdir.base or "binlog")),
        "log_slave_updates": "OFF",
        "read_only": "ON",
        "hostname": cfg.host,
        "port": server.port,
        "max_allowed_packet": 1 << 30,
        "net_write_timeout": 60,
        "net_read_timeout": 30,
        "wait_timeout": 28800,
        "interactive_timeout": 28800,
        "character_set_server": "utf8mb4",
        "collation_server": "utf8mb4_general_ci",
        "character_set_client": "utf8mb4",
        "character_set_connection": "utf8mb4",
        "character_set_results": "utf8mb4",
        "lower_case_table_names": 0,
        "lower_case_file_system": "OFF",
        "sql_mode": "",
        "time_zone": "SYSTEM",
        "system_time_zone": "UTC",
        "transaction_isolation": "REPEATABLE-READ",
        "tx_isolation": "REPEATABLE-READ",
        "autocommit": "ON",
    }


FUNCTIONS: dict[str, Callable[[BinlogServer, Session], object]] = {
    "unix_timestamp": lambda s, sess: int(time.time()),
    "version": lambda s, sess: s.config.version,
    "database": lambda s, sess: sess.db,
    "schema": lambda s, sess: sess.db,
    "user": lambda s, sess: f"{sess.user}@{sess.host}",
    "current_user": lambda s, sess: f"{sess.user}@%",
    "connection_id": lambda s, sess: sess.conn_id,
    "now": lambda s, sess: datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
    "current_timestamp": lambda s, sess: datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
    "last_insert_id": lambda s, sess: 0,
    "uuid": lambda s, sess: str(uuid.uuid4()),
    # MariaDB replicas ask for the GTID of a position; there are no GTIDs here: NULL.
    "binlog_gtid_pos": lambda s, sess: None,
}


def _gtid_function(name: str, arity: int, fn: Callable[..., object]) -> Callable[[list[object]], object]:
    def call(args: list[object]) -> object:
        if len(args) != arity:
            from dumper.server.queries import QueryError

            raise QueryError(1582, f"Incorrect parameter count in the call to native function '{name}'", "42000")
        if any(a is None for a in args):
            return None
        try:
            return fn(*(parse_gtid_set(str(a)) for a in args))
        except GtidError as exc:
            from dumper.server.queries import QueryError

            raise QueryError(1772, str(exc).replace("malformed", "Malformed")) from None
    return call


# Functions that take arguments (Debezium asks GTID_SUBTRACT of the server).
ARG_FUNCTIONS: dict[str, Callable[[list[object]], object]] = {
    "gtid_subtract": _gtid_function("GTID_SUBTRACT", 2, lambda a, b: format_gtid_set(subtract(a, b))),
    "gtid_subset": _gtid_function("GTID_SUBSET", 2, lambda a, b: int(is_subset(a, b))),
}

