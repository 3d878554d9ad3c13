"""The target assignment of a KIP-848 consumer group: which server assignor, its run over every
member (Kafka's ``TargetAssignmentBuilder``), the records of the targets that changed, and the
KIP-1263 batching that runs it at most once per ``consumer.assignment.interval.ms``.

https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/TargetAssignmentBuilder.java
KIP-1263: https://cwiki.apache.org/confluence/display/KAFKA/KIP-1263%3A+Group+Coordinator+Assignment+Batching
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from protocol.consumer_group_records import (
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol.errors import ErrorCode

from ...runtime.contract import Record
from ..assignors.spec import GroupSpec, MemberSpec, PartitionAssignor
from ..config import GroupConfig
from ..topics_image import TopicsImage
from .group import ConsumerGroup, ResolvedRegex
from .member import Assignment, ConsumerGroupMember, normalize
from .records import to_tps
from .validation import HeartbeatError

__all__ = ["TargetAssignment"]

E = ErrorCode


class _Describer:
    """The topics as an assignor sees them (``TopicDescriber``)."""

    def __init__(self, image: TopicsImage) -> None:
        self.image = image

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        topic = self.image.by_id(topic_id)
        return -1 if topic is None else topic.num_partitions

    def racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        return self.image.partition_racks(topic_id, partition)


class TargetAssignment:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: the target
    assignment."""

    config: GroupConfig
    topics: TopicsImage
    assignors: Mapping[str, PartitionAssignor]
    last_assignment_ms: dict[str, int]

    if TYPE_CHECKING:
        # The manager's per-group setting.
        def assignment_interval_ms(self, group_id: str) -> int: ...

    def _may_assign(self, group_id: str, now: int) -> bool:
        """KIP-1263: at most one target assignment per ``consumer.assignment.interval.ms``."""
        interval = self.assignment_interval_ms(group_id)
        last = self.last_assignment_ms.get(group_id)
        return interval <= 0 or last is None or now - last >= interval


    def _topic_ids(self, member: ConsumerGroupMember, regexes: Mapping[str, ResolvedRegex]) -> frozenset[uuid.UUID]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex and member.subscribed_topic_regex in regexes:
            names.update(regexes[member.subscribed_topic_regex].topics)
        ids = set()
        for name in names:
            topic = self.topics.get(name)
            if topic is not None:
                ids.add(topic.topic_id)
        return frozenset(ids)


    def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str:
        """The server assignor most members ask for (ties: by name); else the configured default."""
        counts = Counter(m.server_assignor for m in members if m.server_assignor is not None)
        if counts:
            return max(counts.items(), key=lambda item: (item[1], item[0]))[0]
        return self.config.consumer_assignors[0]

    def _compute_target(self, group: ConsumerGroup, group_epoch: int, members: Mapping[str, ConsumerGroupMember],
                        regexes: Mapping[str, ResolvedRegex], replaced: ConsumerGroupMember | None,
                        records: list[Record]) -> dict[str, Assignment]:
        """Run the assignor over every member (Kafka's ``TargetAssignmentBuilder``) and record the
        members whose target changed, then the new assignment epoch."""
        name = self.preferred_assignor(members.values())
        assignor = self.assignors.get(name)
        old: dict[str, Assignment] = dict(group.target)
        if replaced is not None:
            new_id = next(m for m, v in members.items() if v.instance_id == replaced.instance_id)
            old[new_id] = old.pop(replaced.member_id, {})
        if assignor is None:
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                                 f"{group_epoch}: the assignor {name} is not available.")
        spec = GroupSpec({mid: MemberSpec(m.rack_id, self._topic_ids(m, regexes), dict(old.get(mid, {})), m.instance_id)
                          for mid, m in members.items()})
        try:
            result = assignor.assign(spec, _Describer(self.topics))
        except Exception as exc:  # PartitionAssignorError and bugs alike: the heartbeat fails
            raise HeartbeatError(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment for epoch "
                                 f"{group_epoch}: {exc}") from exc
        new: dict[str, Assignment] = {}
        for mid in sorted(members):
            assignment = normalize(result.get(mid, {}))
            new[mid] = assignment
            if assignment != old.get(mid, {}):
                records.append((ConsumerGroupTargetAssignmentMemberKey(group.group_id, mid),
                                ConsumerGroupTargetAssignmentMemberValue(to_tps(assignment))))
        records.append((ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
                        ConsumerGroupTargetAssignmentMetadataValue(group_epoch)))
        return new
