"""``gbinlog verify`` of a stream group (docs/streams.md): each stream checked as a global binlog
of its own (files, CRCs, positions, grammar, GTIDs, vtso order), every stream holding every DDL and
heartbeat, and with the simulator's truth the union of the streams: each transaction's parts joined
again by vtso, its rows and DDLs equal the truth's and the final tables the truth's tables."""

from __future__ import annotations

from pathlib import Path

from dumper.state import load_state
from dumper.streams import StreamSpec
from dumper.verify import (
    VerifyReport,
    _check_truth,
    _Checker,
    _Stop,
    truth_for,
)
from dumper.verify_file import Written


def verify_group(directory: Path, truth: str | dict | None = None, *, max_errors: int = 50) -> VerifyReport:
    state = load_state(directory)
    spec = StreamSpec.from_settings(state.settings.get("streams") if state else None)
    group = _Checker(directory, truth is not None, max_errors)
    report = group.report
    data, report.fatal = truth_for(directory, truth)
    if report.fatal:
        return report
    streams: list[list[Written]] = []
    for k in range(spec.count):
        d = spec.directory(directory, k)
        if not d.is_dir():
            report.errors.append(f"{d}: stream {spec.name(k)} is missing")
            continue
        ck = _Checker(d, truth is not None, max_errors)
        sub = ck.run()
        report.files.extend(sub.files)
        report.events += sub.events
        report.errors.extend(sub.errors)
        for w in ck.written:
            report.txns += 1
            report.kinds[w.kind] = report.kinds.get(w.kind, 0) + 1
        streams.append(ck.written)
    if report.errors or len(streams) != spec.count:
        return report
    try:
        group.written = _joined(group, streams, spec)
        if data is not None and report.ok:
            _check_truth(group, data, any_row_order=True)
            report.truth_checked = True
    except _Stop:
        pass
    return report


def _joined(ck: _Checker, streams: list[list[Written]], spec: StreamSpec) -> list[Written]:
    """The group's transactions in vtso order: every DDL and heartbeat once (each stream must hold
    it), a DML transaction's parts joined in stream order."""
    common = [[(w.vtso, w.kind) for w in s if w.kind != "dml"] for s in streams]
    for k in range(1, len(streams)):
        if common[k] != common[0]:
            missing = sorted(set(common[0]) ^ set(common[k]))[:3]
            ck.error(f"{spec.name(k)} and {spec.name(0)} differ in their DDL and heartbeat transactions "
                     f"(e.g. {missing}): every stream holds every one")
            return []
    joined: dict[str, Written] = {}
    for s in streams:
        for w in s:
            have = joined.get(w.vtso)
            if have is None:
                joined[w.vtso] = Written(w.vtso, w.kind, w.file, w.pos, w.db, w.sql, list(w.changes))
            elif w.kind == "dml":
                have.changes.extend(w.changes)
    return [joined[v] for v in sorted(joined)]
