"""Heartbeat cost with 100,000 members in one classic group (issue 5: O(1), no timer churn).

Drives the pure state machine (``GroupCoordinatorShard``) with the test context's mock clock and
timer, so only the coordinator's own work is timed: 100,000 heartbeats, then the mass expiry of
half the members when their session timers fire. Run: ``.venv/bin/python bench/group_heartbeat_bench.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.group.classic_group import ClassicGroupMember  # noqa: E402
from coordinator.group.config import GroupConfig  # noqa: E402
from coordinator.group.group_state import GroupState  # noqa: E402
from tests.coordinator.group.group_test_context import GroupTestContext  # noqa: E402

MEMBERS = 100_000


def main() -> None:
    ctx = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=0))
    manager = ctx.shard.group_manager
    group = manager.ensure_group("big")
    for i in range(MEMBERS):
        group.add(ClassicGroupMember(f"m{i}", None, "c", "h", 30_000, 10_000, "consumer", [("range", b"")]))
    for state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
        group.transition_to(state, 0)
    for member_id in group.members:
        manager.touch_member(group, member_id)
    ctx.sleep(5_000)
    calls = ctx.timer.schedule_calls
    started = time.perf_counter()
    for i in range(0, MEMBERS, 2):
        ctx.heartbeat("big", f"m{i}", 0)
    per_heartbeat = (time.perf_counter() - started) / (MEMBERS // 2)
    scheduled = ctx.timer.schedule_calls - calls
    started = time.perf_counter()
    ctx.sleep(5_000)
    expiry = time.perf_counter() - started
    print(f"members={MEMBERS} heartbeat_us={per_heartbeat * 1e6:.1f} timers_scheduled_by_heartbeats={scheduled} "
          f"expire_{MEMBERS // 2}_and_rearm_{MEMBERS // 2}_s={expiry:.2f} members_left={len(group.members)}")


if __name__ == "__main__":
    main()
