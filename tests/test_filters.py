"""``[filter] include / exclude``: MySQL ``replicate-wild-do-table`` /
``replicate-wild-ignore-table`` semantics, applied after shaping, DDL of dropped tables dropped too,
a setting a resume checks. A ``gbinlog run`` with ``exclude = ["bank.audit*"]`` serves a real
MariaDB replica that ends with no ``bank.audit*`` table and the truth's other tables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schema_shaper.filters import FilterError, TableFilter
from tests.mariadb import MariaDB, mariadb_binlog
from tests.test_server_support import (
    PASSWORD,
    USER,
    change_master,
    replica_checksums,
    slave_status,
    truth_checksums,
    wait_caught_up,
)

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "fixtures" / "bank-4dn"
GBINLOG = [sys.executable, "-m", "gbinlog.cli"]
DNS = [f"--dn={BANK / f'dn{i}'}" for i in range(4)]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*GBINLOG, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("include, exclude, db, table, kept", [
    ([], ["bank.audit*"], "bank", "audit_log", False),
    ([], ["bank.audit*"], "bank", "AUDIT_2024", False),       # names compare case-insensitively
    ([], ["bank.audit*"], "bank", "accounts", True),
    ([], ["bank.audit*"], "bank2", "audit_log", True),
    ([], ["bank.audit%"], "bank", "audit", False),              # % matches the empty string too
    ([], ["bank.audit_"], "bank", "audit1", False),           # _ is one character
    ([], ["bank.audit_"], "bank", "audit12", True),
    ([], ["bank.audit\\_x"], "bank", "auditYx", True),        # \_ is a literal underscore
    ([], ["bank.audit\\_x"], "bank", "audit_x", False),
    ([], ["bank"], "bank", "accounts", False),                # 'db' alone = db.%
    (["bank.accounts"], [], "bank", "audit_log", False),      # with includes, the rest is out
    (["bank.accounts"], [], "bank", "accounts", True),
    (["bank.%"], ["bank.audit*"], "bank", "audit_log", True),  # wild-do is checked before wild-ignore
    (["b%"], [], "drift", "items", False),
])
def test_mysql_wild_table_rules(include, exclude, db, table, kept):
    assert TableFilter(include, exclude).wants_table(db, table) is kept


def test_database_ddl_rules_and_bad_patterns():
    f = TableFilter([], ["bank.audit*", "scratch"])
    assert f.wants_database("bank") and not f.wants_database("scratch") and f.wants_database("drift")
    assert not TableFilter(["bank"], []).wants_database("drift")
    for bad in ["", "a.b.c", "db.", ".t"]:
        with pytest.raises(FilterError):
            TableFilter([], [bad])


def _rows_by_table(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in text.splitlines():
        for op in ("### INSERT INTO ", "### UPDATE ", "### DELETE FROM "):
            if line.startswith(op):
                name = line[len(op):].strip()
                out[name] = out.get(name, 0) + 1
    return out


@pytest.mark.slow
def test_build_with_exclude_drops_rows_and_ddl_and_keeps_the_rest(tmp_path):
    plain, filtered = tmp_path / "plain", tmp_path / "filtered"
    assert cli("build", *DNS, f"--out={plain}").returncode == 0
    r = cli("build", *DNS, f"--out={filtered}", "--exclude", "bank.audit*")
    assert r.returncode == 0, r.stderr
    a = mariadb_binlog("-v", *sorted(str(p) for p in plain.glob("binlog.0*")))
    b = mariadb_binlog("-v", *sorted(str(p) for p in filtered.glob("binlog.0*")))
    ra, rb = _rows_by_table(a), _rows_by_table(b)
    assert ra["`bank`.`audit_log`"] > 20 and "`bank`.`audit_log`" not in rb
    assert "audit_log" in a and "audit_log" not in b                 # the CREATE TABLE is gone too
    assert {k: v for k, v in ra.items() if "audit" not in k} == rb   # every other row is there
    # verify --truth holds the filtered output to the truth less the dropped table (from state.json)
    r = cli("verify", str(filtered), "--truth", str(BANK / "truth.json"))
    assert r.returncode == 0 and "1 final tables equal" in r.stdout, (r.stdout, r.stderr)
    assert json.loads((filtered / "state.json").read_text())["settings"]["filter"] == \
        {"include": [], "exclude": ["bank.audit*"]}
    # a resume with other filters would change the bytes: refused, one line, exit 1
    r = cli("build", *DNS, f"--out={filtered}")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "would give different bytes" in r.stderr
    r = cli("build", *DNS, f"--out={tmp_path / 'x'}", "--exclude", "a.b.c")
    assert r.returncode == 2 and "a.b.c" in r.stderr and "Traceback" not in r.stderr


def _free_port() -> int:
    from gbinlog.replica import free_port as free
    return free()


@pytest.mark.slow
def test_run_with_exclude_feeds_a_mariadb_replica_without_the_audit_tables(tmp_path):
    truth = json.loads((BANK / "truth.json").read_text())
    assert "bank.audit_log" in truth["tables"] and truth["tables"]["bank.audit_log"]["rows"]
    port = _free_port()
    out = tmp_path / "out"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[output]\ndir = "{out}"\n[server]\nport = {port}\n'
                   f'users = [{{ name = "{USER}", password = "{PASSWORD}" }}]\n[metrics]\nport = 0\n'
                   '[filter]\nexclude = ["bank.audit*"]\n'
                   + "".join(f'[[dn]]\nid = "dn{i}"\ndir = "{BANK / f"dn{i}"}"\n' for i in range(4)))
    proc = subprocess.Popen([*GBINLOG, "run", "--config", str(cfg)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    try:
        # the DNs are finite: the run has written everything once the output stops growing
        last, since = None, time.monotonic()
        deadline = time.monotonic() + 60
        while time.monotonic() - since < 2.0:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            files = sorted(out.glob("binlog.0*"))
            now = (files[-1].name, files[-1].stat().st_size) if files else None
            if now != last:
                last, since = now, time.monotonic()
            time.sleep(0.1)
        change_master(replica, port, "binlog.000001", 4)
        replica.query("START SLAVE")
        st = wait_caught_up(replica, *last, timeout=60)
        assert (st["Slave_IO_Running"], st["Slave_SQL_Running"]) == ("Yes", "Yes")
        tables = {r[0] for r in replica.query("SHOW TABLES FROM bank")}
        assert tables == {"accounts"}                 # no bank.audit* table at all, not even empty
        rest = {**truth, "tables": {k: t for k, t in truth["tables"].items() if not k.startswith("bank.audit")}}
        assert rest["tables"]
        assert replica_checksums(replica, rest) == truth_checksums(replica, rest)
        b = truth["bank"]
        assert int(replica.query("SELECT SUM(balance) FROM bank.accounts")[0][0]) == b["expected_total"]
        replica.query("STOP SLAVE")
        assert slave_status(replica)["Last_SQL_Error"] == ""
    finally:
        replica.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read()
