"""MySQL's binary formats for DECIMAL and temporal values, shared by row images and binary JSON.

* packed decimal (``decimal2bin`` / ``bin2decimal`` in MySQL's ``strings/decimal.c``): base-10^9 groups
  stored big-endian, sign in the top bit, negative numbers bitwise inverted;
* the "packed longlong" temporal form (``my_time.h`` ``MY_PACKED_TIME_*``): ``(int_part << 24) + usec``,
  used by binary JSON opaque DATE/TIME/DATETIME/TIMESTAMP values;
* the on-disk forms of TIME2 / DATETIME2 / TIMESTAMP2 (MySQL 5.6.4+): an offset-biased big-endian
  integer part followed by 0–3 big-endian bytes of fractional seconds.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

# -- DECIMAL -----------------------------------------------------------------------------------------

DIG_PER_GROUP = 9
DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
MAX_DECIMAL_PRECISION = 65
MAX_DECIMAL_SCALE = 30
# Quantizing to 30 decimals a 65-digit number needs more than the default 28-digit context.
_DECIMAL_CONTEXT = Context(prec=MAX_DECIMAL_PRECISION + MAX_DECIMAL_SCALE + 5, rounding=ROUND_HALF_UP)


def decimal_binary_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


@lru_cache(maxsize=256)
def _decimal_layout(precision: int, scale: int) -> tuple[tuple[tuple[int, int, int], ...],
                                                         tuple[tuple[int, int, int], ...], int]:
    """Groups of the integer and fractional parts as (bit shift in the whole number, bit mask, digits),
    most significant first, and the total byte size."""
    if not (0 < precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= min(precision, MAX_DECIMAL_SCALE)):
        raise ValueError(f"invalid DECIMAL({precision},{scale})")
    intg = precision - scale
    int_groups = ([intg % 9] if intg % 9 else []) + [9] * (intg // 9)
    frac_groups = [9] * (scale // 9) + ([scale % 9] if scale % 9 else [])
    size = decimal_binary_size(precision, scale)
    shift = size * 8
    placed: list[list[tuple[int, int, int]]] = [[], []]
    for part, groups in enumerate((int_groups, frac_groups)):
        for digits in groups:
            nbits = DIG2BYTES[digits] * 8
            shift -= nbits
            placed[part].append((shift, (1 << nbits) - 1, digits))
    return tuple(placed[0]), tuple(placed[1]), size


def decimal_decoder(precision: int, scale: int) -> Callable[[bytes], Decimal]:
    """A decoder of ``decimal_binary_size(precision, scale)`` bytes, with the group layout bound once."""
    int_groups, frac_groups, size = _decimal_layout(precision, scale)
    sign_bit = 1 << (size * 8 - 1)
    all_bits = (1 << (size * 8)) - 1
    from_bytes = int.from_bytes

    if len(int_groups) <= 1 and len(frac_groups) <= 1:
        # Up to 9 digits on each side of the point: one group each, plain shifts (the common case).
        frac_bits = frac_groups[0][1].bit_length() if frac_groups else 0  # the last group sits at bit 0
        frac_mask = (1 << frac_bits) - 1
        pattern = f"%s%d.%0{scale}d" if scale else "%s%d%.0s"

        def decode_simple(data: bytes) -> Decimal:
            whole = from_bytes(data, "big") ^ sign_bit
            sign = ""
            if whole & sign_bit:  # the stored sign bit was clear: negative, all bits inverted
                whole ^= all_bits
                sign = "-"
            return Decimal(pattern % (sign, whole >> frac_bits, whole & frac_mask))

        return decode_simple

    def decode_groups(data: bytes) -> Decimal:
        whole = from_bytes(data, "big") ^ sign_bit
        negative = bool(whole & sign_bit)
        if negative:
            whole ^= all_bits
        int_part = 0
        for shift, mask, digits in int_groups:
            int_part = int_part * 10 ** digits + ((whole >> shift) & mask)
        text = f"-{int_part}" if negative else str(int_part)
        if scale:
            frac_part = 0
            for shift, mask, digits in frac_groups:
                frac_part = frac_part * 10 ** digits + ((whole >> shift) & mask)
            text = f"{text}.{frac_part:0{scale}d}"
        return Decimal(text)

    return decode_groups


def decode_decimal(data: bytes, precision: int, scale: int) -> Decimal:
    """``data`` holds exactly ``decimal_binary_size(precision, scale)`` bytes."""
    return _cached_decimal_decoder(precision, scale)(data[:decimal_binary_size(precision, scale)])


_cached_decimal_decoder = lru_cache(maxsize=256)(decimal_decoder)


def encode_decimal(value: Decimal | int | str | float, precision: int, scale: int) -> bytes:
    """Round half away from zero to ``scale`` digits as MySQL does on insert; ValueError if the
    integer part needs more than ``precision - scale`` digits."""
    int_groups, frac_groups, size = _decimal_layout(precision, scale)
    if not isinstance(value, Decimal):
        value = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    if not value.is_finite():
        raise ValueError(f"DECIMAL cannot hold {value}")
    try:
        quantized = _DECIMAL_CONTEXT.quantize(value, Decimal(1).scaleb(-scale))
    except InvalidOperation as exc:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})") from exc
    sign, digits, _ = quantized.as_tuple()
    coefficient = int("".join(map(str, digits)) or "0")
    int_part, frac_part = divmod(coefficient, 10 ** scale)
    if int_part >= 10 ** (precision - scale):
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    whole = 0
    remaining = int_part
    for shift, _mask, digits_in_group in reversed(int_groups):
        remaining, group = divmod(remaining, 10 ** digits_in_group)
        whole |= group << shift
    remaining = frac_part
    for shift, _mask, digits_in_group in reversed(frac_groups):
        # Fractional groups are aligned left: the last group holds the least significant digits.
        remaining, group = divmod(remaining, 10 ** digits_in_group)
        whole |= group << shift
    if sign:
        whole ^= (1 << (size * 8)) - 1
    whole ^= 1 << (size * 8 - 1)
    return whole.to_bytes(size, "big")


# -- temporal: shared helpers --------------------------------------------------------------------------

def frac_bytes(fsp: int) -> int:
    """Bytes of fractional seconds for TIME2/DATETIME2/TIMESTAMP2 of precision ``fsp``."""
    if not 0 <= fsp <= 6:
        raise ValueError(f"fractional second precision {fsp} is not 0..6")
    return (fsp + 1) // 2


# A stored fraction counts units of 10 ms, 100 µs or 1 µs for 1, 2 or 3 fraction bytes.
FRAC_UNIT = (0, 10000, 100, 1)


def truncate_usec(usec: int, fsp: int) -> int:
    """Drop the digits a column of precision ``fsp`` cannot hold (MySQL rounds before binlogging,
    so the binlog never carries them; truncation keeps an encode of a decoded value exact)."""
    step = 10 ** (6 - fsp)
    return usec - usec % step


def datetime_text(year: int, month: int, day: int, hour: int, minute: int, second: int, usec: int,
                  fsp: int) -> str:
    """MySQL's text form, used for values Python's datetime cannot hold (zero dates)."""
    text = f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{usec:06d}"[:len(text) + 1 + fsp] if fsp else text


_DATETIME_TEXT = re.compile(
    r"^\s*(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{0,6}))?)?\s*$")


def parse_datetime_text(text: str) -> tuple[int, int, int, int, int, int, int]:
    """'YYYY-MM-DD[ hh:mm:ss[.ffffff]]' (zero and partial dates allowed) → fields."""
    match = _DATETIME_TEXT.match(text)
    if not match:
        raise ValueError(f"not a MySQL date/datetime literal: {text!r}")
    y, mo, d, h, mi, s, frac = match.groups()
    usec = int((frac or "").ljust(6, "0"))
    return int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), usec


def datetime_fields(value: dt.datetime | dt.date | str) -> tuple[int, int, int, int, int, int, int]:
    if isinstance(value, dt.datetime):
        return (value.year, value.month, value.day, value.hour, value.minute, value.second,
                value.microsecond)
    if isinstance(value, dt.date):
        return value.year, value.month, value.day, 0, 0, 0, 0
    if isinstance(value, str):
        return parse_datetime_text(value)
    raise TypeError(f"expected datetime, date or str, got {type(value).__name__}")


def make_datetime(year: int, month: int, day: int, hour: int, minute: int, second: int, usec: int,
                  fsp: int) -> dt.datetime | str:
    try:
        return dt.datetime(year, month, day, hour, minute, second, usec)
    except ValueError:
        return datetime_text(year, month, day, hour, minute, second, usec, fsp)


MAX_TIME_HOURS = 838


def time_fields(value: dt.timedelta | dt.time) -> tuple[bool, int, int, int, int]:
    """(negative, hours, minutes, seconds, usec) of a TIME value."""
    if isinstance(value, dt.time):
        return False, value.hour, value.minute, value.second, value.microsecond
    if not isinstance(value, dt.timedelta):
        raise TypeError(f"expected timedelta, got {type(value).__name__}")
    total = value // dt.timedelta(microseconds=1)
    negative = total < 0
    seconds, usec = divmod(abs(total), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    if hours > MAX_TIME_HOURS:
        raise ValueError(f"TIME out of range: {value}")
    return negative, hours, rest // 60, rest % 60, usec


def make_timedelta(negative: bool, hours: int, minutes: int, seconds: int, usec: int) -> dt.timedelta:
    delta = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=usec)
    return -delta if negative else delta


# -- TIME2 / DATETIME2 / TIMESTAMP2 on disk ------------------------------------------------------------

TIMEF_INT_OFS = 0x800000
DATETIMEF_INT_OFS = 0x8000000000


def time2_decoder(fsp: int) -> Callable[[bytes], dt.timedelta]:
    """Decoder of 3 + frac_bytes(fsp) big-endian bytes. The whole field is one offset-biased signed
    number ``(hms << 8*nfrac) + frac``: that is why negative values store the fraction "reversed"."""
    nfrac = frac_bytes(fsp)
    frac_bits = 8 * nfrac
    frac_mask = (1 << frac_bits) - 1
    unit = FRAC_UNIT[nfrac]
    offset = TIMEF_INT_OFS << frac_bits
    from_bytes = int.from_bytes
    timedelta = dt.timedelta

    def decode(data: bytes) -> dt.timedelta:
        signed = from_bytes(data, "big") - offset
        magnitude = -signed if signed < 0 else signed
        hms = magnitude >> frac_bits
        delta = timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 0x3F, seconds=hms & 0x3F,
                          microseconds=(magnitude & frac_mask) * unit)
        return -delta if signed < 0 else delta

    return decode


def decode_time2(data: bytes, fsp: int) -> dt.timedelta:
    return _cached_time2_decoder(fsp)(data[:3 + frac_bytes(fsp)])


_cached_time2_decoder = lru_cache(maxsize=8)(time2_decoder)


def encode_time2(value: dt.timedelta | dt.time, fsp: int) -> bytes:
    nfrac = frac_bytes(fsp)
    negative, hours, minutes, seconds, usec = time_fields(value)
    frac_bits = 8 * nfrac
    magnitude = (((hours << 12) | (minutes << 6) | seconds) << frac_bits) + (
        truncate_usec(usec, fsp) // FRAC_UNIT[nfrac] if nfrac else 0)
    stored = (TIMEF_INT_OFS << frac_bits) + (-magnitude if negative else magnitude)
    return stored.to_bytes(3 + nfrac, "big")


def datetime2_decoder(fsp: int) -> Callable[[bytes], dt.datetime | str]:
    """Decoder of 5 + frac_bytes(fsp) big-endian bytes: sign bit (1 = non-negative), 17 bits
    year*13+month, 5 day, 5 hour, 6 minute, 6 second; then the fraction."""
    nfrac = frac_bytes(fsp)
    frac_bits = 8 * nfrac
    frac_mask = (1 << frac_bits) - 1
    unit = FRAC_UNIT[nfrac]
    from_bytes = int.from_bytes
    datetime = dt.datetime

    def decode(data: bytes) -> dt.datetime | str:
        whole = from_bytes(data, "big")
        usec = (whole & frac_mask) * unit
        packed = (whole >> frac_bits) - DATETIMEF_INT_OFS
        if packed < 0:  # MySQL never writes one; keep the bytes' meaning visible rather than fail
            packed = -packed
        ymd = packed >> 17
        year_month = ymd >> 5
        hms = packed & 0x1FFFF
        try:
            return datetime(year_month // 13, year_month % 13, ymd & 0x1F, hms >> 12, (hms >> 6) & 0x3F,
                            hms & 0x3F, usec)
        except ValueError:
            return datetime_text(year_month // 13, year_month % 13, ymd & 0x1F, hms >> 12,
                                 (hms >> 6) & 0x3F, hms & 0x3F, usec, fsp)

    return decode


def decode_datetime2(data: bytes, fsp: int) -> dt.datetime | str:
    return _cached_datetime2_decoder(fsp)(data[:5 + frac_bytes(fsp)])


_cached_datetime2_decoder = lru_cache(maxsize=8)(datetime2_decoder)


def encode_datetime2(value: dt.datetime | dt.date | str, fsp: int) -> bytes:
    nfrac = frac_bytes(fsp)
    year, month, day, hour, minute, second, usec = datetime_fields(value)
    packed = ((((year * 13 + month) << 5) | day) << 17) | (hour << 12) | (minute << 6) | second
    head = (packed + DATETIMEF_INT_OFS).to_bytes(5, "big")
    if not nfrac:
        return head
    return head + (truncate_usec(usec, fsp) // FRAC_UNIT[nfrac]).to_bytes(nfrac, "big")


def timestamp2_decoder(fsp: int) -> Callable[[bytes], dt.datetime]:
    """Decoder of 4 big-endian bytes of seconds since the epoch (0 is MySQL's zero timestamp), then
    the fraction."""
    nfrac = frac_bytes(fsp)
    frac_bits = 8 * nfrac
    frac_mask = (1 << frac_bits) - 1
    unit = FRAC_UNIT[nfrac]
    from_bytes = int.from_bytes
    timedelta = dt.timedelta

    def decode(data: bytes) -> dt.datetime:
        whole = from_bytes(data, "big")
        return EPOCH + timedelta(seconds=whole >> frac_bits, microseconds=(whole & frac_mask) * unit)

    return decode


def decode_timestamp2(data: bytes, fsp: int) -> dt.datetime:
    return _cached_timestamp2_decoder(fsp)(data[:4 + frac_bytes(fsp)])


_cached_timestamp2_decoder = lru_cache(maxsize=8)(timestamp2_decoder)


def timestamp_parts(value: dt.datetime | str | int) -> tuple[int, int]:
    """(seconds since the epoch, usec). A naive datetime is taken as UTC; '0000-00-00 …' is 0."""
    if isinstance(value, str):
        fields = parse_datetime_text(value)
        if fields[:3] == (0, 0, 0):
            return 0, fields[6]
        value = dt.datetime(*fields, tzinfo=UTC)
    if isinstance(value, int):
        return value, 0
    if not isinstance(value, dt.datetime):
        raise TypeError(f"expected datetime, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    seconds = delta.days * 86400 + delta.seconds
    if not 0 <= seconds < 1 << 32:
        raise ValueError(f"TIMESTAMP out of range: {value}")
    return seconds, delta.microseconds


def encode_timestamp2(value: dt.datetime | str | int, fsp: int) -> bytes:
    nfrac = frac_bytes(fsp)
    seconds, usec = timestamp_parts(value)
    head = seconds.to_bytes(4, "big")
    if not nfrac:
        return head
    return head + (truncate_usec(usec, fsp) // FRAC_UNIT[nfrac]).to_bytes(nfrac, "big")


# -- packed longlong (binary JSON opaque temporal values) --------------------------------------------

def pack_datetime_longlong(year: int, month: int, day: int, hour: int, minute: int, second: int,
                           usec: int, negative: bool = False) -> int:
    ymd = ((year * 13 + month) << 5) | day
    hms = (hour << 12) | (minute << 6) | second
    packed = (((ymd << 17) | hms) << 24) + usec
    return -packed if negative else packed


def unpack_datetime_longlong(packed: int) -> tuple[int, int, int, int, int, int, int]:
    magnitude = abs(packed)
    usec = magnitude & 0xFFFFFF
    ymdhms = magnitude >> 24
    ymd = ymdhms >> 17
    year_month = ymd >> 5
    hms = ymdhms & 0x1FFFF
    return year_month // 13, year_month % 13, ymd & 0x1F, hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F, usec


def pack_time_longlong(value: dt.timedelta | dt.time) -> int:
    negative, hours, minutes, seconds, usec = time_fields(value)
    packed = (((hours << 12) | (minutes << 6) | seconds) << 24) + usec
    return -packed if negative else packed


def unpack_time_longlong(packed: int) -> dt.timedelta:
    magnitude = abs(packed)
    hms = magnitude >> 24
    return make_timedelta(packed < 0, hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F, magnitude & 0xFFFFFF)
