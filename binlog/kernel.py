"""The hot path's byte loops: the compiled ``binlog._kernel`` (built by ``pip install`` when a C
compiler is there) or the pure-Python ``binlog.kernel_py``, which gives the same bytes.

``GBINLOG_PURE_PYTHON=1`` in the environment forces the pure-Python one (the tests run both);
``COMPILED`` says which one this process uses.
"""

from __future__ import annotations

import importlib
import os

from binlog import kernel_py

# the numbers scan's callers see: shared by both implementations
HEADER_LEN, FDE = kernel_py.HEADER_LEN, kernel_py.FDE
K_QUERY, K_GCN = kernel_py.K_QUERY, kernel_py.K_GCN
K_ROWS, K_TABLE_MAP, K_ROWS_QUERY, K_XA_PREPARE = (kernel_py.K_ROWS, kernel_py.K_TABLE_MAP, kernel_py.K_ROWS_QUERY,
                                                   kernel_py.K_XA_PREPARE)
K_BRANCH, K_TSO_COMMIT, K_TXN, K_LOCAL = kernel_py.K_BRANCH, kernel_py.K_TSO_COMMIT, kernel_py.K_TXN, kernel_py.K_LOCAL
Q_OTHER, Q_XA_START, Q_XA_COMMIT = kernel_py.Q_OTHER, kernel_py.Q_XA_START, kernel_py.Q_XA_COMMIT
Q_XA_ROLLBACK, Q_BEGIN, Q_COMMIT = kernel_py.Q_XA_ROLLBACK, kernel_py.Q_BEGIN, kernel_py.Q_COMMIT
ST_MORE, ST_FDE, ST_BAD_SIZE, ST_BAD_CRC = kernel_py.ST_MORE, kernel_py.ST_FDE, kernel_py.ST_BAD_SIZE, kernel_py.ST_BAD_CRC


def pure_python() -> bool:
    """``GBINLOG_PURE_PYTHON=1``: every compiled twin is left aside."""
    return os.environ.get("GBINLOG_PURE_PYTHON", "") not in ("", "0")


def compiled_twin(module: str, name: str | None = None):
    """``module.name`` (``name`` None: the module) from a compiled module (another package's, e.g.
    ``extractor._sort``), or None when it is not built or ``GBINLOG_PURE_PYTHON`` is set: the caller
    keeps its Python one."""
    if pure_python():
        return None
    try:
        found = importlib.import_module(module)
        return found if name is None else getattr(found, name)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # built but broken (an import cycle, a missing dependency): not a silent slow path
        return None


def _load():
    if pure_python():
        return kernel_py, False
    try:
        from binlog import _kernel
    except ImportError:
        return kernel_py, False
    return _kernel, True


_impl, COMPILED = _load()
scan = _impl.scan
scan_txns = _impl.scan_txns
# what scan_txns makes a grouped branch with (compiled only; None: no groups, every event alone)
Maker = getattr(_impl, "Maker", None)
frame = _impl.frame
find = _impl.find  # bytes.find by memmem (compiled): a whole file's byte search

__all__ = ["COMPILED", "Maker", "compiled_twin", "find", "frame", "pure_python", "scan", "scan_txns"]
# a whole DML transaction in one call (dumper.global_binlog), and the pass-through rows check (schema_shaper)
frame_dml = _impl.frame_dml
rows_pass = _impl.rows_pass
passed_rows = _impl.passed_rows
__all__ += ["frame_dml", "passed_rows", "rows_pass"]
# a pass-through DML transaction's blocks in one call (schema_shaper.Shaper._dml)
pass_blocks = _impl.pass_blocks
__all__ += ["pass_blocks"]
# a whole DML transaction from its vtso (dumper.global_binlog; the rules xid_of / cts_marker / cts_line
# are kernel_py's, with their compiled twin inline)
frame_dml_txn = _impl.frame_dml_txn
__all__ += ["frame_dml_txn"]
# a pass-through global transaction shaped and framed in one call (dumper.global_binlog.append_passed)
frame_pass_txn = _impl.frame_pass_txn
__all__ += ["frame_pass_txn"]
# a pass-through transaction routed to a stream group's streams (dumper.stream_group)
route_pass_txn = _impl.route_pass_txn
__all__ += ["route_pass_txn"]
# the trace merge's sort (merger.trace_merge)
by_trace = _impl.by_trace
__all__ += ["by_trace"]
