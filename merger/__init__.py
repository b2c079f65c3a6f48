"""Global merge of all DN streams (DESIGN.md §3, reference §4.3–§4.4, §2).

The blocking k-way merge by vtso, heartbeat windows, the MergeBarrier branch join and the trace-id
block merge. Public interface: ``merge(streams) -> Iterator[GlobalTxn]``.
"""

from merger.errors import BranchConflict, NonMonotonicMerge
from merger.merge import merge
from merger.model import GlobalTxn
from merger.trace_merge import merge_by_trace

__all__ = ["BranchConflict", "GlobalTxn", "NonMonotonicMerge", "merge", "merge_by_trace"]
