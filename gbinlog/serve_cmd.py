"""CLI commands: serve (issue 6)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
