"""Consumer groups in the shard's other APIs: ListGroups, DescribeGroups, ConsumerGroupDescribe,
DeleteGroups, offset expiry, OffsetCommit/OffsetFetch member-epoch checks (KIP-848, KIP-1251),
and snapshots."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import OffsetFetchRequest

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import OFFSETS_SERDE, serialize_record
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    decode_key,
    decode_value,
)
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, deserialize
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext

DAY = 24 * 60 * 60 * 1000


@pytest.fixture
def ctx() -> ConsumerGroupTestContext:
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    c.topics.create("foo", 4)
    return c


def fetch_v9(ctx: ConsumerGroupTestContext, member_id: str | None, epoch: int) -> object:
    request = OffsetFetchRequest(version=9, require_stable=False, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", member_id=member_id, member_epoch=epoch, topics=None)])
    return ctx.shard.fetch_offsets(request, 9)


def test_list_groups_types_and_states(ctx: ConsumerGroupTestContext) -> None:
    ctx.stable_group("classic", 1)
    ctx.cg_heartbeat()
    listed = {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in ctx.list_groups().groups}
    assert listed == {("classic", "consumer", "Stable", "classic"), ("g", "consumer", "Stable", "consumer")}
    assert [g.group_id for g in ctx.list_groups(types=["Consumer"]).groups] == ["g"]
    assert [g.group_id for g in ctx.list_groups(types=["classic"]).groups] == ["classic"]
    assert [g.group_id for g in ctx.list_groups(states=["stable"], types=["consumer"]).groups] == ["g"]
    assert ctx.list_groups(states=["empty"], types=["consumer"]).groups == []
    ctx.cg_heartbeat(member_id="m2")
    assert [g.group_state for g in ctx.list_groups(types=["consumer"]).groups] == ["Reconciling"]


def test_describe_groups_answers_a_consumer_group_as_not_classic(ctx: ConsumerGroupTestContext) -> None:
    # Kafka 4 describes classic groups only: a consumer group is Dead with no members, and v6
    # says why (ConsumerGroupDescribe is the API that describes it).
    ctx.stable_group("classic", 1)
    ctx.cg_heartbeat(instance_id="i1", client_id="cli")
    for version in range(6):
        g, classic = ctx.describe_groups("g", "classic", version=version).groups
        assert (g.error_code, g.error_message, g.group_state, g.protocol_type, g.protocol_data, g.members) == \
            (E.NONE, None, "Dead", "", "", [])
        assert (classic.error_code, classic.group_state, len(classic.members)) == (E.NONE, "Stable", 1)
        ctx.describe_groups("g", "classic", version=version).encode()
    response = ctx.describe_groups("g", "classic", version=6)
    g, classic = response.groups
    assert (g.error_code, g.error_message, g.group_state, g.protocol_type, g.members) == \
        (E.GROUP_ID_NOT_FOUND, "Group g is not a classic group.", "Dead", "", [])
    assert (classic.error_code, classic.error_message, classic.group_state) == (E.NONE, None, "Stable")
    response.encode()


def test_consumer_group_describe(ctx: ConsumerGroupTestContext) -> None:
    ctx.stable_group("classic", 1)
    foo = ctx.topic_id("foo")
    ctx.cg_heartbeat(rack_id="r1", assignor="range")
    g, missing, classic = ctx.shard.consumer_group_describe(["g", "nope", "classic"], 1, True)
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (0, "Stable", 1, 1,
                                                                                                   "range")
    (m,) = g.members
    assert (m.member_id, m.rack_id, m.member_epoch, m.subscribed_topic_names, m.member_type) == \
        ("m1", "r1", 1, ["foo"], 1)
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == \
        [(foo, "foo", [0, 1, 2, 3])]
    assert g.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (classic.error_code, classic.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                           "Group classic is not a consumer group.")


def test_delete_groups(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat(regex="x", topics=["foo"])
    ctx.commit_offsets("g", {("foo", 0): 5}, generation_id=1, member_id="m1", version=9)
    assert ctx.delete_groups("g").results[0].error_code == E.NON_EMPTY_GROUP
    assert ctx.last_records == []
    ctx.cg_heartbeat(member_epoch=-1)
    assert ctx.delete_groups("g").results[0].error_code == 0
    assert ctx.last_records == [
        (OffsetCommitKey("g", "foo", 0), None),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), None),
        (ConsumerGroupPartitionMetadataKey("g"), None),
        (ConsumerGroupMetadataKey("g"), None),
    ]
    assert ctx.cgroups == {} and ctx.shard.offset_manager.offsets == {}
    assert ctx.delete_groups("g").results[0].error_code == E.GROUP_ID_NOT_FOUND


def test_delete_tombstones_every_record_in_kafkas_order(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat(regex="x")
    ctx.sleep(1)  # the new regex is resolved by its own operation
    group = ctx.cgroups["g"]
    records = ctx.shard.consumer_manager.group_tombstones(group)
    assert [type(k) for k, _ in records] == [
        ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupMemberMetadataKey,
        ConsumerGroupRegularExpressionKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMetadataKey]


def test_offsets_of_an_empty_consumer_group_expire_then_the_group(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.commit_offsets("g", {("foo", 0): 5}, generation_id=1, member_id="m1", version=9)
    ctx.cg_heartbeat(member_epoch=-1)
    written = ctx.sleep(7 * DAY + 600_000)
    assert (OffsetCommitKey("g", "foo", 0), None) in written
    assert written[-1] == (ConsumerGroupMetadataKey("g"), None)
    assert ctx.cgroups == {} and ctx.groups == {}


def test_offsets_of_a_live_consumer_group_do_not_expire() -> None:
    ctx = ConsumerGroupTestContext(group_configs=lambda g: {"consumer.session.timeout.ms": DAY})
    ctx.topics.create("foo", 4)
    ctx.cg_heartbeat()
    ctx.commit_offsets("g", {("foo", 0): 5}, generation_id=1, member_id="m1", version=9)
    for _ in range(20):
        ctx.sleep(DAY // 2)
        ctx.cg_heartbeat(member_epoch=1)  # keeps the session alive
    assert ctx.committed("g", "foo", 0) == 5


def test_offset_commit_member_epochs(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()

    def commit(epoch: int, member_id: str = "m1", version: int = 9, partition: int = 0) -> int:
        r = ctx.commit_offsets("g", {("foo", partition): 7}, generation_id=epoch, member_id=member_id, version=version)
        return int(r.topics[0].partitions[0].error_code)

    assert commit(1) == 0 and ctx.last_records[0][0] == OffsetCommitKey("g", "foo", 0)
    assert commit(2) == E.STALE_MEMBER_EPOCH and ctx.last_records == []
    assert commit(1, member_id="m9") == E.UNKNOWN_MEMBER_ID
    assert commit(-1, member_id="") == E.UNKNOWN_MEMBER_ID  # the group is not Empty
    assert commit(1, version=8) == E.UNSUPPORTED_VERSION
    # KIP-1251: m2 joins, m1 moves to epoch 2 keeping partition 0 (assigned at epoch 1): a commit
    # with epoch 1 for partition 0 still passes; for a partition assigned later it does not.
    ctx.cg_heartbeat(member_id="m2")
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 2]})
    assert ctx.cgroups["g"].members["m1"].member_epoch == 2
    assert commit(1) == 0
    ctx.topics.create("foo", 8, topic_id=ctx.topic_id("foo"))
    ctx.cg_heartbeat(member_epoch=2, owned={"foo": [0, 2]})
    member = ctx.cgroups["g"].members["m1"]
    assert member.member_epoch == 3 and 4 in member.assigned_partitions[ctx.topic_id("foo")]
    assert commit(2, partition=4) == E.STALE_MEMBER_EPOCH
    assert commit(2, partition=0) == 0
    assert commit(3, partition=4) == 0
    ctx.cg_heartbeat(member_epoch=-1)
    ctx.cg_heartbeat(member_id="m2", member_epoch=-1)
    assert commit(-1, member_id="") == 0  # a simple commit on an Empty group


def test_offset_fetch_v9_member_epoch(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.commit_offsets("g", {("foo", 0): 7}, generation_id=1, member_id="m1", version=9)
    ok = fetch_v9(ctx, "m1", 1)
    assert ok.groups[0].error_code == 0 and ok.groups[0].topics[0].partitions[0].committed_offset == 7  # type: ignore[attr-defined]
    assert fetch_v9(ctx, "m1", 2).groups[0].error_code == E.STALE_MEMBER_EPOCH  # type: ignore[attr-defined]
    assert fetch_v9(ctx, "m9", 1).groups[0].error_code == E.UNKNOWN_MEMBER_ID  # type: ignore[attr-defined]
    assert fetch_v9(ctx, None, -1).groups[0].error_code == 0  # type: ignore[attr-defined]


def test_snapshot_replayed_into_a_fresh_shard_is_the_same(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat(instance_id="i1", rack_id="r")
    ctx.cg_heartbeat(member_id="m2", regex="fo.*", topics=["foo"])
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    ctx.commit_offsets("g", {("foo", 0): 7}, generation_id=1, member_id="m1", version=9)
    ctx.stable_group("classic", 2)
    fresh = ConsumerGroupTestContext(ctx.config, topics=ctx.topics)
    for key, value in ctx.shard.snapshot_records():
        fresh.shard.replay(key, value)
    fresh.shard.on_loaded()
    assert fresh.state() == ctx.state()
    assert fresh.timer.is_scheduled("rebalance-timeout-g-m1")


def test_serde_round_trips_both_families() -> None:
    cg = (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(3, 9, 100))
    key, value = OFFSETS_SERDE.serialize(*cg)
    typed = decode_key(key)
    assert (typed, decode_value(typed, value)) == cg
    assert OFFSETS_SERDE.serialize(ConsumerGroupMetadataKey("g"), None)[1] is None
    classic = (OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, "", 2, -1))
    assert deserialize(*serialize_record(*classic)) == classic


def test_offset_delete(ctx: ConsumerGroupTestContext) -> None:
    ctx.topics.create("bar", 1)
    ctx.cg_heartbeat()
    ctx.commit_offsets("g", {("foo", 0): 5, ("bar", 0): 6}, generation_id=1, member_id="m1", version=9)
    r = ctx.delete_offsets("g", {"foo": [0], "bar": [0]})
    assert r.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in r.topics} == {"foo": E.GROUP_SUBSCRIBED_TO_TOPIC, "bar": 0}
    assert ctx.last_records == [(OffsetCommitKey("g", "bar", 0), None)]
    assert ctx.delete_offsets("nope", {"foo": [0]}).error_code == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", [0, 1])
def test_answers_encode(ctx: ConsumerGroupTestContext, version: int) -> None:
    """What the shard answers is what the wire codec can send (both APIs, both versions)."""
    from protocol.consumer_group_messages import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse

    r = ctx.cg_heartbeat(instance_id="i", rack_id="r", version=version)
    back = ConsumerGroupHeartbeatResponse.decode(r.encode(version=version), version=version)
    assert (back.member_id, back.member_epoch, back.assignment.topic_partitions[0].partitions) == ("m1", 1, [0, 1, 2, 3])
    groups = ctx.shard.consumer_group_describe(["g", "x"], version, True)
    response = ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)
    decoded = ConsumerGroupDescribeResponse.decode(response.encode(version=version), version=version)
    assert [g.error_code for g in decoded.groups] == [0, E.GROUP_ID_NOT_FOUND]
    assert decoded.groups[0].members[0].assignment.topic_partitions[0].topic_name == "foo"
