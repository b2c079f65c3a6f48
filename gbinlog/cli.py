"""``gbinlog`` command line."""

from __future__ import annotations

import importlib

import click

from gbinlog import __version__
from gbinlog.cli_errors import OneLineErrors


class _Main(click.Group):
    """The command group. Each command's module is imported only when that command is asked for
    (or for ``gbinlog --help``): ``build`` does not load the endpoint, ``serve`` not the pipeline,
    and no production command loads the simulator (``gbinlog simulate …``)."""

    lazy = {
        "simulate": "simulator.cli",
        **dict.fromkeys(("build", "binlogs", "events", "verify"), "gbinlog.build_cmd"),
        **dict.fromkeys(("serve", "hash-password"), "gbinlog.serve_cmd"),
        **dict.fromkeys(("run", "status", "demo"), "gbinlog.run_cmd"),
        "position": "gbinlog.position_cmd",
        "ha": "gbinlog.ha_cmd",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return super().get_command(ctx, name)
        module = importlib.import_module(self.lazy[name])
        if name == "simulate":
            return module.simulate_command
        return next((command for command in module.COMMANDS if command.name == name), None)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gbinlog")
def main() -> None:
    """gbinlog: a global binlog service for PolarDB-X-style distributed MySQL."""



@main.command("txns", cls=OneLineErrors)
@click.argument("dn_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--rows/--no-rows", default=True, help="Count rows (decodes row images) or rows events.")
@click.option("--cluster-stopped", is_flag=True,
              help="The directories hold the DNs' whole binlogs: print past where a DN's input ends.")
def txns_command(dn_dirs: tuple[str, ...], rows: bool, cluster_stopped: bool) -> None:
    """Print the transactions of DN binlog directories in global commit order (vtso, kind,
    commit TSO, branches, tables with row counts). Each directory's name is its DN id. As the
    global binlog, it stops where a DN's input ends below the others' (a last '# held back' line
    says where) unless --cluster-stopped."""
    from pathlib import Path

    from binlog.errors import BinlogError
    from extractor import OrderingError, extract, storage_sequences
    from extractor.source import NotADnDirectory, dn_binlog_files
    from merger import PASSED_ALL, EndsPassing, Membership, merge

    dirs = [Path(d) for d in dn_dirs]
    for d in dirs:
        try:
            dn_binlog_files(d, d.resolve().name)
        except NotADnDirectory as exc:
            raise click.ClickException(str(exc)) from None
    seqs = storage_sequences(d.resolve().name for d in dirs)
    kinds: dict[str, int] = {}
    membership = Membership()
    streams = [extract(d, storage_seq=seqs[d.resolve().name], complete=cluster_stopped) for d in dirs]
    if cluster_stopped:
        streams = [EndsPassing(s, PASSED_ALL) for s in streams]
    try:
        for g in merge(streams, membership=membership):
            kinds[g.kind.value] = kinds.get(g.kind.value, 0) + 1
            click.echo(g.describe(rows=rows))
    except (OrderingError, BinlogError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"# {sum(kinds.values())} txns: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if membership.held is not None:
        click.echo(f"# {membership.held.describe()}")


if __name__ == "__main__":
    main()
