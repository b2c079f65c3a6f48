"""One-line CLI errors for every command: no usage banner, no traceback.

* usage errors (bad option values, missing arguments): ``gbinlog <cmd>: error: …``, exit 2;
* ``click.ClickException`` raised by a command (operator errors: bad input, missing DN, …): its
  own one line, its exit code (1);
* anything else that escapes a command: one line naming the exception (and the path of an
  ``OSError``), exit 1 — the traceback only with ``GBINLOG_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click


def fail(cmd: str, message: str, code: int = 2) -> None:
    click.echo(f"gbinlog {cmd}: error: {' '.join(str(message).split())}", err=True)
    sys.exit(code)


def describe(exc: BaseException) -> str:
    """One line for an unexpected exception: an ``OSError`` names its path."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class OneLineErrors(click.Command):
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            fail(self.name or "?", exc.format_message())
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            fail(self.name or "?", exc.format_message())
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the backstop: one line, never a traceback
            if os.environ.get("GBINLOG_DEBUG"):
                raise
            fail(self.name or "?", describe(exc), 1)
