"""A consumer group's hard state: what its records say, and only changed by their replay
(Kafka's ``ConsumerGroup``). Soft state (timers, the last assignment time, cached hashes) lives
in the manager.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from protocol.consumer_group_records import ConsumerGroupPartitionMetadataValue

from .member import Assignment, ConsumerGroupMember

__all__ = ["ConsumerGroupState", "ConsumerGroup", "ResolvedRegex"]


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """A subscribed regular expression and the topics it matched at a topics-image version."""

    topics: tuple[str, ...]
    version: int
    timestamp: int


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    creation_time_ms: int = -1
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    #: member id -> its target assignment (TargetAssignmentMember records).
    target: dict[str, Assignment] = field(default_factory=dict)
    #: (topic id, partition) -> (owning member id, its epoch): partitions assigned to or being
    #: revoked by a member (Kafka's currentPartitionEpoch).
    owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = field(default_factory=dict)
    #: instance id -> member id of static members.
    static_members: dict[str, str] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    #: Replayed ConsumerGroupPartitionMetadata (written before KIP-1101; kept for snapshots).
    partition_metadata: ConsumerGroupPartitionMetadataValue | None = None
    #: Which records exist (a snapshot writes them back).
    has_epoch_record: bool = False
    has_assignment_record: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        owner = self.owners.get((topic_id, partition))
        return -1 if owner is None else owner[1]

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # --- replay helpers ------------------------------------------------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for source in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, parts in source.items():
                for p in parts:
                    self.owners[(topic_id, p)] = (member.member_id, member.member_epoch)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _release(self, member: ConsumerGroupMember) -> None:
        for source in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, parts in source.items():
                for p in parts:
                    if self.owners.get((topic_id, p), ("",))[0] == member.member_id:
                        del self.owners[(topic_id, p)]
