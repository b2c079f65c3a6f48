"""Dumper high availability: a leader lease with a fencing epoch in the shared meta
store (``lease``), and the member thread that holds or waits for it (``member``)."""

from dumper.ha.lease import Fence, FencedOut, LeaseRow, LeaseStore, LeaseStoreError, MemberRow
from dumper.ha.member import FOLLOWER, LEADER, HaSettings, Member

__all__ = ["FOLLOWER", "LEADER", "Fence", "FencedOut", "HaSettings", "LeaseRow", "LeaseStore", "LeaseStoreError",
           "Member", "MemberRow"]
