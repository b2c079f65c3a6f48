"""The session log (logger ``gbinlog.session``) and the escaping of client input in it.

Its lines carry what clients send (user names, statements, file names of dump requests): a user name
with a newline would write a second, forged line into ``--log-file``, and an escape sequence would
reach the operator's terminal. Every argument of every session-log line goes through ``printable``
(a filter on the logger), so no call site can forget it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape_char(char: str) -> str:
    named = _NAMED_ESCAPES.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal or a log reader could act on written as an escape:
    control characters (C0, DEL, C1 such as CSI), line and paragraph separators, format characters
    (bidirectional overrides), lone surrogates; a backslash is doubled, so an escape in the output
    always stands for one character of the input."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(char if char.isprintable() and char != "\\" else _escape_char(char) for char in text)


def _printable_arg(arg: object) -> object:
    """A log argument as it may be written: numbers as they are (``%d``), anything else as printable
    text (an exception's message may quote what the client sent)."""
    if isinstance(arg, (int, float)):
        return arg
    return printable(arg if isinstance(arg, str) else str(arg))


class EscapeClientInput(logging.Filter):
    """Makes every argument of a record printable (see ``printable``) before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, Mapping):
            record.args = {key: _printable_arg(value) for key, value in record.args.items()}
        elif record.args:
            record.args = tuple(_printable_arg(arg) for arg in record.args)
        record.msg = printable(record.msg) if isinstance(record.msg, str) and not record.args else record.msg
        return True


session_log = logging.getLogger("gbinlog.session")
if not any(isinstance(f, EscapeClientInput) for f in session_log.filters):
    session_log.addFilter(EscapeClientInput())
