"""``gbinlog simulate``: the click command (wired into ``gbinlog.cli``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from simulator.run import SimulateError, simulate
from simulator.workloads import WORKLOADS


def _fail(message: str) -> None:
    click.echo(f"gbinlog simulate: error: {' '.join(message.split())}", err=True)
    sys.exit(2)


class _OneLineErrors(click.Command):
    """Bad arguments → one line on stderr and exit 2 (click's usage errors span several lines),
    whether run on its own or as a subcommand of ``gbinlog``."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _fail(exc.format_message())
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SimulateError as exc:
            _fail(str(exc))


@click.command("simulate", cls=_OneLineErrors)
@click.option("--workload", required=True, type=click.Choice(WORKLOADS),
              help="bank, drift, ddl, mixed, scale (one DN joins mid-run, another leaves later) or all")
@click.option("--dns", type=int, default=4, show_default=True, help="DNs at the start")
@click.option("--txns", type=int, default=None,
              help="client transactions [default: 1000; live: --tps × --duration, else unbounded]")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--hole-rate", type=float, default=0.3, show_default=True,
              help="chance that a branch commit is delayed so later TSOs overtake it on its DN")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="output directory: dn0/ dn1/ … (mysql-bin.NNNNNN + index) and truth.json")
@click.option("--sessions", type=int, default=8, show_default=True, help="concurrent client sessions")
@click.option("--tps", type=int, default=400, show_default=True, help="simulated client txns/s")
@click.option("--max-file-size", type=int, default=1 << 20, show_default=True,
              help="DN binlog rotation size in bytes")
@click.option("--consensus/--no-consensus", default=True, show_default=True,
              help="write X-Paxos consensus events as X-Cluster DNs do")
@click.option("--no-truth", is_flag=True, help="skip truth.json (faster, for big benchmark inputs)")
@click.option("--force", is_flag=True, help="replace --out if it exists")
@click.option("--live", is_flag=True,
              help="real time: DN binlogs grow as the workload runs (TSOs carry wall-clock ms), "
                   "heartbeats every 200 ms, until --duration/--txns are done or SIGINT/SIGTERM")
@click.option("--duration", type=float, default=None, help="live: seconds of workload")
@click.option("--serve", is_flag=True,
              help="live: serve each DN directory over the replication protocol (one port per DN, "
                   "listed in OUT/cluster.json) until SIGINT/SIGTERM")
@click.option("--host", default="127.0.0.1", show_default=True, help="--serve: listen address")
@click.option("--port", type=int, default=0, show_default=True,
              help="--serve: DN i listens on PORT+i (0: any free port)")
@click.option("--user", default="gbinlog", show_default=True, help="--serve: replication user")
@click.option("--password", default="gbinlog", show_default=True, help="--serve: its password")
def simulate_command(workload: str, dns: int, txns: int | None, seed: int, hole_rate: float, out: str,
                     sessions: int, tps: int, max_file_size: int, consensus: bool, no_truth: bool,
                     force: bool, live: bool, duration: float | None, serve: bool, host: str, port: int,
                     user: str, password: str) -> None:
    """Write the binlogs of a simulated PolarDB-X cluster's DNs, and the truth to check against."""
    if live or serve or duration is not None:
        from simulator.live_cli import run_live
        if not live:
            _fail("--serve and --duration need --live")
        run_live(workload=workload, dns=dns, txns=txns, seed=seed, hole_rate=hole_rate, out=out,
                 sessions=sessions, tps=tps, max_file_size=max_file_size, consensus=consensus,
                 truth=not no_truth, force=force, duration=duration, serve=serve, host=host, port=port,
                 user=user, password=password)
        return
    txns = 1000 if txns is None else txns
    summary = simulate(workload, dns, txns, seed, out, hole_rate=hole_rate, sessions=sessions, tps=tps,
                       consensus=consensus, max_file_size=max_file_size, truth=not no_truth, force=force)
    stats = summary["stats"]
    click.echo(f"{out}: {summary['events']:,} events on {len(summary['dns'])} DNs, "
               f"{stats['txns']:,} txns, {stats['rollbacks']} rollbacks, "
               f"{summary['seconds_total']:.2f} s")
    for dn, s in stats["per_dn"].items():
        click.echo(f"  {dn}: {s['events']:,} events, {s['tso_commits']} TSO commits, "
                   f"out of TSO order {s['out_of_order_share']:.1%}, in holes {s['hole_share']:.1%}")
