"""CLI commands: run, status, demo (issue 7)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
