"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiry (KIP-211)."""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import OffsetCommitValue
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, group_key, offset_key

DAY = 24 * 60 * 60 * 1000


def errors(response: object) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


# --- commit ----------------------------------------------------------------------------------


def test_simple_consumer_commit_creates_an_empty_group_and_writes_records() -> None:
    ctx = GroupTestContext()
    response = ctx.commit_offsets("g", {("foo", 0): (10, "meta", 3), ("foo", 1): 20})
    assert errors(response) == {("foo", 0): E.NONE, ("foo", 1): E.NONE}
    now = ctx.clock.now
    assert ctx.last_records == [
        (offset_key("g", "foo", 0), OffsetCommitValue(offset=10, metadata="meta", commit_timestamp=now, leader_epoch=3)),
        (offset_key("g", "foo", 1), OffsetCommitValue(offset=20, metadata="", commit_timestamp=now, leader_epoch=-1)),
    ]
    assert ctx.group("g").state is GroupState.EMPTY and ctx.group("g").protocol_type is None


def test_fetch_returns_committed_offset_metadata_and_leader_epoch() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): (10, "meta", 3)})
    part = ctx.fetch_offsets("g", {"foo": [0, 1]}).topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
            for p in part] == [(0, 10, 3, "meta", 0), (1, -1, -1, "", 0)]
    v4 = ctx.fetch_offsets("g", {"foo": [0]}, version=4).topics[0].partitions[0]
    assert v4.committed_leader_epoch == -1  # no leader epoch before v5


def test_fetch_of_unknown_group_gives_minus_one_and_no_error() -> None:
    ctx = GroupTestContext()
    response = ctx.fetch_offsets("nobody", {"foo": [0]}, version=7, require_stable=True)
    assert response.error_code == E.NONE
    p = response.topics[0].partitions[0]
    assert (p.committed_offset, p.metadata, p.error_code) == (-1, "", E.NONE)
    assert ctx.fetch_offsets("nobody", None).topics == []


def test_fetch_all_and_v8_multi_group() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 1): 11, ("bar", 0): 5, ("foo", 0): 10})
    everything = ctx.fetch_offsets("g", None, version=6)
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in everything.topics] == [
        ("bar", [(0, 5)]), ("foo", [(0, 10), (1, 11)])]
    v8 = ctx.fetch_offsets("g", {"foo": [1]}, version=9)
    group = v8.groups[0]
    assert group.group_id == "g" and group.error_code == 0
    assert group.topics[0].partitions[0].committed_offset == 11
    v8.encode(version=9)  # the answer encodes at the version it is asked for


def test_commit_to_unknown_group_with_a_generation() -> None:
    ctx = GroupTestContext()
    assert errors(ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=1, member_id="m", version=8)) == {
        ("foo", 0): E.ILLEGAL_GENERATION}
    assert errors(ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=1, member_id="m", version=9)) == {
        ("foo", 0): E.GROUP_ID_NOT_FOUND}
    assert "g" not in ctx.groups and ctx.log == []


def test_unknown_partition_is_unknown_topic_or_partition_and_others_are_written() -> None:
    ctx = GroupTestContext(partition_exists=lambda topic, partition: topic == "foo")
    response = ctx.commit_offsets("g", {("foo", 0): 1, ("gone", 0): 2})
    assert errors(response) == {("foo", 0): E.NONE, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert [k for k, _ in ctx.last_records] == [offset_key("g", "foo", 0)]


def test_metadata_too_large_fails_only_that_partition() -> None:
    ctx = GroupTestContext(GroupConfig(offset_metadata_max_bytes=4))
    response = ctx.commit_offsets("g", {("foo", 0): (1, "abcd", -1), ("foo", 1): (2, "abcde", -1),
                                        ("foo", 2): (3, "😀😀", -1), ("foo", 3): (4, "😀😀x", -1)})
    assert errors(response) == {("foo", 0): E.NONE, ("foo", 1): E.OFFSET_METADATA_TOO_LARGE,
                                ("foo", 2): E.NONE, ("foo", 3): E.OFFSET_METADATA_TOO_LARGE}
    assert [k.partition for k, _ in ctx.last_records] == [0, 2]


def test_null_metadata_is_stored_as_empty() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): (1, None, -1)})
    assert ctx.last_records[0][1].metadata == ""


def test_legacy_retention_time_sets_an_expire_timestamp() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1}, retention_time_ms=1000, version=4)
    assert ctx.last_records[0][1].expire_timestamp == ctx.clock.now + 1000
    ctx.commit_offsets("g", {("foo", 0): 1}, retention_time_ms=1000, version=5)
    assert ctx.last_records[0][1].expire_timestamp is None


def test_member_commits_per_state() -> None:
    ctx = GroupTestContext()
    a, fa = ctx.join_new_member("g")
    b, fb = ctx.join_new_member("g")
    ctx.sleep(6_000)
    generation = fa.result().generation_id
    leader = fa.result().leader
    follower = b if leader == a else a
    # CompletingRebalance: REBALANCE_IN_PROGRESS
    assert errors(ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id=leader)) == {
        ("foo", 0): E.REBALANCE_IN_PROGRESS}
    ctx.sync_group("g", follower, generation)
    ctx.sync_group("g", leader, generation, assignments={})
    # Stable: accepted, and the session restarts.
    ctx.sleep(9_000)
    assert errors(ctx.commit_offsets("g", {("foo", 0): 2}, generation_id=generation, member_id=leader)) == {
        ("foo", 0): E.NONE}
    assert ctx.group("g").members[leader].deadline_ms == ctx.clock.now + 10_000
    # Wrong generation / unknown member / simple consumer while not Empty.
    assert errors(ctx.commit_offsets("g", {("foo", 0): 3}, generation_id=generation + 1, member_id=leader)) == {
        ("foo", 0): E.ILLEGAL_GENERATION}
    assert errors(ctx.commit_offsets("g", {("foo", 0): 3}, generation_id=generation, member_id="x")) == {
        ("foo", 0): E.UNKNOWN_MEMBER_ID}
    assert errors(ctx.commit_offsets("g", {("foo", 0): 3})) == {("foo", 0): E.UNKNOWN_MEMBER_ID}
    # PreparingRebalance: the previous generation may still commit.
    ctx.join_group("g", leader)
    assert errors(ctx.commit_offsets("g", {("foo", 0): 4}, generation_id=generation, member_id=follower)) == {
        ("foo", 0): E.NONE}
    assert ctx.committed("g", "foo", 0) == 4


def test_member_commit_to_empty_group_is_unknown_member_id() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1})
    assert errors(ctx.commit_offsets("g", {("foo", 0): 2}, generation_id=0, member_id="m")) == {
        ("foo", 0): E.UNKNOWN_MEMBER_ID}


def test_commit_is_returned_until_overwritten() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1})
    assert ctx.committed("g", "foo", 0) == 1
    ctx.commit_offsets("g", {("foo", 0): 7})
    assert ctx.committed("g", "foo", 0) == 7


# --- delete ----------------------------------------------------------------------------------


def test_offset_delete_errors_and_tombstones() -> None:
    ctx = GroupTestContext()
    assert ctx.delete_offsets("nobody", {"foo": [0]}).error_code == E.GROUP_ID_NOT_FOUND
    ctx.commit_offsets("g", {("foo", 0): 1, ("bar", 0): 2})
    response = ctx.delete_offsets("g", {"foo": [0, 1]})
    assert response.error_code == E.NONE
    assert errors(response) == {("foo", 0): E.NONE, ("foo", 1): E.NONE}
    assert ctx.last_records == [(offset_key("g", "foo", 0), None)]  # only what existed
    assert ctx.committed("g", "foo", 0) == -1 and ctx.committed("g", "bar", 0) == 2


def test_offset_delete_of_a_topic_a_consumer_group_subscribes_to() -> None:
    ctx = GroupTestContext()
    ids, generation = ctx.stable_group("g", 1, topics=("foo",))
    ctx.commit_offsets("g", {("foo", 0): 1, ("bar", 0): 2}, generation_id=generation, member_id=ids[0])
    response = ctx.delete_offsets("g", {"foo": [0], "bar": [0]})
    assert response.error_code == E.NONE
    assert errors(response) == {("foo", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("bar", 0): E.NONE}
    assert ctx.last_records == [(offset_key("g", "bar", 0), None)]


def test_offset_delete_on_non_empty_non_consumer_group_is_non_empty_group() -> None:
    ctx = GroupTestContext()
    ctx.join_new_member("g", protocol_type="connect")
    assert ctx.delete_offsets("g", {"foo": [0]}).error_code == E.NON_EMPTY_GROUP


def test_unparseable_subscription_counts_as_subscribed_to_everything() -> None:
    ctx = GroupTestContext()
    ctx.join_new_member("g", protocols=[("range", b"\x00")])
    ctx.sleep(3_000)
    assert errors(ctx.delete_offsets("g", {"anything": [0]})) == {("anything", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}


# --- expiry ----------------------------------------------------------------------------------


def test_simple_group_offsets_expire_from_their_commit_time_and_the_group_dies() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY))
    ctx.commit_offsets("g", {("foo", 0): 1})
    ctx.sleep(DAY // 2)
    ctx.commit_offsets("g", {("foo", 1): 1})
    written = ctx.sleep(DAY // 2 + 600_000)
    assert written == [(offset_key("g", "foo", 0), None)]
    written = ctx.sleep(DAY // 2)
    assert written == [(offset_key("g", "foo", 1), None), (group_key("g"), None)]
    assert "g" not in ctx.groups


def test_kip211_offsets_of_an_active_group_do_not_expire() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY))
    ids, generation = ctx.stable_group("g", 1)
    ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id=ids[0])
    for _ in range(60):  # two days of heartbeats, no commits
        for _ in range(100):
            ctx.sleep(8_000)
            ctx.heartbeat("g", ids[0], generation)
    assert ctx.committed("g", "foo", 0) == 1


def test_kip211_offsets_expire_retention_after_the_group_became_empty() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY))
    ids, generation = ctx.stable_group("g", 1)
    ctx.commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id=ids[0])
    ctx.sleep(5_000)
    ctx.leave_group("g", [(ids[0], None)])
    emptied = ctx.clock.now
    assert ctx.group("g").state is GroupState.EMPTY
    ctx.sleep(DAY - 600_000)
    assert ctx.committed("g", "foo", 0) == 1
    written = ctx.sleep(1_200_000)
    assert written == [(offset_key("g", "foo", 0), None), (group_key("g"), None)]
    assert ctx.clock.now - emptied >= DAY


def test_stable_consumer_group_expires_only_topics_no_longer_subscribed() -> None:
    hour = 3_600_000
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=hour))
    ids, generation = ctx.stable_group("g", 1, topics=("foo",))
    ctx.commit_offsets("g", {("foo", 0): 1, ("old", 0): 2}, generation_id=generation, member_id=ids[0])
    written = []
    for _ in range(600):  # 80 minutes of heartbeats
        written += ctx.sleep(8_000)
        ctx.heartbeat("g", ids[0], generation)
    assert written == [(offset_key("g", "old", 0), None)]
    assert ctx.committed("g", "foo", 0) == 1 and ctx.group("g").state is GroupState.STABLE


def test_legacy_expire_timestamp_wins() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY))
    ctx.commit_offsets("g", {("foo", 0): 1}, retention_time_ms=1_000, version=2)
    written = ctx.sleep(600_000)
    assert written == [(offset_key("g", "foo", 0), None), (group_key("g"), None)]


def test_nothing_expires_while_rebalancing() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=1_000))
    ids, generation = ctx.stable_group("g", 1, topics=("foo",), session_timeout_ms=1_000_000,
                                       rebalance_timeout_ms=1_000_000)
    ctx.commit_offsets("g", {("old", 0): 1}, generation_id=generation, member_id=ids[0])
    ctx.join_group("g", ctx.shard.group_manager.groups["g"].leader_id, session_timeout_ms=1_000_000,
                   rebalance_timeout_ms=1_000_000)
    ctx.join_new_member("g", session_timeout_ms=1_000_000, rebalance_timeout_ms=1_000_000)
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    ctx.sleep(600_000)
    assert ctx.committed("g", "old", 0) == 1


def test_empty_consumer_group_without_offsets_dies_at_the_next_check() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY))
    ids, generation = ctx.stable_group("g", 1)
    ctx.leave_group("g", [(ids[0], None)])
    written = ctx.sleep(600_000)
    assert written == [(group_key("g"), None)]
    assert "g" not in ctx.groups and "g" not in ctx.shard.group_manager.group_records
    assert ctx.reload().shard.hard_state() == ctx.shard.hard_state()


def test_offsets_of_a_group_that_has_members_again_stop_expiring() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=1_200_000))
    ctx.commit_offsets("g", {("foo", 0): 1})
    ids, generation = ctx.stable_group("g", 1)  # the simple group gets a consumer
    for _ in range(300):
        ctx.sleep(8_000)
        ctx.heartbeat("g", ids[0], generation)
    assert ctx.committed("g", "foo", 0) == 1


def test_deleted_topics_lose_their_offsets_in_every_group() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("a", {("gone", 0): 1, ("kept", 0): 2})
    ctx.commit_offsets("b", {("gone", 3): 1})
    ctx._apply(ctx.shard.on_topics_deleted({"gone"}))
    assert ctx.last_records == [(offset_key("a", "gone", 0), None), (offset_key("b", "gone", 3), None)]
    assert ctx.committed("a", "kept", 0) == 2 and ctx.committed("b", "gone", 3) == -1
