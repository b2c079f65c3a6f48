"""``state.json``: where to restart from, written atomically after the binlog is fsynced
(docs/architecture.md, state and recovery).

Format ``gbinlog-state/1`` (one JSON object)::

    {
      "format": "gbinlog-state/1",
      "cluster": {"id": "<tso(19)+txnId(19) of the first heartbeat seen, or null>",
                  "dns": {"dn0": {"server_id": 2724573685}, ...}},
      "storage_seqs": {"dn0": "099589", ...},
      "last_vtso": "<54 digits>",          # the last transaction consumed (written, or NONE)
      "binlog": {"file": "binlog.000003", "pos": 12345, "vtso": "<54 digits>"},
                                           # end of the last CTS marker written (null: none yet)
      "dns": {"dn0": {"file": "mysql-bin.000002", "pos": 456, "tso": 7202…, "txn_id": 8490…,
                      "seq": 1}, ...},     # restart point per DN (null: from its first file)
      "heartbeat_dns": ["dn0", ...],       # DNs that took part in a heartbeat so far (members)
      "joined": {"dn4": "<vtso>"},          # DNs that joined (scale-out) / left (scale-in) at the
      "left": {"dn1": "<vtso>"},            #   StorageInstChange instruction of that vtso
      "meta_store": "meta.db",             # the shaper's meta store: a path (relative to the
                                           #   out dir) or a mysql:// URL
      "settings": {"server_id": 1, "server_version": "5.7.44-gbinlog",
                   "max_file_size": 524288000, "heartbeat_interval": 30},
      "counts": {"txns": N, "written": N, "events": N, "bytes": N},  # informational
      "streams": {"marks": {"0": {"file": …, "pos": …, "vtso": …}}, "counts": {"0": {…}},
                  "tables": [["<vtso>", "db.table", 2]]}   # a stream group only (dumper.stream_group)
    }

Restart: the binlog is recovered first (its last marker may be newer than ``binlog.vtso``, never
older); every DN is re-read from its restart point with that ``VtsoState``; transactions with vtso
≤ max(last marker, ``last_vtso``) are dropped; the shaper is ``Shaper.as_of(meta store, that vtso)``.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dumper.global_binlog import DiskFull, DumperError, fsync_dir
from extractor.model import RestartPoint

if TYPE_CHECKING:
    from dumper.window import WindowSummary

STATE_FILE = "state.json"
FORMAT = "gbinlog-state/1"


class StateError(DumperError):
    """``state.json`` is unreadable or not ours."""


@dataclass(slots=True)
class BinlogMark:
    """The end of the last CTS marker written when the state was saved."""

    file: str
    pos: int
    vtso: str


@dataclass(slots=True)
class State:
    cluster_id: str | None = None
    server_ids: dict[str, int | None] = field(default_factory=dict)
    storage_seqs: dict[str, str] = field(default_factory=dict)
    last_vtso: str | None = None
    binlog: BinlogMark | None = None
    restart: dict[str, RestartPoint | None] = field(default_factory=dict)
    heartbeat_dns: list[str] = field(default_factory=list)
    meta_store: str = "meta.db"
    joined: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    # a stream group's output (dumper.stream_group): each stream's last marker and counts, and the
    # table→stream map's history
    streams: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "cluster": {"id": self.cluster_id,
                        "dns": {dn: {"server_id": sid} for dn, sid in sorted(self.server_ids.items())}},
            "storage_seqs": dict(sorted(self.storage_seqs.items())),
            "last_vtso": self.last_vtso,
            "binlog": None if self.binlog is None else {"file": self.binlog.file, "pos": self.binlog.pos,
                                                        "vtso": self.binlog.vtso},
            "dns": {dn: None if p is None else {"file": p.file, "pos": p.offset, "tso": p.tso,
                                                "txn_id": p.txn_id, "seq": p.seq}
                    for dn, p in sorted(self.restart.items())},
            "heartbeat_dns": sorted(self.heartbeat_dns),
            "joined": dict(sorted(self.joined.items())),
            "left": dict(sorted(self.left.items())),
            "meta_store": self.meta_store,
            "settings": self.settings,
            "counts": self.counts,
            **({"streams": self.streams} if self.streams is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = STATE_FILE) -> State:
        if data.get("format") != FORMAT:
            raise StateError(f"{where}: format {data.get('format')!r}, expected {FORMAT!r}")
        try:
            b = data.get("binlog")
            return cls(
                cluster_id=data["cluster"].get("id"),
                server_ids={dn: v.get("server_id") for dn, v in data["cluster"]["dns"].items()},
                storage_seqs=dict(data["storage_seqs"]),
                last_vtso=data.get("last_vtso"),
                binlog=None if b is None else BinlogMark(b["file"], int(b["pos"]), b["vtso"]),
                restart={dn: None if p is None else RestartPoint(p["file"], int(p["pos"]), int(p["tso"]),
                                                                 int(p["txn_id"]), int(p["seq"]))
                         for dn, p in data["dns"].items()},
                heartbeat_dns=list(data.get("heartbeat_dns", [])),
                joined={str(k): str(v) for k, v in (data.get("joined") or {}).items()},
                left={str(k): str(v) for k, v in (data.get("left") or {}).items()},
                meta_store=data.get("meta_store") or "meta.db",
                settings=dict(data.get("settings", {})),
                counts=dict(data.get("counts", {})),
                streams=data.get("streams"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None


def load_state(directory: str | os.PathLike) -> State | None:
    """The saved state, or None when there is none."""
    path = Path(directory) / STATE_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StateError(f"{path}: unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise StateError(f"{path}: not a JSON object")
    return State.from_json(data, str(path))


def save_state(directory: str | os.PathLike, state: State) -> None:
    """Write ``state.json`` atomically: a temporary file, fsync, rename, fsync of the directory.
    Call it only after the binlog it describes is fsynced."""
    directory = Path(directory)
    tmp = directory / f".{STATE_FILE}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state.to_json(), fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / STATE_FILE)
        fsync_dir(directory)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        cls = DiskFull if exc.errno in (errno.ENOSPC, errno.EDQUOT) else StateError
        raise cls(f"{directory / STATE_FILE}: cannot write: {os.strerror(exc.errno) if exc.errno else exc} "
                  "(the previous state stays in force)") from exc


def meta_store_location(directory: str | os.PathLike, meta_store: str) -> str:
    """Where the meta store ``meta_store`` (as ``state.json`` and the settings give it: a path relative
    to the output directory, ``sqlite:///path``, or a ``mysql://`` URL) is: a path or a URL."""
    path = meta_store.removeprefix("sqlite://") if meta_store.startswith("sqlite:///") else meta_store
    if "://" not in path and not os.path.isabs(path):
        path = str(Path(directory) / path)
    return path


def state_of_windows(windows: Sequence[WindowSummary], *, server_ids: dict[str, int | None],
                     storage_seqs: dict[str, str], left: dict[str, str], meta_store: str, settings: dict[str, Any],
                     binlog: BinlogMark | None, base: State | None = None) -> State:
    """The ``state.json`` of a batch build made of windows (``dumper.window``, in vtso order): what
    the pipeline would have saved at the end of one run over them all, going on from ``base`` (a
    resumed output's state after its first window, None for a new output). Each DN's restart point
    is the newest any window reached; the heartbeat DNs and the cluster id come from the windows'
    broadcast transactions, as ``Pipeline.note_broadcast`` takes them."""
    from extractor.vtso import vtso_actual_tso

    restart: dict[str, RestartPoint | None] = {dn: None for dn in storage_seqs}
    members: set[str] = set()
    cluster_id = None
    counts = {"txns": 0, "written": 0, "events": 0, "bytes": 0}
    if base is not None:
        restart.update(base.restart)
        members.update(base.heartbeat_dns)
        cluster_id = base.cluster_id
        counts = {k: base.counts.get(k, 0) for k in counts}
    for w in windows:
        restart.update((dn, RestartPoint(*p)) for dn, p in w.points.items())
        for vtso, names in w.broadcasts:
            members.update(names)
            if cluster_id is None:
                cluster_id = vtso_actual_tso(vtso)
        for key in counts:
            counts[key] += getattr(w, key)
    last_vtso = next((w.last_vtso for w in reversed(windows) if w.last_vtso), base.last_vtso if base else None)
    return State(cluster_id=cluster_id, server_ids=dict(server_ids), storage_seqs=dict(storage_seqs),
                 last_vtso=last_vtso, binlog=binlog if binlog is not None or base is None else base.binlog,
                 restart=restart, heartbeat_dns=sorted(members), meta_store=meta_store, left=dict(left),
                 joined=dict(base.joined) if base else {}, settings=settings, counts=counts)
