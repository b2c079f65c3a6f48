"""Payloads of the events a PolarDB-X DN 8.0 writes, built with precompiled structs.

These are on the simulator's hot path (every group has a GCN, a GTID and several QUERY events), so
they are packed directly; ``tests/test_simulator_events.py`` checks each against the binlog
library's decoders and ``mariadb-binlog``. Layouts: MySQL 8.0 ``control_events.cpp`` (GTID,
PREVIOUS_GTIDS, XID), ``statement_events.cpp`` (QUERY), ``rows_event`` (ROWS_QUERY), PolarDB-X
engine (GCN 105, consensus 101-104), XA_PREPARE (docs/formats.md).
"""

from __future__ import annotations

import struct

from binlog.constants import GcnFlag
from binlog.lenenc import pack_int

# -- QUERY ------------------------------------------------------------------------------------------
# The status variables a DN 8.0 writes (code order as MySQL writes them; MariaDB's reader knows
# every code up to 5 here, so it decodes what it needs and skips the rest).
Q_FLAGS2, Q_SQL_MODE, Q_CHARSET, Q_CATALOG_NZ, Q_DEFAULT_COLLATION_FOR_UTF8MB4 = 0, 1, 4, 6, 18
SQL_MODE_DN = 0x40200000          # STRICT_TRANS_TABLES | NO_ENGINE_SUBSTITUTION (real DN capture)
CHARSET_UTF8MB4_GENERAL_CI = 45
CHARSET_UTF8_GENERAL_CI = 33
STATUS_VARS_DN = (
    struct.pack("<BI", Q_FLAGS2, 0)
    + struct.pack("<BQ", Q_SQL_MODE, SQL_MODE_DN)
    + bytes([Q_CATALOG_NZ, 3]) + b"std"
    + struct.pack("<BHHH", Q_CHARSET, CHARSET_UTF8MB4_GENERAL_CI, CHARSET_UTF8MB4_GENERAL_CI,
                  CHARSET_UTF8_GENERAL_CI)
    + struct.pack("<BH", Q_DEFAULT_COLLATION_FOR_UTF8MB4, 255)
)
_QUERY_POST = struct.Struct("<IIBHH")


def query_prefix(thread_id: int, db: str, status_vars: bytes = STATUS_VARS_DN,
                 exec_time: int = 0) -> bytes:
    """Everything of a QUERY payload before the statement text; ``prefix + text`` is the payload."""
    dbb = db.encode("utf-8")
    return (_QUERY_POST.pack(thread_id, exec_time, len(dbb), 0, len(status_vars)) + status_vars
            + dbb + b"\0")


# -- GCN (105) ---------------------------------------------------------------------------------------
GCN_PREPARE = GcnFlag.HAVE_GCN | GcnFlag.HAVE_SNAPSHOT_SEQ
GCN_COMMIT = GcnFlag.HAVE_GCN | GcnFlag.HAVE_COMMITTED_SEQ | GcnFlag.GCN_ASSIGNED
GCN_ONE_PHASE = GCN_PREPARE | GcnFlag.HAVE_COMMITTED_SEQ | GcnFlag.GCN_ASSIGNED
GCN_LOCAL = GcnFlag.HAVE_GCN
_GCN = struct.Struct("<BQ")


def gcn_payload(flags: int, gcn: int) -> bytes:
    """New-engine layout: flags, then the GCN only when ``HAVE_GCN`` is set (docs/formats.md)."""
    if flags & GcnFlag.HAVE_GCN:
        return _GCN.pack(flags, gcn)
    return bytes([flags])


# -- GTID (33) / PREVIOUS_GTIDS (35) -----------------------------------------------------------------
_GTID_HEAD = struct.Struct("<B16sQBqq")
LT_TYPE_LOGICAL_CLOCK = 2
SERVER_VERSION_ID = 80032


net_field_length = pack_int   # MySQL's name for a length-encoded integer


def gtid_payload(sid: bytes, gno: int, last_committed: int, sequence_number: int,
                 commit_us: int, transaction_length: int) -> bytes:
    """MySQL 8.0.32 GTID event: commit flag 1, sid, gno, logical clock, immediate commit time (no
    original time: the high bit stays clear), transaction length, server version."""
    return (_GTID_HEAD.pack(1, sid, gno, LT_TYPE_LOGICAL_CLOCK, last_committed, sequence_number)
            + commit_us.to_bytes(7, "little") + net_field_length(transaction_length)
            + SERVER_VERSION_ID.to_bytes(4, "little"))


GTID_FIXED_LEN = _GTID_HEAD.size + 7 + 4   # + the net_field_length of transaction_length


def previous_gtids_payload(sid: bytes, last_gno: int) -> bytes:
    """One SID with one interval [1, last_gno + 1) — or no SID at all before the first group."""
    if last_gno <= 0:
        return struct.pack("<Q", 0)
    return struct.pack("<Q16sQqq", 1, sid, 1, 1, last_gno + 1)


# -- XID, XA_PREPARE, ROWS_QUERY -----------------------------------------------------------------
def xid_payload(xid: int) -> bytes:
    return xid.to_bytes(8, "little")


_XA_PREPARE = struct.Struct("<BIII")


def xa_prepare_payload(gtrid: bytes, bqual: bytes, one_phase: bool, format_id: int = 1) -> bytes:
    return _XA_PREPARE.pack(1 if one_phase else 0, format_id, len(gtrid), len(bqual)) + gtrid + bqual


def rows_query_payload(text: bytes) -> bytes:
    """A length byte (capped at 255, as MySQL writes it; readers take the rest) + the text."""
    return bytes([min(len(text), 255)]) + text


# -- consensus (X-Paxos) -------------------------------------------------------------------------
_CONSENSUS = struct.Struct("<IQQQQ")
CONSENSUS_TERM = 2


def consensus_log_payload(index: int, length: int, term: int = CONSENSUS_TERM) -> bytes:
    """flag u32, term u64, index u64, length u64 (bytes of the group it precedes), reserve u64."""
    return _CONSENSUS.pack(0, term, index, length, 0)


def previous_consensus_index_payload(index: int) -> bytes:
    return index.to_bytes(8, "little")
