"""``gbinlog ha step-down``: hand the leadership over on purpose (rolling upgrades).

Asks the current leader (through the lease row) to release its lease at its next renewal; it then
sits out one lease length, so another member takes over with the next epoch. Every member serves
replicas all the time (each runs its own pipeline), so replicas see nothing of the hand-over.
Exit codes: 0 handed over, 1 no leader / no hand-over within the timeout / store unreachable,
2 operator error (bad config, no ``[ha]``).
"""

from __future__ import annotations

import time

import click

from gbinlog.cli_errors import OneLineErrors, fail
from gbinlog.run_cmd import DEFAULT_CONFIG, _load


@click.group("ha")
def ha_group() -> None:
    """High availability: the leader of a group of `gbinlog run` members."""


@ha_group.command("step-down", cls=OneLineErrors)
@click.option("--config", "config", type=str, default=None, metavar="FILE",
              help=f"any member's cluster.toml [default: $GBINLOG_CONFIG or ./{DEFAULT_CONFIG}]")
@click.option("--timeout", type=float, default=None, metavar="S",
              help="wait this long for the next leader [default: 3 lease lengths]")
def step_down_command(config: str | None, timeout: float | None) -> None:
    """Ask the current leader to hand over; wait until another member leads."""
    from dumper.ha import LeaseStore, LeaseStoreError
    cfg = _load("ha step-down", config)
    if not cfg.ha.member:
        fail("ha step-down", "the config has no [ha] table (ha.member)")
    url = cfg.ha.store or cfg.metadb
    try:
        store = LeaseStore.open(url)
    except LeaseStoreError as exc:
        fail("ha step-down", str(exc), 1)
    try:
        row = store.read()
        if not row.live(store.now_ms()):
            fail("ha step-down", "no member holds the lease now (no leader to step down)", 1)
        if not store.request_step_down(row.epoch):
            fail("ha step-down", f"the leadership moved on from epoch {row.epoch} meanwhile", 1)
        limit = time.monotonic() + (timeout if timeout is not None else 3 * cfg.ha.lease_ms / 1000)
        while True:
            new = store.read()
            if new.epoch > row.epoch and new.live(store.now_ms()):
                click.echo(f"gbinlog ha: {row.holder} (epoch {row.epoch}) handed over to {new.holder} "
                           f"at {new.address} (epoch {new.epoch})")
                return
            if time.monotonic() > limit:
                state = f"{row.holder} released the lease" if not new.holder else f"{new.holder} still leads"
                fail("ha step-down", f"no new leader within the timeout ({state})", 1)
            time.sleep(0.05)
    except LeaseStoreError as exc:
        fail("ha step-down", str(exc), 1)
    finally:
        store.close()


COMMANDS: list[click.Command] = [ha_group]
