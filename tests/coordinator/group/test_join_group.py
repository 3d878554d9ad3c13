"""JoinGroup: front-door checks, the two-phase join (KIP-394), the initial delay (KIP-134),
generations, protocol vote, leader choice, group.max.size (KIP-389), session timeouts."""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import GroupMetadataValue, MemberMetadata
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, group_key, protocols, subscription

NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)


def test_empty_group_id_is_invalid_group_id() -> None:
    ctx = GroupTestContext()
    response = ctx.join_group("").result()
    assert response.error_code == E.INVALID_GROUP_ID
    assert ctx.last_records == [] and "" not in ctx.groups


def test_session_timeout_outside_bounds_is_invalid_session_timeout() -> None:
    ctx = GroupTestContext()
    assert ctx.join_group("g", session_timeout_ms=5_999).result().error_code == E.INVALID_SESSION_TIMEOUT
    assert ctx.join_group("g", session_timeout_ms=1_800_001).result().error_code == E.INVALID_SESSION_TIMEOUT
    assert "g" not in ctx.groups  # a failed join leaves no group behind


def test_unknown_group_with_member_id_is_unknown_member_id() -> None:
    ctx = GroupTestContext()
    response = ctx.join_group("g", "someone").result()
    assert response.error_code == E.UNKNOWN_MEMBER_ID and response.member_id == "someone"


def test_v4_new_dynamic_member_gets_member_id_required_and_is_pending() -> None:
    ctx = GroupTestContext()
    response = ctx.join_group("g", version=4, client_id="cli").result()
    assert response.error_code == E.MEMBER_ID_REQUIRED
    assert response.member_id == "cli-uuid1"
    assert response.generation_id == -1 and response.members == []
    group = ctx.group("g")
    assert group.pending_members == {"cli-uuid1"} and not group.members
    assert ctx.last_records == []


def test_pending_member_expires_after_its_session_timeout() -> None:
    ctx = GroupTestContext()
    member_id = ctx.join_group("g", session_timeout_ms=6_000).result().member_id
    ctx.sleep(5_999)
    assert ctx.group("g").is_pending(member_id)
    ctx.sleep(1)
    assert not ctx.group("g").is_pending(member_id)
    assert ctx.join_group("g", member_id).result().error_code == E.UNKNOWN_MEMBER_ID


def test_v3_new_member_is_added_without_member_id_required() -> None:
    ctx = GroupTestContext(NO_DELAY)
    future = ctx.join_group("g", version=3)
    assert not future.done()
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    ctx.sleep(0)
    response = future.result()
    assert response.error_code == E.NONE and response.generation_id == 1
    assert response.leader == response.member_id == "client-uuid1"
    assert response.protocol_name == "range"


def test_first_member_joins_after_initial_delay_and_becomes_leader() -> None:
    ctx = GroupTestContext()
    member_id, future = ctx.join_new_member("g")
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    ctx.sleep(2_999)
    assert not future.done()
    ctx.sleep(1)
    response = future.result()
    assert response.error_code == E.NONE
    assert (response.generation_id, response.leader, response.member_id) == (1, member_id, member_id)
    assert response.protocol_type == "consumer" and response.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in response.members] == [(member_id, subscription("foo"))]
    assert ctx.group("g").state is GroupState.COMPLETING_REBALANCE
    assert ctx.last_records == []  # nothing is persisted until the leader's SyncGroup


def test_initial_delay_is_extended_while_new_members_arrive_at_generation_zero() -> None:
    ctx = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=3_000))
    _, first = ctx.join_new_member("g", rebalance_timeout_ms=10_000)
    ctx.sleep(2_000)
    _, second = ctx.join_new_member("g", rebalance_timeout_ms=10_000)
    ctx.sleep(1_000)  # first delay over, a member arrived: wait again
    assert not first.done()
    ctx.sleep(3_000)
    assert first.result().error_code == E.NONE and second.result().error_code == E.NONE
    assert first.result().generation_id == 1


def test_initial_delay_extension_is_bounded_by_the_rebalance_timeout() -> None:
    ctx = GroupTestContext(GroupConfig(initial_rebalance_delay_ms=3_000))
    _, first = ctx.join_new_member("g", rebalance_timeout_ms=5_000)
    for _ in range(2):
        ctx.sleep(1_500)
        ctx.join_new_member("g", rebalance_timeout_ms=5_000)
    # first delay 3000, then one more of min(3000, 5000 - 3000) = 2000
    ctx.sleep(1_999)
    assert not first.done()
    ctx.sleep(1)
    assert first.result().error_code == E.NONE


def test_empty_group_at_later_generation_gets_exactly_one_initial_delay() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1)
    ctx.leave_group("g", [(ids[0], None)])
    assert ctx.group("g").state is GroupState.EMPTY
    _, first = ctx.join_new_member("g")
    ctx.sleep(1_000)
    ctx.join_new_member("g")
    ctx.sleep(2_000)
    assert first.result().generation_id == generation + 2


def test_all_members_joined_completes_a_rebalance_early() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    leader_rejoin = ctx.join_group("g", ids[0])
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    assert not leader_rejoin.done()
    follower_rejoin = ctx.join_group("g", ids[1])
    assert leader_rejoin.result().generation_id == generation + 1
    assert follower_rejoin.result().generation_id == generation + 1
    assert len(leader_rejoin.result().members) == 2
    assert follower_rejoin.result().members == []  # only the leader gets the member list


def test_rebalance_timeout_is_the_largest_members_and_drops_dynamic_members_that_did_not_rejoin() -> None:
    ctx = GroupTestContext()
    kwargs = dict(protocols=protocols("foo"))
    a, fa = ctx.join_new_member("g", rebalance_timeout_ms=10_000, **kwargs)
    b, fb = ctx.join_new_member("g", rebalance_timeout_ms=20_000, **kwargs)
    ctx.sleep(6_000)
    generation = fa.result().generation_id
    assert ctx.group("g").rebalance_timeout_ms() == 20_000
    leader = fa.result().leader
    other = b if leader == a else a
    ctx.sync_group("g", other, generation)
    ctx.sync_group("g", leader, generation, assignments={})
    rejoin = ctx.join_group("g", leader, rebalance_timeout_ms=10_000 if leader == a else 20_000, **kwargs)
    for _ in range(3):  # the other member stays alive but does not rejoin
        ctx.sleep(5_000)
        assert ctx.heartbeat("g", other, generation).error_code == E.REBALANCE_IN_PROGRESS
    ctx.sleep(4_999)
    assert not rejoin.done()
    ctx.sleep(1)
    response = rejoin.result()
    assert response.generation_id == generation + 1
    assert [m.member_id for m in response.members] == [leader]
    assert other not in ctx.group("g").members


def test_leader_that_did_not_rejoin_is_replaced_by_a_member_that_did() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    follower_changes = ctx.join_group("g", ids[1], protocols=protocols("foo", "bar"))
    ctx.sleep(10_000)  # the leader's session runs out; then everyone left has joined
    response = follower_changes.result()
    assert response.leader == ids[1] and response.generation_id == generation + 1
    assert list(ctx.group("g").members) == [ids[1]]


def test_follower_rejoining_stable_group_with_same_metadata_gets_current_generation() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    response = ctx.join_group("g", ids[1]).result()
    assert response.error_code == E.NONE and response.generation_id == generation
    assert response.leader == ids[0] and response.members == []
    assert ctx.group("g").state is GroupState.STABLE


def test_leader_rejoining_stable_group_always_rebalances() -> None:
    ctx = GroupTestContext()
    ids, _ = ctx.stable_group("g", 2)
    assert not ctx.join_group("g", ids[0]).done()
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE


def test_member_rejoining_completing_rebalance_with_same_metadata_gets_current_generation() -> None:
    ctx = GroupTestContext()
    a, fa = ctx.join_new_member("g")
    ctx.sleep(3_000)
    again = ctx.join_group("g", a).result()
    assert again.generation_id == fa.result().generation_id and len(again.members) == 1
    assert ctx.group("g").state is GroupState.COMPLETING_REBALANCE
    changed = ctx.join_group("g", a, protocols=protocols("bar"))
    # New metadata: a rebalance, which completes at once since the only member has joined.
    assert changed.result().generation_id == again.generation_id + 1
    assert ctx.group("g").subscribed_topics == {"bar"}


def test_rebalance_answers_parked_syncs_with_rebalance_in_progress() -> None:
    ctx = GroupTestContext()
    a, fa = ctx.join_new_member("g")
    b, fb = ctx.join_new_member("g")
    ctx.sleep(6_000)
    follower = b if fa.result().leader == a else a
    sync = ctx.sync_group("g", follower, 1)
    assert not sync.done()
    ctx.join_new_member("g")
    assert sync.result().error_code == E.REBALANCE_IN_PROGRESS


def test_protocol_type_mismatch_is_inconsistent_group_protocol() -> None:
    ctx = GroupTestContext()
    ctx.stable_group("g", 1)
    assert ctx.join_group("g", protocol_type="connect").result().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_no_common_protocol_is_inconsistent_group_protocol() -> None:
    ctx = GroupTestContext()
    ctx.stable_group("g", 1)
    other = [("roundrobin", subscription("foo"))]
    assert ctx.join_group("g", protocols=other).result().error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_empty_protocols_into_empty_group_is_inconsistent_group_protocol() -> None:
    ctx = GroupTestContext()
    assert ctx.join_group("g", protocols=[]).result().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.join_group("g", protocol_type="").result().error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert "g" not in ctx.groups


def test_protocol_vote_picks_the_most_preferred_common_protocol() -> None:
    ctx = GroupTestContext()
    meta = subscription("foo")
    a, fa = ctx.join_new_member("g", protocols=[("range", meta), ("roundrobin", meta), ("sticky", meta)])
    ctx.join_new_member("g", protocols=[("roundrobin", meta), ("range", meta)])
    ctx.join_new_member("g", protocols=[("sticky", meta), ("roundrobin", meta)])
    ctx.sleep(9_000)
    # candidates: range? no (third lacks it); roundrobin, sticky? no (second lacks it) -> roundrobin
    assert fa.result().protocol_name == "roundrobin"


def test_group_max_size_rejects_new_members_with_empty_member_id() -> None:
    ctx = GroupTestContext(GroupConfig(max_size=2))
    ids, _ = ctx.stable_group("g", 2)
    response = ctx.join_group("g", version=3).result()
    assert response.error_code == E.GROUP_MAX_SIZE_REACHED and response.member_id == ""
    assert ctx.join_group("g", ids[1]).result().error_code == E.NONE  # existing members still welcome


def test_group_max_size_counts_members_awaiting_join_while_preparing() -> None:
    ctx = GroupTestContext(GroupConfig(max_size=2))
    ctx.join_new_member("g")
    ctx.join_new_member("g")
    member_id = ctx.join_group("g").result().member_id  # pending ids do not count
    response = ctx.join_group("g", member_id).result()
    assert response.error_code == E.GROUP_MAX_SIZE_REACHED
    assert not ctx.group("g").is_pending(member_id)


def test_new_member_that_never_completes_its_join_is_removed_after_five_minutes() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1, rebalance_timeout_ms=600_000)
    newcomer, future = ctx.join_new_member("g", rebalance_timeout_ms=600_000)
    # The old member keeps heartbeating but never rejoins; the join waits for the rebalance timeout.
    for _ in range(59):
        ctx.sleep(5_000)
        assert ctx.heartbeat("g", ids[0], generation).error_code == E.REBALANCE_IN_PROGRESS
    assert not future.done()
    ctx.sleep(5_000)
    assert future.result().error_code == E.UNKNOWN_MEMBER_ID
    assert newcomer not in ctx.group("g").members


def test_dead_group_is_coordinator_not_available() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1})
    group = ctx.group("g")
    ctx.shard.group_manager.delete_group_soft_state(group)
    ctx.groups["g"] = group  # still cached, as a Dead group is until its tombstone is replayed
    assert ctx.join_group("g").result().error_code == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.join_group("g", "m").result().error_code == E.COORDINATOR_NOT_AVAILABLE


def test_existing_member_errors() -> None:
    ctx = GroupTestContext()
    ctx.stable_group("g", 1)
    assert ctx.join_group("g", "stranger").result().error_code == E.UNKNOWN_MEMBER_ID


def test_rebalance_with_everyone_gone_writes_an_empty_group_record() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 2)
    ctx.join_group("g", ids[0])  # PreparingRebalance
    ctx.leave_group("g", [(ids[1], None), (ids[0], None)])
    group = ctx.group("g")
    assert group.state is GroupState.EMPTY and group.generation_id == generation + 1
    assert ctx.last_records == [(group_key("g"), GroupMetadataValue(
        protocol_type="consumer", generation=generation + 1, protocol=None, leader=None,
        current_state_timestamp=ctx.clock.now, members=()))]


def test_join_response_versions() -> None:
    ctx = GroupTestContext(NO_DELAY)
    old = ctx.join_group("g", version=0, session_timeout_ms=10_000)
    ctx.sleep(0)
    response = old.result()
    assert response.version == 0 and response.protocol_name == "range"
    response.encode()
    assert ctx.group("g").members[response.member_id].rebalance_timeout_ms == 10_000  # v0: session timeout


def test_member_metadata_record_written_by_leader_sync() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1)
    member = ctx.group("g").members[ids[0]]
    completed_at = ctx.clock.now  # the join completed at the end of the initial delay; no time passed since
    assert ctx.log == [(group_key("g"), GroupMetadataValue(
        protocol_type="consumer", generation=generation, protocol="range", leader=ids[0],
        current_state_timestamp=completed_at,
        members=(MemberMetadata(member_id=ids[0], client_id="client", client_host="/127.0.0.1",
                                rebalance_timeout=30_000, session_timeout=10_000, subscription=subscription("foo"),
                                assignment=f"assign-{ids[0]}".encode(), group_instance_id=None),)))]
    assert member.assignment == f"assign-{ids[0]}".encode()
