"""Serving speed: our endpoint vs a real MariaDB master sending the same binlog bytes (issue 6,
Must show 5). Not a test: prints numbers.

    .venv/bin/python bench/serve.py [--txns 200000] [--runs 3] [--keep DIR]

A throwaway MariaDB master writes a binlog of 1-row autocommit transactions (GTID, BEGIN, TABLE_MAP,
WRITE_ROWS, XID: the shape of the global binlog); then our server serves the master's own binlog
directory, so both send exactly the same files. Timed, alternating, ``--runs`` times each:
`mariadb-binlog --read-from-remote-server --to-last-log` (text mode, output to /dev/null) and the same
with `--raw` (files written, no decoding: bound by the transfer, not by the client's printing). The
ratio is bytes/s from our server divided by bytes/s from the master (≥ 1.0 = at least as fast).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dumper.server import ServerConfig, start_in_thread  # noqa: E402
from tests.mariadb import MariaDB, _binary  # noqa: E402

USER, PASSWORD = "bench", "bench-pw"

FILL = """
CREATE USER '{user}'@'%' IDENTIFIED BY '{pw}';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%';
CREATE DATABASE bench;
CREATE TABLE bench.t (id INT PRIMARY KEY, amount BIGINT, note VARCHAR(64), created DATETIME,
  balance DECIMAL(10,2));
DELIMITER //
CREATE PROCEDURE bench.fill(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    INSERT INTO bench.t VALUES (i, i * 7, CONCAT('note ', i), '2026-01-01 00:00:00' + INTERVAL i SECOND,
      (i % 100000) / 100);
    SET i = i + 1;
  END WHILE;
END //
DELIMITER ;
CALL bench.fill({txns});
"""


def read_remote(port: int, first: str, out_dir: Path, raw: bool) -> float:
    args = [_binary("mariadb-binlog"), "--no-defaults", "--read-from-remote-server", "--to-last-log",
            "-h127.0.0.1", f"-P{port}", f"-u{USER}", f"-p{PASSWORD}"]
    if raw:
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        args += ["--raw", f"--result-file={out_dir}/"]
    t0 = time.perf_counter()
    with open("/dev/null", "wb") as null:
        subprocess.run([*args, first], stdout=null, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txns", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="work directory to keep (default: a temp dir, removed)")
    opts = ap.parse_args()
    root = opts.keep or Path(tempfile.mkdtemp(prefix="gbinlog-bench-serve-"))
    master = MariaDB.start(root / "master", log_bin=True, extra_args=(
        "--sync-binlog=0", "--innodb-flush-log-at-trx-commit=0", "--max-binlog-size=64M"))
    try:
        t0 = time.perf_counter()
        master.run_sql(FILL.format(user=USER, pw=PASSWORD, txns=opts.txns))
        files = master.binlog_files()
        size = sum(f.stat().st_size for f in files)
        print(f"master wrote {len(files)} file(s), {size / 1e6:.1f} MB, {opts.txns} txns "
              f"in {time.perf_counter() - t0:.1f} s")
        with start_in_thread(ServerConfig(dir=master.datadir, users={USER: PASSWORD}, server_id=100)) as ours:
            for raw in (False, True):
                times: dict[str, list[float]] = {"mariadb": [], "gbinlog": []}
                for _ in range(opts.runs):
                    for name, port in (("mariadb", master.port), ("gbinlog", ours.port)):
                        times[name].append(read_remote(port, files[0].name, root / "raw", raw))
                best = {k: min(v) for k, v in times.items()}
                med = {k: statistics.median(v) for k, v in times.items()}
                mode = "--raw" if raw else "text"
                for k in times:
                    print(f"  {mode:5} {k:8} best {size / best[k] / 1e6:7.1f} MB/s  median "
                          f"{size / med[k] / 1e6:7.1f} MB/s  runs {', '.join(f'{t:.2f}s' for t in times[k])}")
                print(f"  {mode:5} ratio gbinlog/mariadb: best {best['mariadb'] / best['gbinlog']:.2f}, "
                      f"median {med['mariadb'] / med['gbinlog']:.2f} (target >= 1.0)")
    finally:
        master.stop()
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
