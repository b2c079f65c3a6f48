"""Global merge of all DN streams (DESIGN.md §3, reference §4.3–§4.4, §2).

Will own: the blocking k-way merge by vtso, heartbeat windows, the MergeBarrier branch join and the
trace-id block merge. Public interface: ``merge(streams) -> Iterator[GlobalTxn]``.
"""
