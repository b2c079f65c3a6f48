"""docs/architecture.md names only code that exists.

The document's convention: a code reference is an inline code span holding a full dotted Python
path that starts with a package name (`extractor.sorter.Sorter.release`), or a repository path
(`merger/_merge.pyx`). Every dotted name must import (the longest importable module prefix, then
``getattr`` for the rest) and every path must exist; the worked walk must name at least
``MIN_WALK_NAMES`` of them, so a gutted walk fails too.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("binlog", "extractor", "merger", "schema_shaper", "dumper", "gbinlog", "simulator")
PATH_ROOTS = (*PACKAGES, "tests", "bench", "fixtures", "docs")
MIN_WALK_NAMES = 12

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# a dotted name, optionally written as a call: `merger.kway_merge.merge(streams)`
_DOTTED = re.compile(rf"^((?:{'|'.join(PACKAGES)})(?:\.{_IDENT})*)(?:\(.*\))?$")
_PATH = re.compile(rf"^(?:{'|'.join(PATH_ROOTS)})/[A-Za-z0-9_./-]+$")
# what the document must not mention: paths outside the repository, development history
_OUTSIDE = re.compile(r"\.\./|/work/|/tmp/|DESIGN\.md|polardbx-cdc\.md|\bissue \d|\bsession \d"
                      r"|\bround \d|Must show", re.I)


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks (a fenced block is an example, not a reference)."""
    return _SPAN.findall(_FENCE.sub("", text))


def dotted_names(text: str) -> list[str]:
    return [m.group(1) for s in spans(text) if (m := _DOTTED.match(s.strip()))]


def repo_paths(text: str) -> list[str]:
    return [s.strip() for s in spans(text) if _PATH.match(s.strip())]


def resolve(name: str) -> object:
    """The object ``name`` names: the longest importable module prefix, then attributes.
    Raises LookupError naming what is missing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # only "no such module (on the way to this name)" moves on to a shorter prefix; a
            # module that exists but cannot import (a missing dependency) is an error of its own
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue
            raise
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attr):
                raise LookupError(f"{'.'.join(parts[:i])} has no attribute {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"no module {parts[0]!r}")


def unresolved(names: list[str]) -> list[str]:
    bad = []
    for name in sorted(set(names)):
        try:
            resolve(name)
        except LookupError as exc:
            bad.append(f"{name}: {exc}")
    return bad


def walk_section(text: str) -> str:
    m = re.search(r"^## [^\n]*Worked walk[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, "docs/architecture.md has no '## … Worked walk …' section"
    return m.group(1)


def test_the_document_names_code_by_the_convention():
    names = dotted_names(doc_text())
    # the document is about the code: a document with a handful of references is not this one
    assert len(set(names)) >= 100, f"only {len(set(names))} dotted code references"
    assert {p.split(".")[0] for p in names} == set(PACKAGES), "every package is described"


def test_every_dotted_name_resolves():
    bad = unresolved(dotted_names(doc_text()))
    assert not bad, "docs/architecture.md names code that does not exist:\n" + "\n".join(bad)


def test_every_repository_path_exists():
    missing = sorted({p for p in repo_paths(doc_text()) if not (ROOT / p).exists()})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_worked_walk_names_the_functions_on_the_way():
    walk = walk_section(doc_text())
    names = set(dotted_names(walk))
    assert not unresolved(list(names))
    callables = {n for n in names if callable(resolve(n))}
    assert len(callables) >= MIN_WALK_NAMES, sorted(callables)
    # the walk goes through every stage, from the DN's events to the replica
    for stage in ("extractor.sorter", "extractor.vtso", "merger.", "schema_shaper.",
                  "dumper.global_binlog", "dumper.server.dump"):
        assert any(n.startswith(stage) for n in names), f"the worked walk skips {stage}"


def test_nothing_outside_the_repository_is_referred_to():
    found = sorted({m.group(0) for m in _OUTSIDE.finditer(doc_text())})
    assert not found, f"docs/architecture.md refers outside the repository or to its history: {found}"


@pytest.mark.parametrize("name", ["extractor.sorter.Sorter.relase", "merger.merge_by_trac",
                                  "dumper.no_such_module.thing", "schema_shaper.shaper.Shaper.nope"])
def test_a_misspelt_name_does_not_resolve(name):
    with pytest.raises(LookupError):
        resolve(name)
    assert unresolved([name])


def test_the_extraction_of_names_follows_the_convention():
    text = ("`extractor.sorter.Sorter.release` `merger.kway_merge.merge(streams)` `<out>/binlog.index`"
            " `gbinlog run` `Shaper.as_of` `merger/_merge.pyx`\n```\n`dumper.nothing`\n```\n")
    assert dotted_names(text) == ["extractor.sorter.Sorter.release", "merger.kway_merge.merge"]
    assert repo_paths(text) == ["merger/_merge.pyx"]
