"""Trace ids from the CN's ``/*DRDS /ip/trace-seq/subseq/server/ */`` hint (docs/formats.md)."""

from __future__ import annotations

import re

TRACE_LEN = 10
# The form the CN writes: /*DRDS /<ip>/<trace>-<seq>/<subSeq>/<serverId>/ */ with plain decimal
# numbers (subSeq, serverId may be empty). For it ``parse_hint``'s general rules reduce to these
# groups; anything else goes the general way.
_CANONICAL = re.compile(r"/\*DRDS /[^/]*/[^/\-\s]+-([0-9]+)/([0-9]*)/([0-9]*)/ \*/")
_NUMERIC = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[lLdDfF]?|0[xX][0-9a-fA-F]+")


def _creatable(s: str) -> bool:
    """Apache ``NumberUtils.isCreatable`` for the forms a hint can hold."""
    return bool(_NUMERIC.fullmatch(s))


def build_trace_id(main: str | None, sub: str | None) -> str:
    """``leftPad(seq, 10, '0') + leftPad(subSeq, 10, '0')``; blank parts count as "0"."""
    main = main.strip() if main and main.strip() else "0"
    sub = sub.strip() if sub and sub.strip() else "0"
    return main.rjust(TRACE_LEN, "0") + sub.rjust(TRACE_LEN, "0")


def fake_trace_id(item_count: int) -> str:
    """The trace id of a table map in a transaction that had no hint at all: item count + zeros."""
    return build_trace_id(str(item_count), None)


def parse_hint(text: str) -> tuple[str, int | None] | None:
    """(trace id, server id) of a ROWS_QUERY text, or None if it is not a ``/*DRDS`` hint.

    Exactly ``LogEventUtil.buildTrace``: the text between the first '/' after index 6 and the first
    ``*/``, split on '/' (empty fields kept, a trailing empty one dropped, like java.util.Scanner);
    field 1 is ``traceId[-seq]`` (the second '-'-separated token, "0" without one), field 2 the
    subSeq if numeric, field 3 the server id if numeric.
    """
    m = _CANONICAL.match(text)
    if m is not None:
        seq, sub, server = m.groups()
        return seq.rjust(TRACE_LEN, "0") + (sub or "0").rjust(TRACE_LEN, "0"), int(server) if server else None
    if not text.startswith("/*DRDS"):
        return None
    begin = text.find("/", 6)
    end = text.find("*/")
    if begin < 0 or end < 0:
        return None
    fields = text[begin + 1:end].split("/")
    n = len(fields)
    if fields[-1] == "":
        n -= 1
    seq = sub = "0"
    server_id = None
    if n > 1:
        parts = fields[1].strip().split("-")
        if "" in parts:  # StringUtils.split drops empty tokens
            parts = [p for p in parts if p]
        seq = parts[1] if len(parts) >= 2 and not parts[1].isspace() else "0"
        if n > 2:
            f = fields[2].strip()
            if f and (f.isdigit() or _creatable(f)):
                sub = f
            if n > 3:
                f = fields[3].strip()
                if f and (f.isdigit() or _creatable(f)):
                    try:
                        server_id = int(f)
                    except ValueError:
                        server_id = None
    return seq.rjust(TRACE_LEN, "0") + sub.rjust(TRACE_LEN, "0"), server_id


def reduce_hint(text: str) -> str:
    """The rows-query text kept with a block: only the ``/*DRDS…*/`` hint, SQL after it cut."""
    if text.endswith("*/"):
        return text
    start = text.find("/*DRDS")
    end = text.find("*/", start + 6) if start >= 0 else -1
    if start < 0 or end < 0:
        return text
    return text[start:end + 2]
