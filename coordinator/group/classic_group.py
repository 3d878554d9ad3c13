"""A classic group and its members: the live (soft) model the handlers of ``group_manager`` drive.

Kafka ``ClassicGroup`` / ``ClassicGroupMember`` (old ``GroupMetadata`` / ``MemberMetadata``).
Source: https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/classic/ClassicGroup.java

What lives here is soft state in the sense of ``group_manager``'s rules: the current state,
generation, protocol, leader and members as the rebalance protocol moves them, plus parked
responses. What a group *persisted* (its last GroupMetadata record) is kept apart by the manager
and changes only in replay; :meth:`ClassicGroup.to_record_value` builds the record a handler
wants written, and :meth:`ClassicGroup.from_record` rebuilds a group when a partition is loaded.

Protocol vote: the candidates are the protocols every member supports; each member votes for the
first candidate in its own preference order; most votes wins. Kafka breaks ties arbitrarily; we
pick the alphabetically first name so that the choice is deterministic.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from protocol.consumer_offsets import GroupMetadataValue, MemberMetadata
from protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_subscribed_topics

from ..runtime.contract import ResponseHandle
from .group_state import VALID_PREVIOUS_STATES, GroupState, IllegalStateTransition

__all__ = ["ClassicGroup", "ClassicGroupMember", "ParkedResponse", "parse_subscribed_topics",
           "CONSUMER_PROTOCOL_TYPE"]


@dataclass(slots=True)
class ParkedResponse:
    """A JoinGroup or SyncGroup waiting for the rebalance, with the version to answer in."""

    future: ResponseHandle
    api_version: int


@dataclass(slots=True, eq=False)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference.
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join: ParkedResponse | None = None
    sync: ParkedResponse | None = None
    #: Until its first join completes a member lives on the 5-minute new-member deadline.
    is_new: bool = False
    #: When the member's session ends unless it shows signs of life (heartbeat, commit...).
    deadline_ms: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise IllegalStateTransition(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState | None = None
    #: When the group entered its state (None: unknown, e.g. loaded from a v0/v1 record).
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    #: group.instance.id -> member id (KIP-345).
    static_members: dict[str, str] = field(default_factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet (KIP-394).
    pending_members: set[str] = field(default_factory=set)
    #: Members with a parked JoinGroup.
    awaiting_join: set[str] = field(default_factory=set)
    #: Members that got this generation's JoinGroup answer and owe a SyncGroup (KAFKA-12890).
    pending_sync: set[str] = field(default_factory=set)
    #: A member joined during a generation-0 initial delay, so the delay is extended (KIP-134).
    new_member_added: bool = False
    #: How many members support each protocol name, for the consistency check.
    protocol_support: Counter[str] = field(default_factory=Counter)
    #: Topics the members subscribe to (ConsumerProtocol groups); None = unknown.
    subscribed_topics: set[str] | None = None

    # --- state ---------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def can_rebalance(self) -> bool:
        return GroupState.PREPARING_REBALANCE in _NEXT_IS_REBALANCE[self.state]

    # --- members -------------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember, join: ParkedResponse | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        for name, _ in member.supported_protocols:
            self.protocol_support[name] += 1
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.set_join(member, join)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        """Remove a member (or a pending member id); a removed leader is replaced by any other."""
        self.pending_members.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        for name, _ in member.supported_protocols:
            self.protocol_support[name] -= 1
            if self.protocol_support[name] <= 0:
                del self.protocol_support[name]
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.awaiting_join.discard(member_id)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            # Any member will do (Kafka takes an arbitrary one). The newest is O(1) to find even
            # after mass removals from the front, where iterating a dict from its start is not.
            self.leader_id = next(reversed(self.members), None)
        return member

    def set_join(self, member: ClassicGroupMember, join: ParkedResponse | None) -> None:
        member.join = join
        if join is None:
            self.awaiting_join.discard(member.member_id)
        else:
            self.awaiting_join.add(member.member_id)

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        for name, _ in member.supported_protocols:
            self.protocol_support[name] -= 1
            if self.protocol_support[name] <= 0:
                del self.protocol_support[name]
        member.supported_protocols = protocols
        for name, _ in protocols:
            self.protocol_support[name] += 1
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> ClassicGroupMember:
        """Move a static member to a new member id; leadership moves with it. The caller answers
        the old id's parked requests (FENCED_INSTANCE_ID) before calling."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.awaiting_join:
            self.awaiting_join.discard(old_member_id)
        self.pending_sync.discard(old_member_id)
        member.join = None
        member.sync = None
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def has_all_members_joined(self) -> bool:
        return len(self.members) == len(self.awaiting_join) and not self.pending_members

    def elect_joined_leader(self) -> bool:
        """Before the join completes: keep the leader if it rejoined, else pick any member that
        did. False when nobody rejoined (or the group has no leader)."""
        if self.leader_id is None:
            return False
        if self.leader_id in self.awaiting_join:
            return True
        for member_id in self.members:
            if member_id in self.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        """The group's rebalance timeout: the largest of its members'."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -----------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        count = len(self.members)
        return any(self.protocol_support.get(name, 0) == count for name, _ in protocols)

    def candidate_protocols(self) -> set[str]:
        count = len(self.members)
        return {name for name, supporters in self.protocol_support.items() if supporters == count}

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id} has no protocol all members support")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed to everything (Kafka does the same)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        """Close the join phase: the generation goes up by one whether or not anyone joined."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = self.compute_subscribed_topics()
        self.pending_sync.clear()

    # --- records -------------------------------------------------------------------------------

    def to_record_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadata value for the group as it is now; ``assignments`` overrides the
        members' current assignments (members missing from it get an empty one)."""
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=m.assignment if assignments is None else assignments.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """Rebuild a group from its last GroupMetadata record: Stable with members, else Empty."""
        group = cls(
            group_id=group_id,
            state=GroupState.STABLE if value.members else GroupState.EMPTY,
            state_timestamp_ms=None if value.current_state_timestamp < 0 else value.current_state_timestamp,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
        )
        for m in value.members:
            group.add(ClassicGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=group.protocol_type or "",
                supported_protocols=[(value.protocol or "", bytes(m.subscription))],
                assignment=bytes(m.assignment),
            ))
        group.protocol_type = value.protocol_type or None
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


_NEXT_IS_REBALANCE: dict[GroupState, frozenset[GroupState]] = {
    state: frozenset(t for t, prev in VALID_PREVIOUS_STATES.items() if state in prev) for state in GroupState
}
