"""``extract(dn)``: one DN's committed transactions in ascending vtso."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from extractor.assembler import Assembler
from extractor.model import DnTxn, Pos
from extractor.source import DirSource, DnSource
from extractor.vtso import VtsoState


def extract(dn: str | os.PathLike | DnSource, *, dn_id: str | None = None, storage_seq: str | None = None,
            state: VtsoState | None = None, start: Pos | None = None, follow: bool = False,
            should_stop: Callable[[], bool] | None = None, strict: bool = True,
            complete: bool = False) -> Iterator[DnTxn]:
    """Assemble, vtso-stamp and first-level-sort the binlog of one DN.

    ``dn`` is a DN binlog directory (its name is the DN id unless ``dn_id`` says otherwise) or a
    ``DnSource``. ``storage_seq`` overrides the DN's 6-digit storage sequence (see
    ``storage_sequences`` for a collision-free set); ``state`` and ``start`` resume from a restart
    point. With ``follow=True`` the newest file is followed as the DN writes it, until
    ``should_stop()``. Yields committed transactions (no rollbacks, no empty ones) in ascending vtso;
    a prepared transaction that never commits is held, with a warning every 10 s while following.
    Bad input raises an ``OrderingError`` (or the reader's ``BinlogError``) naming DN, file, offset.
    ``complete``: the input is the DN's whole binlog (its cluster stopped), so a branch still open
    at its end is an error (``OpenAtEnd``) instead of being held.
    """
    if isinstance(dn, DnSource):
        source = dn
    else:
        source = DirSource(dn, dn_id=dn_id, follow=follow, should_stop=should_stop,
                           start_file=start.file if start else None, start_pos=start.offset if start else 4)
    asm = Assembler(dn_id or source.dn_id, storage_seq=storage_seq, state=state, strict=strict)
    if isinstance(source, DirSource):
        source.on_idle = asm.warn_held
    for name, events in source.files():
        yield from asm.feed(name, events)
    asm.finish(complete)
