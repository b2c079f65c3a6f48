"""``gbinlog simulate --live [--serve]``: run a ``LiveSimulation`` in the foreground.

SIGINT/SIGTERM end the workload cleanly (in-flight txns finish, truth.json is written); with
``--serve`` the DN endpoints keep serving after the workload is done, until the next signal.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import click

from simulator.live import LiveSimulation, ServeOptions
from simulator.run import SimulateError


def run_live(*, workload: str, dns: int, txns: int | None, seed: int, hole_rate: float, out: str,
             sessions: int, tps: int, max_file_size: int, consensus: bool, truth: bool, force: bool,
             duration: float | None, serve: bool, host: str, port: int, user: str, password: str) -> None:
    if serve and not 0 <= port <= 65535 - 64:
        raise SimulateError(f"--port must be between 0 and {65535 - 64}, got {port}")
    opts = ServeOptions(host=host, port=port, user=user, password=password) if serve else None
    sim = LiveSimulation(workload, dns, out, seed=seed, tps=tps, duration=duration, txns=txns,
                         hole_rate=hole_rate, sessions=sessions, max_file_size=max_file_size,
                         consensus=consensus, truth=truth, serve=opts, force=force)
    signalled = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        signalled.set()
        sim.stop()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def ready(s: LiveSimulation) -> None:
        click.echo(f"{out}: live {workload} on {dns} DNs, {tps} txns/s"
                   + (f" for {duration:g} s" if duration else ", until interrupted"))
        for dn_id, p in sorted(s.ports.items()):
            click.echo(f"  {dn_id} serving {out}/{dn_id} on {host}:{p}")
        sys.stdout.flush()

    try:
        try:
            summary = sim.run(on_ready=ready)
        except OSError as exc:
            raise SimulateError(f"cannot serve: {exc.strerror or exc}") from None
        st = summary["stats"]
        click.echo(f"{out}: {summary['events']:,} events on {len(summary['dns'])} DNs, {st['txns']:,} txns, "
                   f"{st['rollbacks']} rollbacks, {summary['seconds']:.1f} s"
                   + (", truth.json written" if truth else ""))
        sys.stdout.flush()
        if serve:
            if not signalled.is_set():
                click.echo("workload done; still serving the DNs until interrupted")
                sys.stdout.flush()
            while not signalled.is_set():
                time.sleep(0.2)
    finally:
        sim.stop_servers()
        for s, h in old.items():
            signal.signal(s, h)
