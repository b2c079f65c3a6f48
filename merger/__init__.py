"""Global merge of all DN streams (docs/architecture.md).

The blocking k-way merge by vtso, heartbeat windows, the MergeBarrier branch join and the trace-id
block merge, cluster membership (``StorageInstChange``). Public interface:
``merge(streams, join=…, should_stop=…, membership=…) -> Iterator[GlobalTxn]``.
"""

from merger.emission import PASSED_ALL, EndsPassing, Held
from merger.errors import BranchConflict, BranchTsoMismatch, NonMonotonicMerge, TsoJumpedAhead
from merger.kway_merge import IDLE, merge
from merger.membership import Membership, storage_change
from merger.model import GlobalTxn
from merger.trace_merge import merge_by_trace

__all__ = ["IDLE", "PASSED_ALL", "BranchConflict", "BranchTsoMismatch", "EndsPassing", "Held", "GlobalTxn", "Membership", "NonMonotonicMerge", "merge", "merge_by_trace",
           "storage_change", "TsoJumpedAhead"]
