"""``simulate(...)``: run a workload on a simulated cluster and write DN binlogs + ``truth.json``.

Everything is written into a temporary directory next to ``out`` and renamed into place at the end,
so a directory called ``out`` is always complete; a failed run leaves nothing behind.
"""

from __future__ import annotations

import gc
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from simulator.cluster import Cluster, SimConfig
from simulator.ddl import cdc_start
from simulator.truth import TruthBuilder, write_truth
from simulator.workloads import WORKLOADS, make_driver

MAX_DNS = 64


class SimulateError(Exception):
    """Bad arguments or an unusable output directory: a one-line message for the user."""


def validate(cfg: SimConfig) -> None:
    if cfg.workload not in WORKLOADS:
        raise SimulateError(f"unknown workload {cfg.workload!r} (choose from {', '.join(WORKLOADS)})")
    if not 1 <= cfg.dns <= MAX_DNS:
        raise SimulateError(f"--dns must be between 1 and {MAX_DNS}, got {cfg.dns}")
    if cfg.txns < 1:
        raise SimulateError(f"--txns must be at least 1, got {cfg.txns}")
    if not 0.0 <= cfg.hole_rate <= 1.0:
        raise SimulateError(f"--hole-rate must be between 0 and 1, got {cfg.hole_rate}")
    if cfg.sessions < 1 or cfg.tps < 1:
        raise SimulateError("--sessions and --tps must be at least 1")
    if cfg.max_file_size < 4096:
        raise SimulateError(f"--max-file-size must be at least 4096, got {cfg.max_file_size}")
    if cfg.seed < 0:
        raise SimulateError(f"--seed must not be negative, got {cfg.seed}")


def command_line(cfg: SimConfig) -> str:
    """The ``gbinlog simulate`` command that regenerates this output, less ``--out`` (recorded in
    the truth, which must not depend on where it was written)."""
    args = ["gbinlog", "simulate", "--workload", cfg.workload, "--dns", str(cfg.dns), "--txns",
            str(cfg.txns), "--seed", str(cfg.seed), "--hole-rate", str(cfg.hole_rate),
            "--sessions", str(cfg.sessions), "--tps", str(cfg.tps), "--max-file-size",
            str(cfg.max_file_size), "--consensus" if cfg.consensus else "--no-consensus"]
    if not cfg.truth:
        args.append("--no-truth")
    return shlex.join(args)


def _prepare_out(out: Path, force: bool) -> Path:
    """Check ``out`` can be (re)placed and make the temp dir beside it."""
    if out.exists() and not out.is_dir():
        raise SimulateError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise SimulateError(f"--out {out} exists and is not empty (use --force to replace it)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    except OSError as exc:
        raise SimulateError(f"cannot write --out {out}: {exc.strerror or exc}") from None


def _put_in_place(tmp: Path, out: Path) -> None:
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.rename(out, old / "x")
    os.rename(tmp, out)
    if old is not None:
        shutil.rmtree(old)


def run_cluster(cfg: SimConfig, out_dir: Path) -> Cluster:
    """The simulation itself: DNs, setup, sessions, heartbeats until every job and txn is done."""
    cl = Cluster(cfg, out_dir)
    for _ in range(cfg.dns):
        cl.add_dn()
    cl.cdc_dns = list(cl.dns)
    cl.workload = make_driver(cl, cfg.workload)
    cl.after(500, cdc_start, cl)             # the CdcStart instruction: the initial topology
    cl.after(1_000, cl.workload.start)
    cl.after(1_000, cl.heartbeat)
    # The run allocates millions of small objects and few cycles: the cyclic GC would rescan the
    # growing heap again and again (a third of the time on big runs), so it waits for the end.
    gc.disable()
    try:
        cl.run()
    finally:
        gc.enable()
    if not cl.finished:
        raise AssertionError("simulator bug: the run stopped before every txn and job finished")
    for node in cl.dns:
        node.close()
    return cl


def simulate(workload: str, dns: int, txns: int, seed: int, out: str | os.PathLike, *,
             hole_rate: float = 0.3, sessions: int = 8, tps: int = 400, consensus: bool = True,
             max_file_size: int = 1 << 20, truth: bool = True, force: bool = False) -> dict[str, Any]:
    """Run ``workload`` on ``dns`` DNs; returns a summary (events, seconds, per-DN stats)."""
    cfg = SimConfig(workload=workload, dns=dns, txns=txns, seed=seed, hole_rate=hole_rate,
                    sessions=sessions, tps=tps, consensus=consensus, max_file_size=max_file_size,
                    truth=truth)
    validate(cfg)
    out_path = Path(out)
    tmp = _prepare_out(out_path, force)
    try:
        started = time.perf_counter()
        cl = run_cluster(cfg, tmp)
        elapsed_sim = time.perf_counter() - started
        summary: dict[str, Any] = {"events": sum(n.log.events_written for n in cl.dns),
                                   "seconds": elapsed_sim, "dns": [n.id for n in cl.dns]}
        from simulator.truth import stats
        summary["stats"] = stats(cl)
        if truth:
            params = asdict(cfg)
            gc.disable()                      # same reason as in run_cluster
            try:
                doc = TruthBuilder(cl).build(params, command_line(cfg))
                write_truth(tmp / "truth.json", doc)
            finally:
                gc.enable()
        _put_in_place(tmp, out_path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    summary["seconds_total"] = time.perf_counter() - started
    return summary
