"""The group faults of issue 35 on the shard (``coordinator/group/fault_actions.py``): a forced
rebalance and a kicked member move a group exactly as the coordinator's own paths do (a classic
group's prepareRebalance and session expiry, a consumer group's epoch bump and fencing), records
first, and a shard loaded from the log afterwards holds the same state."""

from __future__ import annotations

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.topics_image import StaticTopicsImage
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext
from tests.coordinator.group.group_test_context import GroupTestContext

NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 0, 27, 25
CONFIG = GroupConfig(initial_rebalance_delay_ms=0)


def run(ctx: GroupTestContext, op: str, *args: object) -> dict[str, object]:
    result = ctx._apply(getattr(ctx.shard, op)(*args))
    assert isinstance(result.response, dict)
    return result.response


def rejoin_all(ctx: GroupTestContext, group_id: str, ids: list[str]) -> int:
    """Every member rejoins and syncs; returns the new generation."""
    joins = [ctx.join_group(group_id, m) for m in ids]
    answers = [f.result() for f in joins]
    assert all(a.error_code == NONE for a in answers), answers
    generation = answers[0].generation_id
    leader = answers[0].leader
    syncs = [ctx.sync_group(group_id, m, generation, assignments={x: b"a" for x in ids} if m == leader else None)
             for m in ids]
    assert all(s.result().error_code == NONE for s in syncs)
    return int(generation)


def test_a_forced_rebalance_of_a_stable_classic_group_makes_its_members_rejoin_into_a_new_generation() -> None:
    ctx = GroupTestContext(CONFIG)
    ids, generation = ctx.stable_group("g", 2)
    answer = run(ctx, "fault_rebalance", "g")
    assert answer == {"group": "g", "protocol": "classic", "state": "PreparingRebalance",
                      "generation": generation, "rebalanced": True}
    assert ctx.last_records == []  # starting a rebalance from Stable writes nothing (as in Kafka)
    for m in ids:
        assert ctx.heartbeat("g", m, generation).error_code == REBALANCE_IN_PROGRESS
    assert rejoin_all(ctx, "g", ids) == generation + 1
    assert ctx.group("g").state.value == "Stable"
    assert ctx.reload().shard.hard_state() == ctx.shard.hard_state()


def test_a_forced_rebalance_while_completing_answers_parked_syncs_rebalance_in_progress() -> None:
    ctx = GroupTestContext(CONFIG)
    ids, generation = ctx.stable_group("g", 2)
    ctx.join_group("g", ids[0])  # the leader rejoins: a rebalance starts
    joined = ctx.join_group("g", ids[1]).result()
    assert ctx.group("g").state.value == "CompletingRebalance"
    parked = ctx.sync_group("g", ids[1], joined.generation_id)
    assert not parked.done()
    answer = run(ctx, "fault_rebalance", "g")
    assert answer["state"] == "PreparingRebalance" and answer["rebalanced"] is True
    assert parked.result().error_code == REBALANCE_IN_PROGRESS
    assert rejoin_all(ctx, "g", ids) == joined.generation_id + 1


def test_a_forced_rebalance_of_an_empty_group_changes_nothing_and_of_an_unknown_one_is_refused() -> None:
    ctx = GroupTestContext(CONFIG)
    ctx.commit_offsets("simple", {("t", 0): 5})  # a group with offsets only: Empty
    assert run(ctx, "fault_rebalance", "simple") == {
        "group": "simple", "protocol": "classic", "state": "Empty", "generation": 0, "rebalanced": False}
    assert ctx.last_records == []
    with pytest.raises(LookupError, match="group 'nope' does not exist"):
        ctx.shard.fault_rebalance("nope")
    with pytest.raises(LookupError, match="group 'nope' does not exist"):
        ctx.shard.fault_kick_member("nope", None)


def test_kicking_a_classic_member_removes_it_as_a_session_expiry_would() -> None:
    ctx = GroupTestContext(CONFIG)
    ids, generation = ctx.stable_group("g", 3)
    first = min(ids)
    assert run(ctx, "fault_kick_member", "g", None) == {"group": "g", "member": first, "protocol": "classic"}
    assert first not in ctx.group("g").members
    assert ctx.heartbeat("g", first, generation).error_code == UNKNOWN_MEMBER_ID
    others = [m for m in ids if m != first]
    for m in others:
        assert ctx.heartbeat("g", m, generation).error_code == REBALANCE_IN_PROGRESS
    new_generation = rejoin_all(ctx, "g", others)
    assert new_generation == generation + 1
    assert {m.member_id for m in ctx.reload().group("g").members.values()} == set(others)
    with pytest.raises(LookupError, match="group 'g' has no member 'ghost'"):
        ctx.shard.fault_kick_member("g", "ghost")


def test_kicking_a_static_classic_member_by_its_instance_id() -> None:
    ctx = GroupTestContext(CONFIG)
    joined = ctx.join_group("g", group_instance_id="i-1", session_timeout_ms=10_000)
    ctx.sleep(0)
    member_id = joined.result().member_id
    ctx.sync_group("g", member_id, joined.result().generation_id, assignments={member_id: b"a"})
    assert run(ctx, "fault_kick_member", "g", "i-1")["member"] == member_id
    assert ctx.group("g").state.value == "Empty"
    assert ctx.reload().group("g").members == {}


def consumer_group(ctx: ConsumerGroupTestContext, members: int) -> list[str]:
    ids = [f"m{i}" for i in range(1, members + 1)]
    for m in ids:
        ctx.cg_heartbeat("g", m, 0)
    for _ in range(4):  # reconcile everyone to the group epoch
        for m in ids:
            epoch = ctx.cgroups["g"].members[m].member_epoch
            ctx.cg_heartbeat("g", m, epoch, owned={"foo": sorted(_assigned(ctx, m))})
    assert ctx.cgroups["g"].state.value == "Stable"
    return ids


def _assigned(ctx: ConsumerGroupTestContext, member_id: str) -> set[int]:
    member = ctx.cgroups["g"].members[member_id]
    return set(member.assigned_partitions.get(ctx.topic_id("foo"), ()))


def consumer_context() -> ConsumerGroupTestContext:
    topics = StaticTopicsImage()
    topics.create("foo", 4)
    return ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0), topics=topics)


def test_a_forced_rebalance_of_a_consumer_group_bumps_its_epoch_and_members_reconcile_to_it() -> None:
    ctx = consumer_context()
    ids = consumer_group(ctx, 2)
    before = ctx.cgroups["g"].group_epoch
    answer = run(ctx, "fault_rebalance", "g")
    assert answer == {"group": "g", "protocol": "consumer", "state": "Assigning", "group_epoch": before + 1,
                      "rebalanced": True}
    assert len(ctx.last_records) == 1
    group = ctx.cgroups["g"]
    assert group.group_epoch == before + 1 and group.state.value == "Assigning"
    for m in ids:
        response = ctx.cg_heartbeat("g", m, group.members[m].member_epoch, owned={"foo": sorted(_assigned(ctx, m))})
        assert response.error_code == NONE
    assert group.assignment_epoch == before + 1
    assert all(member.member_epoch == before + 1 for member in group.members.values())
    assert group.state.value == "Stable"
    assert ctx.reload().state() == ctx.state()


def test_kicking_a_consumer_group_member_fences_it() -> None:
    ctx = consumer_context()
    consumer_group(ctx, 2)
    before = ctx.cgroups["g"].group_epoch
    assert run(ctx, "fault_kick_member", "g", "m2") == {"group": "g", "member": "m2", "protocol": "consumer"}
    group = ctx.cgroups["g"]
    assert set(group.members) == {"m1"} and group.group_epoch == before + 1
    assert ctx.cg_heartbeat("g", "m2", before, owned={"foo": []}).error_code == UNKNOWN_MEMBER_ID
    assert ctx.cg_heartbeat("g", "m2", 0).error_code == NONE  # it rejoins
    assert ctx.reload().state() == ctx.state()
    with pytest.raises(LookupError, match="group 'g' has no member 'm9'"):
        ctx.shard.fault_kick_member("g", "m9")


def test_a_forced_rebalance_of_an_empty_consumer_group_writes_nothing() -> None:
    ctx = consumer_context()
    consumer_group(ctx, 1)
    run(ctx, "fault_kick_member", "g", None)
    assert ctx.cgroups["g"].state.value == "Empty"
    answer = run(ctx, "fault_rebalance", "g")
    assert answer["rebalanced"] is False and answer["state"] == "Empty" and ctx.last_records == []
