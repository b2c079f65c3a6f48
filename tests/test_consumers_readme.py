"""The README's python-mysql-replication recipe ("Connect your consumer"), run verbatim against the
endpoint serving the `ddl` fixture's global binlog: the first run (no GTID set) gets every logical row
change of the truth by column name; a run resumed with the GTID set it had persisted after a third of
the transactions gets exactly the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dumper.server import ServerConfig, start_in_thread
from gbinlog.local_engine import Settings, build
from tests.test_consumers_metadata import truth_changes_by_name

ROOT = Path(__file__).resolve().parents[1]


def recipe() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("**python-mysql-replication**"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_recipe(port: int, seen: str) -> tuple[list, list[str]]:
    got: list = []
    gtids: list[str] = []

    def handle(schema, table, row):
        gtids.append(scope["last_gtid"])
        if "before_values" in row:
            got.append((schema, table, "update", (row["before_values"], row["after_values"])))
        else:
            got.append((schema, table, None, row["values"]))

    scope = {"SEEN": seen, "PORT": port, "handle": handle, "last_gtid": None}
    exec(compile(recipe(), "README.md", "exec"), scope)  # noqa: S102 - the documented recipe itself
    return got, gtids


def test_the_readme_pmr_recipe_reads_everything_then_resumes_by_gtid(tmp_path):
    truth = json.loads((ROOT / "fixtures" / "ddl-3dn" / "truth.json").read_text())
    want = [(db, t, op if op == "update" else None, v) for db, t, op, v in truth_changes_by_name(truth)]
    out = tmp_path / "g"
    build(sorted(p for p in (ROOT / "fixtures" / "ddl-3dn").iterdir() if p.is_dir()), out,
          settings=Settings(max_file_size=32 << 10))
    with start_in_thread(ServerConfig(dir=out, users={"repl": "secret"})) as h:
        everything, gtids = run_recipe(h.port, "")
        assert everything == want
        # Persisted after the transaction of the third of the changes: resume from there.
        cut = len(everything) // 3
        while cut < len(gtids) and gtids[cut] == gtids[cut - 1]:
            cut += 1
        uuid, gno = gtids[cut - 1].split(":")
        rest, _ = run_recipe(h.port, f"{uuid}:1-{gno}")
    assert rest == everything[cut:]
