"""What the endpoint answers for ``@@variables``: ``system_variables`` (MySQL's defaults, and over them
what this endpoint is: GTID ones read from the served files, ``dumper.server.gtid_dump``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dumper.server.mysql_variables import mysql_defaults

if TYPE_CHECKING:
    from dumper.server.server import BinlogServer
    from dumper.server.stream_dirs import ServedStream


def system_variables(server: BinlogServer, stream: ServedStream | None = None) -> dict[str, object]:
    """Every system variable's global value: MySQL's defaults for the configured version
    (``mysql_variables``), over them what this endpoint is and enforces. ``stream``: the stream of a
    stream group the session is about (its GTIDs and file names; ``BinlogServer.stream_of``)."""
    cfg = server.config
    # GTIDs answer what the files hold (dumper.gtid): ON with the sid of their GTID events.
    gtids = stream.gtid_files if stream else server.queries.gtid_files
    bdir = stream.bdir if stream else server.bdir
    files = bdir.files()
    gtid_uuid = gtids.server_uuid(files)
    gtid_mode = "ON" if gtid_uuid else cfg.gtid_mode
    base = str(bdir.path / (bdir.base or "binlog"))
    values = mysql_defaults(cfg.version)
    values.update({
        "server_id": cfg.server_id,
        "server_uuid": gtid_uuid or cfg.uuid,
        "version": cfg.version,
        "version_comment": "gbinlog replication endpoint",
        "binlog_checksum": bdir.checksum_name(),
        "master_verify_checksum": "OFF",
        "gtid_mode": gtid_mode,
        "enforce_gtid_consistency": gtid_mode,
        "gtid_executed": gtids.text(files, "executed"),
        "gtid_purged": gtids.text(files, "purged"),
        "gtid_binlog_pos": "",
        "gtid_current_pos": "",
        "gtid_domain_id": 0,
        "log_bin_basename": base,
        "log_bin_index": base + ".index",
        "hostname": cfg.host,
        "bind_address": cfg.host,
        "port": server.port,
        "max_allowed_packet": cfg.max_allowed_packet,
        "max_connections": cfg.max_connections,
        "net_read_timeout": int(cfg.net_read_timeout),
        "wait_timeout": int(cfg.wait_timeout),
        "have_ssl": "YES" if server.tls_context is not None else "DISABLED",
        "have_openssl": "YES" if server.tls_context is not None else "DISABLED",
        "require_secure_transport": "ON" if cfg.require_secure_transport else "OFF",
        "binlog_expire_logs_seconds": int(cfg.expire_logs_seconds),
        "max_execution_time": int(cfg.max_execution_time * 1000),
    })
    # binlog_row_metadata is 8.0's, but the files carry it whatever the version says, and readers
    # (python-mysql-replication) ask for it to name columns
    values["binlog_row_metadata"] = cfg.binlog_row_metadata
    if cfg.version.startswith("5."):
        values.pop("binlog_expire_logs_seconds", None)
        values["expire_logs_days"] = int(cfg.expire_logs_seconds // 86400)
    return values
