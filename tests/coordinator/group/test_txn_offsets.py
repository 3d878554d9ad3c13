"""TxnOffsetCommit (KIP-98, KIP-447) and the transaction markers on ``__consumer_offsets``: the
checks, the records (a transactional batch of the producer), pending offsets invisible until the
COMMIT marker, RequireStable, the last log position winning, expiry and deletion, and reloads."""

from __future__ import annotations

from typing import Any

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from protocol.consumer_offsets import OffsetCommitValue
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext

from .group_test_context import GroupTestContext, group_key, offset_key
from .test_static_membership import static_group

DAY = 24 * 60 * 60 * 1000
PID, OTHER = 1000, 2000


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetched(ctx: GroupTestContext, group_id: str, partitions: list[int], *, stable: bool = False,
            version: int = 7) -> list[tuple[int, int]]:
    """(committed offset, error) per partition of topic foo."""
    response = ctx.fetch_offsets(group_id, {"foo": partitions}, version=version, require_stable=stable)
    topics = response.groups[0].topics if version >= 8 else response.topics
    return [(p.committed_offset, p.error_code) for p in topics[0].partitions]


# --- records and visibility ------------------------------------------------------------------------


def test_a_txn_commit_writes_a_transactional_batch_and_stays_pending_until_the_commit_marker() -> None:
    ctx = GroupTestContext()
    response = ctx.txn_commit_offsets("g", {("foo", 0): (10, "meta", 3), ("foo", 1): 20}, producer_epoch=4)
    assert errors(response) == {("foo", 0): E.NONE, ("foo", 1): E.NONE}
    now = ctx.clock.now
    assert ctx.last_records == [
        (offset_key("g", "foo", 0), OffsetCommitValue(10, "meta", now, 3)),
        (offset_key("g", "foo", 1), OffsetCommitValue(20, "", now, -1)),
    ]
    # Both records carry the producer (the runtime writes them in its transactional batch).
    assert [e[:3] for e in ctx.entries] == [("record", PID, 4), ("record", PID, 4)]
    assert ctx.group("g").state is GroupState.EMPTY  # a simple group (KIP-447)
    assert fetched(ctx, "g", [0, 1]) == [(-1, E.NONE), (-1, E.NONE)]
    assert fetched(ctx, "g", [0, 1, 2], stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT),
                                                         (-1, E.UNSTABLE_OFFSET_COMMIT), (-1, E.NONE)]
    assert fetched(ctx, "g", [0], stable=True, version=8) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]
    ctx.end_transaction(PID, commit=True, producer_epoch=4)
    assert fetched(ctx, "g", [0, 1], stable=True) == [(10, E.NONE), (20, E.NONE)]
    assert ctx.shard.pending_state() == {}


def test_an_abort_marker_drops_the_pending_offsets_and_keeps_the_committed_ones() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 5})
    ctx.txn_commit_offsets("g", {("foo", 0): 9})
    assert fetched(ctx, "g", [0]) == [(5, E.NONE)]
    assert fetched(ctx, "g", [0], stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]
    ctx.end_transaction(PID, commit=False)
    assert fetched(ctx, "g", [0], stable=True) == [(5, E.NONE)]
    assert ctx.shard.offset_manager.open_by_group == {}


def test_the_last_log_position_wins_between_plain_and_transactional_commits() -> None:
    ctx = GroupTestContext()
    ctx.txn_commit_offsets("g", {("foo", 0): 5, ("foo", 1): 5})
    ctx.commit_offsets("g", {("foo", 0): 7})  # after the pending offset in the log
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0, 1]) == [(7, E.NONE), (5, E.NONE)]
    # A pending offset written after a plain commit wins at its COMMIT.
    ctx.commit_offsets("g", {("foo", 0): 8})
    ctx.txn_commit_offsets("g", {("foo", 0): 3})
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0]) == [(3, E.NONE)]


def test_of_two_transactions_the_later_record_wins_whatever_the_order_of_their_markers() -> None:
    ctx = GroupTestContext()
    ctx.txn_commit_offsets("g", {("foo", 0): 1}, producer_id=PID)
    ctx.txn_commit_offsets("g", {("foo", 0): 2}, producer_id=OTHER)
    ctx.end_transaction(OTHER, commit=True)
    assert fetched(ctx, "g", [0], stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]  # PID's is still open
    ctx.end_transaction(PID, commit=True)  # its record is older than OTHER's: not stored
    assert fetched(ctx, "g", [0], stable=True) == [(2, E.NONE)]
    assert ctx.reload().shard.hard_state() == ctx.shard.hard_state()


def test_a_tombstone_drops_the_pending_offsets_of_its_partition() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 5})
    ctx.txn_commit_offsets("g", {("foo", 0): 6, ("foo", 1): 6})
    assert errors(ctx.delete_offsets("g", {"foo": [0]})) == {("foo", 0): E.NONE}
    assert ctx.last_records == [(offset_key("g", "foo", 0), None)]
    assert fetched(ctx, "g", [0, 1], stable=True) == [(-1, E.NONE), (-1, E.UNSTABLE_OFFSET_COMMIT)]
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0, 1]) == [(-1, E.NONE), (6, E.NONE)]


def test_offset_delete_tombstones_a_partition_with_only_a_pending_offset() -> None:
    ctx = GroupTestContext()
    ctx.txn_commit_offsets("g", {("foo", 0): 6})
    assert errors(ctx.delete_offsets("g", {"foo": [0, 1]})) == {("foo", 0): E.NONE, ("foo", 1): E.NONE}
    assert ctx.last_records == [(offset_key("g", "foo", 0), None)]
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0], stable=True) == [(-1, E.NONE)]


def test_a_marker_of_a_producer_without_pending_offsets_changes_nothing() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 5})
    before = ctx.shard.hard_state()
    ctx.end_transaction(OTHER, commit=True)
    ctx.end_transaction(OTHER, commit=False)
    assert ctx.shard.hard_state() == before


def test_pending_offsets_survive_a_reload_and_a_later_marker_completes_them() -> None:
    ctx = GroupTestContext()
    ctx.txn_commit_offsets("g", {("foo", 0): 5})
    ctx.txn_commit_offsets("h", {("foo", 0): 6}, producer_id=OTHER)
    reloaded = ctx.reload()
    assert reloaded.shard.pending_state() == ctx.shard.pending_state()
    assert reloaded.group("g").state is GroupState.EMPTY  # the group of pending-only offsets
    assert fetched(reloaded, "g", [0], stable=True) == [(-1, E.UNSTABLE_OFFSET_COMMIT)]
    reloaded.end_transaction(PID, commit=True)
    reloaded.end_transaction(OTHER, commit=False)
    assert fetched(reloaded, "g", [0], stable=True) == [(5, E.NONE)]
    assert fetched(reloaded, "h", [0], stable=True) == [(-1, E.NONE)]


# --- checks (KIP-447) ------------------------------------------------------------------------------


def test_an_unknown_group_accepts_generation_minus_one_only() -> None:
    ctx = GroupTestContext()
    assert errors(ctx.txn_commit_offsets("g", {("foo", 0): 1}, generation_id=3, member_id="m")) == {
        ("foo", 0): E.ILLEGAL_GENERATION}
    assert ctx.last_records == [] and "g" not in ctx.groups
    assert errors(ctx.txn_commit_offsets("g", {("foo", 0): 1})) == {("foo", 0): E.NONE}


def test_member_and_generation_checks_of_a_classic_group() -> None:
    ctx = GroupTestContext()
    (leader, _other), generation = ctx.stable_group("g", 2)

    def commit(**kwargs: Any) -> int:
        return errors(ctx.txn_commit_offsets("g", {("foo", 0): 1}, **kwargs))[("foo", 0)]

    assert commit(generation_id=generation, member_id=leader) == E.NONE
    assert commit(generation_id=generation + 1, member_id=leader) == E.ILLEGAL_GENERATION
    assert commit(generation_id=generation, member_id="nobody") == E.UNKNOWN_MEMBER_ID
    # Unlike OffsetCommit: an anonymous commit to a live group goes through (KIP-447 producers
    # before v3 send no member), and so does a commit while the group rebalances.
    assert commit() == E.NONE
    assert commit(version=2) == E.NONE
    ctx.join_new_member("g")  # a new member: PreparingRebalance
    assert ctx.group("g").state is GroupState.PREPARING_REBALANCE
    assert commit(generation_id=generation, member_id=leader) == E.NONE


def test_a_static_member_with_another_member_id_is_fenced() -> None:
    ctx = GroupTestContext()
    ids, generation = static_group(ctx, "i1")
    result = ctx.txn_commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id="stale",
                                    group_instance_id="i1")
    assert errors(result) == {("foo", 0): E.FENCED_INSTANCE_ID}
    result = ctx.txn_commit_offsets("g", {("foo", 0): 1}, generation_id=generation, member_id=ids["i1"],
                                    group_instance_id="i1")
    assert errors(result) == {("foo", 0): E.NONE}


def test_a_consumer_group_checks_member_epochs_and_answers_illegal_generation_for_a_stale_one() -> None:
    ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0))
    ctx.topics.create("foo", 4)
    ctx.cg_heartbeat("g", "m1", 0)
    ctx.cg_heartbeat("g", "m1", 1, owned={"foo": [0, 1, 2, 3]})

    def commit(epoch: int, member_id: str = "m1") -> int:
        return errors(ctx.txn_commit_offsets("g", {("foo", 0): 7}, generation_id=epoch, member_id=member_id))[("foo", 0)]

    assert commit(1) == E.NONE
    assert commit(2) == E.ILLEGAL_GENERATION  # STALE_MEMBER_EPOCH before TxnOffsetCommit v6
    assert commit(1, member_id="m9") == E.UNKNOWN_MEMBER_ID
    ctx.end_transaction(PID, commit=True)
    assert ctx.committed("g", "foo", 0) == 7


def test_metadata_too_large_and_unknown_partitions_fail_alone() -> None:
    ctx = GroupTestContext(GroupConfig(offset_metadata_max_bytes=4), partition_exists=lambda t, p: p < 2)
    result = ctx.txn_commit_offsets("g", {("foo", 0): (1, "12345", -1), ("foo", 1): (2, "1234", -1), ("foo", 5): 3})
    assert errors(result) == {("foo", 0): E.OFFSET_METADATA_TOO_LARGE, ("foo", 1): E.NONE,
                              ("foo", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert [k for k, _v in ctx.last_records] == [offset_key("g", "foo", 1)]


def test_leader_epoch_is_kept_from_v2_on() -> None:
    ctx = GroupTestContext()
    ctx.txn_commit_offsets("g", {("foo", 0): (1, "", 7)}, version=1)
    ctx.txn_commit_offsets("g", {("foo", 1): (1, "", 7)}, version=2)
    assert [v.leader_epoch for _k, v in ctx.log] == [-1, 7]


# --- expiry and deletion ---------------------------------------------------------------------------


def test_a_pending_offset_never_expires_and_its_group_stays() -> None:
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=DAY))
    ctx.commit_offsets("g", {("foo", 0): 1, ("foo", 1): 1})
    ctx.txn_commit_offsets("g", {("foo", 0): 2})
    ctx.txn_commit_offsets("h", {("foo", 0): 2})  # a group with pending offsets only
    expired = ctx.sleep(2 * DAY)
    assert expired == [(offset_key("g", "foo", 1), None)]  # foo-0 of g is held by the transaction
    assert "g" in ctx.groups and "h" in ctx.groups
    ctx.end_transaction(PID, commit=False)
    expired = ctx.sleep(DAY)
    assert (offset_key("g", "foo", 0), None) in expired and (group_key("h"), None) in expired
    assert "g" not in ctx.groups and "h" not in ctx.groups


def test_deleting_a_group_tombstones_its_pending_only_partitions_too() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1})
    ctx.txn_commit_offsets("g", {("foo", 0): 2, ("foo", 1): 2})
    assert ctx.delete_groups("g").results[0].error_code == E.NONE
    assert ctx.last_records == [(offset_key("g", "foo", 0), None), (offset_key("g", "foo", 1), None),
                                (group_key("g"), None)]
    assert ctx.shard.pending_state() == {}
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0, 1]) == [(-1, E.NONE), (-1, E.NONE)]


def test_a_deleted_topic_tombstones_its_pending_only_partitions_too() -> None:
    ctx = GroupTestContext()
    ctx.commit_offsets("g", {("foo", 0): 1})
    ctx.txn_commit_offsets("g", {("foo", 0): 2, ("foo", 1): 2, ("bar", 0): 2})
    ctx._apply(ctx.shard.on_topics_deleted({"foo"}))
    assert sorted(ctx.last_records, key=str) == [(offset_key("g", "foo", 0), None), (offset_key("g", "foo", 1), None)]
    ctx.end_transaction(PID, commit=True)
    assert fetched(ctx, "g", [0, 1]) == [(-1, E.NONE), (-1, E.NONE)]
    assert ctx.committed("g", "bar", 0) == 2
