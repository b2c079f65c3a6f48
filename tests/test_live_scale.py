"""The ``scale`` workload live: a DN joins mid-run,
another leaves later, and the downstream never notices.

Two DNs at the start; at 40 % of the run ``dn2`` joins (a group copied onto it, a
``StorageInstChange`` instruction on all three DNs, then a database over all three); at 75 %
``dn1``'s groups move to the others and an instruction lists only ``dn0``, ``dn2``. ``gbinlog run``
has ``dn2`` as a standby DN: it connects to it when the instruction goes through the merge, and
stops reading ``dn1`` after its branch of the second one. A SIGKILL after the join checks that a
restart keeps the joined DN, one after the leave that a restart does not read the left DN again.
The global binlog must equal, byte for byte, a batch build over all three finished DN binlogs (no
gap, no reordering), pass ``verify --truth``, and a real MariaDB replica must end with the truth's
tables.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gbinlog.replica import free_port
from tests.mariadb import MariaDB
from tests.test_live_bank import files_of, status
from tests.test_live_support import (
    ROOT,
    Cluster,
    Service,
    attach,
    first_file_listed,
    replica_checksums,
    truth_checksums,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow

DURATION = 16


def test_dn_joins_mid_run_downstream_never_notices(tmp_path):
    cluster = Cluster(tmp_path, "scale", 2, duration=DURATION, tps=100, seed=11)
    out = tmp_path / "global"
    server_port = free_port()
    cfg = write_config(tmp_path / "cluster.toml", out, cluster, ["dn0", "dn1", "dn2"], standby=("dn2",),
                       server_port=server_port)
    svc = Service(cfg, tmp_path / "run.log")
    replica = MariaDB.start(tmp_path / "replica", server_id=2)
    try:
        svc.start()
        wait_for(lambda: first_file_listed(out), 20, "the first global binlog file")
        attach(replica, server_port)
        st = wait_for(lambda: status(out) or None, 10, "status.json")
        if not st["merge"]["joined"]:                 # (a busy machine may start the run after the join)
            assert next(d for d in st["dns"] if d["dn"] == "dn2")["state"] == "standby"
        joined = wait_for(lambda: status(out)["merge"]["joined"], DURATION + 10, "dn2 to join")
        assert list(joined) == ["dn2"]
        wait_for(lambda: next((d for d in status(out)["dns"] if d["dn"] == "dn2"), {}).get("txns", 0) > 5, 15,
                 "transactions from dn2")
        svc.kill9()                                   # a restart after the join keeps dn2
        svc.start()
        left = wait_for(lambda: status(out).get("merge", {}).get("left"), DURATION + 20, "dn1 to leave")
        assert list(left) == ["dn1"]
        wait_for(lambda: (json.loads((out / "state.json").read_text()).get("left") or None), 10,
                 "a checkpoint after the leave")
        svc.kill9()                                   # a restart after the leave does not read dn1
        svc.start()
        truth = cluster.wait_done(DURATION + 30)
        (leave,) = [t for t in truth["txns"] if t.get("kind") == "instruction" and t["instruction"].get("left_dn")]
        assert left == {"dn1": leave["vtso"]}
        want = truth_checksums(replica, truth)
        wait_for(lambda: replica_checksums(replica, truth) == want, 60, "the replica to apply everything", 0.5)
        st = status(out)
        assert st["merge"]["dns"] == ["dn0", "dn2"] and st["merge"]["left"] == left
        shown = subprocess.run([sys.executable, "-m", "gbinlog.cli", "status", "--dir", str(out)], cwd=ROOT,
                               capture_output=True, text=True)
        assert f"left {left}" in shown.stdout and "DNs merged dn0, dn2" in shown.stdout, shown.stdout
        assert svc.terminate() == 0, svc.log_text()[-3000:]
        state = json.loads((out / "state.json").read_text())
        assert list(state["joined"]) == ["dn2"] and sorted(state["dns"]) == ["dn0", "dn1", "dn2"]
        assert state["left"] == left
        assert not (out / "live.json").exists()
    finally:
        svc.ensure_stopped()
        replica.stop()
        cluster.close()
    assert (cluster.dir / "dn2").is_dir()
    batch = tmp_path / "batch"
    dn_args = [a for d in ("dn0", "dn1", "dn2") for a in ("--dn", str(cluster.dir / d))]
    built = subprocess.run([sys.executable, "-m", "gbinlog.cli", "build", *dn_args, "--out", str(batch),
                            "--max-file-size", "256KB", "--no-progress"], cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    live_files, batch_files = files_of(out), files_of(batch)
    assert list(live_files) == list(batch_files)
    for name in live_files:
        assert live_files[name] == batch_files[name], name
    verified = subprocess.run([sys.executable, "-m", "gbinlog.cli", "verify", str(out), "--truth",
                               str(cluster.dir / "truth.json")], cwd=ROOT, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # rows written to the new database on every DN, the new DN included, reached the output
    kv2 = truth["tables"]["scale_new.kv2"]
    assert len(kv2["rows"]) > 0
