"""``gbinlog demo``: the whole service in one command, nothing to configure.

A simulated 4-DN PolarDB-X cluster runs the ``bank`` workload in real time (transfers between
accounts as distributed transactions, with 2PC holes and a heartbeat every 200 ms), each DN served
over the replication protocol; ``gbinlog run``'s pipeline reads the DNs, writes the global binlog
and serves it; when MariaDB is installed a throwaway replica attaches with ``CHANGE MASTER TO``.
A live line (fits 80 columns, or the terminal's width) shows the transactions written per second
against the target, the global binlog's lag (commit TSO → written) and the replica's total balance,
which must stay constant; a summary when it ends.
Ctrl-C (or SIGTERM) stops everything it started and removes its files (unless ``--dir``).
"""

from __future__ import annotations

import atexit
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from gbinlog.cli_errors import OneLineErrors, fail


def _line(text: str, tty: bool) -> None:
    if tty:
        sys.stdout.write("\r\033[K" + text)
    else:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()


REPL_USER, REPL_PASSWORD = "repl", "repl"


class _Started:
    """What the demo started, stopped in reverse order (at the end, on an error, or at exit); the
    work directory is removed unless the user chose it."""

    def __init__(self, work: Path, keep: bool) -> None:
        self.work, self.keep = work, keep
        self.stops: list = []

    def add(self, stop) -> None:
        self.stops.append(stop)

    def close(self) -> None:
        while self.stops:          # last started first; a stop may still add one (the replica)
            fn = self.stops.pop()
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                click.echo(f"gbinlog demo: while stopping: {exc}", err=True)
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def _stop_event() -> threading.Event:
    """Set by SIGINT / SIGTERM."""
    stop = threading.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda signum, frame: stop.set())
    return stop


def _work_and_port(work_dir: str | None, port: int) -> tuple[Path, int]:
    """Every check before anything is created (a failed start leaves no directory behind), then
    the work directory and the endpoint's port."""
    from gbinlog.live import RunError, check_port
    from gbinlog.replica import free_port

    if work_dir is not None and Path(work_dir).exists() and (
            not Path(work_dir).is_dir() or any(Path(work_dir).iterdir())):
        fail("demo", f"--dir {work_dir} is not an empty directory")
    if port:
        try:
            check_port("127.0.0.1", port, "--port")
        except RunError as exc:
            fail("demo", f"{exc} (choose another with --port, or --port 0)")
    else:
        port = free_port()
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="gbinlog-demo-"))
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail("demo", f"--dir {work}: {exc.strerror or exc}")
    return work, port


def _start_simulation(dns: int, tps: int, work: Path, started: _Started, dn_password: str):
    """The live bank cluster serving its DNs; returns once every DN listens."""
    from simulator.live import LiveSimulation, ServeOptions
    from simulator.run import SimulateError

    try:
        sim = LiveSimulation("bank", dns, work / "cluster", tps=tps, truth=False,
                             serve=ServeOptions(port=0, user="cdc", password=dn_password))
    except SimulateError as exc:
        fail("demo", str(exc))
    thread = threading.Thread(target=sim.run, name="gbinlog-demo-sim", daemon=True)
    thread.start()
    started.add(lambda: (sim.stop(), thread.join(30), sim.stop_servers()))
    deadline = time.monotonic() + 30
    while len(sim.ports) < dns:
        if sim.error is not None or time.monotonic() > deadline:
            fail("demo", f"the simulated cluster did not start: {sim.error}")
        time.sleep(0.02)
    return sim


def _start_replica(work: Path, started: _Started, rep: list) -> threading.Thread:
    """A MariaDB replica starting in a thread (the demo goes on without one if it fails)."""
    from gbinlog.replica import Replica

    def start() -> None:
        try:
            r = Replica.start(work / "replica")
        except Exception as exc:  # noqa: BLE001 - the demo goes on without a replica
            click.echo(f"gbinlog demo: no replica: {exc}", err=True)
            return
        rep.append(r)
        started.add(r.stop)
    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    started.add(lambda: thread.join(120))        # a failure before the replica is up still stops it
    return thread


def _start_runner(sim, work: Path, port: int, started: _Started, dn_password: str):
    """``gbinlog run`` in this process over the simulated DNs' endpoints."""
    from gbinlog.config import Config, DnConfig, OutputConfig, ServerConfig, UserConfig
    from gbinlog.live import LiveRunner, RunError

    cfg = Config(dn=tuple(DnConfig(id=dn, host="127.0.0.1", port=p, user="cdc", password=dn_password)
                          for dn, p in sorted(sim.ports.items(), key=lambda kv: int(kv[0][2:]))),
                 output=OutputConfig(dir=work / "global", rotate_size=64 << 20),
                 server=ServerConfig(port=port, users=(UserConfig(REPL_USER, REPL_PASSWORD),)))
    runner = LiveRunner(cfg)
    try:
        runner.start()
    except RunError as exc:
        fail("demo", str(exc))
    thread = threading.Thread(target=_run, args=(runner,), name="gbinlog-demo-run", daemon=True)
    thread.start()
    started.add(lambda: (runner.stop(), thread.join(30), runner.close()))
    return runner


@click.command("demo", cls=OneLineErrors)
@click.option("--dns", type=click.IntRange(1, 16), default=4, show_default=True, help="simulated DNs")
@click.option("--tps", type=click.IntRange(1, 5000), default=200, show_default=True,
              help="client transactions per second")
@click.option("--port", type=click.IntRange(0, 65535), default=3307, show_default=True,
              help="replication endpoint port (0: any free port)")
@click.option("--dir", "work_dir", type=click.Path(file_okay=False), default=None,
              help="keep everything here (default: a temporary directory removed at the end)")
@click.option("--replica/--no-replica", default=True, show_default=True,
              help="attach a throwaway MariaDB replica when mariadbd is installed")
@click.option("--duration", type=float, default=None, help="stop by itself after this many seconds")
def demo_command(dns: int, tps: int, port: int, work_dir: str | None, replica: bool,
                 duration: float | None) -> None:
    """Simulated 4-DN bank cluster → gbinlog → MariaDB replica, live; Ctrl-C stops it all."""
    from gbinlog.replica import mariadb_available

    stop = _stop_event()
    tty = sys.stdout.isatty()
    work, port = _work_and_port(work_dir, port)
    started = _Started(work, keep=work_dir is not None)
    atexit.register(started.close)
    rep: list = []
    try:
        dn_password = secrets.token_hex(8)
        sim = _start_simulation(dns, tps, work, started, dn_password)
        want_replica = replica and mariadb_available()
        replica_thread = _start_replica(work, started, rep) if want_replica else None
        runner = _start_runner(sim, work, port, started, dn_password)
        click.echo(f"gbinlog demo: {dns} DNs (bank, {tps} txns/s) → global binlog in {work / 'global'} → "
                   f"served on 127.0.0.1:{port} (user {REPL_USER}, password {REPL_PASSWORD})")
        if replica_thread is not None:
            replica_thread.join()
        if rep:
            _attach_when_ready(rep[0], work / "global", port, REPL_PASSWORD, stop)
            click.echo(f"gbinlog demo: MariaDB replica (pid {rep[0].pid}) attached with CHANGE MASTER TO "
                       f"MASTER_PORT={port}; socket {rep[0].socket}")
        elif replica and not want_replica:
            click.echo("gbinlog demo: mariadbd not installed: no replica (./dev.sh installs mariadb-server)")
        click.echo(f"Ctrl-C stops everything. Live line: client txn/s written (target {tps}), binlog lag = "
                   "commit TSO → written to the global binlog, the replica's total balance.")
        summary = _live_lines(sim, runner, rep[0] if rep else None, stop, tty, duration, tps)
        _line("gbinlog demo: stopping…", tty)
        if tty:
            sys.stdout.write("\n")
    finally:
        started.close()
        atexit.unregister(started.close)
    click.echo(summary.text() if summary.seconds else "gbinlog demo: stopped before the first live line")
    click.echo("gbinlog demo: stopped; nothing left running")


def _run(runner) -> None:
    try:
        runner.run()
    except Exception as exc:  # noqa: BLE001 - shown by the live line
        runner.error = exc


def _attach_when_ready(replica, out: Path, port: int, password: str, stop: threading.Event) -> None:
    """``CHANGE MASTER TO`` once the first global binlog file exists (the replica starts there)."""
    while not (out / "binlog.000001").exists() and not stop.is_set():
        time.sleep(0.05)
    replica.attach("127.0.0.1", port, "repl", password, heartbeat=1.0, retry=1)


@dataclass
class Summary:
    """What the demo shows when it ends."""

    seconds: float = 0.0
    written: int = 0
    lags_ms: list = field(default_factory=list)
    balance_checks: int = 0
    balance_ok: int = 0
    balance: int | None = None

    def text(self) -> str:
        lags = sorted(self.lags_ms)
        lag = (f"binlog lag p50 {lags[len(lags) // 2] / 1000:.2f} s, max {lags[-1] / 1000:.2f} s"
               if lags else "binlog lag -")
        rep = (f"; replica total balance {self.balance:,} in {self.balance_ok}/{self.balance_checks} checks"
               if self.balance_checks else "")
        return (f"gbinlog demo: {self.seconds:.0f} s, {self.written:,} transactions written "
                f"({self.written / max(self.seconds, 1e-9):,.0f}/s), {lag}{rep}")


def live_line(t: float, tps: float, target: int, lag_ms: float | None, replica: str, width: int) -> str:
    """One status line that fits ``width`` columns (80 by default): elapsed, written txn/s against
    the target, whose lag (the global binlog's: commit TSO → written), the replica's part."""
    lag = f"{lag_ms / 1000:.2f}s" if lag_ms is not None else "-"
    text = f"{t:4.0f}s  {tps:5.0f}/{target} txn/s  binlog lag {lag}"
    if replica:
        text += "  " + replica
    return text if len(text) < width else text[:width - 2] + "…"


def _live_lines(sim, runner, replica, stop: threading.Event, tty: bool, duration: float | None,
                target: int) -> Summary:
    t0 = time.monotonic()
    expected = None
    summary = Summary()
    while not stop.wait(1.0):
        now = time.monotonic()
        st = runner.status()
        if runner.error is not None:
            _line(f"gbinlog demo: pipeline stopped: {runner.error}", tty)
            if tty:
                sys.stdout.write("\n")
            return summary
        lag = st["lag_ms"]
        summary.seconds, summary.written = now - t0, st["written"]
        if lag is not None:
            summary.lags_ms.append(lag)
        part = ""
        if replica is not None:
            if expected is None and sim.cl is not None and sim.cl.bank_accounts:
                expected = sim.cl.bank_accounts
            part = _replica_part(replica, expected, summary)
        width = shutil.get_terminal_size((80, 24)).columns if tty else 80
        _line(live_line(now - t0, st["txns_out_per_s"], target, lag, part, width), tty)
        if duration is not None and now - t0 >= duration:
            return summary
    return summary


def _replica_part(replica, accounts: int | None, summary: Summary) -> str:
    """The replica's view: while the accounts are loaded their count grows; after that the total
    balance must stay ``accounts × 1000`` whatever transfers run."""
    try:
        rows = replica.query("SELECT COUNT(*), SUM(balance) FROM bank.accounts")
        count, total = rows[0][0], rows[0][1]
    except Exception:  # noqa: BLE001 - the table comes with the first DDL
        return "replica: waiting for bank"
    if not count or accounts is None or count < accounts:
        return f"replica: loading {count}{'/' + str(accounts) if accounts else ''}"
    expected = accounts * 1000
    summary.balance_checks += 1
    summary.balance = int(total)
    if int(total) == expected:
        summary.balance_ok += 1
        return f"replica balance {int(total):,} ✓"
    return f"replica balance {int(total):,}≠{expected:,} ✗"
