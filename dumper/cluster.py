"""Which cluster a set of DN binlogs (and an output directory) belongs to.

A DN binlog carries no cluster id. What it does carry:

* its server id (every event header; the first file's FDE is read) — one per DN instance, so it
  identifies a DN, and ``state.json`` records it per DN id: an output directory built from other
  DNs (another cluster's, or the same names re-created) is refused on resume;
* the broadcast transactions (docs/formats.md): heartbeats every 200 ms, DDL marks and
  instructions are TSO XA transactions on the BROADCAST ``__cdc__`` tables, i.e. one branch on
  *every* DN of the cluster with the same gtrid and commit TSO. DNs of one cluster share them;
  DNs of two clusters do not (the simulator's clusters even share the first heartbeats, since
  every run starts its TSO oracle at the same instant, but not their DDL marks).

So the rule is membership (``check_broadcast_members``): once a DN took part in a broadcast
transaction, every later one has a branch from it (until its input ends). A DN that joins later
(scale-out) starts taking part and stays. Before a fresh build ``check_broadcast_prefixes``
compares the first broadcast transactions of every DN, so DNs of two clusters are refused before
anything is written. ``state.json``'s ``cluster.id`` is the (TSO, txnId) of the first broadcast
transaction written: informational, the checks use the DN server ids and the rules above.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from dumper.global_binlog import DumperError
from extractor.model import DnTxn, TxnKind
from merger.errors import TsoJumpedAhead
from merger.model import GlobalTxn


class ClusterMismatch(DumperError):
    """DN inputs that are not one cluster, or an output directory built from other DNs."""


def dn_server_id(directory: str | os.PathLike, first_file: str | None) -> int | None:
    """The server id in the first event header of the DN's first binlog file (None: no file)."""
    if first_file is None:
        return None
    path = Path(directory) / first_file
    with open(path, "rb") as fh:
        head = fh.read(4 + 19)
    if len(head) < 4 + 19:
        return None
    return int.from_bytes(head[9:13], "little")


def check_distinct_dns(server_ids: dict[str, int | None]) -> None:
    """Two DN inputs with one server id are the same DN twice."""
    seen: dict[int, str] = {}
    for dn, sid in sorted(server_ids.items()):
        if sid is None:
            continue
        if sid in seen:
            raise ClusterMismatch(f"DN {dn} and DN {seen[sid]} have the same server id {sid}: the same DN "
                                  "given twice?")
        seen[sid] = dn


def check_same_dns(saved: dict[str, int | None], now: dict[str, int | None], out_dir: str) -> None:
    """The DNs of a resumed build are the ones the output directory was built from."""
    if set(saved) != set(now):
        raise ClusterMismatch(f"{out_dir} was built from DNs {', '.join(sorted(saved))}, not "
                              f"{', '.join(sorted(now))}: another cluster's output, or a different DN set "
                              "(use a new output directory)")
    for dn in sorted(now):
        if saved[dn] is not None and now[dn] is not None and saved[dn] != now[dn]:
            raise ClusterMismatch(f"{out_dir} holds the global binlog of another cluster: DN {dn} had server "
                                  f"id {saved[dn]} there, {now[dn]} here")


BROADCAST_KINDS = frozenset({TxnKind.HEARTBEAT, TxnKind.DDL_MARK, TxnKind.INSTRUCTION})


#: a DN lacking a broadcast while its next commit is this far above it had its TSO jump (closer,
#: the binlogs are of two clusters); a cluster's heartbeats are a second or less apart
JUMP_SECONDS = 60.0


def check_broadcast_members(g: GlobalTxn, members: set[str], ended: set[str],
                            head_of: Callable[[str], DnTxn | None] | None = None) -> None:
    """The cluster membership rule: a broadcast transaction (heartbeat, DDL mark, instruction —
    rows of the BROADCAST ``__cdc__`` tables) has a branch from every DN that took part in an
    earlier one, unless that DN's input has ended. Adds its DNs to ``members``.

    ``head_of`` (the merge's next transaction of a DN): a DN that lacks the broadcast while its
    next transaction commits ``JUMP_SECONDS`` or more above it had a commit TSO jump ahead
    (``TsoJumpedAhead``, naming the DN, file and offset of that transaction) — the merge took the
    broadcast without waiting for it."""
    dns = {b.dn for b in g.branches}
    missing = members - dns - ended
    if missing and head_of is not None:
        for dn in sorted(missing):
            head = head_of(dn)
            gap = ((head.tso >> 22) - (int(g.vtso[:19]) >> 22)) / 1000 if head is not None and head.tso else 0
            if gap >= JUMP_SECONDS:
                raise TsoJumpedAhead(
                    f"the transaction begun here commits with TSO {head.tso}, {gap:,.3f} s above "
                    f"{g.kind.value} {g.vtso[:19]} that every other DN has and this DN lacks below it: "
                    "its commit TSO jumped ahead (or this binlog is another cluster's)",
                    dn=dn, file=head.start.file, offset=head.start.offset)
    if missing:
        raise ClusterMismatch(
            f"{g.kind.value} {g.vtso} has branches from {', '.join(sorted(dns))} but not from "
            f"{', '.join(sorted(missing))}, which took part in earlier ones: these DN binlogs are not one "
            "cluster (every heartbeat and DDL mark of a cluster reaches all its DNs)")
    members |= dns


def broadcast_prefix(txns: Iterable[DnTxn], count: int = 16, limit: int = 50000) -> list[str]:
    """The actual TSOs (first 38 vtso digits) of a DN's first ``count`` broadcast transactions,
    looking at most ``limit`` transactions ahead."""
    out: list[str] = []
    for n, t in enumerate(txns):
        if t.kind in BROADCAST_KINDS and t.is_tso:
            out.append(t.vtso[:38])
            if len(out) >= count:
                break
        if n >= limit:
            break
    return out


def check_broadcast_prefixes(prefixes: dict[str, list[str]]) -> None:
    """Before a fresh build: DNs of one cluster have the same broadcast transactions wherever their
    inputs overlap in time (a DN that joined later, or whose old files are purged, starts later
    but then shares them). Two DNs whose first broadcast transactions overlap in time and differ
    are from two clusters."""
    items = sorted((dn, p) for dn, p in prefixes.items() if p)
    for i, (x, px) in enumerate(items):
        for y, py in items[i + 1:]:
            lo, hi = max(px[0], py[0]), min(px[-1], py[-1])
            if lo > hi:
                continue
            sx = {a for a in px if lo <= a <= hi}
            sy = {b for b in py if lo <= b <= hi}
            if sx != sy:
                odd = sorted(sx ^ sy)[0]
                raise ClusterMismatch(
                    f"DN {x} and DN {y} are not one cluster: in the time both cover, only one of them has the "
                    f"broadcast transaction (heartbeat / DDL mark) {odd}")
