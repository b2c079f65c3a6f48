"""CLI commands: build, binlogs, events, verify (issue 5)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
