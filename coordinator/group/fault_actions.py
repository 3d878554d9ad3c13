"""The group faults a test injects (issue 35's ``rebalance`` and ``kick-member``, docs/testing.md):
operations of one partition's shard, records first like every write, that move a group as the
coordinator itself would move it — never a path of their own.

* A forced rebalance of a classic group is Kafka's ``prepareRebalance`` of a Stable or
  CompletingRebalance group (members heartbeating get REBALANCE_IN_PROGRESS, rejoin, and the
  join completes into the next generation); of a KIP-848 consumer group, a bump of its group
  epoch (the ConsumerGroupMetadata record a subscription change writes), after which the next
  heartbeat computes a new target assignment and the members reconcile to the new epoch
  (https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol).
* A kicked member is removed as its session expiry removes it: a classic group's session-timeout
  removal (the group rebalances), a consumer group's fencing (its records removed, the group
  epoch bumped, or the online downgrade when it was the last consumer-protocol member).

An id this partition holds no live group for raises LookupError (the fault endpoint answers
404); nothing is written then.
"""

from __future__ import annotations

from ..runtime.contract import CoordinatorResult, Record
from .classic_group import ClassicGroup
from .consumer.group import ConsumerGroup, ConsumerGroupState
from .consumer.manager import ConsumerGroupManager
from .consumer.records import epoch_bump
from .group_manager import GroupManager
from .group_state import GroupState

__all__ = ["force_rebalance", "kick_member", "holds_group"]

Result = CoordinatorResult[dict[str, object]]


def _no_group(group_id: str) -> LookupError:
    return LookupError(f"group '{group_id}' does not exist")


def _groups(classic_groups: GroupManager, consumer_groups: ConsumerGroupManager, group_id: str
            ) -> tuple[ConsumerGroup | None, ClassicGroup | None]:
    """The consumer group or the live classic group of the id (one of them), or LookupError."""
    consumer_group = consumer_groups.groups.get(group_id)
    if consumer_group is not None:
        return consumer_group, None
    classic = classic_groups.groups.get(group_id)
    if classic is None or classic.state is GroupState.DEAD:
        raise _no_group(group_id)
    return None, classic


def holds_group(classic_groups: GroupManager, consumer_groups: ConsumerGroupManager, group_id: str) -> bool:
    try:
        _groups(classic_groups, consumer_groups, group_id)
    except LookupError:
        return False
    return True


def force_rebalance(classic_groups: GroupManager, consumer_groups: ConsumerGroupManager, group_id: str) -> Result:
    """Operation "fault-rebalance". The answer: ``{"group", "protocol", "state", "rebalanced"}``
    and, for a classic group, ``"generation"`` (the one being left: the rebalance ends in a
    greater one), for a consumer group ``"group_epoch"`` (the new epoch). ``rebalanced`` is
    False for an Empty group, which has nothing to rebalance (nothing is written)."""
    consumer_group, classic = _groups(classic_groups, consumer_groups, group_id)
    if consumer_group is not None:
        if consumer_group.state is ConsumerGroupState.EMPTY:
            return CoordinatorResult([], {"group": group_id, "protocol": "consumer", "state": "Empty",
                                          "group_epoch": consumer_group.group_epoch, "rebalanced": False})
        return CoordinatorResult([epoch_bump(consumer_group)], {
            "group": group_id, "protocol": "consumer", "state": ConsumerGroupState.ASSIGNING.value,
            "group_epoch": consumer_group.group_epoch + 1, "rebalanced": True})
    assert classic is not None
    records: list[Record] = []
    rebalanced = classic_groups.force_rebalance(classic, records)
    return CoordinatorResult(records, {"group": group_id, "protocol": "classic", "state": classic.state.value,
                                       "generation": classic.generation_id, "rebalanced": rebalanced})


def kick_member(classic_groups: GroupManager, consumer_groups: ConsumerGroupManager, group_id: str,
                member: str | None) -> Result:
    """Operation "fault-kick-member": ``member`` is a member id or a group.instance.id (None: the
    first member by member id). The answer: ``{"group", "member", "protocol"}`` (``member`` the
    member id removed). An unknown member raises LookupError."""
    consumer_group, classic = _groups(classic_groups, consumer_groups, group_id)
    if consumer_group is not None:
        if member is None:
            member_id = min(consumer_group.members, default=None)
        elif member in consumer_group.members:
            member_id = member
        else:
            static = consumer_group.static_member(member)
            member_id = None if static is None else static.member_id
        if member_id is None:
            raise _no_member(group_id, member)
        answer: dict[str, object] = {"group": group_id, "member": member_id, "protocol": "consumer"}
        return consumer_groups.fence_member(consumer_group, member_id, answer)
    assert classic is not None
    if member is None:
        member_id = min(classic.members, default=None)
    elif member in classic.members:
        member_id = member
    else:
        member_id = classic.static_members.get(member)
    if member_id is None:
        raise _no_member(group_id, member)
    records: list[Record] = []
    classic_groups.expire_member(classic, classic.members[member_id], records)
    return CoordinatorResult(records, {"group": group_id, "member": member_id, "protocol": "classic"})


def _no_member(group_id: str, member: str | None) -> LookupError:
    if member is None:
        return LookupError(f"group '{group_id}' has no members")
    return LookupError(f"group '{group_id}' has no member '{member}'")
