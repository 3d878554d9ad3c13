"""The consumer-group records (key versions 3-8 and 16) a consumer group is written as: a
member's subscription and assignment values, and the record lists that create a group, remove
a member, hand a static member's state to its new id, or delete a group.

Kafka ``GroupCoordinatorRecordHelpers`` and ``ConsumerGroup.createConsumerGroupRecords`` /
``createGroupTombstoneRecords``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorRecordHelpers.java
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)

from ...runtime.contract import Record
from .group import ConsumerGroup
from .member import Assignment, ConsumerGroupMember, normalize

__all__ = ["to_tps", "from_tps", "subscription_value", "subscription", "current_value",
           "remove_member_records", "replacement_records", "consumer_group_records", "group_tombstones",
           "epoch_bump"]


def to_tps(assignment: Assignment, epochs: Mapping[tuple[uuid.UUID, int], int] | None = None
           ) -> tuple[TopicPartitions, ...]:
    out = []
    for topic_id in sorted(assignment):
        parts = tuple(sorted(assignment[topic_id]))
        out.append(TopicPartitions(topic_id, parts, None if epochs is None else
                                   tuple(epochs.get((topic_id, p), -1) for p in parts)))
    return tuple(out)


def from_tps(tps: Iterable[TopicPartitions]) -> dict[uuid.UUID, frozenset[int]]:
    return normalize({tp.topic_id: frozenset(tp.partitions) for tp in tps})


def subscription_value(m: ConsumerGroupMember) -> ConsumerGroupMemberMetadataValue:
    return ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=m.classic_member_metadata)


def subscription(m: ConsumerGroupMember) -> tuple[object, ...]:
    """What a ConsumerGroupMemberMetadata record holds (cheaper to compare than the record)."""
    return (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names, m.subscribed_topic_regex,
            m.rebalance_timeout_ms, m.server_assignor, m.classic_member_metadata)


def current_value(m: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        m.member_epoch, m.previous_member_epoch, int(m.state),
        to_tps(m.assigned_partitions, m.assignment_epochs), to_tps(m.partitions_pending_revocation))


def remove_member_records(group_id: str, member_id: str) -> list[Record]:
    return [(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            (ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
            (ConsumerGroupMemberMetadataKey(group_id, member_id), None)]


def replacement_records(group: ConsumerGroup, replaced: ConsumerGroupMember, member: ConsumerGroupMember
                        ) -> list[Record]:
    """A rejoining static member takes over the old member's state under its new id."""
    group_id, member_id = group.group_id, member.member_id
    records = remove_member_records(group_id, replaced.member_id)
    records.append((ConsumerGroupMemberMetadataKey(group_id, member_id), subscription_value(member)))
    records.append((ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                    ConsumerGroupTargetAssignmentMemberValue(to_tps(group.target.get(replaced.member_id, {})))))
    records.append((ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), current_value(member)))
    return records


def consumer_group_records(group: ConsumerGroup) -> list[Record]:
    """The records that create ``group`` as it is, in Kafka's order
    (``ConsumerGroup.createConsumerGroupRecords``)."""
    gid = group.group_id
    records: list[Record] = [(ConsumerGroupMemberMetadataKey(gid, m), subscription_value(v))
                             for m, v in group.members.items()]
    records.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(
        group.group_epoch, group.metadata_hash, group.creation_time_ms)))
    records += [(ConsumerGroupTargetAssignmentMemberKey(gid, m),
                 ConsumerGroupTargetAssignmentMemberValue(to_tps(group.target.get(m, {})))) for m in group.members]
    records.append((ConsumerGroupTargetAssignmentMetadataKey(gid),
                    ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)))
    records += [(ConsumerGroupCurrentMemberAssignmentKey(gid, m), current_value(v))
                for m, v in group.members.items()]
    return records


def group_tombstones(group: ConsumerGroup, replaced: tuple[str, str] | None = None) -> list[Record]:
    """Every record of the group, as tombstones, in Kafka's order (``createGroupTombstoneRecords``);
    ``replaced`` (old id, new id): a static member replaced earlier in the same batch goes
    under its new id (``createGroupTombstoneRecordsWithReplacedMember``)."""
    gid = group.group_id
    ids = [replaced[1] if replaced is not None and m == replaced[0] else m for m in group.members]
    records: list[Record] = [(ConsumerGroupCurrentMemberAssignmentKey(gid, m), None) for m in ids]
    records += [(ConsumerGroupTargetAssignmentMemberKey(gid, m), None) for m in ids]
    records.append((ConsumerGroupTargetAssignmentMetadataKey(gid), None))
    records += [(ConsumerGroupMemberMetadataKey(gid, m), None) for m in ids]
    records += [(ConsumerGroupRegularExpressionKey(gid, r), None) for r in group.regexes]
    records.append((ConsumerGroupPartitionMetadataKey(gid), None))
    records.append((ConsumerGroupMetadataKey(gid), None))
    return records


def epoch_bump(group: ConsumerGroup) -> Record:
    """The group's metadata at the next group epoch (its topics' hash and creation time kept): the
    record a subscription change writes, which makes the next heartbeat compute a new target
    assignment and every member reconcile to the new epoch (KIP-848's group epoch)."""
    return (ConsumerGroupMetadataKey(group.group_id),
            ConsumerGroupMetadataValue(group.group_epoch + 1, group.metadata_hash, group.creation_time_ms))
