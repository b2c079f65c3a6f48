"""CLI commands: run, status, demo.

Operator errors (bad config, unreachable DN, wrong password, port in use, output in use) print one
line ``gbinlog <cmd>: error: …`` on stderr and exit 2; an error while running exits 1 after a
clean stop (the output ends at a whole transaction, ``state.json`` at the last checkpoint).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import click

DEFAULT_CONFIG = "cluster.toml"


# one-line errors (usage errors exit 2, anything unexpected exit 1, never a traceback)
from gbinlog.cli_errors import OneLineErrors, fail  # noqa: E402,F401


def _config_path(config: str | None) -> str:
    return config or os.environ.get("GBINLOG_CONFIG") or DEFAULT_CONFIG


def _load(cmd: str, config: str | None):
    from gbinlog.config import ConfigError, load
    try:
        return load(_config_path(config))
    except ConfigError as exc:
        fail(cmd, str(exc))


@click.command("run", cls=OneLineErrors)
@click.option("--config", "config", type=str, default=None, metavar="FILE",
              help=f"cluster.toml [default: $GBINLOG_CONFIG or ./{DEFAULT_CONFIG}]")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True,
              help="spark: Structured Streaming over the DN binlog directories (pyspark, Java 17)")
@click.option("--master", default=None, help="Spark master URL (--engine spark) [default: local[*]]")
@click.option("--conf", "confs", multiple=True, metavar="K=V", help="Spark setting (--engine spark), repeatable")
@click.option("--trigger", default=None, help="Spark micro-batch trigger, e.g. '500 milliseconds' "
              "[default: as fast as possible]")
@click.option("-v", "--verbose", count=True, help="-v info (incl. the endpoint's session log), -vv debug, on stderr")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the info log (session log: logins, dumps, PURGE) to this file.")
def run_command(config: str | None, engine: str, master: str | None, confs: tuple[str, ...],
                trigger: str | None, verbose: int, log_file: Path | None) -> None:
    """Run the live service: read every DN, merge, shape, write and serve the global binlog.

    SIGTERM / SIGINT stop it cleanly (flush, fsync, state.json); SIGHUP reopens --log-file (after
    logrotate moved it); after a SIGKILL the next start
    recovers and goes on from the restart points."""
    from gbinlog.live import ClusterRefused, LiveRunner, RunError, ShutdownAbort
    from gbinlog.process import parse_file_mode, reopen_logs_on_sighup, set_file_mode
    from gbinlog.serve_cmd import setup_logging
    cfg = _load("run", config)
    set_file_mode(parse_file_mode(cfg.output.file_mode, "output.file_mode"))   # before anything is created
    setup_logging(verbose, log_file, "run")
    reopen_logs_on_sighup()
    if engine == "spark":
        if cfg.streams.count > 1:
            fail("run", "[streams] count > 1 (a stream group) is not supported with --engine spark: run it with "
                        "--engine local")
        from gbinlog.spark_engine.streaming import SparkLiveRunner
        runner: LiveRunner = SparkLiveRunner(cfg, master=master, conf=list(confs), trigger=trigger)
    else:
        if master or confs or trigger:
            fail("run", "--master, --conf and --trigger apply to --engine spark only")
        runner = LiveRunner(cfg)

    def on_signal(signum: int, frame: object) -> None:
        runner.stop()

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    try:
        try:
            runner.start()
        except RunError as exc:
            fail("run", str(exc), 1 if isinstance(exc, ClusterRefused) else 2)
        where = f"{cfg.server.host}:{runner.endpoint.port}" if runner.endpoint else "no endpoint"
        metrics = f", metrics on {cfg.metrics.host}:{cfg.metrics.port}" if cfg.metrics.port else ""
        click.echo(f"gbinlog run: {len(cfg.dn)} DNs → {cfg.output.dir} (serving on {where}{metrics}); "
                   "SIGTERM stops", err=True)
        try:
            result = runner.run()
        except ShutdownAbort as exc:
            click.echo(f"gbinlog run: stopped: {exc}", err=True)
            return
        except RunError as exc:
            fail("run", str(exc))
        except Exception as exc:  # noqa: BLE001 - one line for the operator, details in the log
            logging.getLogger("gbinlog.run").debug("run failed", exc_info=True)
            fail("run", f"{type(exc).__name__}: {exc}", 1)
        click.echo(f"gbinlog run: stopped cleanly at {result.last_vtso} ({result.txns} txns this run)", err=True)
    finally:
        runner.close()


# -- status ---------------------------------------------------------------------------------------------
def _alive(out: Path) -> int | None:
    """The pid of the writer holding ``out``'s lock (-1 when it has not written it yet), or None."""
    from gbinlog.output_lock import lock_holder
    holder = lock_holder(out)
    if holder is None:
        return None
    return holder.pid if holder.pid is not None else -1


def _age(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.1f} s" if abs(ms) >= 1000 else f"{ms:.0f} ms"


def read_status(out: Path) -> dict:
    """status.json of the output directory (with ``running``/``pid`` from the lock) and, when the
    service is not running, what ``state.json`` says."""
    from gbinlog.live import STATUS_FILE
    doc: dict = {}
    path = out / STATUS_FILE
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            doc = {}
    pid = _alive(out)
    doc["running"] = pid is not None
    if pid is not None:
        doc["pid"] = pid
        doc["status_age_s"] = round(time.time() - doc.get("time", 0), 1) if doc.get("time") else None
    state_path = out / "state.json"
    if state_path.exists():
        try:
            doc["state_json"] = json.loads(state_path.read_text())
        except ValueError:
            pass
    return doc


def format_status(doc: dict) -> str:
    lines = []
    run = "running" if doc.get("running") else "not running"
    if doc.get("running"):
        run += f" (pid {doc.get('pid')}, up {doc.get('uptime_s', 0):.0f} s)"
    lines.append(f"gbinlog: {run}; output {doc.get('output', '?')}; endpoint {doc.get('endpoint') or '-'}")
    if not doc.get("running") and doc.get("time"):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["time"]))
        lines.append(f"  (figures below are from its last status, at {when})")
    if doc.get("error"):
        lines.append(f"  error: {doc['error']}")
    if doc.get("last_vtso"):
        lines.append(f"  last vtso written {doc['last_vtso']}  lag {_age(doc.get('lag_ms'))}  "
                     f"txns {doc.get('txns', 0):,}  events out {doc.get('events_out', 0):,} "
                     f"({doc.get('events_out_per_s', 0):,.0f}/s)")
    merge = doc.get("merge") or {}
    if merge.get("watermark"):
        lines.append(f"  merge watermark {merge['watermark']}  DNs merged {', '.join(merge.get('dns', []))}"
                     + (f"  joined {merge['joined']}" if merge.get("joined") else "")
                     + (f"  left {merge['left']}" if merge.get("left") else ""))
    for d in doc.get("dns", []):
        state = d.get("state", "?") + ("/STALLED" if d.get("stalled") and d.get("state") != "standby" else "")
        line = f"  DN {d['dn']:<6} {state:<10} {d.get('source', '')}"
        if "file" in d:
            line += (f"  at {d['file']}:{d['pos']}  {d.get('events_per_s', 0):,.0f} events/s  last TSO "
                     f"{d.get('last_tso') or '-'} ({_age(d.get('last_tso_age_ms'))} ago)  "
                     f"open prepares {d.get('open_prepares', 0)}")
            held = d.get("oldest_open_prepare")
            if held:
                line += f" (oldest {held['xid'] or 'local'} at {held['at']}, {held['age_s']:.1f} s)"
            if d.get("reconnects"):
                line += f"  reconnects {d['reconnects']}"
            if d.get("last_error") and d.get("state") != "streaming":
                line += f"  last error: {d['last_error']}"
        lines.append(line)
    if doc.get("ha"):
        from gbinlog.ha import format_ha
        lines += format_ha(doc["ha"])
    reps = doc.get("replicas")
    if reps is not None:
        lines.append(f"  replicas attached: {len(reps)}")
        for r in reps:
            line = f"    server_id {r['server_id']} {r['user']}@{r['host']} at {r['file']}:{r['pos']}"
            if "bytes_per_s" in r:
                line += (f"  {r['bytes_per_s'] / 1024:.0f} KiB/s  {r['seconds_behind_head']:.1f} s behind head"
                         + ("  tls" if r.get("tls") else ""))
            lines.append(line)
    st = doc.get("state_json")
    group = (st or {}).get("streams")
    if group:
        spec = (st.get("settings") or {}).get("streams") or {}
        lines.append(f"  stream group {spec.get('group', '?')}: {spec.get('count', '?')} streams by "
                     f"{spec.get('hash', '?')} (as of the last checkpoint)")
        for k, mark in sorted((group.get("marks") or {}).items(), key=lambda kv: int(kv[0])):
            counts = (group.get("counts") or {}).get(k) or {}
            lines.append(f"    stream {k}: {mark['file']}:{mark['pos']}  {counts.get('written', 0):,} txns, "
                         f"{counts.get('bytes', 0):,} bytes written")
    if st and not doc.get("running"):
        b = st.get("binlog") or {}
        lines.append(f"  state.json: last vtso {st.get('last_vtso')}, binlog {b.get('file')}:{b.get('pos')}")
        for dn, p in sorted((st.get("dns") or {}).items()):
            lines.append(f"    DN {dn}: restart at " + (f"{p['file']}:{p['pos']}" if p else "its first file"))
    return "\n".join(lines)


@click.command("status", cls=OneLineErrors)
@click.option("--config", "config", type=str, default=None, metavar="FILE",
              help=f"cluster.toml [default: $GBINLOG_CONFIG or ./{DEFAULT_CONFIG}]")
@click.option("--dir", "out_dir", type=click.Path(file_okay=False), default=None,
              help="the output directory instead of --config's output.dir")
@click.option("--json", "as_json", is_flag=True, help="the raw status document")
def status_command(config: str | None, out_dir: str | None, as_json: bool) -> None:
    """Per DN: connection, position, last TSO and its age, oldest open prepare; merge watermark,
    last vtso written, lag, replicas attached and their positions."""
    out = Path(out_dir) if out_dir else Path(_load("status", config).output.dir)
    if not out.is_dir():
        fail("status", f"output directory {out} does not exist (gbinlog run has not started there)")
    doc = read_status(out)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
    else:
        click.echo(format_status(doc))
    code, reason = status_exit(doc)
    if code:
        click.echo(f"gbinlog status: {reason}", err=True)
        sys.exit(code)


# ``gbinlog status`` exit codes (a health check can use them): 0 running and healthy, 1 not
# running (never started here, stopped, or the last start failed), 2 operator error (no such
# directory, bad config), 3 running but unhealthy (a DN stalled, the endpoint down, the status stuck).
def status_exit(doc: dict) -> tuple[int, str]:
    from gbinlog.metrics import health_of
    if not doc.get("running"):
        last = f" (last state {doc['state']}" + (f": {doc['error']}" if doc.get("error") else "") + ")" \
            if doc.get("state") else ""
        return 1, f"not running{last}"
    ok, reason = health_of(doc)
    return (0, "ok") if ok else (3, f"unhealthy: {reason}")


def _demo_command() -> click.Command:
    from gbinlog.demo import demo_command
    return demo_command


COMMANDS: list[click.Command] = [run_command, status_command, _demo_command()]
