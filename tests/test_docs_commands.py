"""Every ``gbinlog …`` command line in README.md and docs/ is one the CLI accepts.

Two forms are checked, both against the click commands themselves (no option list kept here):
- a line of a fenced code block that starts with ``gbinlog `` (``\\`` continuations joined, a
  trailing ``# comment`` dropped) and is not a usage line (no ``[ ]``, ``|`` or ``...``) is parsed
  by the command's own click parser: the subcommand exists, every option exists and gets its
  value, a choice is one of the choices, nothing is left over, no required option is missing;
- an inline code span that starts with ``gbinlog ``, and a usage line, is a synopsis
  (``[--port P]``, ``(--gtid SET | --tso TSO)``): its subcommand exists and every option it names
  is one of that command's options.
A quoted error message (``gbinlog build: error: …``) is not a command line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from gbinlog.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`(gbinlog [^`\n]+)`(?!`)")
OPTION_TOKEN = re.compile(r"^(--?[A-Za-z][\w-]*)")
SYNOPSIS = re.compile(r"(^|\s)[\[(]|\s\|\s|\.\.\.")   # [--opt X], (--a | --b), X ...: a usage line
NOT_COMMANDS = {"gbinlog replication endpoint"}   # values the endpoint answers (@@version_comment)
ABSENT = {None, getattr(click.core, "UNSET", None)}   # what click's parser leaves for a missing value


@dataclass(frozen=True)
class CommandLine:
    where: str      # file:line
    text: str
    synopsis: bool  # an inline span (may use [ ] | … placeholders) rather than a runnable line


def command_lines(path: Path) -> list[CommandLine]:
    text = path.read_text()
    found: list[CommandLine] = []
    fenced_spans = []
    for block in FENCE.finditer(text):
        fenced_spans.append(block.span())
        first_line = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        index = 0
        while index < len(lines):
            line, start = lines[index], index
            while line.endswith("\\") and index + 1 < len(lines):
                index += 1
                line = line[:-1] + " " + lines[index].strip()
            index += 1
            line = line.strip().removeprefix("$ ")
            if line.startswith("gbinlog "):
                found.append(CommandLine(f"{path.name}:{first_line + start}", line,
                                         synopsis=bool(SYNOPSIS.search(line))))
    for span in INLINE.finditer(text):
        if span.group(1) in NOT_COMMANDS or any(lo <= span.start() < hi for lo, hi in fenced_spans):
            continue
        line_no = text.count("\n", 0, span.start()) + 1
        found.append(CommandLine(f"{path.name}:{line_no}", span.group(1).replace("\\|", "|"),
                                 synopsis=True))
    return found


def is_message(tokens: list[str]) -> bool:
    """A quoted error message ("gbinlog ha step-down: error: …"), not a command line."""
    return any(token.endswith(":") for token in tokens[1:3])


def _subcommand(tokens: list[str]) -> tuple[click.Command, list[str], str]:
    """The command the tokens after ``gbinlog`` name, the tokens left for it, and its path."""
    command: click.Command = main
    path = "gbinlog"
    rest = tokens
    while isinstance(command, click.Group):
        if not rest:
            raise AssertionError(f"{path}: no subcommand")
        name, rest = rest[0], rest[1:]
        found = command.get_command(click.Context(command), name)
        if found is None:
            raise AssertionError(f"{path} has no command {name!r}")
        command, path = found, f"{path} {name}"
    return command, rest, path


def _option_names(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def problems(line: CommandLine) -> list[str]:
    """What is wrong with one documented command line (empty when the CLI accepts it)."""
    if is_message(line.text.split()):
        return []
    try:
        tokens = shlex.split(line.text, comments=True)
    except ValueError as exc:
        return [f"{line.where}: {line.text!r}: {exc}"]
    try:
        command, args, path = _subcommand(tokens[1:])
    except AssertionError as exc:
        return [f"{line.where}: {line.text!r}: {exc}"]
    if line.synopsis:
        known = _option_names(command)
        wrong = []
        for token in args:
            for part in token.strip("[](){}").split("|"):
                match = OPTION_TOKEN.match(part.strip("[](){}"))
                if match and match.group(1) not in known:
                    wrong.append(match.group(1))
        return [f"{line.where}: {path} has no option {name}" for name in wrong]
    ctx = click.Context(command, info_name=path)
    try:
        opts, leftover, _order = command.make_parser(ctx).parse_args(list(args))
    except click.UsageError as exc:
        return [f"{line.where}: {line.text!r}: {exc.format_message()}"]
    found: list[str] = []
    if leftover and not command.allow_extra_args:
        found.append(f"{line.where}: {line.text!r}: extra arguments {leftover}")
    for param in command.params:
        value = opts.get(param.name)
        if any(value is absent for absent in ABSENT):
            value = None
        if param.required and value is None and not param.envvar:
            found.append(f"{line.where}: {line.text!r}: {param.get_error_hint(ctx)} is missing")
        if isinstance(param.type, click.Choice) and value is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            found += [f"{line.where}: {line.text!r}: {v!r} is not one of {list(param.type.choices)}"
                      for v in values if v not in param.type.choices]
    return found


ALL_LINES = [line for path in DOCUMENTS for line in command_lines(path)]


def test_the_documents_show_commands():
    """The test below cannot pass by finding nothing: README and docs show the CLI at work."""
    runnable = [line for line in ALL_LINES if not line.synopsis]
    assert len(runnable) >= 10, [line.text for line in runnable]
    assert len([line for line in ALL_LINES if line.synopsis]) >= 20
    tokens = [shlex.split(line.text, comments=True) for line in ALL_LINES if not is_message(line.text.split())]
    shown = {_subcommand(t[1:])[2] for t in tokens}
    for command in ("gbinlog build", "gbinlog run", "gbinlog serve", "gbinlog verify",
                    "gbinlog simulate", "gbinlog status", "gbinlog position", "gbinlog demo"):
        assert command in shown, command


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_documented_command_line_is_accepted(document: Path):
    found = [problem for line in command_lines(document) for problem in problems(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, synopsis, expected", [
    ("gbinlog build --dn d --out o --no-such-option", False, "No such option"),
    ("gbinlog build --dn d --out o --engine flink", False, "is not one of"),
    ("gbinlog buil --dn d", False, "has no command 'buil'"),
    ("gbinlog verify", False, "is missing"),
    ("gbinlog serve --dir D [--portt P]", True, "has no option --portt"),
    ("gbinlog position DIR (--gtid SET | --tsoo TSO)", True, "has no option --tsoo"),
    ("gbinlog ha step-down --timeout", False, "requires an argument"),
])
def test_the_check_finds_what_the_cli_refuses(text: str, synopsis: bool, expected: str):
    """The checker itself: each of these is wrong in one way, and the finding says which."""
    found = problems(CommandLine("doc.md:1", text, synopsis))
    assert found and expected in found[0], found
