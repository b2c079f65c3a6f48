"""How row values are written into ``truth.json`` (and read back).

Row values follow the binlog library's Python conventions (None = NULL, int, float, Decimal,
date/datetime (naive)/timedelta, TIMESTAMP = aware UTC datetime, strings and blobs = bytes,
ENUM = 1-based index, SET = bit mask, BIT = int, JSON = Python value). JSON has no such types, so:

| Python value                | JSON                                            |
|-----------------------------|-------------------------------------------------|
| None, bool, int, float      | itself (ints are exact: Python's json keeps big ints) |
| bytes, valid UTF-8           | a JSON string                                   |
| bytes, not UTF-8             | ``{"$hex": "<hex>"}``                           |
| Decimal                     | ``{"$dec": "12.50"}`` (str of the Decimal, scale kept) |
| date                        | ``{"$date": "2024-06-01"}``                     |
| naive datetime              | ``{"$datetime": "2024-06-01 10:00:00.123000"}`` (µs only when non-zero) |
| aware datetime (TIMESTAMP)  | ``{"$timestamp": "2024-06-01 10:00:00"}`` (UTC) |
| timedelta (TIME)            | ``{"$time": "-01:02:03.500000"}``               |
| JSON column value           | ``{"$json": <the value>}``                      |

``encode_value(v, json_column)`` and ``decode_value(obj)`` are exact inverses for every value the
simulator writes.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

_UTC = dt.UTC


def _fmt_time_of_day(h: int, m: int, s: int, us: int) -> str:
    base = f"{h:02d}:{m:02d}:{s:02d}"
    return f"{base}.{us:06d}" if us else base


def encode_value(value: Any, json_column: bool = False) -> Any:
    """One row value → its JSON form (see the module table)."""
    if json_column:
        return {"$json": value}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return {"$hex": bytes(value).hex()}
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, dt.datetime):
        text = f"{value:%Y-%m-%d} " + _fmt_time_of_day(value.hour, value.minute, value.second,
                                                        value.microsecond)
        return {"$timestamp": text} if value.tzinfo is not None else {"$datetime": text}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.timedelta):
        total_us = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        sign = "-" if total_us < 0 else ""
        total_us = abs(total_us)
        secs, us = divmod(total_us, 1_000_000)
        h, rest = divmod(secs, 3600)
        m, s = divmod(rest, 60)
        return {"$time": sign + _fmt_time_of_day(h, m, s, us)}
    raise TypeError(f"no JSON form for {type(value).__name__}")


def _parse_dt(text: str) -> dt.datetime:
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return dt.datetime.strptime(text, fmt)


def decode_value(obj: Any) -> Any:
    """The inverse of ``encode_value``: JSON form → Python value (strings come back as bytes)."""
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, dict) and len(obj) == 1:
        (tag, text), = obj.items()
        if tag == "$json":
            return text
        if tag == "$hex":
            return bytes.fromhex(text)
        if tag == "$dec":
            return Decimal(text)
        if tag == "$date":
            return dt.date.fromisoformat(text)
        if tag == "$datetime":
            return _parse_dt(text)
        if tag == "$timestamp":
            return _parse_dt(text).replace(tzinfo=_UTC)
        if tag == "$time":
            neg = text.startswith("-")
            hms, _, frac = text.lstrip("-").partition(".")
            h, m, s = (int(x) for x in hms.split(":"))
            delta = dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=int(frac or 0))
            return -delta if neg else delta
    raise ValueError(f"not a truth value: {obj!r}")
