"""Event type codes, header flags, column types and the FDE post-header tables.

Sources: MySQL 5.7/8.0 ``binlog_event.h``, MariaDB ``log_event.h``, PolarDB-X engine (SEQUENCE 80,
consensus 101-104, GCN 105); the DN dialect: docs/formats.md.
"""

from __future__ import annotations

from enum import IntEnum

BINLOG_MAGIC = b"\xfebin"
HEADER_LEN = 19
CRC_LEN = 4
# MySQL never writes an event above 1 GiB (max_allowed_packet); anything larger is corruption.
MAX_EVENT_SIZE = 1 << 30


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    # PolarDB-X DN (AliSQL / polardbx-engine)
    SEQUENCE = 80
    CONSENSUS_LOG = 101
    PREVIOUS_CONSENSUS_INDEX = 102
    CONSENSUS_CLUSTER_INFO = 103
    CONSENSUS_EMPTY = 104
    GCN = 105
    # MariaDB
    ANNOTATE_ROWS = 160
    BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    START_ENCRYPTION = 164
    QUERY_COMPRESSED = 165
    WRITE_ROWS_COMPRESSED_V1 = 166
    UPDATE_ROWS_COMPRESSED_V1 = 167
    DELETE_ROWS_COMPRESSED_V1 = 168
    WRITE_ROWS_COMPRESSED = 169
    UPDATE_ROWS_COMPRESSED = 170
    DELETE_ROWS_COMPRESSED = 171


KNOWN_EVENT_TYPES = frozenset(int(t) for t in EventType)

ROWS_V1_TYPES = frozenset({EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1})
ROWS_V2_TYPES = frozenset({EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS})
ROWS_TYPES = ROWS_V1_TYPES | ROWS_V2_TYPES
WRITE_TYPES = frozenset({EventType.WRITE_ROWS_V1, EventType.WRITE_ROWS})
UPDATE_TYPES = frozenset({EventType.UPDATE_ROWS_V1, EventType.UPDATE_ROWS})
DELETE_TYPES = frozenset({EventType.DELETE_ROWS_V1, EventType.DELETE_ROWS})
CONSENSUS_TYPES = frozenset(range(101, 105))


class EventFlag:
    """Common-header flags (``log_event.h``)."""

    BINLOG_IN_USE = 0x0001
    THREAD_SPECIFIC = 0x0004
    SUPPRESS_USE = 0x0008
    UPDATE_TABLE_MAP_VERSION = 0x0010
    ARTIFICIAL = 0x0020
    RELAY_LOG = 0x0040
    IGNORABLE = 0x0080
    NO_FILTER = 0x0100
    MTS_ISOLATE = 0x0200


class ChecksumAlg:
    OFF = 0
    CRC32 = 1
    UNDEF = 255


class GcnFlag:
    """GCN_LOG_EVENT body flag bits (docs/formats.md)."""

    HAVE_GCN = 0x01
    HAVE_SNAPSHOT_SEQ = 0x02
    HAVE_COMMITTED_SEQ = 0x04
    GCN_ASSIGNED = 0x08
    GCN_PROPOSAL = 0x10
    HAVE_BRANCH_COUNT = 0x20


class SequenceType:
    """SEQUENCE_EVENT (80) types of DN 5.7 (docs/formats.md)."""

    INVALID = 0
    SNAPSHOT = 1
    COMMIT = 2
    HEARTBEAT = 3


class RowsFlag:
    STMT_END = 0x0001
    NO_FOREIGN_KEY_CHECKS = 0x0002
    RELAXED_UNIQUE_CHECKS = 0x0004
    COMPLETE_ROWS = 0x0008


class ColumnType(IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


# Post-header lengths of a MySQL 5.7 FDE, types 1..38 (log_event.cc Format_description_log_event).
POST_HEADER_LEN_57 = bytes([
    56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 95, 0, 4, 26, 8, 0,   # 1..20
    0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0,          # 21..38
])
# MySQL 8.0 adds PARTIAL_UPDATE_ROWS (39), TRANSACTION_PAYLOAD (40), HEARTBEAT_V2 (41).
POST_HEADER_LEN_80 = bytes([*POST_HEADER_LEN_57[:14], 98, *POST_HEADER_LEN_57[15:], 10, 0, 0])
# The FDE's own entry is 57 + number of types (server version, created, header len, table).
assert POST_HEADER_LEN_57[14] == 57 + len(POST_HEADER_LEN_57)
assert POST_HEADER_LEN_80[14] == 57 + len(POST_HEADER_LEN_80)


def post_header_table(n_types: int, base: bytes = POST_HEADER_LEN_80) -> bytes:
    """A post-header table covering ``n_types`` types (DNs declare up to GCN = 105); extra types are 0."""
    table = bytearray(base[:n_types]) + bytes(max(0, n_types - len(base)))
    table[EventType.FORMAT_DESCRIPTION - 1] = 57 + n_types
    return bytes(table)


# MariaDB-known collation ids that the output uses (never 255, which MariaDB 10.11 lacks).
CHARSET_UTF8MB4_GENERAL_CI = 45
CHARSET_UTF8_GENERAL_CI = 33
CHARSET_LATIN1 = 8
CHARSET_BINARY = 63
