"""``gbinlog`` command line."""

from __future__ import annotations

import click

from gbinlog import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gbinlog")
def main() -> None:
    """gbinlog: a global binlog service for PolarDB-X-style distributed MySQL."""


if __name__ == "__main__":
    main()
