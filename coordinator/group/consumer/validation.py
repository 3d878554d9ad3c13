"""The checks of requests against KIP-848 consumer groups: ConsumerGroupHeartbeat's request and
member epoch (Kafka's order, Kafka's messages), and OffsetCommit/OffsetFetch by a member.

Kafka ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`` and
``throwIfConsumerGroupMemberEpochIsInvalid``, ``ConsumerGroup.validateOffsetCommit`` and
``validateOffsetFetch``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest

from ..topics_image import TopicsImage
from .group import ConsumerGroup
from .member import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupMember
from .reconciliation import OwnedPartitions

__all__ = ["HeartbeatError", "CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION", "validate_heartbeat",
           "check_member_epoch", "OffsetChecks"]

E = ErrorCode

#: ConsumerGroupHeartbeat v1 requires a client-generated member id (KIP-1082,
#: https://cwiki.apache.org/confluence/display/KAFKA/KIP-1082%3A+Require+Client-Generated+IDs+over+the+ConsumerGroupHeartbeat+RPC).
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1


class HeartbeatError(Exception):
    """A refused heartbeat: answered with ``code`` and ``message``, no records written."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_heartbeat(request: KafkaRequest, api_version: int, assignors: Sequence[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, in its order."""
    epoch = request.member_epoch
    if api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0 \
            or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not (request.member_id or "").strip():
            raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if request.group_id is None or not request.group_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
    regex = request.subscribed_topic_regex if api_version >= 1 else None
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise HeartbeatError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or len(request.topic_partitions) > 0:
            raise HeartbeatError(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and regex is None:
            raise HeartbeatError(E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must"
                                 " be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise HeartbeatError(E.INVALID_REQUEST, "MemberEpoch is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in assignors:
        raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {assignor} is not supported. Supported "
                             f"assignors: {', '.join(assignors)}.")


def check_member_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a member one epoch behind whose
    owned partitions are all still assigned to it only lost a response."""
    if received > member.member_epoch:
        raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                             f"({received}) than the one known by the group coordinator ({member.member_epoch})."
                             " The member must abandon all its partitions and rejoin.")
    if received < member.member_epoch:
        subset = owned is not None and all(
            set(parts) <= member.assigned_partitions.get(topic_id, frozenset()) for topic_id, parts in owned)
        if received != member.previous_member_epoch or not subset:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its partitions and "
                                 "rejoin.")


class OffsetChecks:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: may a member
    commit or fetch the group's offsets (KIP-848, KIP-1251)."""

    topics: TopicsImage

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int,
                               partitions: Iterable[tuple[str, int]]) -> int:
        """0 when the commit may go ahead, else the error of every partition."""
        if member_epoch < 0 and not group.members:
            return E.NONE  # an admin client or a consumer without group management, on an Empty group
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member.uses_classic_protocol:
            # A classic member commits with its generation, which is its member epoch, in any
            # version (Kafka ``ConsumerGroup.validateOffsetCommit``).
            return E.NONE if member_epoch == member.member_epoch else E.ILLEGAL_GENERATION
        if api_version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return E.NONE
        if member_epoch > member.member_epoch or member_epoch < 0:
            return E.STALE_MEMBER_EPOCH
        # KIP-1251: an older epoch may still commit a partition it held since then.
        for topic, partition in partitions:
            described = self.topics.get(topic)
            assigned_at = None if described is None else member.assignment_epochs.get((described.topic_id, partition))
            if assigned_at is None or assigned_at > member_epoch:
                return E.STALE_MEMBER_EPOCH
        return E.NONE

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return E.NONE
        # A classic member's epoch is its generation: a mismatch is ILLEGAL_GENERATION, as for its
        # commits (Kafka ``ConsumerGroup.validateOffsetFetch``/``validateMemberEpoch``).
        return E.ILLEGAL_GENERATION if member.uses_classic_protocol else E.STALE_MEMBER_EPOCH
