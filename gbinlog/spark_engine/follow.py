"""The second range placed while it is written (``exchange=reread`` on a local master).

Without this, the second range's bytes are copied into the final files after every writer is done
(``layout.finish_files``): only then is the first range's end known, and only that end says where
they go. The first range's writer finishes a little earlier by design (``batch.FOLLOW_FIRST_SHARE``)
and then, instead of idling, follows the second range's writer: that one publishes the sizes and
timestamps of the transactions it has written out (``Progress``, a frame per 4 MB flush), and the
follower lays them out after its own files by the local writer's rule (``layout.plan_files``,
resumed where the last frames ended) and places them at once. When the second range ends, its bytes
are already in the first range's directory; the driver takes that directory as if the first range
had written both (``absorb_followed``), and the copy job is left with the ranges after them.

Checked, never assumed: the driver takes a follow only when the second range's row is the one that
published it (same job token) with the same sizes and timestamps; otherwise (a range written again
after a wrong guess, a writer that failed) it cuts the first range's last file back to its own end
and the copy path places the second range as before.
"""

from __future__ import annotations

import hashlib
import os
import struct
import time
from array import array
from pathlib import Path

from gbinlog.spark_engine.layout import (
    copy_segments,
    plan_files,
    range_file_name,
    write_file_head,
    write_rotate,
)

DONE, FAILED = 0xFFFFFFFF, 0xFFFFFFFE
FOLLOWED = 1               # the range a follower places: the second (the first writes its own files)
POLL_SECONDS = 0.002       # the follower's wait between looks at the progress file
START_SECONDS = 1.0        # how long the follower waits for the followed writer's task to start
_N = struct.Struct("<I")


def progress_path(tmp_dir: str, rng: int, token: str) -> Path:
    return Path(tmp_dir, f"range-{rng:05d}.{token}.progress")


def digest(sizes: bytes, stamps: bytes) -> str:
    return hashlib.blake2b(sizes + b"|" + stamps, digest_size=16).hexdigest()


class Progress:
    """The followed writer's side: after each flush of its range file, a frame ``[n][n sizes][n
    timestamps]`` (u32) of the transactions written out since the last frame; at the end ``DONE``
    or ``FAILED``. Frames only name transactions whose bytes are in the file already."""

    def __init__(self, tmp_dir: str, rng: int, token: str) -> None:
        self.fd = os.open(progress_path(tmp_dir, rng, token), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        self.token = token
        self.sent = 0

    def publish(self, sizes: list[int], stamps: list[int]) -> None:
        n = len(sizes) - self.sent
        if n > 0:
            os.write(self.fd, _N.pack(n) + array("I", sizes[self.sent:]).tobytes()
                     + array("I", stamps[self.sent:self.sent + n]).tobytes())
            self.sent += n

    def close(self, ok: bool) -> None:
        """The terminator (once: later calls do nothing)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.write(fd, _N.pack(DONE if ok else FAILED))
        finally:
            os.close(fd)


def _frames(buf: bytearray) -> tuple[list, int | None]:
    """Complete frames at the start of ``buf`` (consumed from it) and a terminator if one came."""
    out, off, end = [], 0, None
    while off + 4 <= len(buf):
        n = _N.unpack_from(buf, off)[0]
        if n in (DONE, FAILED):
            end = n
            off += 4
            break
        if off + 4 + 8 * n > len(buf):
            break
        sizes, stamps = array("I"), array("I")
        sizes.frombytes(bytes(buf[off + 4:off + 4 + 4 * n]))
        stamps.frombytes(bytes(buf[off + 4 + 4 * n:off + 4 + 8 * n]))
        out.append((sizes, stamps))
        off += 4 + 8 * n
    del buf[:off]
    return out, end


def follow(settings, placed: dict, rng: int = FOLLOWED) -> dict | None:
    """Follow range ``rng``'s writer (its progress file of job ``settings.follow``) and place its
    transactions after ``placed`` (the first range's files, ``render.FinalFiles``) in that
    directory. Returns the files' end as ``placed`` after both ranges and what was placed
    (``token``, ``txns``, ``digest`` of the sizes and timestamps), or ``None``: nothing to follow
    (the writer has not started within ``START_SECONDS``: it runs after this task) or the writer
    failed."""
    from dumper.global_binlog import file_name, file_start

    if not placed or not placed["files"] or (settings.gtids and placed.get("sid") is None):
        return None
    path = progress_path(settings.tmp_dir, rng, settings.follow)
    due = time.monotonic() + START_SECONDS
    while True:   # both tasks start at once, but a task's start can lag (a Python worker forked)
        try:
            fd = os.open(path, os.O_RDONLY)
            break
        except FileNotFoundError:
            if time.monotonic() > due:
                return None
            time.sleep(POLL_SECONDS)
    t0 = time.perf_counter()
    src = str(Path(settings.tmp_dir, range_file_name(rng, settings.follow)))
    out_dir = placed["dir"]
    fde_len = len(file_start(server_id=settings.server_id, server_version=settings.server_version))
    sid = placed.get("sid") if settings.gtids else None
    state = dict(placed)
    base = fde_len          # the range file offset of the next frame's first transaction
    buf = bytearray()
    all_sizes, all_stamps = array("I"), array("I")
    waited = 0.0
    try:
        while True:
            data = os.read(fd, 1 << 20)
            buf += data
            frames, end = _frames(buf)
            if frames:
                layout = plan_files([(k, s, t) for k, (s, t) in enumerate(frames)], max_file_size=settings.max_file_size,
                                    fde_len=fde_len, file_name=file_name, gtids=settings.gtids, placed=state)
                bases = [base]
                for sizes, stamps in frames:
                    bases.append(bases[-1] + sum(sizes))
                    all_sizes.extend(sizes)
                    all_stamps.extend(stamps)
                base = bases[-1]
                for f in layout.files:
                    if not f.in_place:
                        write_file_head(Path(out_dir, f.name), f, server_id=settings.server_id,
                                        server_version=settings.server_version, sid=sid, gtids=settings.gtids)
                pieces = [(bases[g.rng] + g.rel_start - fde_len, bases[g.rng] + g.rel_end - fde_len, g.file, g.start,
                           g.first_gno, g.first_seq, sid) for f in layout.files for g in f.segments]
                copy_segments(src, out_dir, pieces, release=True, released_written=False)
                for f in layout.files:
                    if f.rotate_ts is not None:
                        write_rotate(Path(out_dir, f.name), f, server_id=settings.server_id)
                state = {**layout.end, "dir": out_dir, "sid": placed.get("sid")}
            if end == FAILED:
                cut_back(placed)
                return None
            if end == DONE:
                break
            if not data:
                # no time limit: a writer that fails writes FAILED, and one whose process dies fails
                # the job (no retries where following runs), which stops this task
                time.sleep(POLL_SECONDS)
                waited += POLL_SECONDS
    finally:
        os.close(fd)
    last = Path(out_dir, state["files"][-1])
    os.truncate(last, state["position"])   # the last file ends at its last transaction (or its head)
    return {"token": settings.follow, "placed": state, "txns": len(all_sizes),
            "digest": digest(all_sizes.tobytes(), all_stamps.tobytes()),
            "seconds": time.perf_counter() - t0, "waited": waited}


def absorb_followed(rows: list[dict]) -> bool:
    """Driver: take the first range's follow of the second (its files then end after both, and the
    second range is marked ``absorbed``: nothing of it is copied) when the second range's row is the
    one the follower placed (the same job's; its sizes and timestamps are checked); else (a row of
    a later job: the range written again) cut the first range's last file back to its own end.
    Whether it was taken."""
    if not rows or not rows[0].get("direct"):
        return False
    first = rows[0]
    followed = first.pop("followed", None)
    if not followed:
        return False
    second = rows[FOLLOWED] if len(rows) > FOLLOWED else None
    if second is not None and second["rng"] == FOLLOWED and second.get("progress") == followed["token"]:
        if second["written"] != followed["txns"] or digest(second["sizes"], second["stamps"]) != followed["digest"]:
            # the follower released the range file's pages behind it: the copy path cannot redo it
            raise RuntimeError(f"range {FOLLOWED}: its row ({second['written']} transactions) is not what the "
                               f"first range's task placed ({followed['txns']}) in the same job")
        first["direct"] = followed["placed"]
        second["absorbed"] = True
        return True
    cut_back(first["direct"])
    return False


def cut_back(placed: dict) -> None:
    """The first range's last file back to its own end (``placed``): what a follow put after it
    goes (files the follower began stay in the attempt's directory, which is not moved in)."""
    os.truncate(Path(placed["dir"], placed["files"][-1]), placed["position"])
