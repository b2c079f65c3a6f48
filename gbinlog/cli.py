"""``gbinlog`` command line."""

from __future__ import annotations

import importlib

import click

from gbinlog import __version__
from gbinlog.cli_errors import OneLineErrors


class _Main(click.Group):
    """The command group. ``simulate`` (the simulated cluster, a test tool) is imported only when
    it is asked for (``gbinlog simulate …``, ``gbinlog --help``): no production command loads the
    simulator."""

    lazy = {"simulate": ("simulator.cli", "simulate_command")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gbinlog")
def main() -> None:
    """gbinlog: a global binlog service for PolarDB-X-style distributed MySQL."""


# Commands live in their own modules (one owner each); the CLI only wires them in.
from gbinlog import build_cmd, ha_cmd, position_cmd, run_cmd, serve_cmd  # noqa: E402

for _module in (build_cmd, serve_cmd, run_cmd, position_cmd, ha_cmd):
    for _command in _module.COMMANDS:
        main.add_command(_command)


@main.command("txns", cls=OneLineErrors)
@click.argument("dn_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--rows/--no-rows", default=True, help="Count rows (decodes row images) or rows events.")
def txns_command(dn_dirs: tuple[str, ...], rows: bool) -> None:
    """Print the transactions of DN binlog directories in global commit order (vtso, kind,
    commit TSO, branches, tables with row counts). Each directory's name is its DN id."""
    from pathlib import Path

    from binlog.errors import BinlogError
    from extractor import OrderingError, extract, storage_sequences
    from extractor.source import NotADnDirectory, dn_binlog_files
    from merger import merge

    dirs = [Path(d) for d in dn_dirs]
    for d in dirs:
        try:
            dn_binlog_files(d, d.resolve().name)
        except NotADnDirectory as exc:
            raise click.ClickException(str(exc)) from None
    seqs = storage_sequences(d.resolve().name for d in dirs)
    kinds: dict[str, int] = {}
    try:
        for g in merge([extract(d, storage_seq=seqs[d.resolve().name]) for d in dirs]):
            kinds[g.kind.value] = kinds.get(g.kind.value, 0) + 1
            click.echo(g.describe(rows=rows))
    except (OrderingError, BinlogError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"# {sum(kinds.values())} txns: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()
