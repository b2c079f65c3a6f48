"""The global binlog files (layout: docs/formats.md; the dumper stage: docs/architecture.md).

``encode_txn`` turns one ``LogicalTxn`` into its events, ``file_start``/``rotate_event`` frame a
file, ``render_file`` writes a whole file from a list of transactions (the Spark engine renders its
range files with it), and ``GlobalBinlog`` appends to ``binlog.NNNNNN`` + ``binlog.index`` with
rotation at transaction boundaries and crash recovery on open (``dumper.recovery``).

Every byte is a function of the transactions and the writer settings (server id, server version,
max file size): no wall clock, no process counter, so a restart or another engine writes the same
files. Per event the writer packs the 19-byte header, appends the payload as it came from the shaper
and a CRC32 — nothing else is touched. Framing (``put_event``, ``file_start``, ``rotate_event``),
file names and the rotation rule are ``binlog.writer``'s; this module adds the transaction shape
(BEGIN, rows, XID, CTS marker) and the durable append.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterable
from pathlib import Path

from binlog import kernel
from binlog.constants import HEADER_LEN, POST_HEADER_LEN_57, POST_HEADER_LEN_80, EventFlag, EventType
from binlog.index_lock import index_lock

# the XID value and the CTS marker: rules of the global binlog defined next to their compiled twin
# (``binlog.kernel.frame_dml_txn`` writes a DML transaction's XID and markers in C)
from binlog.kernel_py import CTS_PREFIX, cts_marker, xid_of  # noqa: F401 (CTS_PREFIX: for recovery, verify)
from binlog.writer import file_name as _file_name
from binlog.writer import file_seq, rotation_due
from binlog.writer import file_start as _file_start
from binlog.writer import rotate_event as rotate_event
from dumper.gtid import cluster_identity, file_gtids, gtid_payload, gtid_uuid, previous_gtids_event, sid_of
from extractor.vtso import vtso_timestamp
from merger.model import GlobalTxn
from schema_shaper.model import LogicalKind, LogicalTxn
from schema_shaper.rows import PASS

DEFAULT_SERVER_VERSION = "5.7.44-gbinlog"
DEFAULT_MAX_FILE_SIZE = 500 * 1024 * 1024
BASE = "binlog"
HEARTBEAT_INTERVAL = 30  # seconds: a heartbeat txn is written when its TSO second divides this
HEARTBEAT_TEXT = b"# TSO HEARTBEAT TXN"

_pack_xid = struct.Struct("<Q").pack
_QUERY, _XID, _ROWS_QUERY, _TABLE_MAP = int(EventType.QUERY), int(EventType.XID), 29, int(EventType.TABLE_MAP)
_GTID = int(EventType.GTID)
_DML, _DDL = LogicalKind.DML, LogicalKind.DDL
_SUPPRESS_USE = EventFlag.SUPPRESS_USE
# MySQL writes Rows_query as an ignorable event; a reader that does not know type 29 skips it.
_IGNORABLE = EventFlag.IGNORABLE
# BEGIN: thread 0, exec 0, db_len 0, error 0, no status vars, db "" + NUL, "BEGIN" → 42 bytes in all.
BEGIN_PAYLOAD = struct.pack("<IIBHH", 0, 0, 0, 0, 0) + b"\0BEGIN"
assert HEADER_LEN + len(BEGIN_PAYLOAD) + 4 == 42
_HEARTBEAT_QUERY = b"\x01" + HEARTBEAT_TEXT
_BEGIN_ITEM = (_QUERY, BEGIN_PAYLOAD, _SUPPRESS_USE)
BEGIN_HEAD = [_BEGIN_ITEM]   # the head of a DML transaction without GTID (its BEGIN): also the Spark range writer's


# Crash injection for the crash-safety tests: GBINLOG_CRASH_AT="<point>:<n>[,<point>:<n>…]" makes
# the process SIGKILL itself the n-th time it reaches <point> (rotated: ROTATE durable, next file not
# created; opened: next file and index written; torn: half of a transaction's bytes written;
# checkpoint: binlog fsynced, state.json not yet written). Read once at import: unset, it costs
# nothing.
_CRASH_AT = os.environ.get("GBINLOG_CRASH_AT")
_CRASH_PLAN = {p.partition(":")[0]: int(p.partition(":")[2] or 1) for p in (_CRASH_AT or "").split(",") if p}
_crash_counts: dict[str, int] = {}


def crash_point(name: str) -> bool:
    """True when the process must die here now (only with GBINLOG_CRASH_AT)."""
    nth = _CRASH_PLAN.get(name)
    if nth is None:
        return False
    _crash_counts[name] = _crash_counts.get(name, 0) + 1
    return _crash_counts[name] == nth


def crash_now() -> None:
    os.kill(os.getpid(), 9)


class DumperError(Exception):
    """The global binlog cannot be written or recovered; the message names the file and offset."""


class DiskFull(DumperError):
    """A write failed for lack of space (ENOSPC/EDQUOT); the file was cut back to the last txn."""


def file_name(seq: int, base: str = BASE) -> str:
    return _file_name(seq, base)


def heartbeat_written(txn: LogicalTxn, interval: int = HEARTBEAT_INTERVAL) -> bool:
    """A heartbeat becomes a txn in the file only when its TSO second divides ``interval``
    (polardbx-cdc's ``binlog_write_heartbeat_interval``); otherwise it writes nothing."""
    return txn.timestamp % interval == 0


def encode_txn(txn: LogicalTxn, pos: int, server_id: int, *,
               heartbeat_interval: int = HEARTBEAT_INTERVAL) -> bytes:
    """The events of one transaction written at file offset ``pos``: headers with timestamp (from
    the TSO), server id (the txn's hint server id, else ``server_id``), size and end position, the
    payloads as given, CRC32 each. ``b""`` for a transaction that writes nothing (NONE, a heartbeat
    outside its second)."""
    out = bytearray()
    _encode(out, txn, vtso_timestamp(txn.vtso), pos, server_id, heartbeat_interval)
    return bytes(out)


def _encode(out: bytearray, txn: LogicalTxn, ts: int, pos: int, server_id: int, heartbeat_interval: int,
            gtid: bytes | None = None) -> int:
    """``encode_txn`` (``ts``: the txn's timestamp) appended to ``out``; returns the number of
    events (0: nothing written).
    A DML transaction goes in one ``binlog.kernel.frame_dml_txn`` call (compiled: the CTS line,
    XID and marker from the vtso, headers, payload copies, the pass-through rows events' table ids
    and CRC32s in one C loop), the others as a
    list of ``(type, payload[, flags])`` in one ``binlog.kernel.frame`` call. ``gtid``: the body
    of a GTID event to write first (``dumper.gtid.gtid_payload``). On an error nothing is left in
    ``out``."""
    kind = txn.kind
    vtso = txn.vtso
    sid = txn.server_id
    if sid is None:
        sid = server_id
    if kind is _DML:
        head = [_BEGIN_ITEM] if gtid is None else [(_GTID, gtid), _BEGIN_ITEM]
        at = len(out)
        try:
            return kernel.frame_dml_txn(out, pos, ts, sid, head, txn.blocks, vtso, txn.archive)
        except BaseException:
            del out[at:]
            raise
    if kind is LogicalKind.DDL:
        if txn.query is None:
            raise DumperError(f"DDL transaction {vtso} has no QUERY payload")
        items = [(_QUERY, txn.query)]
    elif kind is LogicalKind.HEARTBEAT:
        if ts % heartbeat_interval:
            return 0
        items = [_BEGIN_ITEM, (_ROWS_QUERY, _HEARTBEAT_QUERY, _IGNORABLE), (_XID, _pack_xid(xid_of(vtso)))]
    else:
        return 0
    items.append((_ROWS_QUERY, cts_marker(vtso), _IGNORABLE))
    if gtid is not None:
        items.insert(0, (_GTID, gtid))
    at = len(out)
    try:
        kernel.frame(out, pos, ts, sid, items)
    except BaseException:
        del out[at:]
        raise
    return len(items)


def check_same_bytes(binlog: GlobalBinlog, txn: LogicalTxn) -> None:
    """A resume without ``state.json`` (a crash before the first checkpoint) re-shapes from the
    start: the regenerated last transaction must be the bytes that end the files, else the
    directory holds another cluster's binlog (``dumper.cluster.ClusterMismatch``)."""
    from dumper.cluster import ClusterMismatch

    mark = binlog.recovery.last_marker
    probe = encode_txn(txn, 0, binlog.server_id, heartbeat_interval=binlog.heartbeat_interval)
    start = mark.end - len(probe)
    path = binlog.directory / mark.file
    with open(path, "rb") as fh:
        fh.seek(max(start, 0))
        have = fh.read(mark.end - max(start, 0))
    if start < 0 or have != encode_txn(txn, start, binlog.server_id, heartbeat_interval=binlog.heartbeat_interval):
        raise ClusterMismatch(f"{path}: the transaction ending at {mark.end} ({mark.vtso}) is not what these DNs "
                              "produce for that vtso: the directory holds another cluster's binlog (or other "
                              "settings); use a new output directory")


def check_server_version(server_version: str) -> None:
    """The FDE dialects written: ``5.7…`` (MySQL 5.7's post-header table, the default) and ``8.0…``
    (MySQL 8.0's, as a MySQL 8 source with binlog_row_metadata=FULL writes; mariadb-binlog reads both)."""
    if not server_version.startswith(("5.", "8.")):
        raise ValueError(f"server version {server_version!r} must start with '5.' or '8.'")


def fde_post_header_len(server_version: str) -> bytes:
    """The FDE's post-header length table of the dialect ``server_version`` names."""
    return POST_HEADER_LEN_80 if server_version.startswith("8.") else POST_HEADER_LEN_57


def file_start(*, server_id: int, server_version: str = DEFAULT_SERVER_VERSION, timestamp: int = 0,
               previous_gtids: tuple[bytes | None, int] | None = None) -> bytes:
    """Magic + FORMAT_DESCRIPTION (binlog v4, the post-header table of the 5.7 or 8.0 dialect, CRC32).
    ``created`` is 0 (a rotated file, not a server start: readers must not drop temporary tables);
    the header timestamp is ``timestamp``. With ``previous_gtids`` = (sid, gno before the file) the
    PREVIOUS_GTIDS event follows (GTIDs on)."""
    check_server_version(server_version)
    head = _file_start(server_id=server_id, server_version=server_version, timestamp=timestamp, created=0,
                       post_header_len=fde_post_header_len(server_version))
    if previous_gtids is not None:
        head += previous_gtids_event(len(head), timestamp, server_id, *previous_gtids)
    return head


def writes(txn: LogicalTxn, heartbeat_interval: int = HEARTBEAT_INTERVAL) -> bool:
    """Whether ``txn`` puts any event in the file."""
    kind = txn.kind
    if kind is LogicalKind.HEARTBEAT:
        return heartbeat_written(txn, heartbeat_interval)
    return kind is LogicalKind.DML or kind is LogicalKind.DDL


def render_file(txns: Iterable[LogicalTxn], *, seq: int, server_id: int,
                server_version: str = DEFAULT_SERVER_VERSION, fde_timestamp: int | None = None,
                rotate: bool = True, base: str = BASE, heartbeat_interval: int = HEARTBEAT_INTERVAL) -> bytes:
    """A whole file ``<base>.<seq>``: FDE, the transactions, and (``rotate``) a ROTATE to the next
    file timestamped with the last written transaction's timestamp.

    Byte-identical to what ``GlobalBinlog`` writes for the same transactions and file boundaries:
    the first file's FDE carries its first written transaction's timestamp (``fde_timestamp=None``);
    every later file's FDE carries the timestamp of the ROTATE that ended the previous file, i.e.
    the previous file's last written transaction's timestamp (pass it as ``fde_timestamp``).
    """
    parts: list[bytes] = []
    pos = 0
    last_ts = fde_timestamp or 0
    for txn in txns:
        if not parts:
            if not writes(txn, heartbeat_interval):
                continue
            head = file_start(server_id=server_id, server_version=server_version,
                              timestamp=txn.timestamp if fde_timestamp is None else fde_timestamp)
            parts.append(head)
            pos = len(head)
        data = encode_txn(txn, pos, server_id, heartbeat_interval=heartbeat_interval)
        if data:
            parts.append(data)
            pos += len(data)
            last_ts = txn.timestamp
    if not parts:
        head = file_start(server_id=server_id, server_version=server_version, timestamp=fde_timestamp or 0)
        parts.append(head)
        pos = len(head)
    if rotate:
        parts.append(rotate_event(pos, file_name(seq + 1, base), timestamp=last_ts, server_id=server_id))
    return b"".join(parts)


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index(directory: Path, names: list[str], base: str = BASE, *, drop_missing: bool = False) -> list[str]:
    """``<base>.index`` (``./binlog.000001`` per line, as MySQL writes it), replaced atomically under
    ``index_lock``; ``drop_missing`` leaves out the files no longer on disk (purged meanwhile).
    Returns the names written."""
    with index_lock(directory):
        if drop_missing:
            names = [n for n in names if (directory / n).exists()]
        tmp = directory / f".{base}.index.tmp"
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write("".join(f"./{n}\n" for n in names))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / f"{base}.index")
        fsync_dir(directory)
    return names


class GlobalBinlog:
    """Appends transactions to ``<dir>/binlog.NNNNNN`` and keeps ``binlog.index``.

    Opening an existing directory recovers it first (``dumper.recovery.recover``): anything after
    the last CTS marker is cut, a torn file start is rewritten, a rotation cut short is finished;
    ``recovery`` says what was found and ``last_vtso`` is the last transaction in the files.
    ``append`` refuses a vtso ≤ ``last_vtso`` (never a duplicate or a step back). Bytes are
    buffered in memory and written with ``os.write`` at transaction boundaries, so a failed write
    (disk full) cuts the file back to the last whole transaction on disk and raises ``DiskFull``.
    ``flush(fsync=True)`` makes everything appended so far durable.
    """

    def __init__(self, directory: str | os.PathLike, *, server_id: int = 1,
                 server_version: str = DEFAULT_SERVER_VERSION, max_file_size: int = DEFAULT_MAX_FILE_SIZE,
                 base: str = BASE, heartbeat_interval: int = HEARTBEAT_INTERVAL, buffer_size: int = 1 << 20,
                 hint: tuple[str, int] | None = None, gtids: bool = False, gtid_uuid: str | None = None,
                 gtid_stream: str | None = None) -> None:
        from dumper.recovery import recover

        check_server_version(server_version)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.server_id = server_id
        self.server_version = server_version
        self.max_file_size = max_file_size
        self.base = base
        self.heartbeat_interval = heartbeat_interval
        self.buffer_size = buffer_size
        self._buf = bytearray()
        # a function called before appended transactions are written out (the pipeline: the meta
        # store synced first, so a restart from what the files hold finds the history they depend on)
        self.before_write = None
        self._fd: int | None = None
        self.recovery = recover(self.directory, base=base, server_id=server_id, server_version=server_version,
                                max_file_size=max_file_size, hint=hint, gtids=gtids)
        rec = self.recovery
        # GTIDs (``dumper.gtid``): sid, last gno written, transactions in the current file.
        self.gtids = gtids
        self.gtid_sid: bytes | None = sid_of(gtid_uuid) if gtid_uuid else None
        # a stream of a stream group: its GTIDs are named by the cluster and the stream
        self.gtid_stream = gtid_stream
        self.gno = self.file_txns = 0
        if gtids and rec.files:
            self._load_gtids(rec.files[-1], rec.position)
        self.files: list[str] = list(rec.files)
        self.last_vtso: str | None = rec.last_vtso      # last vtso appended (written or not)
        self.last_written_vtso: str | None = rec.last_vtso  # last CTS marker in the files
        self.last_timestamp = rec.last_timestamp
        self.position = rec.position                     # end of the data appended to the current file
        self._disk_pos = rec.position                    # end of what os.write put in the file
        self.bytes_written = 0
        self.txns_written = 0
        self.events_written = 0
        # (file, end) of the last CTS marker: where state.json's recovery hint points
        self.last_marker: tuple[str, int] | None = (
            (rec.last_marker.file, rec.last_marker.end) if rec.last_marker is not None else None)
        if self.files:
            self._fd = os.open(self.directory / self.files[-1], os.O_WRONLY)
            os.lseek(self._fd, self.position, os.SEEK_SET)

    # -- names ------------------------------------------------------------------------------------
    @property
    def file_name(self) -> str | None:
        return self.files[-1] if self.files else None

    @property
    def path(self) -> Path | None:
        return self.directory / self.files[-1] if self.files else None

    # -- writing ----------------------------------------------------------------------------------
    def append(self, txn: LogicalTxn) -> int:
        """Write one transaction (nothing for NONE and off-second heartbeats); returns the bytes
        it took. Rotates after it when the file reached ``max_file_size``."""
        vtso = txn.vtso
        last = self.last_vtso
        if last is not None and vtso <= last:
            raise DumperError(f"vtso {vtso} is not above the last one written ({last}) in "
                              f"{self.directory / (self.file_name or '?')}")
        kind = txn.kind
        if kind is not _DML and not writes(txn, self.heartbeat_interval):
            self.last_vtso = vtso
            return 0
        ts = vtso_timestamp(vtso)
        if self._fd is None:
            self._open_file(1 if not self.files else file_seq(self.files[-1]) + 1, ts)
        gtid = None
        if self.gtids:
            if self.gtid_sid is None:
                identity = cluster_identity(vtso)
                if self.gtid_stream is not None:
                    identity = f"{identity}:{self.gtid_stream}"
                self.gtid_sid = sid_of(gtid_uuid(identity))
            self.gno += 1
            self.file_txns += 1
            gtid = gtid_payload(self.gtid_sid, self.gno, self.file_txns, ddl=kind is _DDL)
        buf = self._buf
        at = len(buf)
        n_events = _encode(buf, txn, ts, self.position, self.server_id, self.heartbeat_interval, gtid)
        return self._appended(vtso, ts, len(buf) - at, n_events)

    def append_passed(self, g: GlobalTxn, plans: dict) -> int | None:
        """``append(shaper.shape_txn(g))`` for a DML transaction whose every block passes through
        (``plans``: the shaper's plan cache, ``Shaper.plans``), shaped and framed in one kernel call
        (``binlog.kernel.frame_pass_txn``) without a ``LogicalTxn``: the hot path. None, with
        nothing done, when it does not pass through as a whole, or the first file is not started
        yet or the GTID identity not known yet: then ``append(shape_txn(g))``."""
        vtso = g.vtso
        last = self.last_vtso
        if self._fd is None or (last is not None and vtso <= last):
            return None
        gtids = self.gtids
        if gtids and self.gtid_sid is None:
            return None
        head = self._dml_head()
        ts = vtso_timestamp(vtso)
        buf = self._buf
        at = len(buf)
        try:
            n_events = kernel.frame_pass_txn(buf, self.position, ts, self.server_id, head, g.blocks, g.branches,
                                             vtso, plans, PASS)
        except BaseException:
            del buf[at:]
            raise
        if n_events < 0:
            return None
        if gtids:
            self.gno += 1
            self.file_txns += 1
        return self._appended(vtso, ts, len(buf) - at, n_events)

    def _dml_head(self) -> list:
        """The events before a pass-through DML transaction's blocks: its GTID (GTIDs on, the
        identity known) and BEGIN."""
        if self.gtids:
            return [(_GTID, gtid_payload(self.gtid_sid, self.gno + 1, self.file_txns + 1, ddl=False)), _BEGIN_ITEM]
        return BEGIN_HEAD

    def append_pass_blocks(self, vtso: str, blocks: list, server_id: int | None, archive: bool) -> int:
        """``append`` of a DML transaction given as ``binlog.kernel.pass_blocks``' tuple blocks (a
        stream's part of a pass-through transaction, ``dumper.stream_group``): framed in one kernel
        call once the file is started and the GTID identity known, else through ``append``."""
        last = self.last_vtso
        if last is not None and vtso <= last:
            raise DumperError(f"vtso {vtso} is not above the last one written ({last}) in "
                              f"{self.directory / (self.file_name or '?')}")
        gtids = self.gtids
        if self._fd is None or (gtids and self.gtid_sid is None):
            from schema_shaper.model import PassBlock

            return self.append(LogicalTxn(vtso, _DML, [PassBlock(b) for b in blocks], server_id=server_id,
                                          archive=archive))
        head = self._dml_head()
        ts = vtso_timestamp(vtso)
        buf = self._buf
        at = len(buf)
        try:
            n_events = kernel.frame_dml_txn(buf, self.position, ts, self.server_id if server_id is None else server_id,
                                            head, blocks, vtso, archive)
        except BaseException:
            del buf[at:]
            raise
        if gtids:
            self.gno += 1
            self.file_txns += 1
        return self._appended(vtso, ts, len(buf) - at, n_events)

    def _appended(self, vtso: str, ts: int, size: int, n_events: int) -> int:
        """The bookkeeping after a written transaction of ``size`` bytes at the end of the buffer."""
        self.last_vtso = vtso
        buf = self._buf
        if _CRASH_AT and crash_point("torn"):
            _write_all(self._fd, bytes(buf[:len(buf) - size + size // 2]))
            crash_now()
        position = self.position = self.position + size
        self.last_marker = (self.files[-1], position)
        self.events_written += n_events
        self.last_written_vtso = vtso
        self.last_timestamp = ts
        self.bytes_written += size
        self.txns_written += 1
        if rotation_due(position, self.max_file_size):
            self.rotate()
        elif len(buf) >= self.buffer_size:
            self._write_out()
        return size

    def _write_out(self) -> None:
        buf = self._buf
        if not buf:
            return
        if self.before_write is not None:
            self.before_write()
        # a fresh buffer first: a failed write's traceback may still hold a view of the old one
        self._buf = bytearray()
        try:
            _write_all(self._fd, buf)
        except OSError as exc:
            self._fail(exc, "write")
        self._disk_pos += len(buf)

    def _fail(self, exc: OSError, what: str) -> None:
        """Cut the file back to the last whole transaction that reached it and raise."""
        name = self.files[-1]
        try:
            os.ftruncate(self._fd, self._disk_pos)
            os.fsync(self._fd)
        except OSError:
            pass
        self._buf = bytearray()
        self.position = self._disk_pos
        if self.gtids:
            self._load_gtids(name, self._disk_pos)
        cls = DiskFull if exc.errno in (errno.ENOSPC, errno.EDQUOT) else DumperError
        raise cls(f"{self.directory / name}: offset {self._disk_pos}: {what} failed: "
                  f"{os.strerror(exc.errno) if exc.errno else exc}; the file ends at the last whole "
                  f"transaction") from exc

    def _open_file(self, seq: int, timestamp: int) -> None:
        name = file_name(seq, self.base)
        head = file_start(server_id=self.server_id, server_version=self.server_version, timestamp=timestamp,
                          previous_gtids=(self.gtid_sid, self.gno) if self.gtids else None)
        self.file_txns = 0
        path = self.directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, head)
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            cls = DiskFull if exc.errno in (errno.ENOSPC, errno.EDQUOT) else DumperError
            raise cls(f"{path}: cannot start the file: {os.strerror(exc.errno)}") from exc
        # Files purged meanwhile (the endpoint's retention / PURGE BINARY LOGS) leave the index too.
        try:
            self.files = write_index(self.directory, [*self.files, name], self.base, drop_missing=True)
        except OSError as exc:
            os.close(fd)
            cls = DiskFull if exc.errno in (errno.ENOSPC, errno.EDQUOT) else DumperError
            raise cls(f"{self.directory / (self.base + '.index')}: cannot write: {os.strerror(exc.errno)} "
                      f"({name} is started; recovery lists it)") from exc
        self._fd = fd
        self.position = self._disk_pos = len(head)

    def _load_gtids(self, name: str, end: int) -> None:
        """The GTID position after recovery: from the last file's PREVIOUS_GTIDS and GTID events."""
        facts = file_gtids(self.directory / name, end)
        self.gtid_sid = facts.sid or self.gtid_sid
        self.gno = facts.gno_after
        self.file_txns = facts.count

    def rotate(self) -> str:
        """End the current file with ROTATE (timestamp of its last transaction), make it durable and
        start the next one; returns the new file's name."""
        seq = file_seq(self.files[-1]) + 1
        nxt = file_name(seq, self.base)
        ts = self.last_timestamp
        self._buf += rotate_event(self.position, nxt, timestamp=ts, server_id=self.server_id)
        self._write_out()
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._fail(exc, "fsync")
        os.close(self._fd)
        self._fd = None
        if _CRASH_AT and crash_point("rotated"):
            crash_now()
        self._open_file(seq, ts)
        if _CRASH_AT and crash_point("opened"):
            crash_now()
        return nxt

    def flush_logs(self) -> str:
        """FLUSH LOGS: close the current file with ROTATE now and continue in a new one."""
        if self._fd is None:
            self._open_file(1 if not self.files else file_seq(self.files[-1]) + 1,
                            self.last_timestamp)
        return self.rotate()

    def flush(self, fsync: bool = True) -> None:
        """Write out the buffer; with ``fsync`` the data is durable when this returns."""
        if self._fd is None:
            return
        self._write_out()
        if fsync:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                self._fail(exc, "fsync")

    @property
    def durable_position(self) -> tuple[str, int] | None:
        """(file, offset) of the end of the last transaction (valid after ``flush``)."""
        return (self.files[-1], self.position) if self.files else None

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.flush(fsync=True)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> GlobalBinlog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
