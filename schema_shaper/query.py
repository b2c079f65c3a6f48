"""The logical DDL's QUERY event payload (polardbx-cdc's ``QueryEventBuilder`` /
``DDLConverter.buildDdlEventSql``).

Text::

    [# POLARX_ORIGIN_SQL_ENCODE=BASE64]      when the PolarDB-X DDL spans lines
    # POLARX_ORIGIN_SQL=<PolarDB-X DDL, or its base64>
    # POLARX_TSO=<vtso>
    # POLARX_DDL_ID=<ddl id or 0>
    <MySQL-compatible DDL>

Status variables: Q_FLAGS2, Q_SQL_MODE (bits MariaDB shares only), Q_CATALOG_NZ ``std``,
Q_TIME_ZONE ``SYSTEM``, Q_CHARSET (client and connection utf8mb4_general_ci — the text is UTF-8 —
and server = the logical database's character set, one of the ids MariaDB knows), and
Q_UPDATED_DB_NAMES. thread_id 1, exec_time 0 (a rebuilt binlog must be byte-identical, so no clock).
"""

from __future__ import annotations

import base64

from binlog.constants import EventType
from binlog.events import encode_body
from binlog.query_status import status_vars
from schema_shaper.types import mariadb_charset_id, sql_mode_bits

UTF8MB4_GENERAL_CI = 45


def ddl_text(origin_sql: str, vtso: str, ddl_id: int | str, mysql_sql: str, *, comments: bool = True) -> str:
    """The ``# POLARX_*`` header lines and the MySQL-compatible statement; without ``comments`` the
    statement alone (for consumers whose DDL parsers do not skip comment lines)."""
    if not comments:
        return mysql_sql
    lines = []
    if "\n" in origin_sql or "\r" in origin_sql:
        lines.append("# POLARX_ORIGIN_SQL_ENCODE=BASE64")
        lines.append("# POLARX_ORIGIN_SQL=" + base64.b64encode(origin_sql.encode("utf-8")).decode("ascii"))
    else:
        lines.append("# POLARX_ORIGIN_SQL=" + origin_sql)
    lines.append(f"# POLARX_TSO={vtso}")
    lines.append(f"# POLARX_DDL_ID={ddl_id or 0}")
    lines.append(mysql_sql)
    return "\n".join(lines)


def ddl_query_payload(*, db: str, text: str, updated_db: str, charset: str | None = None,
                      sql_mode: str | None = None, flags2: int = 0) -> bytes:
    """A QUERY payload (post-header, status vars, db, query; no header, no CRC)."""
    sv = status_vars(flags2=flags2, sql_mode=sql_mode_bits(sql_mode), catalog_nz="std",
                     time_zone="SYSTEM",
                     charset=(UTF8MB4_GENERAL_CI, UTF8MB4_GENERAL_CI, mariadb_charset_id(charset)),
                     updated_db_names=(updated_db,) if updated_db else None)
    return encode_body(EventType.QUERY, thread_id=1, exec_time=0, error_code=0, status_vars=sv, db=db,
                       query=text.encode("utf-8", "surrogateescape"))
