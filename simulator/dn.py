"""One DN's binlog in the PolarDB-X DN 8.0 dialect (docs/formats.md).

A DN writes whole groups: ``[CONSENSUS_LOG] GCN GTID <statements>``. The GTID event carries the
group's byte length and the consensus event the length of what follows it, so a group is laid out in
memory first and written with one ``write``. Files start with FDE (8.0 server version, post-header
lengths for every type up to GCN = 105), [PREVIOUS_CONSENSUS_INDEX], PREVIOUS_GTIDS, and rotate with
ROTATE after a group once they pass ``max_file_size``.
"""

from __future__ import annotations

import struct
from pathlib import Path

from binlog.constants import EventFlag, EventType, post_header_table
from binlog.header import HEADER_STRUCT, crc32
from binlog.writer import BinlogWriter
from simulator import dn_events as ev

DN_SERVER_VERSION = "8.0.32-X-Cluster-8.4.19-20240630"
N_EVENT_TYPES = 105
_HEADER_PACK = HEADER_STRUCT.pack
_CRC = crc32
_GTID = int(EventType.GTID)
_GCN = int(EventType.GCN)
_CONSENSUS = int(EventType.CONSENSUS_LOG)
_IGNORABLE = EventFlag.IGNORABLE
_U32 = struct.Struct("<I").pack
_NET_FIELD_LIMIT = {3: 1 << 16, 4: 1 << 24, 9: 1 << 64}   # net_field_length: width -> values below


def dn_post_header_table() -> bytes:
    """8.0 post-header lengths for types 1..105 with the DN's own types filled in: consensus log 36,
    previous consensus index 8, cluster info 4, GCN 0 (its body is flag-driven)."""
    table = bytearray(post_header_table(N_EVENT_TYPES))
    for type_code, length in ((101, 36), (102, 8), (103, 4), (104, 0), (105, 0)):
        table[type_code - 1] = length
    return bytes(table)


Event = tuple[int, bytes, int]          # (type code, payload, header flags)


class DnLog(BinlogWriter):
    """``mysql-bin.NNNNNN`` + ``mysql-bin.index`` of one DN, written group by group."""

    def __init__(self, directory: str | Path, *, server_id: int, sid: bytes, consensus: bool,
                 max_file_size: int, timestamp: int) -> None:
        self.sid = sid
        self.consensus = consensus
        self.gno = 0                 # last GTID number written
        self.consensus_index = 0     # last consensus log index written
        self.seq_in_file = 0         # GTID logical clock, restarts in every file as in MySQL
        self.events_written = 0
        super().__init__(directory, "mysql-bin", server_id=server_id, server_version=DN_SERVER_VERSION,
                         checksum=True, post_header_len=dn_post_header_table(),
                         max_file_size=max_file_size, timestamp=timestamp)

    def _open(self, seq: int, timestamp: int) -> None:
        super()._open(seq, timestamp)
        self._name = self.file_name
        self.seq_in_file = 0
        self.events_written += 1
        if self.consensus:
            self.append(EventType.PREVIOUS_CONSENSUS_INDEX,
                        ev.previous_consensus_index_payload(self.consensus_index + 1),
                        timestamp=timestamp, flags=_IGNORABLE)
            self.events_written += 1
        self.append(EventType.PREVIOUS_GTIDS, ev.previous_gtids_payload(self.sid, self.gno),
                    timestamp=timestamp)
        self.events_written += 1

    def _close_file(self) -> None:
        # No fsync: a simulated DN's files are written once and renamed into place as a whole.
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def rotate(self, *, timestamp: int = 0) -> str:
        self.events_written += 1
        return super().rotate(timestamp=timestamp)

    def write_group(self, events: list[Event], *, gcn_flags: int, gcn: int, timestamp: int,
                    commit_us: int) -> tuple[str, int]:
        """Write ``[CONSENSUS] GCN GTID events…`` as one group; returns the file name and the
        position of ``events[0]`` (the others follow back to back). Rotates afterwards when full."""
        body_len = 23 * len(events)
        for event in events:
            body_len += len(event[1])
        # The GTID's transaction_length counts the GTID event itself, whose size depends on how many
        # bytes that length takes: settle it by trying the shorter encodings first.
        gtid_len = 24 + ev.GTID_FIXED_LEN
        if body_len + gtid_len >= 251:
            for width in (3, 4, 9):
                gtid_len = 23 + ev.GTID_FIXED_LEN + width
                if body_len + gtid_len < _NET_FIELD_LIMIT[width]:
                    break
        self.gno += 1
        self.seq_in_file += 1
        gtid = ev.gtid_payload(self.sid, self.gno, self.seq_in_file - 1, self.seq_in_file, commit_us,
                               body_len + gtid_len)
        gcn_payload = ev.gcn_payload(gcn_flags, gcn)
        pos = self.position
        server_id = self.server_id
        parts: list[bytes] = []
        append = parts.append
        pack = _HEADER_PACK
        crc = _CRC
        if self.consensus:
            self.consensus_index += 1
            payload = ev.consensus_log_payload(self.consensus_index,
                                               23 + len(gcn_payload) + gtid_len + body_len)
            size = 23 + len(payload)
            pos += size
            head = pack(timestamp, _CONSENSUS, server_id, size, pos, _IGNORABLE)
            append(head)
            append(payload)
            append(_U32(crc(payload, crc(head))))
        size = 23 + len(gcn_payload)
        pos += size
        head = pack(timestamp, _GCN, server_id, size, pos, _IGNORABLE)
        append(head)
        append(gcn_payload)
        append(_U32(crc(gcn_payload, crc(head))))
        pos += gtid_len
        head = pack(timestamp, _GTID, server_id, gtid_len, pos, 0)
        append(head)
        append(gtid)
        append(_U32(crc(gtid, crc(head))))
        first = pos
        for type_code, payload, flags in events:
            size = 23 + len(payload)
            pos += size
            head = pack(timestamp, type_code, server_id, size, pos, flags)
            append(head)
            append(payload)
            append(_U32(crc(payload, crc(head))))
        self._fh.write(b"".join(parts))
        self.position = pos
        self.events_written += (3 if self.consensus else 2) + len(events)
        name = self._name
        if pos >= self.max_file_size:
            self.rotate(timestamp=timestamp)
        return name, first
