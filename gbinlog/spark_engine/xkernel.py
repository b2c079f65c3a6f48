"""The Spark engine's byte loops: the compiled ``_xkernel`` (built by ``pip install`` with
``binlog._kernel``) or the pure-Python twins here, which give the same bytes.

``GBINLOG_PURE_PYTHON=1`` forces the pure-Python ones (as for ``binlog.kernel``; the tests run
both).

* ``place(src, start, rel_start, first_gno, first_seq, sid)``: range bytes (whole transactions,
  at ``rel_start`` in their range file) moved to file offset ``start``: a GTID event before each
  transaction when ``sid`` is given (``dumper.gtid.insert_gtids``), else only relocated.
* ``event_marks(data, off, step)``: event starts about every ``step`` bytes (a walk over the
  headers).
"""

from __future__ import annotations

from binlog.kernel import compiled_twin

_X = compiled_twin("gbinlog.spark_engine._xkernel")
COMPILED = _X is not None


def place_py(src, start: int, rel_start: int, first_gno: int, first_seq: int, sid: bytes | None) -> bytearray:
    from binlog.writer import relocate
    from dumper.gtid import insert_gtids

    if sid is not None:
        return insert_gtids(src, start, first_gno, first_seq, sid)
    buf = bytearray(src)
    if start != rel_start:
        relocate(buf, start - rel_start)
    return buf


def event_marks_py(data, off: int, step: int) -> list[int]:
    out: list[int] = []
    due = off
    while off + 19 <= len(data):
        size = int.from_bytes(data[off + 9:off + 13], "little")
        if size < 19 or off + size > len(data):
            break
        if off >= due:
            out.append(off)
            due = off + step
        off += size
    return out


if COMPILED:
    def place(src, start: int, rel_start: int, first_gno: int, first_seq: int, sid: bytes | None) -> bytearray:
        return _X.place(src, start, first_gno, first_seq, sid)

    event_marks = _X.event_marks
else:
    place = place_py
    event_marks = event_marks_py
