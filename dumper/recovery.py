"""Crash recovery of the global binlog on open (docs/architecture.md; CDC ``seekLastTso``).

The files are the truth: the last ``CTS::<vtso>`` marker is the last transaction written. A crash
can leave, in the last file only: a torn event or a partial transaction after the last marker
(cut), a file whose magic/FDE is incomplete (rewritten), a ROTATE without its next file (the next
file is created) or a file past the size limit that was not rotated yet (rotated now). Anything
wrong before the last marker, or in a file that is not the last, is corruption, not a crash: it
raises ``DumperError`` naming the file and offset and nothing is changed.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from binlog.constants import BINLOG_MAGIC, HEADER_LEN, EventType
from binlog.header import HEADER_STRUCT, crc_ok
from binlog.reader import fde_checksum_ok
from binlog.writer import file_seq, next_file_name, rotation_due
from dumper.global_binlog import (
    BASE,
    CTS_PREFIX,
    DumperError,
    file_start,
    fsync_dir,
    rotate_event,
    write_index,
)
from dumper.gtid import PREVIOUS_GTIDS as _PREVIOUS_GTIDS
from dumper.gtid import file_gtids, previous_gtids_end, previous_gtids_event

_ROTATE = int(EventType.ROTATE)
_FDE = int(EventType.FORMAT_DESCRIPTION)
_ROWS_QUERY = int(EventType.ROWS_QUERY)
_MARKER_HEAD = b"\x01" + CTS_PREFIX
# header + length byte + "CTS::" + 54 digits + CRC: the marker written after every transaction
MARKER_SIZE = HEADER_LEN + 1 + len(CTS_PREFIX) + 54 + 4


@dataclass(slots=True)
class Marker:
    """A ``CTS::<vtso>`` commit marker: where it is and what it says."""

    file: str
    start: int
    end: int
    vtso: str
    timestamp: int


@dataclass(slots=True)
class Scan:
    """One file read header by header: FDE end, the last marker, where valid data ends and why."""

    size: int
    fde_end: int = 0             # 0: no valid magic + FDE
    fde_timestamp: int = 0
    last_marker: Marker | None = None
    valid_end: int = 0           # end of the last event with a valid header, size, log_pos and CRC
    after_marker: list[tuple[int, int, int, int]] = field(default_factory=list)  # (type, start, end, ts)
    problem: str | None = None   # why the scan stopped before the file's end


@dataclass(slots=True)
class Recovery:
    """What ``recover`` found and did. ``position`` is the end of the data in the last file."""

    files: list[str]
    last_vtso: str | None = None
    last_timestamp: int = 0
    position: int = 0
    last_marker: Marker | None = None
    actions: list[str] = field(default_factory=list)

    @property
    def repaired(self) -> bool:
        return bool(self.actions)


_NUMBERED = re.compile(r"^(.+)\.(\d{6,})$")


def binlog_base(directory: Path) -> str:
    """The base name of the binlog files in ``directory``: ``binlog`` for a global binlog, or a
    stream's ``<group>_stream_<k>_binlog`` (``dumper.streams``), read from the one ``*.index``
    file, else from the numbered files; ``binlog`` when there are none."""
    try:
        names = [p.name for p in Path(directory).iterdir()]
    except OSError:
        return BASE
    if f"{BASE}.index" in names:
        return BASE
    indexes = [n[:-len(".index")] for n in names if n.endswith(f"_{BASE}.index") and not n.startswith(".")]
    if len(indexes) == 1:
        return indexes[0]
    bases = {m.group(1) for m in map(_NUMBERED.match, names) if m is not None and m.group(1).endswith(f"_{BASE}")}
    return bases.pop() if len(bases) == 1 else BASE


def list_files(directory: Path, base: str | None = None) -> list[str]:
    """The binlog files: ``<base>.index`` order, plus files the index does not list yet at the end
    (a crash between creating a file and rewriting the index). ``base`` None: ``binlog_base``."""
    if base is None:
        base = binlog_base(directory)
    pattern = re.compile(rf"^{re.escape(base)}\.(\d{{6,}})$")
    on_disk = sorted((p.name for p in directory.iterdir() if pattern.match(p.name)),
                     key=file_seq)
    index = directory / f"{base}.index"
    if not index.exists():
        return on_disk
    listed = [os.path.basename(line.strip()) for line in index.read_text(encoding="ascii").splitlines()
              if line.strip()]
    missing = [n for n in listed if n not in on_disk]
    if missing:
        raise DumperError(f"{index}: lists {', '.join(missing)}, which do not exist")
    last = file_seq(listed[-1]) if listed else 0
    return listed + [n for n in on_disk if file_seq(n) > last]


def _marker_at(data, start: int, end: int, name: str, at: int = 0) -> Marker | None:
    """The CTS marker occupying ``data[start:end]`` if that is one (header, size, log_pos, CRC);
    ``data[0]`` is at file offset ``at``."""
    if start < 0 or start + at < 4 or end - start < HEADER_LEN + 4 + len(_MARKER_HEAD):
        return None
    ts, type_code, _sid, size, log_pos, _flags = HEADER_STRUCT.unpack_from(data, start)
    if type_code != _ROWS_QUERY or size != end - start or log_pos != end + at:
        return None
    if data[start + HEADER_LEN:start + HEADER_LEN + len(_MARKER_HEAD)] != _MARKER_HEAD:
        return None
    if not crc_ok(data[start:end]):
        return None
    text = bytes(data[start + HEADER_LEN + len(_MARKER_HEAD):end - 4]).decode("ascii", "replace")
    return Marker(name, start + at, end + at, text.split("::", 1)[0], ts)


def scan_file(path: Path, start: int | None = None, marker: Marker | None = None) -> Scan:
    """Walk ``path``'s events, checking size, log_pos and CRC32 of each; stop at the first bad one.

    ``start`` (with the ``marker`` that ends there) skips the part a checkpoint already proved.
    """
    size = path.stat().st_size
    scan = Scan(size=size)
    if size < 4 + HEADER_LEN:
        scan.problem = "shorter than magic + FDE header"
        return scan
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != BINLOG_MAGIC:
            scan.problem = f"bad magic {data[:4].hex()}"
            return scan
        ts, type_code, _sid, fde_size, log_pos, _flags = HEADER_STRUCT.unpack_from(data, 4)
        fde_end = 4 + fde_size
        if type_code != _FDE or fde_end > size or log_pos != fde_end or not fde_checksum_ok(data[4:fde_end]):
            scan.problem = "incomplete or invalid FORMAT_DESCRIPTION"
            return scan
        scan.fde_end = fde_end
        scan.fde_timestamp = ts
        off = fde_end
        if start is not None and marker is not None and fde_end < start <= size:
            scan.last_marker = marker
            off = start
        view = memoryview(data)
        unpack = HEADER_STRUCT.unpack_from
        after = scan.after_marker
        while off + HEADER_LEN <= size:
            ts, type_code, _sid, ev_size, log_pos, _flags = unpack(data, off)
            end = off + ev_size
            if ev_size < HEADER_LEN + 4 or end > size:
                scan.problem = (f"torn event at {off}: {size - off} of its {ev_size} bytes are in the file"
                                if ev_size >= HEADER_LEN + 4 else f"impossible event size {ev_size} at {off}")
                break
            if log_pos != end:
                scan.problem = f"event at {off} has log_pos {log_pos}, expected {end}"
                break
            if not crc_ok(view[off:end]):
                scan.problem = f"CRC32 mismatch in the event at {off}"
                break
            if type_code == _ROWS_QUERY and data[off + HEADER_LEN:off + HEADER_LEN + 6] == _MARKER_HEAD:
                text = bytes(data[off + HEADER_LEN + 6:end - 4]).decode("ascii", "replace")
                scan.last_marker = Marker(path.name, off, end, text.split("::", 1)[0], ts)
                after.clear()
            else:
                after.append((type_code, off, end, ts))
            off = end
        else:
            if off < size:
                scan.problem = f"torn event at {off}: the file ends {size - off} bytes into its header"
        view.release()
        scan.valid_end = off
    return scan


def _closed(scan: Scan) -> bool:
    """The file ends with its last marker (or FDE) then one ROTATE, nothing else."""
    return (scan.problem is None and len(scan.after_marker) == 1 and scan.after_marker[0][0] == _ROTATE)


def _middle_file_marker(directory: Path, name: str) -> tuple[Marker | None, int]:
    """The last marker of a file that is not the last one, which must end ``… CTS ROTATE``
    (checked from its tail, no full scan) or be ``FDE ROTATE`` (a FLUSH LOGS with nothing in
    between: no marker). Returns (marker or None, the ROTATE's timestamp)."""
    path = directory / name
    size = path.stat().st_size
    rot_len = HEADER_LEN + 8 + len(next_file_name(name)) + 4
    rot_start = size - rot_len
    if rot_start > 4 + HEADER_LEN:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            ts, t, _s, sz, lp, _f = HEADER_STRUCT.unpack_from(data, rot_start)
            if t == _ROTATE and sz == rot_len and lp == size and \
                    crc_ok(data[rot_start:size]):
                marker = _marker_at(data, rot_start - MARKER_SIZE, rot_start, name)
                if marker is not None:
                    return marker, ts
    scan = scan_file(path)
    if _closed(scan):
        rot_ts = scan.after_marker[0][3]
        if scan.last_marker is not None:
            return scan.last_marker, rot_ts
        if scan.after_marker[0][1] == scan.fde_end:
            return None, rot_ts
    why = scan.problem or "does not end with a CTS marker and a ROTATE"
    raise DumperError(f"{path}: offset {scan.valid_end}: {why} (not the last file: corruption, "
                      "not a crash; refusing to change it)")


def check_middle_files(directory: Path, files: list[str]) -> None:
    """Every file the index lists before the last one must be whole: magic + a valid FDE at its
    start, and at its end a ROTATE naming the next listed file after its last CTS marker (or right
    after the FDE). A crash never leaves anything else there: a torn, cut or missing middle file
    is damage, refused with ``DumperError`` naming it (nothing is changed). Two small reads per
    file, no scan."""
    for name, nxt in zip(files, files[1:], strict=False):
        path = directory / name
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(4 + HEADER_LEN)
            fde_size = HEADER_STRUCT.unpack_from(head, 4)[3] if len(head) == 4 + HEADER_LEN else 0
            fh.seek(4)
            fde = fh.read(fde_size) if 0 < fde_size <= size - 4 else b""
        if head[:4] != BINLOG_MAGIC or not fde or head[4 + 4] != _FDE or not fde_checksum_ok(fde):
            raise DumperError(f"{path}: offset 4: no valid FORMAT_DESCRIPTION (not the last file: damaged, "
                              "not a crash; refusing to change it)")
        _marker, _ts = _middle_file_marker(directory, name)
        if next_file_name(name) != nxt:
            raise DumperError(f"{path}: its ROTATE names {next_file_name(name)} but {directory / BASE}.index "
                              f"lists {nxt} next: the index is damaged")


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)
        fh.flush()
        os.fsync(fh.fileno())


def recover(directory: Path, *, base: str = BASE, server_id: int, server_version: str,
            max_file_size: int, hint: tuple[str, int] | None = None, gtids: bool = False) -> Recovery:
    """Bring the files to a state an uninterrupted writer could have left after its last whole
    transaction, and say where that is. ``hint`` = (file, end of a marker) from ``state.json``
    lets the scan start there instead of at the file's beginning. ``gtids``: every file starts with
    PREVIOUS_GTIDS after its FDE (a file start written here gets it too)."""
    directory = Path(directory)

    def previous(name: str | None, end: int | None = None) -> tuple | None:
        """The PREVIOUS_GTIDS of the file after ``name`` (None: GTIDs off)."""
        if not gtids:
            return None
        if name is None:
            return (None, 0)
        facts = file_gtids(directory / name, end)
        return (facts.sid, facts.gno_after)

    files = list_files(directory, base)
    rec = Recovery(files=files)
    if not files:
        return rec
    check_middle_files(directory, files)
    last = files[-1]
    path = directory / last
    hint_marker = None
    if hint is not None and hint[0] == last and path.stat().st_size >= hint[1]:
        with open(path, "rb") as fh:
            fh.seek(max(0, hint[1] - MARKER_SIZE))
            tail = fh.read(MARKER_SIZE)
        hint_marker = _marker_at(tail, 0, len(tail), last, at=hint[1] - MARKER_SIZE)
    scan = scan_file(path, hint[1] if hint_marker else None, hint_marker)
    if scan.fde_end == 0:
        if len(files) == 1:
            path.unlink()
            rec.actions.append(f"removed {last}: it never got a complete FORMAT_DESCRIPTION ({scan.problem})")
            files.pop()
            write_index(directory, files, base)
            rec.files = files
            return rec
        scan = _rewrite_start(directory, files, scan, rec, server_id=server_id, server_version=server_version,
                              previous=previous)
    marker = scan.last_marker
    keep_end = marker.end if marker is not None else scan.fde_end
    head_missing = False
    if gtids and marker is None:
        # No transaction in the file: keep its PREVIOUS_GTIDS when whole, else write it again.
        keep_end = previous_gtids_end(path, scan.fde_end)
        head_missing = keep_end == scan.fde_end
    closed = _closed(scan) and scan.after_marker[0][1] == keep_end
    if marker is None:
        # No transaction in the last file: the last one is in an earlier file (checked before
        # anything is changed, so corruption there leaves every file as it was).
        for name in reversed(files[:-1]):
            m, _ts = _middle_file_marker(directory, name)
            if m is not None:
                marker = m
                break
    if not closed and scan.size > keep_end:
        _truncate(path, keep_end)
        what = scan.problem or "a transaction without its CTS marker"
        rec.actions.append(f"cut {scan.size - keep_end} bytes after offset {keep_end} of {last} ({what})")
    if head_missing:
        keep_end = _write_previous_gtids(path, keep_end, server_id, previous(files[-2] if len(files) > 1 else None))
        rec.actions.append(f"wrote the PREVIOUS_GTIDS of {last}")
    rec.last_marker = marker
    rec.last_vtso = marker.vtso if marker is not None else None
    rec.last_timestamp = marker.timestamp if marker is not None else 0
    _finish_rotation(directory, files, scan, rec, closed, keep_end, server_id=server_id,
                     server_version=server_version, max_file_size=max_file_size, previous=previous)
    listed = list_index(directory, base)
    if listed != files:
        files[:] = write_index(directory, files, base, drop_missing=True)   # a purge may run meanwhile
        if listed is not None and listed != files[:len(listed)]:
            rec.actions.append("rewrote binlog.index")
    else:
        fsync_dir(directory)
    rec.files = files
    return rec


def _rewrite_start(directory: Path, files: list[str], scan: Scan, rec: Recovery, *, server_id: int,
                   server_version: str, previous) -> Scan:
    """The crash hit while the last file was being started: rewrite its magic + FDE (+
    PREVIOUS_GTIDS), which carry the timestamp of the ROTATE that ended the previous file."""
    path = directory / files[-1]
    _, prev_rotate_ts = _middle_file_marker(directory, files[-2])
    head = file_start(server_id=server_id, server_version=server_version, timestamp=prev_rotate_ts,
                      previous_gtids=previous(files[-2]))
    with open(path, "wb") as fh:
        fh.write(head)
        fh.flush()
        os.fsync(fh.fileno())
    rec.actions.append(f"rewrote the start of {files[-1]} ({scan.problem})")
    return scan_file(path)


def _write_previous_gtids(path: Path, at: int, server_id: int, previous: tuple) -> int:
    """Write the file's PREVIOUS_GTIDS at ``at`` (after its FDE) durably; returns its end."""
    with open(path, "r+b") as fh:
        fh.seek(4)
        fde_ts = HEADER_STRUCT.unpack(fh.read(HEADER_LEN))[0]
        fh.seek(at)
        fh.write(previous_gtids_event(at, fde_ts, server_id, *previous))
        fh.truncate()
        end = fh.tell()
        fh.flush()
        os.fsync(fh.fileno())
    return end


def _finish_rotation(directory: Path, files: list[str], scan: Scan, rec: Recovery, closed: bool, keep_end: int, *,
                     server_id: int, server_version: str, max_file_size: int, previous) -> None:
    """A rotation cut short is finished as the writer would have: a ROTATE without its next file
    gets the file; a file that reached the size limit without its ROTATE is rotated now. Sets
    ``rec.position`` (the end of the data in the last file) and appends a started file to ``files``."""
    last = files[-1]
    path = directory / last
    if closed:
        rot_ts = scan.after_marker[0][3]
        nxt = next_file_name(last)
        rec.position = _start_file(directory / nxt, file_start(server_id=server_id, server_version=server_version,
                                                               timestamp=rot_ts,
                                                               previous_gtids=previous(last, keep_end)))
        files.append(nxt)
        rec.actions.append(f"{last} ends with ROTATE: started {nxt}")
    elif rotation_due(keep_end, max_file_size) and scan.last_marker is not None:
        nxt = next_file_name(last)
        ts = scan.last_marker.timestamp
        with open(path, "ab") as fh:
            fh.write(rotate_event(keep_end, nxt, timestamp=ts, server_id=server_id))
            fh.flush()
            os.fsync(fh.fileno())
        rec.position = _start_file(directory / nxt, file_start(server_id=server_id, server_version=server_version,
                                                               timestamp=ts, previous_gtids=previous(last, keep_end)))
        files.append(nxt)
        rec.actions.append(f"{last} is full ({keep_end} bytes) and had no ROTATE: rotated to {nxt}")
    else:
        rec.position = keep_end


def list_index(directory: Path, base: str | None = None) -> list[str] | None:
    index = directory / f"{base or binlog_base(directory)}.index"
    if not index.exists():
        return None
    return [os.path.basename(line.strip()) for line in index.read_text(encoding="ascii").splitlines()
            if line.strip()]


def _start_file(path: Path, head: bytes) -> int:
    """Write a new binlog file's magic + FDE, durably; its length is the next write position."""
    with open(path, "wb") as fh:
        fh.write(head)
        fh.flush()
        os.fsync(fh.fileno())
    return len(head)


@dataclass(slots=True)
class SpanCounts:
    """What a stretch of the global binlog holds: transactions (CTS markers), events (FDE and
    ROTATE excluded) and their bytes — what the writer's counters count."""

    written: int = 0
    events: int = 0
    bytes: int = 0


def count_span(directory: Path, files: list[str], start: tuple[str, int] | None,
               end: tuple[str, int] | None) -> SpanCounts:
    """Count the transactions written after ``start`` (the end of a CTS marker; None: the first
    file's start) up to ``end`` (the end of the last marker; None: nothing). Used on resume so
    ``state.json``'s counts after a crash equal an uninterrupted run's: the transactions a crashed
    run wrote after its last checkpoint are in the files, not in the saved counts."""
    counts = SpanCounts()
    if end is None or not files:
        return counts
    first = files.index(start[0]) if start is not None and start[0] in files else 0
    last = files.index(end[0]) if end[0] in files else len(files) - 1
    unpack = HEADER_STRUCT.unpack_from
    for i in range(first, last + 1):
        name = files[i]
        path = directory / name
        if path.stat().st_size < 4 + HEADER_LEN:
            continue
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            off = 4 + unpack(data, 4)[3]                      # after magic + FDE
            if start is not None and i == first and name == start[0]:
                off = start[1]
            stop = min(end[1], len(data)) if i == last else len(data)
            while off + HEADER_LEN <= stop:
                _ts, type_code, _sid, size, _lp, _fl = unpack(data, off)
                if size < HEADER_LEN or off + size > stop:
                    break
                if type_code != _ROTATE and type_code != _PREVIOUS_GTIDS:  # a file's frame, not a txn's
                    counts.events += 1
                    counts.bytes += size
                    if type_code == _ROWS_QUERY and data[off + HEADER_LEN:off + HEADER_LEN + 6] == _MARKER_HEAD:
                        counts.written += 1
                off += size
    return counts
