"""Which cluster a set of DN binlogs (and an output directory) belongs to.

A DN binlog carries no cluster id. What it does carry:

* its server id (every event header; the first file's FDE is read) — one per DN instance, so it
  identifies a DN, and ``state.json`` records it per DN id: an output directory built from other
  DNs (another cluster's, or the same names re-created) is refused on resume;
* the heartbeats (reference §4.4): every 200 ms the cluster's daemon runs one TSO XA transaction
  on the broadcast ``__cdc_heartbeat__`` table, i.e. one branch on *every* DN of the cluster with
  the same gtrid and commit TSO. DNs of one cluster share those; DNs of two clusters never do.

So: the cluster id is the (TSO, txnId) of the first heartbeat seen, and the membership rule
``check_heartbeat_members`` holds for one cluster only: once a DN took part in a heartbeat, every
later heartbeat has a branch from it (until its input ends). A DN that joins later (scale-out)
starts taking part and stays. DN directories from two clusters break the rule at the second
cluster's first heartbeat, before any of its transactions is written; ``first_heartbeats`` lets
a build refuse them before it starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from dumper.global_binlog import DumperError
from extractor.model import DnTxn, TxnKind
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


def check_heartbeat_members(g: GlobalTxn, members: set[str], ended: set[str]) -> None:
    """The cluster membership rule: a heartbeat has a branch from every DN that took part in an
    earlier heartbeat, unless that DN's input has ended. Adds the heartbeat's DNs to ``members``."""
    dns = {b.dn for b in g.branches}
    missing = members - dns - ended
    if missing:
        raise ClusterMismatch(
            f"heartbeat {g.vtso} has branches from {', '.join(sorted(dns))} but not from "
            f"{', '.join(sorted(missing))}, which took part in earlier heartbeats: these DN binlogs are "
            "not one cluster (every heartbeat of a cluster reaches all its DNs)")
    members |= dns


def first_heartbeat(txns: Iterable[DnTxn], limit: int = 20000) -> str | None:
    """The actual TSO (first 38 vtso digits) of the first heartbeat branch in a DN stream, looking
    at most ``limit`` transactions ahead (None: none found)."""
    for n, t in enumerate(txns):
        if t.kind is TxnKind.HEARTBEAT:
            return t.vtso[:38]
        if n >= limit:
            break
    return None


def heartbeat_seen(txns: Iterator[DnTxn], actual_tso: str, limit: int = 20000) -> bool | None:
    """Whether a DN stream has a heartbeat branch with ``actual_tso``: True, False (the stream
    went past it), None (not decided within ``limit`` transactions or the stream ended)."""
    for n, t in enumerate(txns):
        if t.kind is TxnKind.HEARTBEAT and t.vtso[:38] == actual_tso:
            return True
        if t.vtso[:38] > actual_tso and t.kind is TxnKind.HEARTBEAT:
            return False
        if n >= limit:
            break
    return None


def check_first_heartbeats(firsts: dict[str, str | None], stream_of) -> str | None:
    """Before a fresh build: DNs whose first heartbeat is not the earliest one must be DNs that
    joined later, so a DN that had the earliest one must carry theirs too. ``stream_of(dn)`` gives a
    fresh stream of DN ``dn``. Returns the cluster id (earliest first heartbeat) or None."""
    known = {dn: h for dn, h in firsts.items() if h is not None}
    if not known:
        return None
    earliest = min(known.values())
    founder = min(dn for dn, h in known.items() if h == earliest)
    for h in sorted(set(known.values()) - {earliest}):
        if heartbeat_seen(iter(stream_of(founder)), h) is False:
            later = sorted(dn for dn, x in known.items() if x == h)
            raise ClusterMismatch(
                f"DN {', '.join(later)} starts with heartbeat {h}, which DN {founder} (a member since "
                f"heartbeat {earliest}) never had: these DN binlogs are not one cluster")
    return earliest
