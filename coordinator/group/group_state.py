"""The five states of a classic group and which transitions are legal.

Kafka ``ClassicGroupState`` and the old ``GroupMetadata.scala``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/classic/ClassicGroupState.java
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/coordinator/group/GroupMetadata.scala
A new group starts Empty at generation 0. Every transition stamps the group's state timestamp, which
an Empty group persists and offset expiry measures from (KIP-211).

EMPTY — the group has no members (or only offsets: a "simple" group).
    action: JoinGroup from a new member starts a rebalance; SyncGroup, Heartbeat and member
            offset commits get UNKNOWN_MEMBER_ID (the group has no members); commits with
            generation -1 (simple consumers, admin tools) are accepted; OffsetFetch is answered.
    transition: a member joins => PREPARING_REBALANCE
                all offsets expired or DeleteGroups => DEAD

PREPARING_REBALANCE — members are (re)joining.
    action: JoinGroups are parked until all expected members joined or the rebalance timeout
            fires; Heartbeat and SyncGroup get REBALANCE_IN_PROGRESS (heartbeats still count);
            LeaveGroup removes the member; commits of the current generation are accepted.
    transition: join phase completes with members => COMPLETING_REBALANCE
                join phase completes with nobody => EMPTY
                partition unloaded => DEAD

COMPLETING_REBALANCE — waiting for the leader's assignment.
    action: followers' SyncGroups are parked until the leader's assignment is persisted;
            Heartbeat is answered NONE; offset commits get REBALANCE_IN_PROGRESS.
    transition: the leader's assignment is persisted => STABLE
                a member joins, changes metadata, leaves or fails => PREPARING_REBALANCE
                partition unloaded => DEAD

STABLE — every member has its assignment.
    action: Heartbeat is answered NONE; SyncGroup returns the member's assignment; a follower
            rejoining with unchanged metadata gets the current generation back.
    transition: a member joins, the leader rejoins, metadata changes, a member leaves or
                fails => PREPARING_REBALANCE
                partition unloaded => DEAD

DEAD — the group is gone (deleted, expired, or its partition moved away).
    action: Join/Sync/Heartbeat/Leave/Commit get COORDINATOR_NOT_AVAILABLE, so the client looks
            the coordinator up again; describe reports "Dead".
    transition: none; DEAD => DEAD is allowed so removal is idempotent.
"""

from __future__ import annotations

import enum

__all__ = ["GroupState", "VALID_PREVIOUS_STATES", "IllegalStateTransition"]


class GroupState(enum.Enum):
    """A classic group's state; the value is the name on the wire (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: For each state, the states a group may enter it from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A bug: the code asked for a transition the table forbids."""
