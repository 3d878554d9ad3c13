"""Online migration between classic and consumer groups: the two conversions, as records.

KIP-848 ("Upgrade & Downgrade", https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol)
and Kafka 4's ``GroupMetadataManager`` (``convertToConsumerGroup``, ``convertToClassicGroup``) with
``ConsumerGroup.fromClassicGroup`` and ``ClassicGroup.fromConsumerGroup``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java

* Upgrade: the first ConsumerGroupHeartbeat on a non-empty classic group turns it into a consumer
  group in place. The classic GroupMetadata is tombstoned and every classic member becomes a
  consumer-group member that keeps speaking the classic protocol (ClassicMemberMetadata: its
  session timeout and JoinGroup protocols), Stable at the classic generation, with its last
  SyncGroup assignment as both its target and its current assignment.
* Downgrade: when the last consumer-protocol member leaves a group whose other members all speak
  the classic protocol, the consumer-group records are tombstoned and one GroupMetadata record
  holds the classic group: generation = the group epoch, each member's partitions as its
  ConsumerProtocol assignment; the shard then makes it rebalance.

``group.consumer.migration.policy`` (bidirectional, upgrade, downgrade, disabled) says which
conversions of non-empty groups are allowed; an Empty group of either kind always converts.
Everything here is pure: the manager writes the records and the shard moves the soft state.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from protocol.consumer_group_records import (
    ClassicMemberMetadata,
    ClassicProtocol,
)
from protocol.consumer_offsets import GroupMetadataValue, MemberMetadata
from protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolAssignment,
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)

from ..classic_group import ClassicGroup
from ..topics_image import TopicsImage
from .group import ConsumerGroup
from .member import Assignment, ConsumerGroupMember, MemberState, normalize

__all__ = ["upgrade_enabled", "downgrade_enabled", "UpgradeRefused", "consumer_group_from_classic",
           "classic_group_value", "to_assignment", "assignment_bytes",
           "owned_partitions"]


def upgrade_enabled(policy: str) -> bool:
    return policy.lower() in ("bidirectional", "upgrade")


def downgrade_enabled(policy: str) -> bool:
    return policy.lower() in ("bidirectional", "downgrade")


class UpgradeRefused(Exception):
    """The classic group stays classic; the heartbeat answers GROUP_ID_NOT_FOUND with this message."""


def to_assignment(partitions: Iterable[tuple[str, Iterable[int]]], topics: TopicsImage) -> dict[uuid.UUID, frozenset[int]]:
    """Topic names to ids; a topic the image does not know is left out (Kafka ``toTopicPartitionMap``)."""
    out: dict[uuid.UUID, set[int]] = {}
    for name, parts in partitions:
        topic = topics.get(name)
        if topic is not None:
            out.setdefault(topic.topic_id, set()).update(parts)
    return normalize(out)


def owned_partitions(partitions: Iterable[tuple[str, Iterable[int]]], topics: TopicsImage
                     ) -> list[tuple[uuid.UUID, list[int]]]:
    """A classic subscription's owned partitions as a heartbeat would report them."""
    return [(t, sorted(p)) for t, p in sorted(to_assignment(partitions, topics).items())]


def assignment_bytes(assignment: Assignment, version: int, topics: TopicsImage) -> bytes:
    """A consumer-group assignment as the ConsumerProtocol assignment a classic member reads, in
    the version of its subscription (Kafka ``prepareAssignment``); topics the image no longer
    knows are left out."""
    named = []
    for topic_id, parts in assignment.items():
        topic = topics.by_id(topic_id)
        if topic is not None:
            named.append((topic.name, tuple(sorted(parts))))
    return encode_assignment(ConsumerProtocolAssignment(version, tuple(sorted(named))))


def consumer_group_from_classic(classic: ClassicGroup, topics: TopicsImage, metadata_hash: int,
                                now_ms: int) -> ConsumerGroup:
    """The consumer group a classic group becomes (Kafka ``ConsumerGroup.fromClassicGroup``).
    Raises UpgradeRefused when a member's embedded protocol does not parse or an assignment
    carries user data (a custom assignor the server assignors cannot stand in for)."""
    group_id = classic.group_id
    generation = classic.generation_id
    group = ConsumerGroup(group_id, group_epoch=generation, metadata_hash=metadata_hash, creation_time_ms=now_ms,
                          assignment_epoch=generation, has_epoch_record=True, has_assignment_record=True)
    for m in classic.members.values():
        protocol = classic.protocol_name if classic.protocol_name is not None else m.supported_protocols[0][0]
        try:
            subscription = decode_subscription(m.metadata(protocol))
            assignment = decode_assignment(m.assignment)
        except MalformedConsumerProtocol:
            raise UpgradeRefused(f"Cannot upgrade classic group {group_id} to consumer group because the embedded "
                                 "consumer protocol is malformed.") from None
        if assignment.user_data:
            raise UpgradeRefused(f"Cannot upgrade classic group {group_id} to consumer group because an unsupported "
                                 "custom assignor is in use. Please refer to the documentation or switch to a default "
                                 "assignor before re-attempting the upgrade.")
        assigned = to_assignment(assignment.assigned_partitions, topics)
        group.put_member(ConsumerGroupMember(
            m.member_id, member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
            instance_id=m.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=m.rebalance_timeout_ms, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=subscription.topics, assigned_partitions=assigned,
            assignment_epochs={(t, p): generation for t, parts in assigned.items() for p in parts},
            classic_member_metadata=ClassicMemberMetadata(
                m.session_timeout_ms, tuple(ClassicProtocol(n, d) for n, d in m.supported_protocols))))
        group.target[m.member_id] = assigned
    return group


def classic_group_value(group: ConsumerGroup, leaving_member_id: str, topics: TopicsImage, now_ms: int,
                        joining: ConsumerGroupMember | None = None) -> GroupMetadataValue:
    """The GroupMetadata of the classic group a consumer group becomes when ``leaving_member_id``
    (its last consumer-protocol member) leaves, or is replaced by the classic static member
    ``joining`` (Kafka ``ClassicGroup.fromConsumerGroup``): generation
    = the group epoch, the protocol every member supports that most prefer, the first member as
    leader, each member's partitions in its subscription's version.

    Kafka writes each member's target assignment. We write what the member may still hold (its
    assigned partitions and those it has not revoked yet): a classic member that has not rejoined
    since its target changed still holds its old partitions, and the record's assignment is what
    a SyncGroup answers in a Stable group (after a reload) and what a new upgrade takes as each
    member's partitions, so a target there could hand a partition to two members. The rebalance
    that follows the conversion moves everyone to the classic leader's assignment anyway."""
    members = [m for mid, m in group.members.items() if mid != leaving_member_id]
    if joining is not None:
        members.append(joining)
    protocols: list[Mapping[str, bytes]] = []
    for m in members:
        assert m.classic_member_metadata is not None
        protocols.append({p.name: p.metadata for p in m.classic_member_metadata.supported_protocols})
    candidates = set(protocols[0]) if protocols else set()
    for supported in protocols[1:]:
        candidates &= set(supported)
    votes: dict[str, int] = {}
    for m in members:
        assert m.classic_member_metadata is not None
        for p in m.classic_member_metadata.supported_protocols:
            if p.name in candidates:
                votes[p.name] = votes.get(p.name, 0) + 1
                break
    # The classic rule (``ClassicGroup.select_protocol``): most votes, then by name.
    protocol = min(votes, key=lambda name: (-votes[name], name)) if votes else None
    out = []
    for m, supported in zip(members, protocols, strict=True):
        assert m.classic_member_metadata is not None
        metadata = supported.get(protocol or "", b"")
        try:
            version = protocol_version(metadata)
        except MalformedConsumerProtocol:
            version = 0
        out.append(MemberMetadata(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.classic_member_metadata.session_timeout_ms, subscription=metadata,
            assignment=assignment_bytes(_held(m), version, topics)))
    return GroupMetadataValue(protocol_type=CONSUMER_PROTOCOL_TYPE, generation=group.group_epoch, protocol=protocol,
                              leader=out[0].member_id if out else None, current_state_timestamp=now_ms,
                              members=tuple(out))


def _held(member: ConsumerGroupMember) -> Assignment:
    held = dict(member.assigned_partitions)
    for topic_id, parts in member.partitions_pending_revocation.items():
        held[topic_id] = held.get(topic_id, frozenset()) | parts
    return held
