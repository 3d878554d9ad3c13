"""SyncGroup, Heartbeat and LeaveGroup: answers per state, error precedence, sessions (lazy
timers), the pending-sync timeout (KAFKA-12890)."""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import GroupMetadataValue, MemberMetadata
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, group_key, subscription


def completing_group(ctx: GroupTestContext) -> tuple[str, str, int]:
    """Two members in CompletingRebalance: (leader, follower, generation)."""
    a, fa = ctx.join_new_member("g")
    b, fb = ctx.join_new_member("g")
    ctx.sleep(6_000)
    leader = fa.result().leader
    assert ctx.group("g").state is GroupState.COMPLETING_REBALANCE
    return leader, (b if leader == a else a), fa.result().generation_id


# --- SyncGroup -------------------------------------------------------------------------------


def test_followers_wait_for_the_leader_whose_assignment_is_persisted_first() -> None:
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    parked = ctx.sync_group("g", follower, generation)
    assert not parked.done() and ctx.last_records == []
    leader_sync = ctx.sync_group("g", leader, generation, assignments={follower: b"F", leader: b"L"})
    joined_at = ctx.group("g").state_timestamp_ms
    assert ctx.last_records == [(group_key("g"), GroupMetadataValue(
        protocol_type="consumer", generation=generation, protocol="range", leader=leader,
        current_state_timestamp=ctx.last_records[0][1].current_state_timestamp,
        members=tuple(MemberMetadata(member_id=m, client_id="client", client_host="/127.0.0.1",
                                     rebalance_timeout=30_000, session_timeout=10_000,
                                     subscription=subscription("foo"), assignment=a, group_instance_id=None)
                      for m, a in ((ctx.log[-1][1].members[0].member_id, ctx.log[-1][1].members[0].assignment),
                                   (ctx.log[-1][1].members[1].member_id, ctx.log[-1][1].members[1].assignment)))))]
    assert {m.member_id: m.assignment for m in ctx.last_records[0][1].members} == {leader: b"L", follower: b"F"}
    assert joined_at is not None
    assert parked.result().assignment == b"F" and parked.result().protocol_name == "range"
    assert leader_sync.result().assignment == b"L"
    assert ctx.group("g").state is GroupState.STABLE


def test_sync_answers_wait_for_the_append() -> None:
    """Nobody hears of the assignment before the record is durable (on_appended)."""
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    parked = ctx.sync_group("g", follower, generation)
    from kafka.protocol.consumer import SyncGroupRequest

    from coordinator.runtime.contract import ResponseFuture
    request = SyncGroupRequest(version=5, group_id="g", generation_id=generation, member_id=leader,
                               group_instance_id=None, protocol_type=None, protocol_name=None, assignments=[])
    leader_future = ResponseFuture()
    result = ctx.shard.sync_group(request, 5, leader_future)
    assert len(result.records) == 1 and result.on_appended is not None
    assert not parked.done() and not leader_future.done()
    assert ctx.group("g").state is GroupState.COMPLETING_REBALANCE
    ctx._apply(result)
    assert parked.result().assignment == b"" and leader_future.result().error_code == E.NONE


def test_members_the_leader_omitted_get_an_empty_assignment() -> None:
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    ctx.sync_group("g", leader, generation, assignments={leader: b"L", "stranger": b"x"})
    assert {m.member_id: m.assignment for m in ctx.log[-1][1].members} == {leader: b"L", follower: b""}
    assert ctx.sync_group("g", follower, generation).result().assignment == b""


def test_sync_errors_in_order() -> None:
    ctx = GroupTestContext()
    assert ctx.sync_group("", "m", 1).result().error_code == E.INVALID_GROUP_ID
    assert ctx.sync_group("g", "m", 1).result().error_code == E.UNKNOWN_MEMBER_ID
    leader, follower, generation = completing_group(ctx)
    assert ctx.sync_group("g", "stranger", generation).result().error_code == E.UNKNOWN_MEMBER_ID
    assert ctx.sync_group("g", follower, generation + 1).result().error_code == E.ILLEGAL_GENERATION
    assert ctx.sync_group("g", follower, generation, protocol_type="connect").result().error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync_group("g", follower, generation, protocol_name="sticky").result().error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    # Before v5 the protocol fields are not sent and not checked.
    assert not ctx.sync_group("g", follower, generation, version=4).done()


def test_sync_while_preparing_rebalance_is_rebalance_in_progress() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    ctx.join_group("g", ids[0])
    assert ctx.sync_group("g", ids[1], generation).result().error_code == E.REBALANCE_IN_PROGRESS


def test_sync_in_stable_returns_the_current_assignment() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    response = ctx.sync_group("g", ids[1], generation, version=3).result()
    assert (response.error_code, response.assignment) == (E.NONE, f"assign-{ids[1]}".encode())
    assert response.protocol_name is None  # v5+ only
    assert ctx.last_records == []


def test_sync_to_dead_group_is_coordinator_not_available() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("t", 0): 1})
    group = ctx.group("g")
    ctx.shard.group_manager.delete_group_soft_state(group)
    assert ctx.sync_group("g", "m", 0).result().error_code == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.heartbeat("g", "m", 0).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.leave_group("g", [("m", None)]).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.commit_offsets("g", {("t", 0): 1}).topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    ctx.sync_group("g", leader, generation, assignments={})
    for _ in range(6):  # the follower heartbeats but never sends SyncGroup
        ctx.sleep(5_000)
        ctx.heartbeat("g", follower, generation)
        ctx.heartbeat("g", leader, generation)
    assert follower not in ctx.group("g").members
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE


def test_pending_sync_timer_is_cancelled_once_everyone_synced() -> None:
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    assert ctx.timer.is_scheduled("sync-g")
    ctx.sync_group("g", follower, generation)
    ctx.sync_group("g", leader, generation, assignments={})
    assert not ctx.timer.is_scheduled("sync-g")


# --- Heartbeat -------------------------------------------------------------------------------


def test_heartbeat_errors_in_order() -> None:
    ctx = GroupTestContext()
    assert ctx.heartbeat("", "m", 0).error_code == E.INVALID_GROUP_ID
    assert ctx.heartbeat("g", "m", 0).error_code == E.UNKNOWN_MEMBER_ID
    ids, generation = ctx.stable_group("g", 1)
    assert ctx.heartbeat("g", "stranger", generation).error_code == E.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("g", ids[0], generation + 1).error_code == E.ILLEGAL_GENERATION
    assert ctx.heartbeat("g", ids[0], generation).error_code == E.NONE


def test_heartbeat_in_empty_group_is_unknown_member_id() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("t", 0): 1})
    assert ctx.heartbeat("g", "m", 0).error_code == E.UNKNOWN_MEMBER_ID


def test_heartbeat_answers_per_state() -> None:
    ctx = GroupTestContext()
    leader, follower, generation = completing_group(ctx)
    assert ctx.heartbeat("g", follower, generation).error_code == E.NONE  # CompletingRebalance
    ctx.sync_group("g", leader, generation, assignments={})
    assert ctx.heartbeat("g", follower, generation).error_code == E.NONE  # Stable
    ctx.join_group("g", leader)
    assert ctx.heartbeat("g", follower, generation).error_code == E.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    for _ in range(3):
        ctx.sleep(6_000)
        ctx.heartbeat("g", ids[0], generation)
    assert ids[1] not in ctx.group("g").members
    assert ctx.group("g").state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def test_heartbeats_move_a_deadline_and_do_not_reschedule_timers() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1)
    key = f"heartbeat-g-{ids[0]}"
    calls = ctx.timer.schedule_calls
    due = ctx.timer.deadline(key)
    for _ in range(1000):
        ctx.heartbeat("g", ids[0], generation)
    assert ctx.timer.schedule_calls == calls and ctx.timer.deadline(key) == due
    ctx.sleep(9_999)
    ctx.heartbeat("g", ids[0], generation)
    ctx.sleep(1)  # the timer fires, finds a later deadline and re-arms for the remainder
    assert ids[0] in ctx.group("g").members
    assert ctx.timer.deadline(key) == ctx.clock.now + 9_999
    ctx.sleep(9_999)
    assert ids[0] not in ctx.group("g").members


def test_heartbeats_of_many_members_schedule_no_timers() -> None:
    """100,000 members: heartbeats only move stored deadlines and schedule no timers; each
    session timer re-arms lazily when it fires. (Their cost is measured by
    bench/group_heartbeat_bench.py, not asserted here.)"""
    from coordinator.group.classic_group import ClassicGroupMember
    ctx = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=0))
    group_manager = ctx.shard.group_manager
    group = group_manager.ensure_group("big")
    for i in range(100_000):
        group.add(ClassicGroupMember(f"m{i}", None, "c", "h", 30_000, 10_000, "consumer", [("range", b"")]))
    group.transition_to(GroupState.PREPARING_REBALANCE, 0)
    group.transition_to(GroupState.COMPLETING_REBALANCE, 0)
    group.transition_to(GroupState.STABLE, 0)
    for member_id in group.members:
        group_manager.touch_member(group, member_id)
    ctx.sleep(5_000)
    calls = ctx.timer.schedule_calls
    for i in range(0, 100_000, 2):  # half the members stay alive
        assert ctx.heartbeat("big", f"m{i}", 0).error_code == E.NONE
    assert ctx.timer.schedule_calls == calls
    ctx.sleep(5_000)  # every timer fires: odd members expire, even ones re-arm for 5 s more
    assert len(group.members) == 50_000 and all(int(m[1:]) % 2 == 0 for m in group.members)
    assert group.state is GroupState.PREPARING_REBALANCE


def test_awaiting_join_counts_as_alive() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2, rebalance_timeout_ms=60_000)
    rejoin = ctx.join_group("g", ids[0], rebalance_timeout_ms=60_000)
    for _ in range(5):  # well past the parked member's session timeout
        ctx.sleep(5_000)
        ctx.heartbeat("g", ids[1], generation)
    assert ids[0] in ctx.group("g").members and not rejoin.done()


# --- LeaveGroup ------------------------------------------------------------------------------


def test_leave_errors() -> None:
    ctx = GroupTestContext()
    assert ctx.leave_group("", [("m", None)]).error_code == E.INVALID_GROUP_ID
    unknown = ctx.leave_group("g", [("m", None), ("n", "i")])
    assert unknown.error_code == E.NONE
    assert [(m.member_id, m.error_code) for m in unknown.members] == [("m", E.UNKNOWN_MEMBER_ID),
                                                                       ("n", E.UNKNOWN_MEMBER_ID)]
    # v0-2: the single member's error is the top-level error.
    assert ctx.leave_group("g", [("m", None)], version=1).error_code == E.UNKNOWN_MEMBER_ID
    ids, _ = ctx.stable_group("g", 1)
    assert ctx.leave_group("g", [("stranger", None)], version=2).error_code == E.UNKNOWN_MEMBER_ID


def test_leave_from_stable_rebalances_and_last_member_leaving_empties_the_group() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    response = ctx.leave_group("g", [(ids[1], None)], version=1)
    assert response.error_code == E.NONE
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    leave = ctx.leave_group("g", [(ids[0], None)])
    assert leave.members[0].error_code == E.NONE
    group = ctx.group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 1
    assert ctx.last_records == [(group_key("g"), GroupMetadataValue(
        protocol_type="consumer", generation=generation + 1, protocol=None, leader=None,
        current_state_timestamp=ctx.clock.now, members=()))]


def test_leave_answers_the_leavers_parked_join_with_unknown_member_id() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    parked = ctx.join_group("g", ids[0])
    ctx.leave_group("g", [(ids[0], None)])
    assert parked.result().error_code == E.UNKNOWN_MEMBER_ID


def test_pending_member_can_leave_and_unblocks_the_join() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1)
    pending = ctx.join_group("g").result().member_id
    rejoin = ctx.join_group("g", ids[0])
    assert not rejoin.done()  # a pending member blocks completion
    response = ctx.leave_group("g", [(pending, None)])
    assert response.members[0].error_code == E.NONE
    assert rejoin.result().generation_id == generation + 1


def test_leader_leaving_hands_leadership_to_another_member() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 3)
    ctx.leave_group("g", [(ids[0], None)])
    assert ctx.group("g").leader_id in ids[1:]
    rejoins = [ctx.join_group("g", m) for m in ids[1:]]
    responses = [f.result() for f in rejoins]
    assert {r.leader for r in responses} == {ctx.group("g").leader_id}
    assert responses[0].generation_id == generation + 1


def test_group_max_size_while_completing_rebalance() -> None:
    from coordinator.group.config import GroupConfig
    ctx = GroupTestContext(GroupConfig(max_size=2))
    completing_group(ctx)
    response = ctx.join_group("g", version=3).result()
    assert (response.error_code, response.member_id) == (E.GROUP_MAX_SIZE_REACHED, "")
