"""The shard hands members' instance ids to the assignor: with the range assignor, static members
restarted under new member ids keep their ranges when the group next rebalances (Kafka's
RangeAssignor orders static members by instance id)."""

from __future__ import annotations

from coordinator.group.assignors import ASSIGNORS
from coordinator.group.config import GroupConfig
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext


def test_a_rolling_restart_of_static_members_keeps_their_ranges() -> None:
    ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0), assignors=dict(ASSIGNORS))
    ctx.topics.create("foo", 4)
    foo = ctx.topic_id("foo")
    ctx.cg_heartbeat(member_id="m1", instance_id="i0", assignor="range")
    ctx.cg_heartbeat(member_id="m2", instance_id="i1", assignor="range")
    group = ctx.cgroups["g"]
    assert group.target == {"m1": {foo: frozenset({0, 1})}, "m2": {foo: frozenset({2, 3})}}
    # Both restart and come back under new member ids, now in the other order.
    for old, new, instance in (("m1", "z1", "i0"), ("m2", "a2", "i1")):
        assert ctx.cg_heartbeat(member_id=old, member_epoch=-2, instance_id=instance).error_code == 0
        assert ctx.cg_heartbeat(member_id=new, instance_id=instance, assignor="range").error_code == 0
    assert group.target == {"z1": {foo: frozenset({0, 1})}, "a2": {foo: frozenset({2, 3})}}
    # A dynamic member whose id sorts first joins: the static members still come first, in
    # instance id order, so each keeps the start of its range (by member id, z1 would lose all).
    ctx.cg_heartbeat(member_id="0dyn", assignor="range")
    assert group.target == {"z1": {foo: frozenset({0, 1})}, "a2": {foo: frozenset({2})}, "0dyn": {foo: frozenset({3})}}
