"""The range assignor: contiguous partition ranges per topic (Kafka's KIP-848 ``RangeAssignor``).

For each topic, the members subscribed to it, in the order below, get contiguous ranges of its
partitions: with P partitions and S subscribers the first P % S members get P // S + 1 partitions,
the others P // S. So members subscribed to the same topics get the same partition numbers of
every one of those topics that has the same partition count (co-partitioning: the member holding
partition 3 of ``orders`` also holds partition 3 of ``payments``), which a join of the two streams
needs.

Stickiness: as in Kafka 4 (group-coordinator/src/main/java/org/apache/kafka/coordinator/group/
assignor/RangeAssignor.java), the ranges are a function of the sorted members alone, not of the
current assignment: Kafka gave up keeping partitions in place because it broke co-partitioning.
The order is Kafka's (``sortMemberIds``): static members first, by instance id, then dynamic
members by member id. A static member restarting comes back under a new member id but the same
instance id, so it takes its place, and its ranges, again: a rolling restart of a static group
moves no partition.
Racks are not considered (Kafka 4.2's best-effort rack matching for range is not carried over).
Subscribed topics that do not exist are ignored.
"""

from __future__ import annotations

import uuid

from coordinator.group.assignors.spec import Assignment, GroupSpec, TopicDescriber

__all__ = ["RangeAssignor"]


class RangeAssignor:
    name = "range"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        ids = _member_order(group)
        out: dict[str, Assignment] = {member_id: {} for member_id in ids}
        # Members grouped by subscription first: one pass over each distinct subscription's topics,
        # not over every member's (a topic id hashes in Python code).
        by_subscription: dict[frozenset[uuid.UUID], list[str]] = {}
        for member_id in ids:
            by_subscription.setdefault(group.members[member_id].subscribed_topic_ids, []).append(member_id)
        subscribers: dict[uuid.UUID, list[str]] = {}
        for subscribed, members in by_subscription.items():
            for topic_id in subscribed:
                subscribers.setdefault(topic_id, []).extend(members)
        if len(by_subscription) > 1:
            rank = {member_id: index for index, member_id in enumerate(ids)}
            for members in subscribers.values():
                members.sort(key=rank.__getitem__)
        for topic_id, members in subscribers.items():
            count = topics.num_partitions(topic_id)
            if count <= 0:
                continue
            minimum, extras = divmod(count, len(members))
            start = 0
            for index, member_id in enumerate(members):
                if start == count:
                    break  # more subscribers than partitions: the rest get none of this topic
                end = start + minimum + (index < extras)
                if end > start:
                    out[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return out


def _member_order(group: GroupSpec) -> list[str]:
    """Static members by instance id (in Java's String order, by UTF-16 code unit, as Kafka
    compares them), then dynamic members by member id."""
    static: list[tuple[bytes, str]] = []
    dynamic: list[str] = []
    for member_id, spec in group.members.items():
        if spec.instance_id is None:
            dynamic.append(member_id)
        else:
            # The member id breaks ties only to keep the order independent of the dict's: a group
            # never holds two members with one instance id.
            static.append((spec.instance_id.encode("utf-16-be", "surrogatepass"), member_id))
    static.sort()
    dynamic.sort()
    return [member_id for _, member_id in static] + dynamic
