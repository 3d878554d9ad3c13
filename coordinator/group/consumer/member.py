"""A consumer-group member: an immutable value, replaced whole on every change (Kafka's
``ConsumerGroupMember``).

Partitions are ``Assignment`` maps, topic id -> partitions; a topic with no partitions is left
out, so two equal assignments compare equal.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.consumer_group_records import ClassicMemberMetadata

__all__ = ["Assignment", "MemberState", "ConsumerGroupMember", "EMPTY_ASSIGNMENT", "normalize",
           "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH"]

Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}

#: MemberEpoch -1 in a heartbeat: the member leaves; -2: a static member leaves for a while
#: (ConsumerGroupHeartbeatRequest.json).
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def normalize(assignment: Mapping[uuid.UUID, frozenset[int] | set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(p) for t, p in assignment.items() if p}


class MemberState(enum.IntEnum):
    """Kafka's MemberState codes, as CurrentMemberAssignment records store them."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    #: The epoch the member reconciled to; 0 before its first assignment.
    member_epoch: int = 0
    #: The epoch before the last bump (a member whose response got lost retries with it).
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    #: KIP-1251: the member epoch at which each assigned partition was assigned.
    assignment_epochs: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    #: A member that speaks the classic protocol inside a consumer group (online migration,
    #: KIP-848): its session timeout and the protocols of its last JoinGroup; None for a
    #: consumer-protocol member.
    classic_member_metadata: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch
