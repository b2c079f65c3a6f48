"""Per-DN extraction in a worker process (local engine, docs/architecture.md).

Extraction (read, CRC check, assembly, vtso, first-level sort) is most of the work and independent
per DN, so each DN can run ``extract`` in its own process while the main process merges, shapes
and writes. ``worker_stream`` yields the same ``DnTxn``s, in the same order, as
``extract(...)`` in-process: the worker sends batches of encoded transactions over a pipe (bounded
by the pipe, so memory stays flat) and the main process rebuilds the objects, with the one
transaction codec (``extractor.txn_codec``, also the Spark engine's Arrow rows).

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
from extractor.errors import OrderingError
from extractor.model import DnTxn, RestartPoint
from extractor.txn_codec import BodyDecoder, encode_txn, txn_from_fields

BATCH = 512


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


def _work(conn, parent: int, directory: str, dn_id: str, storage_seq: str, restart: tuple | None,
          complete: bool) -> None:
    _die_with_parent(parent)
    from extractor import extract

    try:
        point = RestartPoint(*restart) if restart is not None else None
        kw = {} if point is None else {"start": point.pos, "state": point.vtso_state()}
        batch = []
        for t in extract(directory, dn_id=dn_id, storage_seq=storage_seq, complete=complete, **kw):
            batch.append(encode_txn(t))
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
                  restart: RestartPoint | None = None, complete: bool = False) -> Iterator[DnTxn]:
    """``extract(directory, dn_id=…, storage_seq=…, start/state from restart)`` run in a child
    process; yields the same transactions."""
    decoder = BodyDecoder()
    mp = multiprocessing.get_context("fork")
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=_work, args=(send, os.getpid(), str(Path(directory)), dn_id, storage_seq,
                                          tuple(restart) if restart is not None else None, complete),
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
            for fields, body in data:
                t = txn_from_fields(fields)
                decoder.decode(body, t)
                yield t
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()
