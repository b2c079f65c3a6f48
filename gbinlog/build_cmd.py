"""CLI commands: build, binlogs, events, verify."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from gbinlog.cli_errors import OneLineErrors

# The keys of ``gbinlog build --config FILE`` ([build] table); command-line options win.
BUILD_KEYS = {"dn": list, "out": str, "server_id": int, "server_version": str, "max_file_size": (int, str),
              "heartbeat_interval": int, "meta_store": str, "checkpoint_seconds": (int, float), "checkpoint_bytes": (int, str),
              "on_error": str, "engine": str, "master": str, "conf": dict, "workers": bool, "gtids": bool,
              "ddl_comments": bool, "file_mode": str}
CONFIG_EXAMPLE = """\
[build]
dn = ["/data/dn0", "/data/dn1"]     # DN binlog directories (added to --dn)
out = "/data/global"                # the output directory (or --out)
server_id = 1                       # server id of the global binlog's events
server_version = "5.7.44-gbinlog"   # "5.…" (MySQL 5.7 FDE) or "8.0.…" (MySQL 8.0 FDE)
max_file_size = "500MB"             # rotation size (bytes, or KB/MB/GB)
heartbeat_interval = 30             # a heartbeat txn is written when its TSO second divides this
meta_store = "meta.db"              # the shaper's meta store: a path (relative to out) or mysql://…
checkpoint_seconds = 2.0            # how often state.json is written (after an fsync) …
checkpoint_bytes = "64MB"           # … or after this much output
on_error = "raise"                  # or "skip": shaping errors skip the block with a warning
workers = false                     # extract each DN in a worker process (default: off)
gtids = true                        # GTID events + PREVIOUS_GTIDS (a MySQL 8 replica with auto-position)
ddl_comments = true                 # the # POLARX_* lines before each DDL statement
file_mode = "0640"                  # mode of the files written; directories get x where r (0750)
engine = "local"                    # or "spark"

[streams]                           # a stream group (docs/streams.md): OUT/stream0 … OUT/stream{N-1}
count = 1                           # 1: one global binlog; N > 1: N streams
hash = "table"                      # what a stream owns: "database", "table" or "record"
group = "group1"                    # files: <group>_stream_<k>_binlog.NNNNNN
"""


def _parse_size(value: Any, where: str) -> int:
    from gbinlog.config import ConfigError, parse_size

    try:
        return parse_size(value, where)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None


def load_build_config(path: str) -> dict[str, Any]:
    """The [build] table of a TOML file, strictly: unknown keys and wrong types are errors."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--config") from None
    extra = set(data) - {"build", "filter", "streams"}
    if extra:
        raise click.BadParameter(f"{path}: unknown table/key {', '.join(sorted(extra))} (expected [build], "
                                 "[filter], [streams])", param_hint="--config")
    streams = data.get("streams", {})
    if not isinstance(streams, dict) or set(streams) - {"count", "hash", "group"}:
        raise click.BadParameter(f"{path}: [streams] takes count, hash and group", param_hint="--config")
    table = data.get("build", {})
    flt = data.get("filter", {})
    if not isinstance(table, dict) or not isinstance(flt, dict):
        raise click.BadParameter(f"{path}: [build] and [filter] must be tables", param_hint="--config")
    for key, value in flt.items():
        if key not in ("include", "exclude") or not isinstance(value, list) \
                or not all(isinstance(v, str) for v in value):
            raise click.BadParameter(f"{path}: filter.{key}: expected include/exclude = [\"db.table\", …]",
                                     param_hint="--config")
    if flt:
        table = {**table, "filter": flt}
    if streams:
        table = {**table, "streams": streams}
    for key, value in table.items():
        if key in ("filter", "streams"):
            continue
        if key not in BUILD_KEYS:
            raise click.BadParameter(f"{path}: build.{key} is not a key (known: {', '.join(sorted(BUILD_KEYS))})",
                                     param_hint="--config")
        if not isinstance(value, BUILD_KEYS[key]) or (isinstance(value, bool) and BUILD_KEYS[key] is not bool):
            raise click.BadParameter(f"{path}: build.{key} has the wrong type ({type(value).__name__})",
                                     param_hint="--config")
    base = Path(path).resolve().parent
    if "dn" in table:
        table["dn"] = [str(base / d) for d in table["dn"]]
    if "out" in table:
        table["out"] = str(base / table["out"])
    for key in ("max_file_size", "checkpoint_bytes"):
        if key in table:
            table[key] = _parse_size(table[key], f"build.{key}")
    return table


class _Bar:
    """A tqdm bar over input bytes (events, txns, MB/s, ETA), only on a terminal."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, p) -> None:
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(total=p.in_bytes_total, unit="B", unit_scale=True, unit_divisor=1024,
                            desc="build", dynamic_ncols=True, file=sys.stderr)
        if p.in_bytes_done is not None:
            self.bar.update(p.in_bytes_done - self.bar.n)
        self.bar.set_postfix_str(f"txns={p.txns:,} events={p.events:,} out={p.bytes_out / 1e6:,.1f}MB", refresh=False)
        if p.done:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@click.command("build", cls=OneLineErrors)
@click.option("--dn", "dns", multiple=True, type=click.Path(file_okay=False),
              help="A DN binlog directory (its name is the DN id); repeat for every DN.")
@click.option("--out", "out", type=click.Path(file_okay=False), help="Output directory (global binlog files).")
@click.option("--config", "config", type=click.Path(dir_okay=False), help="TOML file with a [build] table.")
@click.option("--max-file-size", "max_file_size", help="Rotate after this size (bytes or KB/MB/GB; default 500MB).")
@click.option("--server-id", type=click.IntRange(1, 2**32 - 1), help="Server id of the output events (default 1).")
@click.option("--server-version", help="FDE server version: '5.…' (MySQL 5.7 dialect, default 5.7.44-gbinlog) or '8.0.…' (MySQL 8.0).")
@click.option("--meta-store", help="The shaper's meta store: a path (relative to --out) or mysql://… URL.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Continue an existing output directory (crash-safe restart) or refuse one.")
@click.option("--engine", type=click.Choice(["local", "spark"]), help="local (default) or spark.")
@click.option("--master", help="Spark master URL (--engine spark; default local[*]).")
@click.option("--conf", "confs", multiple=True, help="Spark setting k=v (--engine spark); repeatable.")
@click.option("--workers/--no-workers", default=None,
              help="Extract each DN in a worker process (default: off; see bench/build.py).")
@click.option("--gtids/--no-gtids", default=None,
              help="A GTID event before every transaction and PREVIOUS_GTIDS in every file (default: on).")
@click.option("--ddl-comments/--no-ddl-comments", default=None,
              help="The # POLARX_* lines before each DDL statement (default: on); off for consumers whose "
                   "DDL parsers do not skip comment lines.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--include", "includes", multiple=True, metavar="PATTERN",
              help="Only these databases/tables: 'db' or 'db.table', wildcards % _ (or * ?); repeatable.")
@click.option("--exclude", "excludes", multiple=True, metavar="PATTERN",
              help="Leave these databases/tables (rows and DDL) out, e.g. 'bank.audit*'; repeatable.")
@click.option("--cluster-stopped", is_flag=True, default=None,
              help="The DN directories hold the DNs' whole binlogs (the cluster stopped): write the tail "
                   "past where a DN's input ends; refused while a DN has a branch prepared and not committed.")
@click.option("--streams", "stream_count", type=click.IntRange(1, 1024), metavar="N",
              help="Split the output into N streams (OUT/stream0 …; default 1: one global binlog).")
@click.option("--stream-hash", type=click.Choice(["database", "table", "record"]),
              help="What a stream owns: whole databases, tables (default) or rows by primary key.")
@click.option("--file-mode", metavar="MODE",
              help="Mode of the files written, octal (default 0640); directories get x where r (0750).")
def build_command(dns, out, config, max_file_size, server_id, server_version, meta_store, resume, engine, master,
                  confs, workers, gtids, ddl_comments, progress, includes, excludes, cluster_stopped,
                  file_mode, stream_count, stream_hash) -> None:
    """Build the global binlog of DN binlog directories: extract → merge → shape → dump.

    Resumable: on an existing output directory it recovers the files (anything after the last
    complete transaction is cut) and continues from state.json, byte-identical to an
    uninterrupted build. A transaction is written only once every DN has passed it: where one
    DN's input ends below the others' the output stops there, says what it held and exits 3
    (build again when the DN's files are complete, or give --cluster-stopped)."""
    from binlog.errors import BinlogError
    from dumper.global_binlog import DumperError
    from extractor.errors import OrderingError
    from gbinlog.local_engine import build

    cfg = load_build_config(config) if config else {}
    dn_dirs = list(cfg.get("dn", [])) + list(dns)
    out = out or cfg.get("out")
    if not dn_dirs:
        raise click.UsageError("give at least one --dn DIR (or build.dn in --config)")
    if not out:
        raise click.UsageError("give --out DIR (or build.out in --config)")
    settings = _settings_of(cfg, includes, excludes, max_file_size=max_file_size, server_id=server_id,
                            server_version=server_version, meta_store=meta_store, workers=workers, gtids=gtids,
                            ddl_comments=ddl_comments)
    settings.streams = _streams_of(cfg.get("streams", {}), stream_count, stream_hash)
    _set_file_mode(file_mode, cfg)
    engine = engine or cfg.get("engine", "local")
    if engine == "spark":
        if settings.stream_spec().split:
            raise click.UsageError("--streams (a stream group) is not supported with --engine spark: build it "
                                   "with --engine local")
        _spark_build(dn_dirs, out, settings, master or cfg.get("master"),
                     [f"{k}={v}" for k, v in cfg.get("conf", {}).items()] + list(confs), cluster_stopped)
        return
    if master or confs:
        raise click.UsageError("--master/--conf are for --engine spark")
    show = sys.stderr.isatty() if progress is None else progress
    bar = _Bar() if show else None
    try:
        result = build(dn_dirs, out, settings=settings, resume=resume, on_progress=bar,
                       cluster_stopped=bool(cluster_stopped))
    except (DumperError, OrderingError, BinlogError) as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        from schema_shaper import ShapeError

        if isinstance(exc, ShapeError):
            raise click.ClickException(str(exc)) from None
        raise
    finally:
        if bar is not None:
            bar.close()
    _summary(result)
    if result.held is not None:
        _report_held(result.held)


def _settings_of(cfg: dict[str, Any], includes, excludes, **options) -> Any:
    """The build's ``Settings``: the ``[build]`` table's keys, then the options given (not None),
    the filter patterns checked; a bad server id or version is a usage error naming it."""
    from dumper.global_binlog import check_server_version
    from gbinlog.local_engine import Settings

    settings = Settings()
    for key in ("server_id", "server_version", "max_file_size", "heartbeat_interval", "meta_store",
                "checkpoint_seconds", "checkpoint_bytes", "on_error", "workers", "gtids", "ddl_comments"):
        if key in cfg:
            setattr(settings, key, cfg[key])
    flt = cfg.get("filter", {})
    include, exclude = list(flt.get("include", [])) + list(includes), list(flt.get("exclude", [])) + list(excludes)
    if include or exclude:
        from schema_shaper.filters import FilterError, compile_pattern

        for p in include + exclude:
            try:
                compile_pattern(p)
            except FilterError as exc:
                raise click.BadParameter(str(exc), param_hint="--include/--exclude") from None
        settings.filter = {"include": include, "exclude": exclude}
    if options.get("max_file_size") is not None:
        options["max_file_size"] = _parse_size(options["max_file_size"], "--max-file-size")
    for key, value in options.items():
        if value is not None:
            setattr(settings, key, value)
    if isinstance(settings.server_id, bool) or not 1 <= settings.server_id < 2**32:
        raise click.BadParameter(f"{settings.server_id} is not a server id (1..4294967295)", param_hint="server_id")
    try:
        check_server_version(settings.server_version)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--server-version") from None
    return settings


def _streams_of(table: dict[str, Any], count: int | None, level: str | None) -> dict[str, Any] | None:
    """``[streams]`` with the options over it, checked (``dumper.streams.StreamSpec``); None for one
    stream."""
    from dumper.streams import StreamsError, StreamSpec

    merged = {**table, **({"count": count} if count is not None else {}), **({"hash": level} if level else {})}
    try:
        spec = StreamSpec.from_settings(merged)
    except StreamsError as exc:
        raise click.BadParameter(str(exc), param_hint="--streams/--stream-hash") from None
    if level and not spec.split:
        raise click.UsageError("--stream-hash needs --streams N with N > 1")
    return spec.settings() if spec.split else None


def _set_file_mode(option: str | None, cfg: dict[str, Any]) -> None:
    """The mode of every file the build creates (``gbinlog.process``), set before the first one (Spark's
    JVM and its workers inherit it)."""
    from gbinlog.config import ConfigError
    from gbinlog.process import DEFAULT_FILE_MODE, parse_file_mode, set_file_mode

    try:
        mode = parse_file_mode(option, "--file-mode") if option is not None else \
            parse_file_mode(cfg.get("file_mode", DEFAULT_FILE_MODE), "build.file_mode")
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    set_file_mode(mode)


#: ``gbinlog build``'s exit code when the emission rule held transactions back (merger.emission)
EXIT_HELD = 3


def _report_held(held) -> None:
    click.echo(f"gbinlog build: {held.describe()}; the output ends at a whole transaction below it. Build "
               "again into the same directory once that DN's binlog is complete (it continues byte for "
               "byte), or with --cluster-stopped if the cluster has stopped and these are its whole "
               "binlogs", err=True)
    sys.exit(EXIT_HELD)


def _summary(r) -> None:
    secs = max(r.seconds, 1e-9)
    files = f"{r.files[0]}…{r.files[-1]} ({len(r.files)} files)" if r.files else "no file"
    click.echo(f"built {r.out_dir}: {r.txns:,} transactions ({r.written:,} written, {r.events:,} events, "
               f"{r.bytes / 1e6:,.1f} MB) in {r.seconds:.2f} s — "
               + (f"{r.dn_events:,} DN events read, {r.dn_events / secs:,.0f} DN events/s; "
                  if r.dn_events is not None else "")
               + f"{r.events / secs:,.0f} events/s, {r.bytes / 1e6 / secs:,.1f} MB/s out; {files}; "
               f"last vtso {r.last_vtso}")
    if r.resumed:
        click.echo(f"resumed: {r.skipped:,} regenerated transactions at or below the last one dropped"
                   + (f"; recovery: {'; '.join(r.recovery)}" if r.recovery else ""))


def _spark_build(dn_dirs, out, settings, master, confs, cluster_stopped: bool) -> None:
    try:
        from gbinlog.spark_engine import build as spark_build
    except ImportError as exc:
        raise click.ClickException(f"--engine spark is not available: {exc}") from None
    missing = [d for d in dn_dirs if not Path(d).is_dir()]
    if missing:
        raise click.ClickException(f"DN binlog directory {', '.join(missing)} does not exist")
    try:
        # check_cluster: the DN set is checked before anything is written (while the JVM starts)
        result = spark_build(dn_dirs, out, settings=settings, master=master, conf=list(confs), check_cluster=True,
                             cluster_stopped=cluster_stopped)
    except Exception as exc:
        from binlog.errors import BinlogError
        from dumper.global_binlog import DumperError
        from extractor.errors import OrderingError
        from schema_shaper import ShapeError

        # the engine's own errors (no Java, a bad --conf, a failed task) are RuntimeErrors
        if isinstance(exc, (DumperError, OrderingError, BinlogError, ShapeError, RuntimeError)):
            raise click.ClickException(str(exc)) from None
        raise
    click.echo(f"built {out} with spark: {getattr(result, 'txns', '?')} transactions, "
               f"{len(getattr(result, 'files', []) or [])} files in {getattr(result, 'seconds', 0):.2f} s")
    if getattr(result, "held", None) is not None:
        _report_held(result.held)


@click.command("binlogs", cls=OneLineErrors)
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
def binlogs_command(directory: str) -> None:
    """List the global binlog files of DIRECTORY: size, transactions, first and last vtso."""
    from dumper.global_binlog import DumperError
    from dumper.verify import list_binlogs

    try:
        files = list_binlogs(directory)
    except DumperError as exc:
        raise click.ClickException(str(exc)) from None
    if not files:
        raise click.ClickException(f"{directory}: no global binlog here (no binlog.index, no binlog.NNNNNN file)")
    width = max(16, *(len(f.name) for f in files))
    click.echo(f"{'file':<{width}} {'size':>12} {'txns':>8}  {'first vtso':<54}  last vtso")
    for f in files:
        click.echo(f"{f.name:<{width}} {f.size:>12,} {f.txns:>8,}  {f.first_vtso or '-':<54}  {f.last_vtso or '-'}")
    click.echo(f"# {len(files)} files, {sum(f.size for f in files):,} bytes, {sum(f.txns for f in files):,} txns")


@click.command("events", cls=OneLineErrors)
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--from", "start", type=click.IntRange(4), default=4, show_default=True, help="Start position.")
@click.option("--limit", type=click.IntRange(0), default=None, help="At most N events.")
def events_command(file: str, start: int, limit: int | None) -> None:
    """SHOW BINLOG EVENTS for one binlog FILE: Log_name, Pos, Event_type, Server_id, End_log_pos, Info."""
    from dumper.server.show_events import ShowEventsError, show_binlog_events

    path = Path(file)
    try:
        rows = show_binlog_events(path, path.name, start, 0, limit)
    except ShowEventsError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    click.echo("Log_name\tPos\tEvent_type\tServer_id\tEnd_log_pos\tInfo")
    for row in rows:
        click.echo("\t".join(str(x).replace("\n", " ") for x in row))
    if limit is None:
        # SHOW BINLOG EVENTS shows the whole events of a growing file; a file given here that ends
        # in half an event is damaged (or still being written): say so, exit 1
        end = max((int(r[4]) for r in rows), default=4)
        size = path.stat().st_size
        if end < size and start == 4:
            raise click.ClickException(f"{path}: offset {end}: {size - end} bytes after the last whole "
                                       "event (a truncated event, or a file still being written)")


@click.command("verify", cls=OneLineErrors)
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--truth", type=click.Path(dir_okay=False),
              help="The simulator's truth.json: also check every logical txn once and the final state.")
def verify_command(directory: str, truth: str | None) -> None:
    """Check a global binlog directory: files, CRCs, positions, transaction grammar, vtso order, no
    system tables (and with --truth: the content). Exit 1 on any problem."""
    from dumper.verify import verify

    report = verify(directory, truth)
    if report.fatal:
        raise click.ClickException(report.fatal)
    kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(report.kinds.items()))
    click.echo(f"{len(report.files)} files, {report.events:,} events, {report.txns:,} transactions ({kinds})")
    if report.truth_checked:
        click.echo(f"truth: every transaction once, rows and DDLs equal; {report.tables_checked} final tables equal"
                   if report.ok else "truth: differences found")
    for err in report.errors:
        click.echo(f"ERROR {err}", err=True)
    if not report.ok:
        raise SystemExit(1)
    click.echo("OK")


COMMANDS: list[click.Command] = [build_command, binlogs_command, events_command, verify_command]
