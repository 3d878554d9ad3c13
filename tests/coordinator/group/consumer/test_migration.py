"""Online migration between classic and consumer groups (KIP-848 "Upgrade & Downgrade"; Kafka 4's
GroupMetadataManagerTest "testUpgrade..."/"testDowngrade..."/"testClassicGroup...ToConsumerGroup"):
the records each conversion writes, classic members working inside a consumer group, and the log
(and a snapshot) rebuilding the same state after each step."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest

from coordinator.group.config import GroupConfig
from coordinator.group.consumer.group import ConsumerGroupState
from coordinator.group.consumer.member import MemberState
from coordinator.group.consumer.timers import classic_join_timeout_key, classic_sync_timeout_key, session_timeout_key
from protocol.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue
from protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext
from tests.coordinator.group.group_test_context import subscription

GEN = 1
SESSION = 10_000
REBALANCE = 30_000


def subscription_v1(topics: tuple[str, ...], owned: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolSubscription v1 (cooperative: it reports the partitions it owns)."""
    out = struct.pack(">hi", 1, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1) + struct.pack(">i", len(owned))
    for t, parts in owned.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out


def assignment(parts: dict[str, list[int]], user_data: bytes | None = None, version: int = 0) -> bytes:
    return encode_assignment(ConsumerProtocolAssignment(
        version, tuple((t, tuple(p)) for t, p in parts.items()), user_data))


@pytest.fixture
def ctx() -> ConsumerGroupTestContext:
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    c.topics.create("foo", 4)
    return c


def classic_group(ctx: ConsumerGroupTestContext, user_data: bytes | None = None) -> list[str]:
    """Two classic members subscribed to foo, Stable at generation 1: the leader owns foo 0-1,
    the other foo 2-3. Returns [leader, other]."""
    kwargs: dict[str, Any] = dict(protocols=[("range", subscription("foo"))], session_timeout_ms=SESSION,
                                  rebalance_timeout_ms=REBALANCE)
    joins = [ctx.join_new_member("g", **kwargs) for _ in range(2)]
    for _ in range(10):  # members joining during the initial delay extend it (KIP-134)
        if all(f.done() for _, f in joins):
            break
        ctx.sleep(max(ctx.config.initial_rebalance_delay_ms, 1))
    leader = joins[0][1].result().leader
    ids = [leader] + [m for m, _ in joins if m != leader]
    plan = {ids[0]: assignment({"foo": [0, 1]}, user_data), ids[1]: assignment({"foo": [2, 3]}, user_data)}
    ctx.sync_group("g", ids[1], GEN)
    assert ctx.sync_group("g", ids[0], GEN, assignments=plan).result().error_code == 0
    assert ctx.groups["g"].state.value == "Stable"
    return ids


def classic_metadata() -> ClassicMemberMetadata:
    return ClassicMemberMetadata(SESSION, (ClassicProtocol("range", subscription("foo")),))


def tps(ctx: ConsumerGroupTestContext, *parts: int, epochs: int | None = None) -> tuple[TopicPartitions, ...]:
    if not parts:
        return ()
    return (TopicPartitions(ctx.topic_id("foo"), tuple(parts), None if epochs is None else (epochs,) * len(parts)),)


def owned_by(ctx: ConsumerGroupTestContext) -> dict[str, set[int]]:
    return {m: set(v.assigned_partitions.get(ctx.topic_id("foo"), ()))
            | set(v.partitions_pending_revocation.get(ctx.topic_id("foo"), ()))
            for m, v in ctx.cgroups["g"].members.items()}


def assert_replay_and_snapshot(ctx: ConsumerGroupTestContext) -> None:
    assert ctx.reload().state() == ctx.state()
    fresh = ConsumerGroupTestContext(ctx.config, topics=ctx.topics)
    for key, value in ctx.shard.snapshot_records():
        fresh.shard.replay(key, value)
    fresh.shard.on_loaded()
    assert fresh.state() == ctx.state()


def classic_join(ctx: ConsumerGroupTestContext, member_id: str, owned: dict[str, list[int]] | None = None,
                 **kwargs: Any) -> Any:
    metadata = subscription("foo") if owned is None else subscription_v1(("foo",), owned)
    return ctx.join_group("g", member_id, protocols=[("range", metadata)], session_timeout_ms=SESSION,
                          rebalance_timeout_ms=REBALANCE, **kwargs).result()


def rejoin(ctx: ConsumerGroupTestContext, member_id: str) -> None:
    """What a classic consumer does when told to rejoin: JoinGroup, then SyncGroup."""
    r = classic_join(ctx, member_id)
    assert r.error_code == 0, r
    assert ctx.sync_group("g", member_id, r.generation_id).result().error_code in (0, E.REBALANCE_IN_PROGRESS)


def sync_assignment(response: Any) -> dict[str, list[int]]:
    decoded = decode_assignment(response.assignment)
    return {t: sorted(p) for t, p in decoded.assigned_partitions}


# ---------------------------------------------------------------------------------------------
# Upgrade


def test_upgrade_writes_kafkas_records_then_the_joining_member(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.commit_offsets("g", {("foo", 0): 5}, generation_id=GEN, member_id=a)
    r = ctx.cg_heartbeat(member_id="m1")
    assert r.error_code == 0 and r.member_epoch == GEN + 1
    records = ctx.last_records
    assert records[0] == (GroupMetadataKey("g"), None)
    group_hash = ctx.cgroups["g"].metadata_hash
    conversion = [
        (ConsumerGroupMemberMetadataKey("g", a), ConsumerGroupMemberMetadataValue(
            None, None, "client", "/127.0.0.1", ("foo",), None, REBALANCE, None, classic_metadata())),
        (ConsumerGroupMemberMetadataKey("g", b), ConsumerGroupMemberMetadataValue(
            None, None, "client", "/127.0.0.1", ("foo",), None, REBALANCE, None, classic_metadata())),
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(GEN, group_hash, ctx.clock.now)),
        (ConsumerGroupTargetAssignmentMemberKey("g", a), ConsumerGroupTargetAssignmentMemberValue(tps(ctx, 0, 1))),
        (ConsumerGroupTargetAssignmentMemberKey("g", b), ConsumerGroupTargetAssignmentMemberValue(tps(ctx, 2, 3))),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(GEN)),
        (ConsumerGroupCurrentMemberAssignmentKey("g", a), ConsumerGroupCurrentMemberAssignmentValue(
            GEN, GEN, 0, tps(ctx, 0, 1, epochs=GEN), ())),
        (ConsumerGroupCurrentMemberAssignmentKey("g", b), ConsumerGroupCurrentMemberAssignmentValue(
            GEN, GEN, 0, tps(ctx, 2, 3, epochs=GEN), ())),
    ]
    assert records[1:1 + len(conversion)] == conversion
    joining = records[1 + len(conversion):]
    assert joining[0][0] == ConsumerGroupMemberMetadataKey("g", "m1")
    assert joining[1] == (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(GEN + 1, group_hash, ctx.clock.now))
    assert (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(GEN + 1)) \
        in joining
    # The classic group is gone; its offsets stay; classic members have sessions of their own.
    assert "g" not in ctx.groups and ctx.cgroups["g"].state is ConsumerGroupState.RECONCILING
    assert ctx.committed("g", "foo", 0) == 5
    assert ctx.timer.deadline(session_timeout_key("g", a)) == ctx.clock.now + SESSION
    # The new member gets nothing another member still owns.
    owners = owned_by(ctx)
    assert owners[a] == {0, 1} and owners[b] == {2, 3} and owners["m1"] == set()
    # A mixed group is a consumer group: DescribeGroups does not describe it, as in Kafka 4.
    described = ctx.describe_groups("g", version=6).groups[0]
    assert (described.error_code, described.error_message, described.group_state, described.members) == \
        (E.GROUP_ID_NOT_FOUND, "Group g is not a classic group.", "Dead", [])
    assert_replay_and_snapshot(ctx)


def test_the_classic_members_keep_working_and_revoke_by_rejoining(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    group = ctx.cgroups["g"]
    target = {m: set(t.get(ctx.topic_id("foo"), ())) for m, t in group.target.items()}
    assert sorted(len(p) for p in target.values()) == [1, 1, 2]
    # The group moved on: the classic members must rejoin.
    assert ctx.heartbeat("g", a, GEN).error_code == E.REBALANCE_IN_PROGRESS
    assert ctx.sync_group("g", a, GEN).result().error_code == E.REBALANCE_IN_PROGRESS
    assert ctx.heartbeat("g", a, GEN + 5).error_code == E.ILLEGAL_GENERATION
    # A cooperative member rejoins still owning foo 0-1: it keeps what stays its own and must
    # revoke the rest first.
    r = classic_join(ctx, a, owned={"foo": [0, 1]})
    assert (r.error_code, r.generation_id, r.protocol_type, r.protocol_name, r.leader, r.members) == \
        (0, GEN, "consumer", "range", "", [])
    member = ctx.cgroups["g"].members[a]
    revoking = {0, 1} - target[a]
    if revoking:
        assert member.state is MemberState.UNREVOKED_PARTITIONS
        sync = ctx.sync_group("g", a, GEN, protocol_type="consumer", protocol_name="range").result()
        assert sync.error_code == 0 and sync_assignment(sync) == {"foo": sorted(target[a] & {0, 1})} \
            and (sync.protocol_type, sync.protocol_name) == ("consumer", "range")
        assert ctx.heartbeat("g", a, GEN).error_code == E.REBALANCE_IN_PROGRESS
        assert owned_by(ctx)[a] == {0, 1}  # still its own until it rejoins without them
        r = classic_join(ctx, a, owned={"foo": sorted(target[a] & {0, 1})})
    assert r.error_code == 0 and r.generation_id == GEN + 1
    sync = ctx.sync_group("g", a, GEN + 1).result()
    assert sync.error_code == 0 and set(sync_assignment(sync).get("foo", [])) <= target[a]
    assert ctx.timer.is_scheduled(classic_sync_timeout_key("g", a)) is False
    # An eager member rejoins owning nothing (it revoked everything before joining).
    r = classic_join(ctx, b)
    assert r.error_code == 0 and r.generation_id == GEN + 1
    assert ctx.cgroups["g"].members[b].classic_member_metadata == classic_metadata()
    assert ctx.cgroups["g"].members[a].classic_member_metadata == ClassicMemberMetadata(
        SESSION, (ClassicProtocol("range", subscription_v1(("foo",), {"foo": sorted(target[a] & {0, 1})})),))
    for _ in range(3):
        ctx.cg_heartbeat(member_id="m1", member_epoch=ctx.cgroups["g"].members["m1"].member_epoch, owned={
            "foo": sorted(owned_by(ctx)["m1"])})
        for m in (a, b):
            if ctx.heartbeat("g", m, ctx.cgroups["g"].members[m].member_epoch).error_code:
                rejoin(ctx, m)
    assert ctx.cgroups["g"].state is ConsumerGroupState.STABLE
    assert {m: p for m, p in owned_by(ctx).items()} == target
    assert_replay_and_snapshot(ctx)


def test_classic_join_validation_inside_a_consumer_group(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    assert ctx.join_group("g", protocols=[("roundrobin", subscription("foo"))]).result().error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    first = ctx.join_group("g", protocols=[("range", subscription("foo"))]).result()
    assert first.error_code == E.MEMBER_ID_REQUIRED and ctx.last_records == []
    r = classic_join(ctx, first.member_id)
    assert r.error_code == 0 and first.member_id in ctx.cgroups["g"].members
    # A consumer-protocol member cannot use the classic APIs.
    assert ctx.heartbeat("g", "m1", 2).error_code == E.UNKNOWN_MEMBER_ID
    assert ctx.sync_group("g", "m1", 2).result().error_code == E.UNKNOWN_MEMBER_ID
    assert ctx.sync_group("g", "nobody", 2).result().error_code == E.UNKNOWN_MEMBER_ID
    assert_replay_and_snapshot(ctx)


def test_classic_members_commit_with_their_generation(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    ok = ctx.commit_offsets("g", {("foo", 2): 11}, generation_id=GEN, member_id=b, version=8)
    assert ok.topics[0].partitions[0].error_code == 0 and ctx.committed("g", "foo", 2) == 11
    stale = ctx.commit_offsets("g", {("foo", 2): 12}, generation_id=GEN + 1, member_id=b, version=8)
    assert stale.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    described = ctx.shard.consumer_group_describe(["g"], 1, False)[0]
    assert {m.member_id: m.member_type for m in described.members} == {a: 0, b: 0, "m1": 1}


def test_classic_members_fetch_offsets_with_their_generation(ctx: ConsumerGroupTestContext) -> None:
    # Kafka ConsumerGroup.validateOffsetFetch: a classic member's epoch is its generation, and a
    # mismatch is ILLEGAL_GENERATION (STALE_MEMBER_EPOCH is the consumer protocol's answer).
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    ctx.commit_offsets("g", {("foo", 2): 11}, generation_id=GEN, member_id=b, version=8)

    def fetch(member_id: str, epoch: int) -> Any:
        request = OffsetFetchRequest(version=9, require_stable=False, groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g", member_id=member_id, member_epoch=epoch,
                                                       topics=None)])
        groups = ctx.shard.fetch_offsets(request, 9).groups
        assert groups is not None
        return groups[0]

    ok = fetch(b, GEN)
    assert ok.error_code == 0 and ok.topics[0].partitions[0].committed_offset == 11
    assert fetch(b, GEN + 1).error_code == E.ILLEGAL_GENERATION
    assert fetch("m1", ctx.cgroups["g"].members["m1"].member_epoch + 1).error_code == E.STALE_MEMBER_EPOCH


def test_classic_leave_fences_and_bumps_the_epoch(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    epoch = ctx.cgroups["g"].group_epoch
    r = ctx.leave_group("g", [(b, None), ("m1", None), ("nobody", None)])
    assert [(m.member_id, m.error_code) for m in r.members] == [
        (b, 0), ("m1", E.UNKNOWN_MEMBER_ID), ("nobody", E.UNKNOWN_MEMBER_ID)]
    assert ctx.last_records[:3] == [(ConsumerGroupCurrentMemberAssignmentKey("g", b), None),
                                    (ConsumerGroupTargetAssignmentMemberKey("g", b), None),
                                    (ConsumerGroupMemberMetadataKey("g", b), None)]
    assert ctx.last_records[-1][0] == ConsumerGroupMetadataKey("g")
    assert ctx.cgroups["g"].group_epoch == epoch + 1 and b not in ctx.cgroups["g"].members
    assert not ctx.timer.is_scheduled(session_timeout_key("g", b))
    assert_replay_and_snapshot(ctx)


def test_classic_session_timeout_fences(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    ctx.sleep(SESSION // 2)
    ctx.heartbeat("g", a, GEN)
    ctx.cg_heartbeat(member_id="m1", member_epoch=ctx.cgroups["g"].members["m1"].member_epoch)
    ctx.sleep(SESSION // 2 + 1)
    assert b not in ctx.cgroups["g"].members and a in ctx.cgroups["g"].members


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policy_refuses_the_upgrade(policy: str) -> None:
    ctx = ConsumerGroupTestContext(GroupConfig(consumer_migration_policy=policy))
    ctx.topics.create("foo", 4)
    classic_group(ctx)
    r = ctx.cg_heartbeat(member_id="m1")
    assert (r.error_code, r.error_message) == (
        E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because online upgrade is disabled.")
    assert ctx.last_records == [] and ctx.groups["g"].state.value == "Stable" and "g" not in ctx.cgroups


def test_custom_assignor_user_data_refuses_the_upgrade(ctx: ConsumerGroupTestContext,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    classic_group(ctx, user_data=b"x")
    with caplog.at_level("INFO", logger="groupcoord.group"):
        r = ctx.cg_heartbeat(member_id="m1")
    # logged too: a librdkafka member only sees a fatal GROUP_ID_NOT_FOUND
    assert "unsupported custom assignor is in use" in caplog.text
    assert (r.error_code, r.error_message) == (
        E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group g to consumer group because an unsupported custom "
        "assignor is in use. Please refer to the documentation or switch to a default assignor before "
        "re-attempting the upgrade.")
    assert ctx.last_records == [] and ctx.groups["g"].state.value == "Stable"


def test_a_rebalancing_classic_group_upgrades_and_parked_joins_must_rejoin(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    parked = ctx.join_group("g", a, protocols=[("range", subscription("foo", "bar"))],
                            session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE)
    assert ctx.groups["g"].state.value == "PreparingRebalance" and not parked.done()
    assert ctx.cg_heartbeat(member_id="m1").error_code == 0
    assert parked.result().error_code == E.REBALANCE_IN_PROGRESS
    assert "g" not in ctx.groups and set(ctx.cgroups["g"].members) == {a, b, "m1"}
    assert_replay_and_snapshot(ctx)


# ---------------------------------------------------------------------------------------------
# Downgrade


def upgraded(ctx: ConsumerGroupTestContext) -> list[str]:
    a, b = classic_group(ctx)
    ctx.commit_offsets("g", {("foo", 1): 9}, generation_id=GEN, member_id=a)
    ctx.cg_heartbeat(member_id="m1")
    return [a, b]


def test_downgrade_when_the_last_consumer_member_leaves(ctx: ConsumerGroupTestContext) -> None:
    a, b = upgraded(ctx)
    group = ctx.cgroups["g"]
    epoch = group.group_epoch
    # What each member may still hold (not its target: the classic members have not rejoined).
    held = {m: {t: v.assigned_partitions.get(t, frozenset()) | v.partitions_pending_revocation.get(t, frozenset())
                for t in (ctx.topic_id("foo"),)} for m, v in group.members.items()}
    assert held[a] == {ctx.topic_id("foo"): frozenset({0, 1})}
    tombstones = ctx.shard.consumer_manager.group_tombstones(group)
    r = ctx.cg_heartbeat(member_id="m1", member_epoch=-1)
    assert r.error_code == 0 and r.member_epoch == -1
    records = ctx.last_records
    assert records[:-1] == tombstones
    key, value = records[-1]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", epoch, "range", a)
    assert [m.member_id for m in value.members] == [a, b]
    for m in value.members:
        assert (m.session_timeout, m.rebalance_timeout, m.subscription) == (SESSION, REBALANCE, subscription("foo"))
        assert decode_subscription(m.subscription).topics == ("foo",)
        expected = sorted(held[m.member_id].get(ctx.topic_id("foo"), ()))
        assert dict(decode_assignment(m.assignment).assigned_partitions) == ({"foo": tuple(expected)} if expected
                                                                              else {})
    # A classic group again, rebalancing; the offsets stayed.
    assert "g" not in ctx.cgroups and ctx.groups["g"].state.value == "PreparingRebalance"
    assert ctx.groups["g"].generation_id == epoch
    assert ctx.committed("g", "foo", 1) == 9
    assert not ctx.timer.is_scheduled(session_timeout_key("g", a))
    # The classic members rejoin the classic group and it stabilises.
    ja = ctx.join_group("g", a, protocols=[("range", subscription("foo"))], session_timeout_ms=SESSION,
                        rebalance_timeout_ms=REBALANCE)
    jb = ctx.join_group("g", b, protocols=[("range", subscription("foo"))], session_timeout_ms=SESSION,
                        rebalance_timeout_ms=REBALANCE)
    assert ja.result().error_code == 0 and jb.result().generation_id == epoch + 1
    assert_replay_and_snapshot(ctx)


def test_a_session_timeout_of_the_last_consumer_member_downgrades(ctx: ConsumerGroupTestContext) -> None:
    a, b = upgraded(ctx)
    # m1 never heartbeats again; the classic members do, rejoining when told to.
    for _ in range(10):
        ctx.sleep(SESSION // 2)
        if "g" not in ctx.cgroups:
            break
        for m in (a, b):
            if ctx.heartbeat("g", m, ctx.cgroups["g"].members[m].member_epoch).error_code:
                rejoin(ctx, m)
    assert "g" not in ctx.cgroups and set(ctx.groups["g"].members) == {a, b}
    assert ctx.groups["g"].state.value == "PreparingRebalance"
    assert_replay_and_snapshot(ctx)


def test_no_downgrade_when_the_policy_forbids_it() -> None:
    ctx = ConsumerGroupTestContext(GroupConfig(consumer_migration_policy="upgrade", consumer_assignment_interval_ms=0))
    ctx.topics.create("foo", 4)
    upgraded(ctx)
    ctx.cg_heartbeat(member_id="m1", member_epoch=-1)
    assert "g" in ctx.cgroups and len(ctx.cgroups["g"].members) == 2 and "g" not in ctx.groups
    assert ctx.last_records[-1][0] == ConsumerGroupMetadataKey("g")


def test_a_classic_member_leaving_does_not_downgrade(ctx: ConsumerGroupTestContext) -> None:
    a, b = upgraded(ctx)
    ctx.leave_group("g", [(a, None)])
    assert "g" in ctx.cgroups and "g" not in ctx.groups


def test_upgrade_then_downgrade_then_upgrade_replays(ctx: ConsumerGroupTestContext) -> None:
    a, b = upgraded(ctx)
    ctx.cg_heartbeat(member_id="m1", member_epoch=-1)
    for m in (a, b):
        ctx.join_group("g", m, protocols=[("range", subscription("foo"))], session_timeout_ms=SESSION,
                       rebalance_timeout_ms=REBALANCE)
    group = ctx.groups["g"]
    leader, generation = group.leader_id, group.generation_id
    ids = list(group.members)
    plan = {ids[0]: assignment({"foo": [0, 1]}), ids[1]: assignment({"foo": [2, 3]})}
    ctx.sync_group("g", [m for m in ids if m != leader][0], generation)
    ctx.sync_group("g", leader, generation, assignments=plan)
    assert ctx.groups["g"].state.value == "Stable"
    assert ctx.cg_heartbeat(member_id="m2").error_code == 0
    assert set(ctx.cgroups["g"].members) == {a, b, "m2"}
    assert ctx.committed("g", "foo", 1) == 9
    assert_replay_and_snapshot(ctx)


def test_codec_round_trip() -> None:
    raw = subscription_v1(("a", "b"), {"a": [1, 2]})
    sub = decode_subscription(raw)
    assert (sub.version, sub.topics, sub.owned_partitions, sub.user_data) == (1, ("a", "b"), (("a", (1, 2)),), None)
    a = ConsumerProtocolAssignment(3, (("t", (0, 5)),), b"u")
    assert decode_assignment(encode_assignment(a)) == a
    assert decode_assignment(b"") == ConsumerProtocolAssignment(0)


def test_a_classic_member_must_sync_within_its_rebalance_timeout(ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    assert classic_join(ctx, a).error_code == 0
    assert ctx.timer.deadline(classic_sync_timeout_key("g", a)) == ctx.clock.now + REBALANCE
    for _ in range(6):  # the others stay alive (b is told to rejoin but has its rebalance timeout)
        ctx.sleep(REBALANCE // 6)
        ctx.heartbeat("g", b, ctx.cgroups["g"].members[b].member_epoch)
        ctx.cg_heartbeat(member_id="m1", member_epoch=ctx.cgroups["g"].members["m1"].member_epoch)
    ctx.sleep(1)
    assert a not in ctx.cgroups["g"].members and b in ctx.cgroups["g"].members


def test_a_static_classic_member_rejoining_under_a_new_id_takes_over(ctx: ConsumerGroupTestContext) -> None:
    classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    first = classic_join(ctx, "", group_instance_id="i1")
    assert first.error_code == 0
    old_target = ctx.cgroups["g"].target[first.member_id]
    epoch = ctx.cgroups["g"].group_epoch
    assert ctx.join_group("g", "someone-else", group_instance_id="i1").result().error_code == E.FENCED_INSTANCE_ID
    again = classic_join(ctx, "", group_instance_id="i1")
    assert again.error_code == 0 and again.member_id != first.member_id
    group = ctx.cgroups["g"]
    assert first.member_id not in group.members and group.static_members["i1"] == again.member_id
    # Same subscription: no new epoch, the new id inherits the old one's target.
    assert group.group_epoch == epoch and group.target[again.member_id] == old_target
    assert ctx.last_records[:3] == [(ConsumerGroupCurrentMemberAssignmentKey("g", first.member_id), None),
                                    (ConsumerGroupTargetAssignmentMemberKey("g", first.member_id), None),
                                    (ConsumerGroupMemberMetadataKey("g", first.member_id), None)]
    assert_replay_and_snapshot(ctx)


def test_a_replaced_classic_group_is_retired_before_its_tombstone(ctx: ConsumerGroupTestContext,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Its soft state goes (Dead, timers cancelled) before the tombstone is replayed, which
    otherwise warns about a live group: for an upgrade and for an Empty group alike."""
    a, b = classic_group(ctx)
    ctx.leave_group("g", [(a, None), (b, None)])
    assert ctx.groups["g"].state.value == "Empty"
    with caplog.at_level("WARNING", logger="groupcoord.group"):
        assert ctx.cg_heartbeat(member_id="m1").error_code == 0
    assert "tombstone replayed for live group" not in caplog.text


def test_a_classic_member_told_to_rejoin_must_rejoin_within_its_rebalance_timeout(
        ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1")
    assert ctx.heartbeat("g", a, GEN).error_code == E.REBALANCE_IN_PROGRESS
    deadline = ctx.clock.now + REBALANCE
    assert ctx.timer.deadline(classic_join_timeout_key("g", a)) == deadline
    rejoin(ctx, b)
    for _ in range(5):  # a keeps heartbeating (its session lives) but never rejoins
        ctx.sleep(5_000)
        assert ctx.heartbeat("g", a, GEN).error_code == E.REBALANCE_IN_PROGRESS
        ctx.heartbeat("g", b, ctx.cgroups["g"].members[b].member_epoch)
        ctx.cg_heartbeat(member_id="m1", member_epoch=ctx.cgroups["g"].members["m1"].member_epoch)
    assert ctx.timer.deadline(classic_join_timeout_key("g", a)) == deadline  # heartbeats do not move it
    ctx.sleep(deadline - ctx.clock.now)
    assert a not in ctx.cgroups["g"].members and b in ctx.cgroups["g"].members


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(
        ctx: ConsumerGroupTestContext) -> None:
    a, b = classic_group(ctx)
    ctx.cg_heartbeat(member_id="m1", instance_id="i1")
    for _ in range(3):  # everyone reconciles to the new epoch
        ctx.cg_heartbeat(member_id="m1", member_epoch=ctx.cgroups["g"].members["m1"].member_epoch,
                         instance_id="i1", owned={"foo": sorted(owned_by(ctx)["m1"])})
        for m in (a, b):
            if ctx.heartbeat("g", m, ctx.cgroups["g"].members[m].member_epoch).error_code:
                rejoin(ctx, m)
    group = ctx.cgroups["g"]
    assert group.state is ConsumerGroupState.STABLE
    epoch, m1_held = group.group_epoch, owned_by(ctx)["m1"]
    r = classic_join(ctx, "", group_instance_id="i1")
    assert r.error_code == 0 and r.generation_id == epoch
    new_id = r.member_id
    key, value = ctx.last_records[-1]
    assert key == GroupMetadataKey("g") and isinstance(value, GroupMetadataValue)
    assert [m.member_id for m in value.members] == [a, b, new_id] and value.generation == epoch
    assert {m.member_id: m.group_instance_id for m in value.members}[new_id] == "i1"
    # A classic group again, Stable (same subscription): the new member syncs its partitions.
    assert "g" not in ctx.cgroups and ctx.groups["g"].state.value == "Stable"
    sync = ctx.sync_group("g", new_id, epoch, group_instance_id="i1").result()
    assert sync.error_code == 0 and set(sync_assignment(sync).get("foo", [])) == m1_held
    assert_replay_and_snapshot(ctx)
