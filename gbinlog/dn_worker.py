"""Per-DN extraction in a worker process (DESIGN.md §5, local engine).

Extraction (read, CRC check, assembly, vtso, first-level sort) is most of the work and independent
per DN, so each DN can run ``extract`` in its own process while the main process merges, shapes
and writes. ``worker_stream`` yields the same ``DnTxn``s, in the same order, as
``extract(...)`` in-process: the worker sends batches of plain tuples over a pipe (bounded by the
pipe, so memory stays flat) and the main process rebuilds the objects; only what later stages read
crosses (positions, vtso, blocks with their events' bytes, the DDL query event, the restart point).

Errors in the worker (``OrderingError``, ``BinlogError``, …) are re-raised in the main process with
the same type and message. Closing the stream early kills the worker.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from collections.abc import Iterator
from pathlib import Path

from binlog.errors import BinlogError
from binlog.event import Event, FormatContext
from binlog.header import HEADER_STRUCT
from extractor.errors import OrderingError
from extractor.model import Block, DnTxn, Pos, RestartPoint, TxnKind

BATCH = 512
_KINDS = {k.value: k for k in TxnKind}
_tuple_new = tuple.__new__


def _ctx_key(ctx: FormatContext) -> tuple:
    return (ctx.checksum, ctx.server_version, ctx.post_header_len, ctx.source)


def _pack(t: DnTxn) -> tuple:
    q = t.query
    blocks = t.blocks
    ctx = q.ctx if q is not None else blocks[0].events[0].ctx if blocks else None
    # plain tuples cross the pipe (a NamedTuple pickles by class reference, much slower)
    return (t.kind.value, t.txn_id, t.branch, tuple(t.start), t.xid, t.vtso, None if t.end is None else tuple(t.end),
            t.tso, t.server_id, t.archive, None if t.restart is None else tuple(t.restart), t.db, t.sql,
            None if q is None else (q.pos, q.raw),
            [(b.trace_id, b.db, b.table, b.hint, [(e.pos, e.raw) for e in b.events],
              None if b.rows_query is None else (b.rows_query.pos, b.rows_query.raw)) for b in blocks],
            None if ctx is None else _ctx_key(ctx))


def _die_with_parent(parent: int) -> None:
    """SIGKILL this worker when the main process dies (Linux ``PR_SET_PDEATHSIG``): an orphaned
    worker would block forever on its pipe and keep the main process's stdout/stderr open."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the prctl
        os._exit(1)


def _work(conn, parent: int, directory: str, dn_id: str, storage_seq: str, restart: tuple | None) -> None:
    _die_with_parent(parent)
    from extractor import extract

    try:
        point = RestartPoint(*restart) if restart is not None else None
        kw = {} if point is None else {"start": point.pos, "state": point.vtso_state()}
        batch = []
        for t in extract(directory, dn_id=dn_id, storage_seq=storage_seq, **kw):
            batch.append(_pack(t))
            if len(batch) >= BATCH:
                conn.send_bytes(pickle.dumps(("txns", batch), pickle.HIGHEST_PROTOCOL))
                batch = []
        if batch:
            conn.send_bytes(pickle.dumps(("txns", batch), pickle.HIGHEST_PROTOCOL))
        conn.send_bytes(pickle.dumps(("end", None)))
    except (OrderingError, BinlogError) as exc:
        fields = {k: getattr(exc, k) for k in ("dn", "file", "offset", "source") if hasattr(exc, k)}
        conn.send_bytes(pickle.dumps(("error", (type(exc), exc.message, fields))))
    except BaseException as exc:  # anything else: its type name and text
        conn.send_bytes(pickle.dumps(("error", (RuntimeError, f"DN {dn_id} extraction: {type(exc).__name__}: "
                                                              f"{exc}", {}))))
    finally:
        conn.close()


def _rebuild(error: tuple) -> Exception:
    cls, message, fields = error
    try:
        return cls(message, **fields)
    except TypeError:
        return RuntimeError(message)


def worker_stream(directory: str | os.PathLike, dn_id: str, storage_seq: str,
                  restart: RestartPoint | None = None) -> Iterator[DnTxn]:
    """``extract(directory, dn_id=…, storage_seq=…, start/state from restart)`` run in a child
    process; yields the same transactions."""
    ctxs: dict[tuple, FormatContext] = {}
    unpack = HEADER_STRUCT.unpack_from
    new_event = Event
    kinds = _KINDS
    mp = multiprocessing.get_context("fork")
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=_work, args=(send, os.getpid(), str(Path(directory)), dn_id, storage_seq,
                                          tuple(restart) if restart is not None else None),
                      name=f"gbinlog-extract-{dn_id}", daemon=True)
    proc.start()
    send.close()
    try:
        while True:
            try:
                what, data = pickle.loads(recv.recv_bytes())
            except EOFError:
                raise RuntimeError(f"DN {dn_id}: the extraction worker died (exit code {proc.exitcode})") from None
            if what == "end":
                return
            if what == "error":
                raise _rebuild(data)
            for (kind, txn_id, branch, start, xid, vtso, end, tso, server_id, archive, point, db, sql, q, blocks,
                 ck) in data:
                ctx = None
                if ck is not None:
                    ctx = ctxs.get(ck)
                    if ctx is None:
                        ctx = ctxs[ck] = FormatContext(checksum=ck[0], server_version=ck[1], post_header_len=ck[2],
                                                       source=ck[3])
                t = DnTxn(kinds[kind], dn_id, txn_id, branch, _tuple_new(Pos, start), xid, vtso,
                          None if end is None else _tuple_new(Pos, end), tso,
                          [Block(tr, bdb, tb, [new_event(p, unpack(r), r, ctx) for p, r in evs], h,
                                 None if rq is None else new_event(rq[0], unpack(rq[1]), rq[1], ctx))
                           for tr, bdb, tb, h, evs, rq in blocks],
                          server_id, archive, None if q is None else new_event(q[0], unpack(q[1]), q[1], ctx),
                          db, sql)
                if point is not None:
                    t.restart = _tuple_new(RestartPoint, point)
                yield t
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()
