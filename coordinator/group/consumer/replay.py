"""The replay of the consumer-group records (key versions 3-8 and 16) into the groups, and the
snapshot that writes the groups back as records.

Hard state is what the records say: only :meth:`ConsumerGroupReplay.replay` changes the
:class:`ConsumerGroup` objects, at load, on a hot standby and after a write alike (the rules of
``manager.py``). Kafka ``GroupMetadataManager.replay`` (consumer-group records):
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.consumer_offsets import GroupMetadataValue

from .group import ConsumerGroup, ResolvedRegex
from .member import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember, MemberState
from .records import current_value, from_tps, subscription_value, to_tps

__all__ = ["ConsumerGroupReplay", "NotAConsumerGroupError"]


class NotAConsumerGroupError(Exception):
    """A consumer-group record of a group id the log holds a classic group record for (its
    GroupMetadata, not tombstoned before): the load fails, as Kafka's replay fails with "Group
    <id> is not a consumer group" (``getOrMaybeCreatePersistedConsumerGroup``). The conversions
    (``migration.py``, ``fencing.py``) always tombstone one type before writing the other."""


class ConsumerGroupReplay:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: its hard state
    and the records that build it."""

    groups: dict[str, ConsumerGroup]
    last_assignment_ms: dict[str, int]
    hash_checked_at: dict[str, int]
    topic_filters: dict[str, Callable[[str], bool]]
    on_group_created: Callable[[str], None]
    #: The classic GroupMetadata record the shard holds for a group id, or None (set by the shard).
    classic_group_record: Callable[[str], GroupMetadataValue | None]

    def _get_or_create(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
            self.on_group_created(group_id)
        return group

    def replay(self, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None) -> None:
        group_id = key.group_id
        if group_id not in self.groups:
            self._refuse_a_classic_group(key, value)
        if value is None:
            group = self.groups.get(group_id)
            if group is None:
                return
            self._replay_tombstone(group, key)
            return
        group = self._get_or_create(group_id)
        if isinstance(value, ConsumerGroupMetadataValue):
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
            group.creation_time_ms = value.creation_time_ms
            group.has_epoch_record = True
        elif isinstance(value, ConsumerGroupPartitionMetadataValue):
            group.partition_metadata = value
        elif isinstance(value, ConsumerGroupMemberMetadataValue):
            assert isinstance(key, ConsumerGroupMemberMetadataKey)
            old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            group.put_member(dataclasses.replace(
                old, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, subscribed_topic_names=value.subscribed_topic_names,
                subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor=value.server_assignor, classic_member_metadata=value.classic_member_metadata))
        elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = value.assignment_epoch
            group.has_assignment_record = True
        elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            assert isinstance(key, ConsumerGroupTargetAssignmentMemberKey)
            group.target[key.member_id] = from_tps(value.topic_partitions)
        elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
            assert isinstance(key, ConsumerGroupCurrentMemberAssignmentKey)
            old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            epochs = {(tp.topic_id, p): e for tp in value.assigned_partitions if tp.assignment_epochs is not None
                      for p, e in zip(tp.partitions, tp.assignment_epochs, strict=False) if e != -1}
            try:
                state = MemberState(value.state)
            except ValueError:
                state = MemberState.UNKNOWN
            group.put_member(dataclasses.replace(
                old, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch, state=state,
                assigned_partitions=from_tps(value.assigned_partitions),
                partitions_pending_revocation=from_tps(value.partitions_pending_revocation),
                assignment_epochs=epochs))
        elif isinstance(value, ConsumerGroupRegularExpressionValue):
            assert isinstance(key, ConsumerGroupRegularExpressionKey)
            group.regexes[key.regular_expression] = ResolvedRegex(value.topics, value.version, value.timestamp)

    def replaced_by_classic(self, group_id: str) -> None:
        """A classic GroupMetadata value was replayed for this id: Kafka's replay puts the classic
        group in the id's place, so a consumer group of the same id is gone (the conversions
        tombstone it first; only a hand-made or foreign log gets here with one)."""
        if self.groups.pop(group_id, None) is not None:
            self.last_assignment_ms.pop(group_id, None)
            self.hash_checked_at.pop(group_id, None)
            self.topic_filters.pop(group_id, None)

    def _refuse_a_classic_group(self, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None) -> None:
        """Kafka replays a consumer-group record (tombstones included) into the group of its id
        only if that group is a consumer group, or a classic one with no record of its own (a
        "simple" group: no protocol type, no members, as offset commits alone make); otherwise
        the load fails.
        https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java"""
        classic = self.classic_group_record(key.group_id)
        if classic is None or (not classic.protocol_type and not classic.members):
            return
        record = type(key).__name__.removesuffix("Key") + ("" if value is not None else " tombstone")
        raise NotAConsumerGroupError(
            f"Group {key.group_id} is not a consumer group: a {record} record follows its classic group's "
            f"GroupMetadata record (protocol type {classic.protocol_type!r}, generation {classic.generation}, "
            f"{len(classic.members)} members) with no tombstone of it in between")

    def _replay_tombstone(self, group: ConsumerGroup, key: ConsumerGroupRecordKey) -> None:
        if isinstance(key, ConsumerGroupMetadataKey):
            del self.groups[group.group_id]
            self.last_assignment_ms.pop(group.group_id, None)
            self.hash_checked_at.pop(group.group_id, None)
            self.topic_filters.pop(group.group_id, None)
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            group.partition_metadata = None
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            group.remove_member(key.member_id)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = 0
            group.has_assignment_record = False
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            group.target.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            old = group.members.get(key.member_id)
            if old is not None:
                group.put_member(dataclasses.replace(
                    old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    state=MemberState.STABLE, assigned_partitions={}, partitions_pending_revocation={},
                    assignment_epochs={}))
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            group.regexes.pop(key.regular_expression, None)

    def snapshot_records(self) -> list[tuple[ConsumerGroupRecordKey, ConsumerGroupRecordValue]]:
        """The groups as the records a compacted log keeps; replayed into a fresh manager they
        rebuild ``groups`` exactly."""
        out: list[tuple[ConsumerGroupRecordKey, ConsumerGroupRecordValue]] = []
        for gid, group in self.groups.items():
            if group.has_epoch_record:
                out.append((ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(
                    group.group_epoch, group.metadata_hash, group.creation_time_ms)))
            if group.partition_metadata is not None:
                out.append((ConsumerGroupPartitionMetadataKey(gid), group.partition_metadata))
            for pattern, resolved in group.regexes.items():
                out.append((ConsumerGroupRegularExpressionKey(gid, pattern), ConsumerGroupRegularExpressionValue(
                    resolved.topics, resolved.version, resolved.timestamp)))
            for mid, member in group.members.items():
                out.append((ConsumerGroupMemberMetadataKey(gid, mid), subscription_value(member)))
            for mid, assignment in group.target.items():
                out.append((ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                            ConsumerGroupTargetAssignmentMemberValue(to_tps(assignment))))
            if group.has_assignment_record:
                out.append((ConsumerGroupTargetAssignmentMetadataKey(gid),
                            ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)))
            for mid, member in group.members.items():
                out.append((ConsumerGroupCurrentMemberAssignmentKey(gid, mid), current_value(member)))
        return out
