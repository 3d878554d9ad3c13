"""What a KIP-848 server-side assignor is given and what it answers.

A consumer group's target assignment is computed on the coordinator by a named assignor
(``group.consumer.assignors``, KIP-848:
https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol,
"Assignors"). The assignor is a pure function of the members (their racks, subscriptions by topic
id and current target assignments) and of the topics (partition counts, replica racks); these are
the shapes of that function, Kafka's ``GroupSpec``, ``SubscribedTopicDescriber`` and
``ConsumerGroupPartitionAssignor`` reduced to what the group coordinator hands over.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Assignment", "MemberSpec", "GroupSpec", "TopicDescriber", "PartitionAssignor", "PartitionAssignorError"]

#: Topic id -> partitions of that topic.
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    #: The member's current target assignment, which a sticky assignor keeps as far as it can.
    assignment: Assignment
    #: ``group.instance.id`` of a static member (KIP-345), None for a dynamic one: a static member
    #: keeps it across restarts while its member id changes, so range orders members by it.
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    #: Member id -> spec.
    members: dict[str, MemberSpec]


class TopicDescriber(Protocol):
    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The topic's partition count; -1 when the topic does not exist."""
        ...

    def racks(self, topic_id: uuid.UUID, partition: int) -> tuple[str, ...]:
        """The racks of the partition's replicas; () when unknown."""
        ...


class PartitionAssignor(Protocol):
    #: The name a member asks for in ConsumerGroupHeartbeat's ServerAssignor ("uniform", "range").
    @property
    def name(self) -> str: ...

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        """An entry (possibly empty) for every member of ``group``; pure and deterministic: the
        same input gives the same output whatever the order of its dicts. A partition is never
        given twice, nor to a member not subscribed to its topic, nor when it does not exist."""
        ...


class PartitionAssignorError(Exception):
    """The assignor could not compute an assignment (Kafka's PartitionAssignorException)."""
