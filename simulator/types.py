"""MySQL column types of the simulated schemas: parsing the SQL type text, generating values,
converting a value when a column's type is modified, and rendering SQL literals.

Values follow the binlog library's conventions (see ``simulator.values``). ``parse_type`` is the one
place that reads a type text; everything else works on the ``SqlType`` it returns.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

INT_BYTES = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 8}
TEXT_BYTES = {"tinytext": 1, "text": 2, "mediumtext": 3, "longtext": 4,
              "tinyblob": 1, "blob": 2, "mediumblob": 3, "longblob": 4}
UTF8MB4_MAXLEN = 4
_TYPE_RE = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*(unsigned)?\s*$", re.IGNORECASE)
_EPOCH_2024 = dt.datetime(2024, 1, 1)


@dataclass(frozen=True, slots=True)
class SqlType:
    """A parsed column type. ``family`` is the base name in lower case (``int``, ``varchar``…)."""

    text: str
    family: str
    length: int = 0            # chars for char/varchar, bytes for binary/varbinary, bits for bit
    precision: int = 0         # decimal precision
    scale: int = 0             # decimal scale
    fsp: int = 0               # fractional seconds for time/datetime/timestamp
    unsigned: bool = False
    members: tuple[str, ...] = ()   # enum / set members

    @property
    def is_text(self) -> bool:
        """Character data (a charset applies), as opposed to binary strings."""
        return self.family in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext",
                               "enum", "set")

    @property
    def is_int(self) -> bool:
        return self.family in INT_BYTES


def _members(args: str) -> tuple[str, ...]:
    return tuple(m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", args))


def parse_type(text: str) -> SqlType:
    """``"decimal(12,2)"``, ``"int unsigned"``, ``"enum('a','b')"``, ``"datetime(3)"`` → ``SqlType``."""
    m = _TYPE_RE.match(text)
    if not m:
        raise ValueError(f"cannot parse column type {text!r}")
    family, args, unsigned = m.group(1).lower(), m.group(2) or "", bool(m.group(3))
    if family in ("enum", "set"):
        return SqlType(text, family, members=_members(args))
    nums = [int(x) for x in args.split(",") if x.strip()] if args else []
    if family == "decimal":
        precision, scale = (nums + [10, 0][len(nums):])[:2] if nums else (10, 0)
        return SqlType(text, family, precision=precision, scale=scale, unsigned=unsigned)
    if family in ("time", "datetime", "timestamp"):
        return SqlType(text, family, fsp=nums[0] if nums else 0)
    if family in ("char", "binary"):
        return SqlType(text, family, length=nums[0] if nums else 1)
    if family in ("varchar", "varbinary", "bit"):
        return SqlType(text, family, length=nums[0] if nums else 1)
    return SqlType(text, family, unsigned=unsigned)


# -- value generation ---------------------------------------------------------------------------

def int_range(t: SqlType) -> tuple[int, int]:
    bits = INT_BYTES[t.family] * 8
    return (0, (1 << bits) - 1) if t.unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _words(rng: random.Random, max_chars: int) -> str:
    # Multi-byte characters on purpose: lengths in chars vs bytes must both be right downstream.
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 éüß中文字"
    n = rng.randint(0, max(0, max_chars))
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_value(t: SqlType, rng: random.Random, *, small: bool = False) -> Any:
    """A random value that fits ``t`` (``small`` keeps integers and strings modest)."""
    f = t.family
    if f in INT_BYTES:
        lo, hi = int_range(t)
        if small:
            lo, hi = max(lo, -1000), min(hi, 1000)
        # Extremes matter for the row codec: pick a bound now and then.
        r = rng.random()
        return lo if r < 0.05 else hi if r < 0.1 else rng.randint(lo, hi)
    if f == "float":
        return rng.randint(-2 ** 20, 2 ** 20) / 8.0   # exact in a 4-byte float
    if f == "double":
        return rng.randint(-2 ** 40, 2 ** 40) / 1024.0
    if f == "decimal":
        digits = min(t.precision - t.scale, 12)
        whole = rng.randint(0 if t.unsigned else -(10 ** digits - 1), 10 ** digits - 1)
        frac = rng.randint(0, 10 ** t.scale - 1) if t.scale else 0
        sign = "-" if whole < 0 else ""
        text = f"{sign}{abs(whole)}" + (f".{frac:0{t.scale}d}" if t.scale else "")
        return Decimal(text)
    if f == "date":
        return (_EPOCH_2024 + dt.timedelta(days=rng.randint(-20000, 20000))).date()
    if f in ("datetime", "timestamp"):
        us = rng.randint(0, 10 ** 6 - 1) // 10 ** (6 - t.fsp) * 10 ** (6 - t.fsp) if t.fsp else 0
        when = _EPOCH_2024 + dt.timedelta(seconds=rng.randint(-10 ** 8, 10 ** 8), microseconds=us)
        return when.replace(tzinfo=dt.UTC) if f == "timestamp" else when
    if f == "time":
        us = rng.randint(0, 10 ** 6 - 1) // 10 ** (6 - t.fsp) * 10 ** (6 - t.fsp) if t.fsp else 0
        delta = dt.timedelta(seconds=rng.randint(0, 838 * 3600), microseconds=us)
        return -delta if rng.random() < 0.2 else delta
    if f == "year":
        return rng.randint(1901, 2155)
    if f == "char":
        # CHAR drops trailing spaces (binlog image and SELECT alike): never generate them.
        return _words(rng, min(t.length, 12 if small else t.length)).rstrip(" ").encode()
    if f == "varchar":
        return _words(rng, min(t.length, 12 if small else t.length)).encode()
    if f == "binary":
        # BINARY(n) pads with zero bytes and the binlog image drops trailing ones: end on non-zero.
        return bytes(rng.randrange(256) for _ in range(t.length - 1)) + bytes([rng.randint(1, 255)])
    if f == "varbinary":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, min(t.length, 12))))
    if f in ("tinytext", "text", "mediumtext", "longtext"):
        return _words(rng, 24).encode()
    if f in ("tinyblob", "blob", "mediumblob", "longblob"):
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))
    if f == "enum":
        return rng.randint(1, len(t.members))
    if f == "set":
        return rng.randrange(1 << len(t.members))
    if f == "bit":
        return rng.randrange(1 << t.length)
    if f in ("geometry", "point"):
        # Internal format: SRID (0) + WKB POINT, little endian.
        return struct.pack("<IBIdd", 0, 1, 1, rng.randint(-2 ** 20, 2 ** 20) / 8, rng.randint(-2 ** 20, 2 ** 20) / 8)
    if f == "json":
        return {"k": rng.randint(0, 99), "tags": [_words(rng, 5) for _ in range(rng.randint(0, 3))],
                "ok": rng.random() < 0.5, "v": None}
    raise ValueError(f"no generator for {t.text}")


def convert_value(value: Any, to: SqlType) -> Any:
    """A value after ``ALTER TABLE … MODIFY`` to type ``to``: the workloads only widen types
    (INT → BIGINT, VARCHAR(20) → VARCHAR(64)), so the value itself is unchanged."""
    if value is None:
        return None
    if to.is_int and not isinstance(value, int):
        raise TypeError(f"cannot convert {value!r} to {to.text}")
    return value


# -- SQL literals --------------------------------------------------------------------------------

def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''").replace("\0", "\\0") + "'"


def sql_literal(value: Any, t: SqlType) -> str:
    """``value`` as a MySQL/MariaDB literal for a column of type ``t``. TIMESTAMP literals are UTC:
    run them with ``SET time_zone = '+00:00'``."""
    if value is None:
        return "NULL"
    f = t.family
    if f == "json":
        import json
        return _quote(json.dumps(value, sort_keys=True, ensure_ascii=False))
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, Decimal)):
        # ENUM / SET / BIT take their index / mask / bits as a number.
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        if t.is_text:
            return _quote(value.decode("utf-8"))
        return f"X'{value.hex()}'" if value else "''"
    if isinstance(value, dt.datetime):
        return _quote(value.replace(tzinfo=None).isoformat(sep=" "))
    if isinstance(value, dt.date):
        return _quote(value.isoformat())
    if isinstance(value, dt.timedelta):
        from simulator.values import encode_value
        return _quote(encode_value(value)["$time"])
    raise TypeError(f"no literal for {value!r}")
