"""``gbinlog position DIR --gtid SET | --tso TSO | --time 'YYYY-MM-DD HH:MM:SS'``: where a consumer
starts — the file:pos (and GTID) of the first transaction it lacks (``--gtid``), or of the first
transaction committed at or after a TSO / a UTC time.

Found by binary search over the files (their PREVIOUS_GTIDS for a gno, their first CTS marker for a
TSO), then a scan of one file. Exit 0 with ``FILE:POS`` (and ``gtid=… vtso=…``), or with the end of
the binlog when nothing is missing / nothing is that late; exit 1 with one line when the set names
transactions the binlog never had or lacks purged ones, or the directory holds no binlog.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from dumper.gtid import GTID, GtidError, _events, locate_gno, parse_gtid_set, uuid_of

_CTS = b"\x01CTS::"
_ROWS_QUERY, _FDE, _PREVIOUS_GTIDS = 29, 15, 35


@dataclass
class Position:
    file: str
    pos: int
    gtid: str | None = None
    vtso: str | None = None
    at_end: bool = False

    def line(self) -> str:
        parts = [f"{self.file}:{self.pos}"]
        if self.gtid:
            parts.append(f"gtid={self.gtid}")
        if self.vtso:
            parts.append(f"vtso={self.vtso}")
        if self.at_end:
            parts.append("(the end of the binlog: nothing after it yet)")
        return " ".join(parts)


class PositionError(Exception):
    pass


def transactions(path: Path):
    """(start, vtso, gtid) of every whole transaction of one file, in order."""
    with open(path, "rb") as fh:
        size = path.stat().st_size
        start = None
        gtid = None
        for pos, type_code, _size in _events(fh, 4, size):
            if type_code in (_FDE, _PREVIOUS_GTIDS):
                continue
            if start is None:
                start = pos
            if type_code == GTID:
                fh.seek(pos + 20)
                body = fh.read(24)
                gtid = f"{uuid_of(body[:16])}:{int.from_bytes(body[16:24], 'little')}"
            elif type_code == _ROWS_QUERY:
                fh.seek(pos + 19)
                head = fh.read(6 + 54)
                if head.startswith(_CTS):
                    yield start, head[6:].decode("ascii", "replace"), gtid
                    start = gtid = None


def first_vtso(path: Path) -> str | None:
    return next((vtso for _, vtso, _ in transactions(path)), None)


def position_for_tso(directory: Path, files: list[str], tso: int) -> Position:
    """The first transaction whose commit TSO is ≥ ``tso``: binary search over the files' first
    transactions, then a scan of the file (and the next, when it starts later)."""
    lo, hi = 0, len(files) - 1
    while lo < hi:                  # the last file whose first transaction is before the target
        mid = (lo + hi + 1) // 2
        first = first_vtso(directory / files[mid])
        if first is not None and int(first[:19]) < tso:
            lo = mid
        else:
            hi = mid - 1
    for name in files[lo:]:
        for start, vtso, gtid in transactions(directory / name):
            if int(vtso[:19]) >= tso:
                return Position(name, start, gtid, vtso)
    return end_position(directory, files)


def end_position(directory: Path, files: list[str]) -> Position:
    from dumper.server.gtid_dump import GtidFiles

    name, end = GtidFiles(directory).head(files)
    return Position(name, end, at_end=True)


def position_for_gtid(directory: Path, files: list[str], text: str) -> Position:
    """The first transaction not in the GTID set ``text`` (what COM_BINLOG_DUMP_GTID streams from)."""
    # The endpoint's modules load only for this command: `gbinlog build` imports this module too.
    from dumper.server.dump import DumpError
    from dumper.server.gtid_dump import GtidFiles, start_gno

    try:
        client = parse_gtid_set(text)
    except GtidError as exc:
        raise PositionError(str(exc)) from None
    gtids = GtidFiles(directory)
    sid, executed = gtids.executed(files)
    if sid is None:
        raise PositionError(f"{directory} has no GTIDs (built with gtids = false); use --tso or --time")
    try:
        gno = start_gno(client, sid, executed, gtids.purged(files)[1])
    except DumpError as exc:
        raise PositionError(str(exc)) from None
    if gno > executed:
        return end_position(directory, files)
    found = locate_gno(directory, files, gno)
    if found is None:
        raise PositionError(f"transaction {uuid_of(sid)}:{gno} is in no file of {directory}")
    name, pos = found
    vtso = next((v for s, v, _ in transactions(directory / name) if s == pos), None)
    return Position(name, pos, f"{uuid_of(sid)}:{gno}", vtso)


def tso_of_time(text: str) -> int:
    """'YYYY-MM-DD HH:MM:SS[.ffffff]' (UTC) → the TSO of that millisecond (logical part 0)."""
    try:
        when = dt.datetime.fromisoformat(text.strip()).replace(tzinfo=dt.UTC)
    except ValueError:
        raise PositionError(f"--time {text!r}: expected 'YYYY-MM-DD HH:MM:SS' (UTC)") from None
    return int(when.timestamp() * 1000) << 22


@click.command("position")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--gtid", "gtid_set", metavar="SET", help="The GTID set the consumer has (uuid:1-N[,…]).")
@click.option("--tso", type=str, metavar="TSO", help="The first transaction committed at or after this TSO.")
@click.option("--time", "time_text", metavar="'YYYY-MM-DD HH:MM:SS'",
              help="The first transaction committed at or after this UTC time.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the line.")
def position_command(directory: str, gtid_set: str | None, tso: str | None, time_text: str | None,
                     as_json: bool) -> None:
    """Where a consumer starts: FILE:POS (and GTID, vtso) by GTID set, TSO or time."""
    from dumper.recovery import list_files

    given = [x for x in (gtid_set, tso, time_text) if x is not None]
    if len(given) != 1:
        raise click.UsageError("give exactly one of --gtid, --tso, --time")
    path = Path(directory)
    try:
        files = list_files(path) if path.is_dir() else []
        if not files:
            from dumper.stream_group import is_stream_group

            if is_stream_group(path):
                raise PositionError(f"{path} is a stream group: give one stream's directory ({path}/stream0 …)")
            raise PositionError(f"{path}: no binlog files (no binlog.index)")
        if gtid_set is not None:
            found = position_for_gtid(path, files, gtid_set)
        else:
            if tso is not None and not re.fullmatch(r"\d{1,19}", tso.strip()):
                raise PositionError(f"--tso {tso!r}: expected a number (64-bit TSO)")
            found = position_for_tso(path, files, int(tso) if tso is not None else tso_of_time(time_text))
    except (PositionError, OSError) as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    except Exception as exc:  # DumperError from list_files: a damaged index
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(1) from None
    click.echo(json.dumps(asdict(found)) if as_json else found.line())


COMMANDS = [position_command]
