"""The expiry the view reports is the expiry the server performs (KIP-211): for each kind of
offset, the deadline ``StateView`` shows is the first moment the shard's expiry operation
tombstones it — a millisecond before, it keeps it. Pure: a shard driven by the group tests'
context, read through the view."""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from coordinator.group.offset_manager import OffsetManager
from coordinator.ops.state_view import StateView
from coordinator.runtime.errors import CoordinatorState
from protocol.consumer_offsets import OffsetCommitKey
from tests.coordinator.group.group_test_context import GroupTestContext

RETENTION = GroupConfig().offsets_retention_ms


class OneShard:
    """The runtime as the view reads it: one active partition, the context's shard."""

    topic = "__consumer_offsets"
    load_seconds: dict[int, float] = {}

    def __init__(self, ctx: GroupTestContext) -> None:
        self.ctx = ctx

    def hosted(self) -> list[tuple[int, CoordinatorState, object]]:
        return [(0, CoordinatorState.ACTIVE, self.ctx.shard)]


def view_of(ctx: GroupTestContext) -> StateView:
    return StateView(runtime=OneShard(ctx), logs=None)  # type: ignore[arg-type]


def expired_at(ctx: GroupTestContext, group_id: str, now_ms: int) -> set[tuple[str, int]]:
    """What the expiry operation would tombstone at ``now_ms``."""
    manager: OffsetManager = ctx.shard.offset_manager
    if group_id in ctx.shard.consumer_manager.groups:
        # The shard's whole expiry operation (it skips consumer groups that have members); its
        # records are looked at, not applied, and it changes nothing of a consumer group.
        saved, ctx.clock.now = ctx.clock.now, now_ms
        try:
            records = list(ctx.shard.cleanup_group_metadata().records)
        finally:
            ctx.clock.now = saved
    else:
        # What the operation runs for a classic group (without its soft-state cleanup).
        records, _ = manager.expired_offset_tombstones(ctx.shard.group_manager.groups[group_id], now_ms)
    return {(key.topic, key.partition) for key, _value in records
            if isinstance(key, OffsetCommitKey) and key.group == group_id}


def assert_reported_is_performed(ctx: GroupTestContext, group_id: str) -> dict[tuple[str, int], int | None]:
    group = view_of(ctx).group(group_id)
    assert group is not None
    deadlines = {tp: c.expires_at_ms for tp, c in group.offsets.items()}
    for tp, deadline in deadlines.items():
        if deadline is None:
            assert tp not in expired_at(ctx, group_id, ctx.clock.now + 100 * RETENTION)
        else:
            assert tp not in expired_at(ctx, group_id, deadline - 1)
            assert tp in expired_at(ctx, group_id, deadline)
    return deadlines


def test_a_simple_groups_offsets_expire_a_retention_after_each_commit() -> None:
    ctx = GroupTestContext()
    start = ctx.clock.now
    ctx.commit_offsets("s", {("foo", 0): 1})
    ctx.clock.now += 5_000
    ctx.commit_offsets("s", {("foo", 1): 1})
    assert assert_reported_is_performed(ctx, "s") == {("foo", 0): start + RETENTION,
                                                     ("foo", 1): start + 5_000 + RETENTION}


def test_a_legacy_retention_time_is_the_deadline() -> None:
    ctx = GroupTestContext()
    start = ctx.clock.now
    ctx.commit_offsets("s", {("foo", 0): 1}, retention_time_ms=1000, version=4)
    assert assert_reported_is_performed(ctx, "s") == {("foo", 0): start + 1000}


def test_a_stable_group_keeps_its_subscribed_topics_and_an_empty_one_counts_from_emptiness() -> None:
    ctx = GroupTestContext()
    members, generation = ctx.stable_group("g", 1, topics=("foo",))
    committed_at = ctx.clock.now
    ctx.commit_offsets("g", {("foo", 0): 1, ("bar", 0): 1}, generation_id=generation, member_id=members[0])
    # Stable: foo is subscribed (kept); bar is not, a retention after its commit.
    assert assert_reported_is_performed(ctx, "g") == {("foo", 0): None, ("bar", 0): committed_at + RETENTION}
    ctx.clock.now += 60_000
    ctx.leave_group("g", [(members[0], None)])
    became_empty = ctx.group("g").state_timestamp_ms
    assert ctx.group("g").state.value == "Empty"
    assert assert_reported_is_performed(ctx, "g") == {("foo", 0): became_empty + RETENTION,
                                                     ("bar", 0): became_empty + RETENTION}


def test_an_offset_held_by_an_open_transaction_does_not_expire() -> None:
    ctx = GroupTestContext()
    start = ctx.clock.now
    ctx.commit_offsets("s", {("foo", 0): 1, ("foo", 1): 1})
    ctx.txn_commit_offsets("s", {("foo", 1): 2})
    assert assert_reported_is_performed(ctx, "s") == {("foo", 0): start + RETENTION, ("foo", 1): None}
    ctx.end_transaction(1000, commit=True)
    assert view_of(ctx).group("s").offsets[("foo", 1)].expires_at_ms == start + RETENTION  # type: ignore[union-attr]


def test_a_consumer_groups_offsets_expire_only_once_it_is_empty() -> None:
    from tests.coordinator.group.consumer.context import ConsumerGroupTestContext

    ctx = ConsumerGroupTestContext()
    ctx.topics.create("foo", 2)
    joined = ctx.cg_heartbeat(member_epoch=0)
    assert joined.error_code == 0, joined
    committed_at = ctx.clock.now
    ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=joined.member_epoch, member_id="m1", version=9)
    group = view_of(ctx).group("g")
    assert group is not None and (group.type, group.state != "Empty") == ("consumer", True)
    # A member: the expiry operation leaves the group's offsets alone.
    assert assert_reported_is_performed(ctx, "g") == {("foo", 0): None}
    ctx.clock.now += 60_000
    ctx.cg_heartbeat(member_epoch=-1)
    assert view_of(ctx).group("g").state == "Empty"  # type: ignore[union-attr]
    # Empty: a retention after the commit (Kafka's ConsumerGroup.offsetExpirationCondition).
    assert assert_reported_is_performed(ctx, "g") == {("foo", 0): committed_at + RETENTION}
