"""``gbinlog`` command line."""

from __future__ import annotations

import click

from gbinlog import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gbinlog")
def main() -> None:
    """gbinlog: a global binlog service for PolarDB-X-style distributed MySQL."""


# The simulator's command lives in its package; the CLI only wires it in.
from simulator.cli import simulate_command  # noqa: E402

main.add_command(simulate_command)


if __name__ == "__main__":
    main()
