"""Static membership (KIP-345) and SkipAssignment (KIP-814)."""

from __future__ import annotations

from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import GroupMetadataValue, MemberMetadata
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, group_key, protocols, subscription


def static_group(ctx: GroupTestContext, *instances: str) -> tuple[dict[str, str], int]:
    """Static members join (no MEMBER_ID_REQUIRED for them) and sync; instance -> member id."""
    futures = {i: ctx.join_group("g", group_instance_id=i, client_id=f"c-{i}") for i in instances}
    ctx.sleep(3_000 * len(instances))
    responses = {i: f.result() for i, f in futures.items()}
    assert all(r.error_code == 0 for r in responses.values()), responses
    ids = {i: r.member_id for i, r in responses.items()}
    generation = responses[instances[0]].generation_id
    leader = responses[instances[0]].leader
    for i, m in ids.items():
        if m != leader:
            ctx.sync_group("g", m, generation, group_instance_id=i)
    ctx.sync_group("g", leader, generation, assignments={m: f"a-{i}".encode() for i, m in ids.items()},
                   group_instance_id=[i for i, m in ids.items() if m == leader][0])
    assert ctx.group("g").state is GroupState.STABLE
    return ids, generation


def test_static_member_gets_id_from_instance_id_without_member_id_required() -> None:
    ctx = GroupTestContext()
    ids, _ = static_group(ctx, "i1")
    assert ids["i1"] == "i1-uuid1"
    assert ctx.group("g").static_members == {"i1": "i1-uuid1"}


def test_static_follower_rejoining_stable_group_replaces_old_id_without_rebalance() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    follower = ids["i2"]
    old_leader = ctx.group("g").leader_id
    response = ctx.join_group("g", group_instance_id="i2", client_id="c-i2").result()
    new_id = response.member_id
    assert response.error_code == E.NONE and new_id != follower
    assert response.generation_id == generation and response.leader == old_leader
    assert response.skip_assignment is False and response.members == []
    group = ctx.group("g")
    assert group.state is GroupState.STABLE and group.static_members["i2"] == new_id
    assert [m.member_id for m in ctx.last_records[0][1].members] == [ids["i1"], new_id]
    # The persisted assignment moved to the new id.
    assert ctx.last_records[0][1].members[1].assignment == b"a-i2"
    # The old id is fenced; the new one gets the old assignment.
    assert ctx.heartbeat("g", follower, generation, group_instance_id="i2").error_code == E.FENCED_INSTANCE_ID
    sync = ctx.sync_group("g", new_id, generation, group_instance_id="i2").result()
    assert (sync.error_code, sync.assignment) == (E.NONE, b"a-i2")


def test_static_leader_rejoin_v9_is_told_it_leads_but_must_skip_assignment() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    response = ctx.join_group("g", group_instance_id="i1", client_id="c-i1").result()
    assert response.skip_assignment is True
    assert response.leader == response.member_id != ids["i1"]
    assert sorted(m.member_id for m in response.members) == sorted([response.member_id, ids["i2"]])
    assert ctx.group("g").state is GroupState.STABLE


def test_static_leader_rejoin_before_v9_is_shown_the_old_leader_id() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    response = ctx.join_group("g", group_instance_id="i1", client_id="c-i1", version=8).result()
    assert response.leader == ids["i1"] != response.member_id
    assert response.members == []
    assert ctx.group("g").leader_id == response.member_id


def test_static_member_rejoining_with_a_new_protocol_triggers_rebalance() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1")
    meta = subscription("foo")
    future = ctx.join_group("g", group_instance_id="i1", protocols=[("roundrobin", meta), ("range", meta)])
    # Only member, prefers roundrobin now: the vote changes, so the group rebalances (and,
    # everyone having joined, completes at once).
    response = future.result()
    assert response.protocol_name == "roundrobin" and response.generation_id == generation + 1


def test_static_member_rejoining_while_completing_rebalance_fences_old_sync_and_rebalances() -> None:
    ctx = GroupTestContext()
    futures = {i: ctx.join_group("g", group_instance_id=i) for i in ("i1", "i2")}
    ctx.sleep(6_000)
    first = {i: f.result() for i, f in futures.items()}
    follower_instance = "i2" if first["i1"].leader == first["i1"].member_id else "i1"
    parked = ctx.sync_group("g", first[follower_instance].member_id, first["i1"].generation_id,
                            group_instance_id=follower_instance)
    assert not parked.done()
    rejoin = ctx.join_group("g", group_instance_id=follower_instance)
    assert parked.result().error_code == E.FENCED_INSTANCE_ID
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    assert not rejoin.done()


def test_static_member_rejoining_while_preparing_just_waits() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    leader_instance = "i1" if ctx.group("g").leader_id == ids["i1"] else "i2"
    other = "i2" if leader_instance == "i1" else "i1"
    old_join = ctx.join_group("g", ids[leader_instance], group_instance_id=leader_instance)
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    replacement = ctx.join_group("g", group_instance_id=leader_instance)
    assert old_join.result().error_code == E.FENCED_INSTANCE_ID
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    final = ctx.join_group("g", ids[other], group_instance_id=other).result()
    assert final.generation_id == generation + 1
    assert replacement.result().member_id == ctx.group("g").static_members[leader_instance]


def test_static_members_are_kept_when_they_do_not_rejoin() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    leader = ctx.group("g").leader_id
    instance = [i for i, m in ids.items() if m == leader][0]
    rejoin = ctx.join_group("g", leader, group_instance_id=instance)
    other = "i2" if instance == "i1" else "i1"
    for _ in range(6):  # alive, but never rejoins: the join waits the whole rebalance timeout
        assert not rejoin.done()
        ctx.sleep(5_000)
        ctx.heartbeat("g", ids[other], generation, group_instance_id=other)
    response = rejoin.result()
    assert len(response.members) == 2  # the silent static member is still there


def test_fenced_instance_id_and_unknown_instance_id() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1")
    assert ctx.join_group("g", "other-id", group_instance_id="i1").result().error_code == E.FENCED_INSTANCE_ID
    assert ctx.join_group("g", ids["i1"], group_instance_id="nope").result().error_code == E.UNKNOWN_MEMBER_ID
    assert ctx.sync_group("g", "other-id", generation, group_instance_id="i1").result().error_code \
        == E.FENCED_INSTANCE_ID
    assert ctx.heartbeat("g", "other-id", generation, group_instance_id="i1").error_code == E.FENCED_INSTANCE_ID
    assert ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id="other-id",
                              group_instance_id="i1").topics[0].partitions[0].error_code == E.FENCED_INSTANCE_ID
    left = ctx.leave_group("g", [("other-id", "i1")])
    assert left.members[0].error_code == E.FENCED_INSTANCE_ID


def test_leave_by_instance_id_alone_removes_the_static_member() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1", "i2")
    response = ctx.leave_group("g", [("", "i2"), ("", "ghost")])
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in response.members] == [
        ("", "i2", E.NONE), ("", "ghost", E.UNKNOWN_MEMBER_ID)]
    assert ids["i2"] not in ctx.group("g").members
    assert ctx.group("g").state is not GroupState.STABLE


def test_static_member_record_carries_instance_id() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1")
    value = ctx.log[-1][1]
    assert ctx.log[-1][0] == group_key("g")
    assert value == GroupMetadataValue(
        protocol_type="consumer", generation=generation, protocol="range", leader=ids["i1"],
        current_state_timestamp=value.current_state_timestamp,
        members=(MemberMetadata(member_id=ids["i1"], client_id="c-i1", client_host="/127.0.0.1",
                                rebalance_timeout=30_000, session_timeout=10_000,
                                subscription=protocols("foo")[0][1], assignment=b"a-i1", group_instance_id="i1"),))
