"""docs/operations.md documents exactly the keys of ``cluster.toml``, and its TOML examples load.

The schema's keys come from the code: the fields of ``gbinlog.config.Config``, walked recursively
(a field whose type is a dataclass is a table; one whose type is a tuple of dataclasses is a list of
tables, itself a key; every other field is a key). A key is its dotted path: ``metadb``,
``output.dir``, ``server.users`` (the list) and ``server.users.name`` (a key of its entries), ``dn``
and ``dn.id`` (a ``[[dn]]`` table).

The documented keys are the first cells of the rows of every Markdown table whose header's first
cell is ``key``, within the "## Configuration reference" section; each such cell must be one
backticked dotted name.

Each ```toml block of the page is loaded with the project's own loaders: a block with
``[output]`` and ``[[dn]]`` is a whole cluster.toml (``gbinlog.config.load``); a block without
``[[dn]]`` but with ``[server]``/``[output]`` or the flat serve keys is a serve config
(``gbinlog.endpoint_config.load_serve_file``); any other block is a fragment, loaded as the first
whole example with the fragment's top-level tables in place of its own.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from pathlib import Path

import pytest

from gbinlog.config import Config, from_dict, load
from gbinlog.endpoint_config import load_serve_file

DOC = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
SECTION = "## Configuration reference"
KEY_CELL = re.compile(r"^`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`$")
# The loader (gbinlog.config._table) skips this field of every table: where the file was read from.
NOT_A_KEY = "path"
SERVE_KEYS = {"server", "output", "serve", "users", "host", "port", "dir"}


def _table_type(tp: typing.Any) -> tuple[type | None, bool]:
    """(the dataclass a field's type makes a table of, whether it is a list of such tables):
    ``X`` and ``X | None`` → (X, False); ``tuple[X, ...]`` → (X, True); else (None, False)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else tp
    is_list = typing.get_origin(tp) is tuple
    if is_list:
        tp = typing.get_args(tp)[0]
    return (tp, is_list) if dataclasses.is_dataclass(tp) else (None, False)


def schema_keys(cls: type = Config, prefix: str = "") -> set[str]:
    """Every key of the config schema, as a dotted path."""
    hints = typing.get_type_hints(cls)
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        if f.name == NOT_A_KEY:
            continue
        sub, is_list = _table_type(hints[f.name])
        if sub is None or is_list:
            keys.add(prefix + f.name)
        if sub is not None:
            keys |= schema_keys(sub, f"{prefix}{f.name}.")
    return keys


def reference_section(text: str) -> str:
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end != -1 else len(text)]


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def documented_keys(text: str) -> list[str]:
    """The first cells of the rows of the key tables in the configuration reference."""
    keys: list[str] = []
    lines = reference_section(text).splitlines()
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("|") and cells(lines[i])[0].lower() == "key"):
            i += 1
            continue
        assert i + 1 < len(lines) and set(lines[i + 1].replace("|", "").strip()) <= set("-: "), \
            f"key table without a separator row: {lines[i]!r}"
        i += 2
        while i < len(lines) and lines[i].startswith("|"):
            first = cells(lines[i])[0]
            m = KEY_CELL.match(first)
            assert m, f"a key table row whose first cell is not a `table.key`: {lines[i]!r}"
            keys.append(m[1])
            i += 1
    return keys


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"^```toml\n(.*?)^```$", text, re.S | re.M)


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_schema_walk_sees_every_table():
    """The walk itself reaches the nested tables and the lists of tables."""
    keys = schema_keys()
    for key in ("metadb", "output.dir", "server.users", "server.users.name", "dn", "dn.tls_ca",
                "ha.lease_ms", "filter.include"):
        assert key in keys
    assert "output" not in keys and "server" not in keys      # tables, not keys
    assert not any(k == "path" or k.endswith(".path") for k in keys)


def test_every_schema_key_is_documented_and_every_documented_key_exists(doc):
    documented = documented_keys(doc)
    assert len(documented) > 20, "no key tables found in the configuration reference"
    twice = sorted({k for k in documented if documented.count(k) > 1})
    assert not twice, f"keys documented twice in docs/operations.md: {', '.join(twice)}"
    schema = schema_keys()
    undocumented = sorted(schema - set(documented))
    unknown = sorted(set(documented) - schema)
    assert not undocumented, \
        f"keys of gbinlog/config.py missing in docs/operations.md: {', '.join(undocumented)}"
    assert not unknown, \
        f"keys in docs/operations.md that gbinlog/config.py does not have: {', '.join(unknown)}"


def test_the_key_parser_sees_a_removed_row(doc):
    """A row taken out of the reference is noticed (the check above can fail)."""
    row = next(line for line in doc.splitlines() if line.startswith("| `server.write_buffer` |"))
    assert "server.write_buffer" not in documented_keys(doc.replace(row + "\n", ""))
    with pytest.raises(AssertionError, match="not a `table.key`"):
        documented_keys(doc.replace(row, row.replace("`server.write_buffer`", "write_buffer")))


def test_the_toml_examples_load(doc, tmp_path):
    blocks = toml_blocks(doc)
    whole = [b for b in blocks if {"output", "dn"} <= set(tomllib.loads(b))]
    assert whole, "docs/operations.md has no complete cluster.toml example"
    base = tomllib.loads(whole[0])
    for n, block in enumerate(blocks):
        data = tomllib.loads(block)
        path = tmp_path / f"example{n}.toml"
        path.write_text(block, encoding="utf-8")
        if {"output", "dn"} <= set(data):
            cfg = load(path)
            assert cfg.output.dir.is_absolute() and cfg.dn
        elif "dn" not in data and set(data) & SERVE_KEYS:
            server, output, _ = load_serve_file(path)
            assert server.users and output.dir
        else:
            cfg = from_dict({**base, **data}, base=tmp_path)
            for table in data:
                assert getattr(cfg, table) is not None
