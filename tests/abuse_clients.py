"""A process of N abusive clients (tests/test_server_limits.py): each logs in, then sends a 1 MB
``SELECT 1,1,…`` in a loop and reads the whole answer (a result set, or the ERR the endpoint gives
a query longer than its SQL layer reads). Run as ``python -m tests.abuse_clients PORT N SECONDS``;
prints the number of queries answered within SECONDS (waiting on for the first one). In its own process so its CPU does not disturb the measuring
test's timestamps."""

from __future__ import annotations

import os
import sys
import threading
import time

from tests.test_server_support import PASSWORD, USER, RawClient

QUERY = ("SELECT " + ",".join(["1"] * 500_000)).encode()
FIRST_ANSWER_WAIT = 90.0   # seconds after SECONDS to wait for the first answer


def abuse(port: int, until: float, counts: list[int], i: int) -> None:
    c = RawClient(port, USER, PASSWORD, timeout=120)
    while time.monotonic() < until:
        c.command(b"\x03" + QUERY)
        tail = b""
        first = True
        while True:  # read until the result set's final EOF packet, without parsing 500,000 packets
            chunk = c.sock.recv(1 << 20)
            if not chunk:
                return
            if first and chunk[4:5] == b"\xff":     # an ERR packet is the whole answer
                break
            first = False
            tail = (tail + chunk)[-9:]
            if tail[:3] == b"\x05\x00\x00" and tail[4] == 0xFE:
                break
        counts[i] += 1
    c.close()


def main() -> None:
    port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    until = time.monotonic() + seconds
    counts = [0] * n
    threads = [threading.Thread(target=abuse, args=(port, until, counts, i), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    time.sleep(max(0.0, until - time.monotonic()))
    # One answer at least shows the load was real; on a slow machine a 1 MB query can take longer
    # than SECONDS to answer, so the first one is waited for (bounded). The others still queued are
    # not: the process ends, its connections with it.
    while sum(counts) == 0 and time.monotonic() < until + FIRST_ANSWER_WAIT:
        time.sleep(0.05)
    print(sum(counts), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
