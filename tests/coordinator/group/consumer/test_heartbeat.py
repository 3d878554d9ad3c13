"""ConsumerGroupHeartbeat in the shard: every validation rule (response and no records), and the
main flows with the records they write (Kafka's GroupMetadataManagerTest for consumer groups)."""

from __future__ import annotations

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.consumer.group import ConsumerGroupState
from coordinator.group.consumer.member import MemberState
from coordinator.group.consumer.timers import rebalance_timeout_key, session_timeout_key
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext, assignment_of

NOW = 1_000_000


@pytest.fixture
def ctx() -> ConsumerGroupTestContext:
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    c.topics.create("foo", 4)
    c.topics.create("bar", 2)
    return c


def member_value(topics: tuple[str, ...] = ("foo",), **kw: object) -> ConsumerGroupMemberMetadataValue:
    fields: dict[str, object] = dict(instance_id=None, rack_id=None, client_id="client", client_host="/127.0.0.1",
                                     subscribed_topic_names=topics, subscribed_topic_regex=None,
                                     rebalance_timeout_ms=30_000, server_assignor=None)
    fields.update(kw)
    return ConsumerGroupMemberMetadataValue(**fields)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Validation: Kafka's order, codes and messages; nothing written


INVALID = [
    (dict(member_id="", member_epoch=0), 1, E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id="", member_epoch=3), 0, E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(member_id=" ", member_epoch=-1), 0, E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(group_id=""), 1, E.INVALID_REQUEST, "GroupId can't be empty."),
    (dict(instance_id=""), 1, E.INVALID_REQUEST, "InstanceId can't be empty."),
    (dict(rack_id=" "), 1, E.INVALID_REQUEST, "RackId can't be empty."),
    (dict(rebalance_timeout_ms=-1, topics=["foo"], owned={}), 1, E.INVALID_REQUEST,
     "RebalanceTimeoutMs must be provided in first request."),
    (dict(owned={"foo": [0]}), 1, E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (dict(member_epoch=-2), 1, E.INVALID_REQUEST, "InstanceId can't be null."),
    (dict(member_epoch=-3), 1, E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (dict(assignor="sticky"), 1, E.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
]


@pytest.mark.parametrize(("kwargs", "version", "code", "message"), INVALID)
def test_invalid_requests(ctx: ConsumerGroupTestContext, kwargs: dict[str, object], version: int, code: int,
                          message: str) -> None:
    r = ctx.cg_heartbeat(version=version, **kwargs)  # type: ignore[arg-type]
    assert (r.error_code, r.error_message) == (code, message)
    assert ctx.last_records == [] and ctx.cgroups == {}


def test_join_without_names_or_regex(ctx: ConsumerGroupTestContext) -> None:
    from tests.coordinator.group.consumer.context import Q
    request = Q(version=1, group_id="g", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout_ms=1000, subscribed_topic_names=None, subscribed_topic_regex=None,
                server_assignor=None, topic_partitions=[])
    r = ctx._apply(ctx.shard.consumer_group_heartbeat(request, 1, "c", "h")).response
    assert r.error_code == E.INVALID_REQUEST
    assert r.error_message == "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
    assert ctx.last_records == []


def test_v0_join_with_empty_member_id_gets_a_generated_one(ctx: ConsumerGroupTestContext) -> None:
    r = ctx.cg_heartbeat(member_id="", version=0)
    assert r.error_code == 0 and r.member_id == "uuid1" and r.member_epoch == 1
    assert ctx.last_records[0] == (ConsumerGroupMemberMetadataKey("g", "uuid1"), member_value())


def test_unknown_group_and_member(ctx: ConsumerGroupTestContext) -> None:
    r = ctx.cg_heartbeat(member_epoch=1)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Consumer group g not found.")
    ctx.cg_heartbeat()
    r = ctx.cg_heartbeat(member_id="m9", member_epoch=1)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, "Member m9 is not a member of group g.")
    r = ctx.cg_heartbeat(member_id="m9", member_epoch=-1)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, "Member m9 is not a member of group g.")
    assert ctx.last_records == []
    r = ctx.cg_heartbeat(group_id="nope", member_epoch=-1)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_fenced_member_epoch(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    r = ctx.cg_heartbeat(member_epoch=2, owned={"foo": [0, 1, 2, 3]})
    assert r.error_code == E.FENCED_MEMBER_EPOCH
    assert r.error_message == ("The consumer group member has a greater member epoch (2) than the one known by the "
                               "group coordinator (1). The member must abandon all its partitions and rejoin.")
    # Epoch 0 is the previous epoch: a lost join response, tolerated with a subset of the assignment...
    r = ctx.cg_heartbeat(member_epoch=0)
    assert r.error_code == 0 and r.member_epoch == 1 and assignment_of(r, ctx) == {"foo": [0, 1, 2, 3]}
    assert ctx.last_records == []
    ctx.cg_heartbeat(member_id="m2")  # epoch 2; m1 must revoke and stays at 1
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    assert r.member_epoch == 1
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 2]})
    assert r.member_epoch == 2
    # ... but not an older epoch, nor the previous one with partitions it no longer has.
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1]})
    assert r.error_code == E.FENCED_MEMBER_EPOCH
    assert r.error_message == ("The consumer group member has a smaller member epoch (1) than the one known by the "
                               "group coordinator (2). The member must abandon all its partitions and rejoin.")
    assert ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0]}).error_code == 0
    assert ctx.cg_heartbeat(member_epoch=0, owned={}).error_code == E.FENCED_MEMBER_EPOCH
    assert ctx.last_records == []


def test_group_max_size(ctx: ConsumerGroupTestContext) -> None:
    c = ConsumerGroupTestContext(GroupConfig(consumer_max_size=1), topics=ctx.topics)
    c.cg_heartbeat()
    r = c.cg_heartbeat(member_id="m2")
    assert (r.error_code, r.error_message) == (E.GROUP_MAX_SIZE_REACHED,
                                               "The consumer group has reached its maximum capacity of 1 members.")
    assert c.last_records == []
    assert c.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]}).error_code == 0


def test_classic_group_id(ctx: ConsumerGroupTestContext) -> None:
    ids, _ = ctx.stable_group("classic", 1)
    # A join would upgrade the group (test_migration.py), but this group's assignments are not
    # ConsumerProtocol assignments.
    r = ctx.cg_heartbeat(group_id="classic")
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Cannot upgrade classic group classic to "
                                               "consumer group because the embedded consumer protocol is malformed.")
    r = ctx.cg_heartbeat(group_id="classic", member_epoch=3)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group.")
    assert ctx.last_records == []


def test_an_empty_classic_group_becomes_a_consumer_group_and_keeps_its_offsets(ctx: ConsumerGroupTestContext) -> None:
    ids, generation = ctx.stable_group("g", 1)
    ctx.commit_offsets("g", {("foo", 0): 42}, generation_id=generation, member_id=ids[0])
    ctx.leave_group("g", [(ids[0], None)])
    assert ctx.groups["g"].state.value == "Empty"
    r = ctx.cg_heartbeat()
    assert r.error_code == 0
    from protocol.consumer_offsets import GroupMetadataKey
    assert ctx.last_records[0] == (GroupMetadataKey("g"), None)
    assert "g" not in ctx.groups and "g" in ctx.cgroups
    assert ctx.committed("g", "foo", 0) == 42
    reloaded = ctx.reload()
    assert "g" not in reloaded.groups and reloaded.committed("g", "foo", 0) == 42
    assert reloaded.state() == ctx.state()


def test_join_group_on_a_consumer_group(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    # A classic member joins the non-empty consumer group (test_migration.py); the protocol type
    # must be "consumer".
    r = ctx.join_group("g", protocol_type="connect").result()
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL and ctx.last_records == []
    ctx.cg_heartbeat(member_epoch=-1)
    assert ctx.cgroups["g"].state is ConsumerGroupState.EMPTY
    refused = ctx.join_group("g", session_timeout_ms=1).result()
    assert refused.error_code == E.INVALID_SESSION_TIMEOUT and ctx.last_records == [] and "g" in ctx.cgroups
    first = ctx.join_group("g").result()  # an Empty consumer group gives its id to the classic group
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert "g" not in ctx.cgroups and ctx.last_records[-1] == (ConsumerGroupMetadataKey("g"), None)
    ctx.join_group("g", first.member_id)
    assert ctx.groups["g"].state.value == "PreparingRebalance"


# ---------------------------------------------------------------------------------------------
# Flows


def test_first_join(ctx: ConsumerGroupTestContext) -> None:
    foo = ctx.topic_id("foo")
    r = ctx.cg_heartbeat(rack_id="r1")
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 1, 5000)
    assert assignment_of(r, ctx) == {"foo": [0, 1, 2, 3]}
    group = ctx.cgroups["g"]
    assert ctx.last_records == [
        (ConsumerGroupMemberMetadataKey("g", "m1"), member_value(rack_id="r1")),
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(1, group.metadata_hash, NOW)),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m1"),
         ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(foo, (0, 1, 2, 3)),))),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(1)),
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m1"),
         ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, (TopicPartitions(foo, (0, 1, 2, 3), (1, 1, 1, 1)),), ())),
    ]
    assert group.metadata_hash != 0
    assert group.state is ConsumerGroupState.STABLE
    assert ctx.timer.deadline(session_timeout_key("g", "m1")) == NOW + 45_000
    # A steady heartbeat writes nothing and gives no assignment.
    r = ctx.cg_heartbeat(member_epoch=1)
    assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, None) and ctx.last_records == []


def test_second_member_revocation_then_assignment(ctx: ConsumerGroupTestContext) -> None:
    foo = ctx.topic_id("foo")
    ctx.cg_heartbeat()
    r = ctx.cg_heartbeat(member_id="m2")
    # m2 waits for partitions m1 still owns: epoch 2, nothing yet.
    assert (r.member_epoch, assignment_of(r, ctx)) == (2, {})
    assert ctx.last_records[-1] == (ConsumerGroupCurrentMemberAssignmentKey("g", "m2"),
                                    ConsumerGroupCurrentMemberAssignmentValue(2, 0, 2, (), ()))
    assert ctx.cgroups["g"].state is ConsumerGroupState.RECONCILING
    # m1 is asked to revoke 1 and 3 and stays at epoch 1.
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    assert (r.member_epoch, assignment_of(r, ctx)) == (1, {"foo": [0, 2]})
    assert ctx.last_records == [(ConsumerGroupCurrentMemberAssignmentKey("g", "m1"),
                                 ConsumerGroupCurrentMemberAssignmentValue(
                                     1, 0, 1, (TopicPartitions(foo, (0, 2), (1, 1)),), (TopicPartitions(foo, (1, 3)),)))]
    assert ctx.timer.deadline(rebalance_timeout_key("g", "m1")) == NOW + 30_000
    # m2 still cannot have them.
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=2, owned={})
    assert (r.member_epoch, r.assignment) == (2, None) and ctx.last_records == []
    # m1 revoked: epoch 2.
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 2]})
    assert (r.member_epoch, r.assignment) == (2, None)
    assert not ctx.timer.is_scheduled(rebalance_timeout_key("g", "m1"))
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=2, owned={})
    assert (r.member_epoch, assignment_of(r, ctx)) == (2, {"foo": [1, 3]})
    assert ctx.last_records == [(ConsumerGroupCurrentMemberAssignmentKey("g", "m2"),
                                 ConsumerGroupCurrentMemberAssignmentValue(
                                     2, 0, 0, (TopicPartitions(foo, (1, 3), (2, 2)),), ()))]
    assert ctx.cgroups["g"].state is ConsumerGroupState.STABLE
    assert ctx.reload().state() == ctx.state()


def test_leave(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.cg_heartbeat(member_id="m2")
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=-1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "m2", -1)
    group = ctx.cgroups["g"]
    assert ctx.last_records == [
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m2"), None),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m2"), None),
        (ConsumerGroupMemberMetadataKey("g", "m2"), None),
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(3, group.metadata_hash, NOW)),
    ]
    assert not ctx.timer.is_scheduled(session_timeout_key("g", "m2"))
    # m1 had not revoked yet: it keeps everything and moves to epoch 3; its assignment did not
    # change, so none is sent.
    r = ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    assert (r.member_epoch, r.assignment) == (3, None)
    ctx.cg_heartbeat(member_epoch=-1)
    assert ctx.cgroups["g"].state is ConsumerGroupState.EMPTY
    assert ctx.list_groups(types=["consumer"]).groups[0].group_state == "Empty"


def test_static_member_leave_and_rejoin(ctx: ConsumerGroupTestContext) -> None:
    foo = ctx.topic_id("foo")
    ctx.cg_heartbeat(instance_id="i1")
    r = ctx.cg_heartbeat(member_id="m2", instance_id="i1")
    assert r.error_code == E.UNRELEASED_INSTANCE_ID
    assert r.error_message == ("Static member m2 with instance id i1 cannot join the group because the instance id is "
                               "owned by m1 member.")
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=1, instance_id="i1")
    assert (r.error_code, r.error_message) == (E.FENCED_INSTANCE_ID,
                                               "Static member m2 with instance id i1 was fenced by member m1.")
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=1, instance_id="i9")
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")
    assert ctx.last_records == []
    r = ctx.cg_heartbeat(member_epoch=-2, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    assert ctx.last_records == [(ConsumerGroupCurrentMemberAssignmentKey("g", "m1"), ConsumerGroupCurrentMemberAssignmentValue(
        -2, 0, 0, (TopicPartitions(foo, (0, 1, 2, 3), (1, 1, 1, 1)),), ()))]
    # The instance comes back under a new id and takes over without a rebalance.
    r = ctx.cg_heartbeat(member_id="m2", instance_id="i1")
    assert (r.error_code, r.member_epoch, assignment_of(r, ctx)) == (0, 1, {"foo": [0, 1, 2, 3]})
    assert ctx.last_records[:3] == [
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m1"), None),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m1"), None),
        (ConsumerGroupMemberMetadataKey("g", "m1"), None),
    ]
    assert not any(isinstance(k, ConsumerGroupMetadataKey) for k, _ in ctx.last_records)  # no epoch bump
    group = ctx.cgroups["g"]
    assert list(group.members) == ["m2"] and group.static_members == {"i1": "m2"} and group.group_epoch == 1
    assert ctx.reload().state() == ctx.state()


def test_session_timeout_fences(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.cg_heartbeat(member_id="m2")
    ctx.sleep(40_000)
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 2]})
    written = ctx.sleep(6_000)  # m2's session (45 s) expires; m1's was renewed
    assert written[:3] == [(ConsumerGroupCurrentMemberAssignmentKey("g", "m2"), None),
                           (ConsumerGroupTargetAssignmentMemberKey("g", "m2"), None),
                           (ConsumerGroupMemberMetadataKey("g", "m2"), None)]
    assert list(ctx.cgroups["g"].members) == ["m1"] and ctx.cgroups["g"].group_epoch == 3


def test_per_group_session_and_heartbeat_overrides() -> None:
    overrides = {"g": {"consumer.session.timeout.ms": 50_000, "consumer.heartbeat.interval.ms": 7_000}}
    c = ConsumerGroupTestContext(group_configs=lambda g: overrides.get(g, {}))
    c.topics.create("foo", 1)
    assert c.cg_heartbeat().heartbeat_interval_ms == 7_000
    assert c.timer.deadline(session_timeout_key("g", "m1")) == NOW + 50_000


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat(rebalance_timeout_ms=10_000)
    ctx.cg_heartbeat(member_id="m2")
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})  # asked to revoke
    ctx.cg_heartbeat(member_id="m2", member_epoch=2, owned={})
    ctx.sleep(9_000)
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})  # keeps them
    written = ctx.sleep(1_000)
    assert written[0] == (ConsumerGroupCurrentMemberAssignmentKey("g", "m1"), None)
    assert list(ctx.cgroups["g"].members) == ["m2"]
    r = ctx.cg_heartbeat(member_id="m2", member_epoch=2, owned={})
    assert (r.member_epoch, assignment_of(r, ctx)) == (3, {"foo": [0, 1, 2, 3]})
    assert ctx.cg_heartbeat(member_epoch=1).error_code == E.UNKNOWN_MEMBER_ID


def test_new_partitions_bump_the_group_epoch(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    old_hash = ctx.cgroups["g"].metadata_hash
    ctx.topics.put(ctx.topics.get("foo").__class__("foo", ctx.topic_id("foo"), 6))  # type: ignore[union-attr]
    r = ctx.cg_heartbeat(member_epoch=1)
    assert (r.member_epoch, assignment_of(r, ctx)) == (2, {"foo": [0, 1, 2, 3, 4, 5]})
    epoch_record = next(v for k, v in ctx.last_records if isinstance(k, ConsumerGroupMetadataKey))
    assert isinstance(epoch_record, ConsumerGroupMetadataValue)
    assert epoch_record.epoch == 2 and epoch_record.metadata_hash not in (0, old_hash)


def test_unrelated_topic_changes_do_not_bump(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.topics.create("other", 3)
    assert ctx.cg_heartbeat(member_epoch=1).member_epoch == 1 and ctx.last_records == []


@pytest.mark.parametrize("change", ["delete", "recreate", "racks"])
def test_topic_changes_bump_the_group_epoch(ctx: ConsumerGroupTestContext, change: str) -> None:
    ctx.cg_heartbeat()
    if change == "delete":
        ctx.topics.delete("foo")
    elif change == "recreate":
        ctx.topics.delete("foo")
        ctx.topics.create("foo", 4)
    else:
        ctx.topics.create("foo", 4, racks=(("a",), ("b",), ("a",), ("b",)), topic_id=ctx.topic_id("foo"))
    r = ctx.cg_heartbeat(member_epoch=1, owned={} if change != "racks" else {"foo": [0, 1, 2, 3]})
    assert r.error_code == 0
    assert ctx.cgroups["g"].group_epoch == 2
    expected = {} if change == "delete" else {"foo": [0, 1, 2, 3]}
    assert sorted(ctx.cgroups["g"].target["m1"].values(), key=sorted) == \
        [frozenset(v) for v in expected.values()]


def test_assignment_batching(ctx: ConsumerGroupTestContext) -> None:
    """KIP-1263: at most one target assignment per consumer.assignment.interval.ms; meanwhile
    members reconcile to the old target."""
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=1_000), topics=ctx.topics)
    c.cg_heartbeat()
    r = c.cg_heartbeat(member_id="m2")
    group = c.cgroups["g"]
    assert (group.group_epoch, group.assignment_epoch, r.member_epoch) == (2, 1, 1)
    assert group.state is ConsumerGroupState.ASSIGNING
    assert not any(isinstance(k, ConsumerGroupTargetAssignmentMetadataKey) for k, _ in c.last_records)
    c.sleep(1_000)
    r = c.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    assert group.assignment_epoch == 2 and assignment_of(r, c) == {"foo": [0, 2]}


def test_subscription_change(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    r = ctx.cg_heartbeat(member_epoch=1, topics=["foo", "bar"])
    assert r.member_epoch == 2 and assignment_of(r, ctx) == {"foo": [0, 1, 2, 3], "bar": [0, 1]}
    assert ctx.last_records[0] == (ConsumerGroupMemberMetadataKey("g", "m1"), member_value(("foo", "bar")))


def test_regex_subscription_uses_the_resolver() -> None:
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0),
                                 regex_resolver=lambda p, names: frozenset(n for n in names if n.startswith("fo")))
    c.topics.create("foo", 2)
    c.topics.create("bar", 2)
    r = c.cg_heartbeat(regex="fo.*", topics=None)
    # A regex new to the group is resolved by its own operation just after the heartbeat that
    # brought it (Kafka's maybeUpdateRegularExpressions), which bumps the group epoch.
    assert assignment_of(r, c) == {} and "fo.*" not in c.cgroups["g"].regexes
    written = c.sleep(1)
    assert (ConsumerGroupRegularExpressionKey("g", "fo.*") in [k for k, _ in written]
            and c.cgroups["g"].regexes["fo.*"].topics == ("foo",) and c.cgroups["g"].group_epoch == 2)
    r = c.cg_heartbeat(member_epoch=1)
    assert r.member_epoch == 2 and assignment_of(r, c) == {"foo": [0, 1]}
    # A topic created later is picked up at the next heartbeat (the topics image moved).
    c.topics.create("fox", 1)
    r = c.cg_heartbeat(member_epoch=2)
    assert assignment_of(r, c) == {"foo": [0, 1], "fox": [0]}
    assert c.reload().state() == c.state()
    c.cg_heartbeat(member_epoch=-1)
    assert c.cgroups["g"].regexes == {}


def test_load_rearms_timers(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    ctx.cg_heartbeat(member_id="m2")
    ctx.cg_heartbeat(member_epoch=1, owned={"foo": [0, 1, 2, 3]})
    reloaded = ctx.reload()
    assert reloaded.timer.is_scheduled(session_timeout_key("g", "m1"))
    assert reloaded.timer.is_scheduled(session_timeout_key("g", "m2"))
    assert reloaded.timer.is_scheduled(rebalance_timeout_key("g", "m1"))
    assert reloaded.cgroups["g"].members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # A heartbeat after the load writes nothing new when nothing changed.
    assert reloaded.cg_heartbeat(member_id="m2", member_epoch=2).error_code == 0
    assert reloaded.last_records == []


def test_heartbeats_move_the_session_deadline_without_timer_churn(ctx: ConsumerGroupTestContext) -> None:
    ctx.cg_heartbeat()
    calls = ctx.timer.schedule_calls
    for _ in range(60):  # every 5 s (the heartbeat interval) for 5 minutes
        ctx.sleep(5_000)
        assert ctx.cg_heartbeat(member_epoch=1).error_code == 0
    # A re-arm each time the timer fired early (about every 40 s), none per heartbeat.
    assert ctx.timer.schedule_calls - calls <= 8
    assert ctx.shard.consumer_manager.session_deadlines[("g", "m1")] == ctx.clock.now + 45_000
    written = ctx.sleep(45_000)
    assert written[0] == (ConsumerGroupCurrentMemberAssignmentKey("g", "m1"), None)
    assert ctx.shard.consumer_manager.session_deadlines == {}


def test_an_assignor_failure_answers_unknown_server_error_and_changes_nothing() -> None:
    from tests.coordinator.group.consumer.context import RoundRobinAssignor

    class Flaky(RoundRobinAssignor):
        broken = False

        def assign(self, group, topics):  # type: ignore[no-untyped-def]
            if self.broken:
                raise RuntimeError("boom")
            return super().assign(group, topics)

    flaky = Flaky("uniform")
    c = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0), assignors={"uniform": flaky})
    c.topics.create("foo", 2)
    c.cg_heartbeat()
    c.topics.create("foo", 3, topic_id=c.topic_id("foo"))
    flaky.broken = True
    r = c.cg_heartbeat(member_epoch=1)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_SERVER_ERROR,
                                               "Failed to compute a new target assignment for epoch 2: boom")
    assert c.last_records == [] and c.cgroups["g"].group_epoch == 1
    flaky.broken = False  # the next heartbeat still sees the topic change
    r = c.cg_heartbeat(member_epoch=1)
    assert (r.member_epoch, assignment_of(r, c)) == (2, {"foo": [0, 1, 2]})


def test_missing_assignor_package() -> None:
    c = ConsumerGroupTestContext(assignors={})
    c.topics.create("foo", 1)
    r = c.cg_heartbeat()
    assert r.error_code == E.UNKNOWN_SERVER_ERROR and c.last_records == [] and c.cgroups == {}


def test_a_regex_the_resolver_refuses() -> None:
    def resolve(pattern: str, names: object) -> frozenset[str]:
        raise ValueError(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression.")

    c = ConsumerGroupTestContext(regex_resolver=resolve)
    r = c.cg_heartbeat(regex="(", topics=None)
    assert (r.error_code, r.error_message) == (128, "SubscribedTopicRegex `(` is not a valid regular expression.")
    assert c.last_records == [] and c.cgroups == {}
