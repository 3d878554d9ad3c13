"""Moving one member from its current assignment towards its target (Kafka's
``CurrentAssignmentBuilder``, KIP-848 "Member Reconciliation").

The rules that keep a partition from having two owners:

* a member first gives up what its target no longer holds: it stays at its epoch in
  UNREVOKED_PARTITIONS until its heartbeat no longer reports those partitions;
* only then does it move to the target epoch and receive new partitions, and only those no other
  member still holds (``partition_epoch`` returns -1 for a free partition); the rest wait in
  UNRELEASED_PARTITIONS until their owner lets go.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence

from .member import Assignment, ConsumerGroupMember, MemberState

__all__ = ["reconcile", "OwnedPartitions", "FencedByUnknownState"]

#: What a heartbeat reports it owns: (topic id, partitions) pairs, or None when not sent.
OwnedPartitions = Sequence[tuple[uuid.UUID, Sequence[int]]] | None


class FencedByUnknownState(Exception):
    """A member in a state this code does not know, still owning partitions: fence it."""


def _owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    if owned is None:  # not reported: assume it still owns them
        return True
    for topic_id, parts in owned:
        pending = partitions.get(topic_id)
        if pending and any(p in pending for p in parts):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int], owned: OwnedPartitions) -> ConsumerGroupMember:
    """The member after one reconciliation step (itself when nothing changes)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or len(owned) > 0:
        raise FencedByUnknownState()
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _with_epoch(member: ConsumerGroupMember, epoch: int) -> tuple[int, int]:
    """(member epoch, previous member epoch) after moving to ``epoch``."""
    if epoch == member.member_epoch:
        return epoch, member.previous_member_epoch
    return epoch, member.member_epoch


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: Callable[[uuid.UUID, int], int], owned: OwnedPartitions) -> ConsumerGroupMember:
    current = member.assigned_partitions
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending_assignment: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            assigned[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        new = wanted - keep
        free = frozenset(p for p in new if partition_epoch(topic_id, p) == -1)
        if len(free) != len(new):
            unreleased = True
        if free:
            pending_assignment[topic_id] = free
    if revoking and _owns_any(owned, revoking):
        epoch, previous = _with_epoch(member, member_epoch)
        return dataclasses.replace(member, state=MemberState.UNREVOKED_PARTITIONS, member_epoch=epoch,
                                   previous_member_epoch=previous, assigned_partitions=assigned,
                                   partitions_pending_revocation=revoking,
                                   assignment_epochs=_epochs(member, assigned, {}, epoch))
    for topic_id, parts in pending_assignment.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    epoch, previous = _with_epoch(member, target_epoch)
    return dataclasses.replace(
        member, state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        member_epoch=epoch, previous_member_epoch=previous, assigned_partitions=assigned,
        partitions_pending_revocation={},
        assignment_epochs=_epochs(member, assigned, pending_assignment, epoch))


def _epochs(member: ConsumerGroupMember, assigned: Assignment, new: Assignment,
            epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """KIP-1251: a partition kept keeps the epoch it was assigned at; a new one gets ``epoch``."""
    old = member.assignment_epochs
    out: dict[tuple[uuid.UUID, int], int] = {}
    for topic_id, parts in assigned.items():
        fresh = new.get(topic_id, frozenset())
        for p in parts:
            out[(topic_id, p)] = epoch if p in fresh else old.get((topic_id, p), member.member_epoch)
    return out
