"""Serving a stream group (docs/streams.md): one endpoint for every stream of ``OUT``.

A dump request picks its stream by the file it names (``group1_stream_2_binlog.000001``); a
request that names none (GTID auto-position) and the statements that name no stream (SHOW MASTER
STATUS, SHOW BINARY LOGS, SHOW BINLOG EVENTS, ``@@gtid_executed``) take the stream the login user
is bound to: a user named ``<stream>_cdc_user`` (``group1_stream_2_cdc_user``), as PolarDB-X binds
them. ``… WITH 'group1_stream_2'`` names the stream in a statement; SHOW BINARY STREAMS lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dumper.server.binlogdir import BinlogDir
from dumper.server.gtid_dump import GtidFiles

#: a login user named ``<stream>`` + this suffix is bound to that stream
BOUND_USER_SUFFIX = "_cdc_user"


@dataclass
class ServedStream:
    """One stream as the endpoint serves it (``name`` is "" for a single-stream directory)."""

    name: str
    bdir: BinlogDir
    gtid_files: GtidFiles
    base: str = field(default="binlog")


@dataclass
class RetentionOfStream:
    """Retention's view of one stream of a group (``dumper.server.retention.RetentionTarget``)."""

    bdir: BinlogDir
    config: Any
    server: Any

    @property
    def retention_elsewhere(self) -> bool:
        return bool(getattr(self.server, "retention_elsewhere", False))

    def files_in_use(self) -> set[str]:
        return self.server.files_in_use()

    def dumps(self) -> list[Any]:
        return self.server.dumps()


class ServedGroup:
    """The streams of a stream group's output directory."""

    def __init__(self, group: str, streams: list[ServedStream]) -> None:
        self.group = group
        self.streams = streams

    @classmethod
    def open(cls, directory: str | os.PathLike, streams: dict | None = None) -> ServedGroup | None:
        """The group ``directory`` holds (``streams``: its ``[streams]`` settings, as ``gbinlog run``
        knows them before its first ``state.json``; else what ``state.json`` says), else None."""
        from dumper.state import load_state
        from dumper.stream_group import is_stream_group
        from dumper.streams import StreamSpec

        if streams is None:
            if not is_stream_group(directory):
                return None
            streams = load_state(directory).settings.get("streams")
        spec = StreamSpec.from_settings(streams)
        if not spec.split:
            return None
        streams = []
        for k in range(spec.count):
            path = StreamSpec.directory(directory, k)
            path.mkdir(parents=True, exist_ok=True)
            streams.append(ServedStream(spec.name(k), BinlogDir(path, spec.base(k)), GtidFiles(Path(path)),
                                        spec.base(k)))
        return cls(spec.group, streams)

    def by_name(self, name: str) -> ServedStream | None:
        return next((s for s in self.streams if s.name == name), None)

    def by_file(self, file: str) -> ServedStream | None:
        """The stream a file name belongs to (``<stream>_binlog.NNNNNN``)."""
        return next((s for s in self.streams if file.startswith(f"{s.base}.")), None)

    def of_user(self, user: str) -> ServedStream | None:
        """The stream ``user`` is bound to (``<stream>_cdc_user``), else None."""
        if not user.endswith(BOUND_USER_SUFFIX):
            return None
        return self.by_name(user[:-len(BOUND_USER_SUFFIX)])

    def rows(self) -> list[list[object]]:
        """SHOW BINARY STREAMS: group, stream, its newest file and that file's size."""
        out: list[list[object]] = []
        for s in self.streams:
            files = s.bdir.files()
            try:
                size = s.bdir.size(files[-1]) if files else 0
            except OSError:
                size = 0
            out.append([self.group, s.name, files[-1] if files else "", size])
        return out
