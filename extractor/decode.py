"""The few event fields the ordering rules need, parsed straight from the raw bytes.

Everything else passes through as raw bytes. Offsets are from the start of the event (the 19-byte
common header included); ``crc`` is 4 when the event ends with a CRC32, else 0. Precompiled
``struct.Struct``s keep each parse well under a microsecond.
"""

from __future__ import annotations

import struct

from binlog.constants import HEADER_LEN

# QUERY post-header (MySQL log_event.h): thread_id u32, exec_time u32, db_len u8,
# error_code u16, status_vars_len u16. We read from db_len on.
QUERY_DB_STATUS = struct.Struct("<B2xH")
QUERY_DB_OFF = HEADER_LEN + 8
_U64 = struct.Struct("<Q")
# GCN and SEQUENCE bodies (docs/formats.md): flags/type u8 then a u64.
_FLAG_U64 = struct.Struct("<BQ")

# Q_LIZARD_COMMIT_GCN (DN 8.0 V1) and the fixed sizes of status variables before it.
Q_LIZARD_COMMIT_GCN = 200
Q_LIZARD_PREPARE_GCN = 201
_FIXED_STATUS = {
    0: 4, 1: 8, 3: 4, 4: 6, 7: 2, 8: 2, 9: 8, 10: 4, 13: 3, 16: 1, 17: 8, 18: 2, 19: 1, 20: 1,
    # 22: one byte, seen in the real DN 8.0 capture (dn80_gcn_consensus.bin) after Q_DEFAULT_COLLATION.
    22: 1, 128: 3, 129: 8, Q_LIZARD_COMMIT_GCN: 8, Q_LIZARD_PREPARE_GCN: 8,
}
_LEN_PREFIXED = {5, 6}  # TIME_ZONE, CATALOG_NZ: u8 length + bytes


def query_parts(raw: bytes, crc: int, post_header_len: int = 13) -> tuple[int, int, int]:
    """(status_start, db_start, query_start) offsets of a QUERY event; db ends at query_start - 1."""
    db_len, status_len = QUERY_DB_STATUS.unpack_from(raw, QUERY_DB_OFF)
    status = HEADER_LEN + post_header_len
    db = status + status_len
    return status, db, db + db_len + 1


def query_text(raw: bytes, crc: int, post_header_len: int = 13) -> tuple[str, str]:
    """(db, query) of a QUERY event, decoded losslessly (surrogateescape)."""
    _, db, q = query_parts(raw, crc, post_header_len)
    end = len(raw) - crc
    return (bytes(raw[db:q - 1]).decode("utf-8", "surrogateescape"),
            bytes(raw[q:end]).decode("utf-8", "surrogateescape"))


def lizard_commit_gcn(raw: bytes, crc: int, post_header_len: int = 13) -> int | None:
    """Q_LIZARD_COMMIT_GCN of a QUERY event, or None.

    Walks the status variables as the CDC's QueryLogEvent does: an unknown code ends the walk
    (its length is unknowable), so only variables before it are seen.
    """
    status, db, _ = query_parts(raw, crc, post_header_len)
    i = status
    while i < db:
        code = raw[i]
        i += 1
        if code == Q_LIZARD_COMMIT_GCN:
            return _U64.unpack_from(raw, i)[0] if i + 8 <= db else None
        size = _FIXED_STATUS.get(code)
        if size is not None:
            i += size
        elif code in _LEN_PREFIXED:
            i += 1 + raw[i]
        elif code == 2:  # Q_CATALOG_CODE: u8 length + bytes + NUL
            i += 2 + raw[i]
        elif code == 11:  # Q_INVOKER: user and host, each u8 length + bytes
            i += 1 + raw[i]
            i += 1 + raw[i]
        elif code == 12:  # Q_UPDATED_DB_NAMES: count, then NUL-terminated names (254 = too many)
            count = raw[i]
            i += 1
            if count != 254:
                for _ in range(count):
                    i = raw.index(b"\0", i, db) + 1
        else:
            return None
    return None


def gcn(raw: bytes, crc: int) -> tuple[int, int | None]:
    """(flags, gcn) of a GCN_LOG_EVENT, parsed per flags.

    The gcn field is present when ``flags & 0x01`` (new engine) or whenever the body has 9 bytes
    (old engine: flags + gcn always written).
    """
    body_len = len(raw) - crc - HEADER_LEN
    if body_len >= 9:
        flags, value = _FLAG_U64.unpack_from(raw, HEADER_LEN)
        return flags, value
    return raw[HEADER_LEN], None


def sequence(raw: bytes, crc: int) -> tuple[int, int]:
    """(type, number) of a DN 5.7 SEQUENCE_EVENT (80)."""
    return _FLAG_U64.unpack_from(raw, HEADER_LEN)


def rows_query_text(raw: bytes, crc: int) -> str:
    """The text of a ROWS_QUERY event: the body after its (ignored) one-byte length."""
    return raw[HEADER_LEN + 1:len(raw) - crc].decode("utf-8", "surrogateescape")


def table_map_names(raw: bytes, table_id_len: int = 6) -> tuple[int, str, str]:
    """(table_id, db, table) of a TABLE_MAP event."""
    table_id = int.from_bytes(raw[HEADER_LEN:HEADER_LEN + table_id_len], "little")
    i = HEADER_LEN + table_id_len + 2
    db_len = raw[i]
    db = bytes(raw[i + 1:i + 1 + db_len]).decode("utf-8", "surrogateescape")
    i += db_len + 2
    t_len = raw[i]
    table = bytes(raw[i + 1:i + 1 + t_len]).decode("utf-8", "surrogateescape")
    return table_id, db, table


def rows_table_id(raw: bytes, table_id_len: int = 6) -> int:
    """The table id a rows event (v1 or v2) refers to."""
    return int.from_bytes(raw[HEADER_LEN:HEADER_LEN + table_id_len], "little")
