"""Found by tests/fuzz/fuzz_consumer_group_records.py (regression input
tests/fuzz/regressions/consumer_group_records/11ceb0f43c64842d9d52fc658bc87fa176f8d816, one operation): a
ConsumerGroupCurrentMemberAssignment record without the KIP-1251 ``AssignmentEpochs`` tag (as
written before KIP-1251, or with fewer epochs than partitions) loads as "assignment epoch
unknown", and a snapshot of that state writes -1 for each unknown epoch. Replay reads -1 back as
unknown (``ConsumerGroupManager.replay``), so a load from the log and a load from a snapshot
answer an OffsetCommit from an older member epoch alike.
"""

from __future__ import annotations

from coordinator.group.config import GroupConfig
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    TopicPartitions,
)
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext


def _commit(ctx: ConsumerGroupTestContext, epoch: int) -> int:
    r = ctx.commit_offsets("g", {("foo", 0): 7}, generation_id=epoch, member_id="m1", version=9)
    return int(r.topics[0].partitions[0].error_code)


def test_known_bug_unknown_assignment_epochs_survive_a_snapshot() -> None:
    seed = ConsumerGroupTestContext(GroupConfig())
    foo = seed.topics.create("foo", 1).topic_id
    log = [
        (ConsumerGroupMemberMetadataKey("g", "m1"), ConsumerGroupMemberMetadataValue(
            None, None, "client", "/127.0.0.1", ("foo",), None, 30_000, None)),
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(2)),
        # Partition 0 of foo, assignment epoch not recorded.
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m1"), ConsumerGroupCurrentMemberAssignmentValue(
            2, 1, 0, (TopicPartitions(foo, (0,)),))),
    ]
    from_log = ConsumerGroupTestContext(GroupConfig(), log=log, topics=seed.topics)
    from_snapshot = ConsumerGroupTestContext(GroupConfig(), topics=seed.topics)
    for key, value in from_log.shard.snapshot_records():
        from_snapshot.shard.replay(key, value)
    from_snapshot.shard.on_loaded()
    assert _commit(from_log, 1) == E.STALE_MEMBER_EPOCH
    assert from_snapshot.state() == from_log.state()
    assert _commit(from_snapshot, 1) == E.STALE_MEMBER_EPOCH
