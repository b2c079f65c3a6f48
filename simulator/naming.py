"""Names and ids in the exact PolarDB-X formats: physical dbs/groups/tables, XIDs, trace hints,
storage sequences (docs/formats.md)."""

from __future__ import annotations

import random
from functools import lru_cache

CDC_LOGIC_DB = "__cdc__"
HEARTBEAT_TABLE = "__cdc_heartbeat__"
DDL_RECORD_TABLE = "__cdc_ddl_record__"
INSTRUCTION_TABLE = "__cdc_instruction__"
CN_IP = "10.20.0.7"

_SUFFIX_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"


def dn_id(index: int) -> str:
    """The storage instance id of DN ``index``; also its binlog directory name."""
    return f"dn{index}"


def phys_db(db: str, shard: int) -> str:
    return f"{db}_p{shard:05d}"


def group_name(db: str, shard: int) -> str:
    return f"{db.upper()}_P{shard:05d}_GROUP"


def cdc_phys_db(dn_index: int) -> str:
    """The broadcast ``__cdc__`` schema's physical copy on DN ``dn_index`` (docs/formats.md)."""
    return f"__cdc___{dn_index:06d}"


def cdc_group(dn_index: int) -> str:
    return f"__CDC___{dn_index:06d}_GROUP"


def phys_table_name(table: str, rng: random.Random) -> str:
    """``<table>_<4 random chars>`` as PolarDB-X names the physical tables of a sharded table."""
    return f"{table}_{''.join(rng.choice(_SUFFIX_CHARS) for _ in range(4))}"


@lru_cache(maxsize=4096)
def fnv1a_64(text: str) -> int:
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def gtrid(txn_id: int, primary_group: str) -> str:
    """``drds-<hex txnId>@<hex primaryGroupUid>`` (CN XAUtils)."""
    return f"drds-{txn_id:x}@{fnv1a_64(primary_group):016x}"


def bqual(group: str, read_view_seq: int) -> str:
    """``<group>@<4-digit readViewSeq>`` (CN XAUtils)."""
    return f"{group}@{read_view_seq:04d}"


def xid_sql(verb: str, gtrid_text: str, bqual_text: str, format_id: int = 1) -> str:
    """``XA START X'…',X'…',1`` and the END / COMMIT / ROLLBACK forms, as DNs log them."""
    return (f"XA {verb} X'{gtrid_text.encode().hex()}',X'{bqual_text.encode().hex()}',"
            f"{format_id}")


def trace_hint(txn_id: int, seq: int, subseq: int, server_id: str = "", ip: str = CN_IP) -> str:
    """The CN trace comment ``/*DRDS /<ip>/<traceId>-<seq>/<phySqlId>/<serverId>/ */``; the
    trace id is the txn id in hex, as in the real capture."""
    return f"/*DRDS /{ip}/{txn_id:x}-{seq}/{subseq}/{server_id}/ */"


def trace_id(seq: int, subseq: int) -> str:
    """The 20-char trace id the extractor derives from a hint: pad10(seq) + pad10(subseq)."""
    return f"{seq:010d}{subseq:010d}"


def java_string_hash(text: str) -> int:
    h = 0
    for unit in _utf16_units(text):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-le")
    return [int.from_bytes(data[i:i + 2], "little") for i in range(0, len(data), 2)]


def storage_seq(storage_inst_id: str) -> str:
    """The 6-digit storage sequence of a DN: first try of polardbx-cdc ``StorageSequence``,
    ``abs(Objects.hash(id))`` cut to its first 6 digits, left-padded."""
    h = (31 + java_string_hash(storage_inst_id)) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return str(abs(h))[:6].rjust(6, "0")


def vtso(tso: int, txn_id: int, seq: int = 0, storage: str = "000000") -> str:
    """The 54-digit virtual TSO (docs/formats.md)."""
    return f"{tso:019d}{txn_id:019d}{seq:010d}{storage}"
