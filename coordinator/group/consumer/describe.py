"""ConsumerGroupDescribe (KIP-848): the consumer groups of the partition as the admin client
sees them, members with their current and target assignments.

Kafka ``GroupMetadataManager.consumerGroupDescribe`` and ``ConsumerGroup.asDescribedGroup``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from protocol.consumer_group_messages import ConsumerGroupDescribeResponse
from protocol.errors import ErrorCode

from ..topics_image import TopicsImage
from .group import ConsumerGroup, ConsumerGroupState
from .member import Assignment, ConsumerGroupMember

__all__ = ["ConsumerGroupDescriber"]

E = ErrorCode
DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup
DescribedMember = DescribedGroup.Member


class ConsumerGroupDescriber:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: ConsumerGroupDescribe."""

    groups: dict[str, ConsumerGroup]
    topics: TopicsImage

    if TYPE_CHECKING:
        # The manager's, from the target assignment.
        def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str: ...

    def describe(self, group_ids: Sequence[str], api_version: int, include_authorized_operations: bool,
                 authorized_operations: int) -> list[Any]:
        out = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                out.append(DescribedGroup(
                    error_code=int(E.GROUP_ID_NOT_FOUND), error_message=f"Group {group_id} not found.",
                    group_id=group_id, group_state=ConsumerGroupState.DEAD.value, group_epoch=0,
                    assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2147483648))
                continue
            members = []
            for m in group.members.values():
                members.append(DescribedMember(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                    client_id=m.client_id, client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assignment=self._described_assignment(m.assigned_partitions),
                    target_assignment=self._described_assignment(group.target.get(m.member_id, {})),
                    member_type=0 if m.uses_classic_protocol else 1))  # KIP-1099: 0 classic, 1 consumer
            out.append(DescribedGroup(
                error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
                group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                assignor_name=self.preferred_assignor(group.members.values()), members=members,
                authorized_operations=authorized_operations if include_authorized_operations else -2147483648))
        return out

    def _described_assignment(self, assignment: Assignment) -> Any:
        A = DescribedMember.Assignment
        tps = []
        for topic_id in sorted(assignment):
            topic = self.topics.by_id(topic_id)
            tps.append(A.TopicPartitions(topic_id=topic_id, topic_name=topic.name if topic is not None else "",
                                         partitions=sorted(assignment[topic_id])))
        return A(topic_partitions=tps)
