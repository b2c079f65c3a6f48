"""XA xid text → (txnId, branch) as the CDC derives them (CN ``XAUtils``).

The DN logs ``XA START X'<gtrid hex>',X'<bqual hex>',<formatId>``; gtrid is
``drds-<hex txnId>@<hex primaryGroupUid>``, bqual ``<group>[@<readViewSeq>]``. Only format ids 1
(NORMAL) and 3 (ARCHIVE) are CDC transactions; any other id makes the transaction ignored entirely.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

VALID_FORMAT_IDS = ("1", "3")
ARCHIVE_FORMAT_ID = "3"
CDC_SINGLE_GROUP = "__cdc___single_group"
_tuple_new = tuple.__new__


class Xid(NamedTuple):
    txn_id: int
    group: str        # decoded bqual, e.g. "BANK_P00000_GROUP" or "D1_P00000_GROUP@0000"
    archive: bool


def format_id(xid: str) -> str:
    """The text after the last comma (``substringAfterLast(xid, ",")``)."""
    i = xid.rfind(",")
    return xid[i + 1:] if i >= 0 else ""


def is_valid(xid: str) -> bool:
    return format_id(xid) in VALID_FORMAT_IDS


def _unwrap(part: str) -> str:
    """``X'abcd'`` → ``abcd`` (LogEventUtil.unwrap)."""
    part = part.strip()
    b, e = 0, len(part)
    if b < e and part[b] == "X":
        b += 1
    if b < e and part[b] == "'":
        b += 1
    if e > b and part[e - 1] == "'":
        e -= 1
    return part[b:e]


def parse(xid: str) -> Xid:
    """Decode a valid xid; raises ValueError when gtrid/bqual are not what the CN writes."""
    # Fast path for the form the DN writes, X'<hex>',X'<hex>',<fmt>; anything else goes the
    # CDC's general way (split on commas, unwrap X'…').
    parts = _dn_form(xid)
    if parts is not None:
        gtrid_hex, bqual_hex = parts
    else:
        gtrid_part, _, rest = xid.partition(",")
        gtrid_hex, bqual_hex = _unwrap(gtrid_part), _unwrap(rest.partition(",")[0])
    gtrid = bytes.fromhex(gtrid_hex).decode("utf-8")
    # substring(len("drds-")) as the CDC does; then the part before '@' is the hex txnId.
    at = gtrid.find("@")
    txn_id = int(gtrid[5:at] if at >= 0 else gtrid[5:], 16)
    if not 0 <= txn_id < 1 << 63:
        raise ValueError(f"txnId {txn_id} out of range")
    return _tuple_new(Xid, (txn_id, _group(bqual_hex), xid.endswith(",3")))  # Xid(…) minus its __new__ call


def _dn_form(xid: str) -> tuple[str, str] | None:
    """(gtrid hex, bqual hex) of an xid in the form the DN writes, ``X'<hex>',X'<hex>',<fmt>``."""
    g_end = xid.find("'", 2) if xid.startswith("X'") else -1
    b_end = xid.find("'", g_end + 4) if g_end > 0 and xid.startswith(",X'", g_end + 1) else -1
    return (xid[2:g_end], xid[g_end + 4:b_end]) if b_end > 0 else None


def bqual_hex(xid: str) -> bytes | None:
    """The bqual's hex digits as bytes when ``xid`` has the DN's form (``binlog.kernel.scan_txns`` keys
    its branches by them), else None."""
    parts = _dn_form(xid)
    return parts[1].encode("latin-1") if parts is not None else None


@lru_cache(maxsize=4096)
def _group(bqual_hex: str) -> str:
    """The decoded bqual: a handful of groups per DN, decoded once each."""
    return bytes.fromhex(bqual_hex).decode("utf-8")


def is_cdc_single(group: str) -> bool:
    return group.split("@", 1)[0].lower().startswith(CDC_SINGLE_GROUP)


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-le")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] | data[i + 1] << 8)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def storage_hash(dn_id: str) -> str:
    """``String.valueOf(storageInstId.hashCode())``: the first half of every branch key."""
    return str(java_string_hash(dn_id))


def branch_key(dn_hash: str, group: str) -> str:
    """Partition id of an XA branch: ``<storage hash>_<bqual>`` (TxnKeyBuilder)."""
    return f"{dn_hash}_{group}"
