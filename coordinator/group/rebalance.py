"""The rebalance machinery the group handlers share: join and sync phases, sessions, and their
timers.

Kafka ``GroupMetadataManager`` (``prepareRebalance``, ``completeClassicGroupJoin``, the heartbeat,
join, sync and pending-member timeouts):
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
Everything here is soft state (see the rules in ``group_manager``): it moves live groups and
parked responses and appends to the ``records`` list it is given; it never touches what the
records say.

Timer keys: ``heartbeat-<group>-<member>`` (session), ``pending-<group>-<member>`` (a
MEMBER_ID_REQUIRED member that has not come back), ``join-<group>`` (rebalance timeout or
initial delay), ``sync-<group>`` (pending-sync timeout, KAFKA-12890).

Sessions cost O(1) per heartbeat and cause no timer churn: a sign of life only moves the member's
stored deadline. The member's session timer, when it fires, compares the time to the deadline and
re-arms itself for the remainder; only a past deadline expires the member. A timer is re-armed at
once only when a deadline moves *earlier* than its due time (a new member's 5-minute deadline
replaced by its session timeout).
"""

from __future__ import annotations

import logging

from protocol.consumer_offsets import GroupMetadataKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaResponse, KafkaStruct

from ..runtime.contract import EMPTY_RESULT, Clock, CoordinatorResult, Record, Timer
from .classic_group import ClassicGroup, ClassicGroupMember, ParkedResponse
from .config import GroupConfig
from .group_state import GroupState
from .responses import JoinMember, join_error, join_response, sync_response

__all__ = ["Rebalancer", "heartbeat_key", "pending_key", "join_key", "sync_key"]

log = logging.getLogger("groupcoord.group")

E = ErrorCode
S = GroupState

def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def pending_key(group_id: str, member_id: str) -> str:
    return f"pending-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class Rebalancer:
    """Base of :class:`~coordinator.group.group_manager.GroupManager`: the live groups and the
    machinery that moves them between states. Call only from the partition's serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        #: Live groups (soft state).
        self.groups: dict[str, ClassicGroup] = {}
        #: When each member's session timer will fire, to re-arm it only if a deadline moves earlier.
        self._timer_due: dict[tuple[str, str], int] = {}

    def _current_generation_response(self, group: ClassicGroup, member_id: str, version: int) -> KafkaResponse:
        return join_response(
            version, generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member_id,
            members=self._member_list(group) if group.is_leader(member_id) else ())

    @staticmethod
    def _member_list(group: ClassicGroup) -> list[KafkaStruct]:
        return [JoinMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                           metadata=m.metadata(group.protocol_name)) for m in group.members.values()]

    def _add_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember, parked: ParkedResponse,
                                  records: list[Record]) -> None:
        member.is_new = True
        group.add(member, parked)
        if group.state is S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        # Its socket is muted while the JoinGroup is parked, so a disconnect cannot be seen: a new
        # member lives on the new-member join timeout rather than its session timeout.
        self._set_deadline(group, member, self.clock.now_ms() + self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, records)

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember,
                                     protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                                     parked: ParkedResponse, records: list[Record]) -> None:
        group.update_member(member, protocols, rebalance_ms, session_ms)
        if member.join is not None and member.join.future is not parked.future:
            member.join.future.set_result(join_error(member.join.api_version, E.REBALANCE_IN_PROGRESS,
                                                     member.member_id))
        group.set_join(member, parked)
        self._maybe_prepare_rebalance_or_complete_join(group, records)

    # --- rebalance machinery -------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, records: list[Record]) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, records)
        else:
            self._maybe_complete_join_phase(group, records)

    def _maybe_complete_join_phase(self, group: ClassicGroup, records: list[Record]) -> None:
        # A rebalance that started from Empty waits out its initial delay even if everyone joined.
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined() \
                and group.previous_state is not S.EMPTY:
            self._complete_join(group, records)

    def _prepare_rebalance(self, group: ClassicGroup, records: list[Record]) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self._propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self.timer.cancel(sync_key(group.group_id))
        initial = group.state is S.EMPTY
        group.transition_to(S.PREPARING_REBALANCE, self.clock.now_ms())
        if initial:
            # KIP-134: give members starting together a chance to join the same rebalance.
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_delay(group.group_id, delay, remaining)
        elif group.has_all_members_joined():
            self._complete_join(group, records)
        else:
            self._schedule_join_timeout(group)

    def _schedule_initial_delay(self, group_id: str, delay: int, remaining: int) -> None:
        self.timer.schedule(join_key(group_id), delay,
                            lambda: self._on_initial_delay(group_id, delay, remaining),
                            name="initial-rebalance-delay")

    def _on_initial_delay(self, group_id: str, delay: int, remaining: int) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if group is None or group.state is not S.PREPARING_REBALANCE:
            return EMPTY_RESULT
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            self._schedule_initial_delay(group_id, min(self.config.initial_rebalance_delay_ms, remaining),
                                         max(remaining - delay, 0))
            return EMPTY_RESULT
        records: list[Record] = []
        self._complete_join(group, records)
        return CoordinatorResult(records)

    def _schedule_join_timeout(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timer.schedule(join_key(group_id), group.rebalance_timeout_ms(), lambda: self._on_join_timeout(group_id),
                            name="expire-join")

    def _on_join_timeout(self, group_id: str) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if group is None or group.state is not S.PREPARING_REBALANCE:
            return EMPTY_RESULT
        records: list[Record] = []
        self._complete_join(group, records)
        return CoordinatorResult(records)

    def _complete_join(self, group: ClassicGroup, records: list[Record]) -> None:
        """End the join phase (Kafka ``onCompleteJoin``)."""
        self.timer.cancel(join_key(group.group_id))
        # 1. Dynamic members that did not rejoin are dropped; static members are kept.
        for member in list(group.members.values()):
            if member.member_id not in group.awaiting_join and not member.is_static:
                self._drop_member(group, member.member_id)
        # 2. Members but nobody rejoined: wait for their sessions to run out.
        if not group.elect_joined_leader() and group.members:
            log.warning("no member rejoined group %s; waiting for their sessions to expire", group.group_id)
            self._schedule_join_timeout(group)
            return
        # 3. Next generation.
        now = self.clock.now_ms()
        group.init_next_generation(now)
        if group.state is S.EMPTY:
            records.append((GroupMetadataKey(group.group_id), group.to_record_value()))
            return
        members = self._member_list(group)
        for member in group.members.values():
            if member.join is not None:
                is_leader = group.is_leader(member.member_id)
                member.join.future.set_result(join_response(
                    member.join.api_version, generation_id=group.generation_id, protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member.member_id,
                    members=members if is_leader else ()))
                group.set_join(member, None)
            member.is_new = False
            self._set_deadline(group, member, now + member.session_timeout_ms)
            group.pending_sync.add(member.member_id)
        group_id, generation = group.group_id, group.generation_id
        self.timer.schedule(sync_key(group_id), group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(group_id, generation), name="expire-sync")

    def _expire_pending_sync(self, group_id: str, generation: int) -> CoordinatorResult[None]:
        """KAFKA-12890: members that never sent SyncGroup are removed and the group rebalances."""
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation \
                or group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
            return EMPTY_RESULT
        records: list[Record] = []
        for member_id in list(group.pending_sync):
            log.info("member %s of group %s did not sync in time", member_id, group_id)
            self._drop_member(group, member_id)
        self._prepare_rebalance(group, records)
        return CoordinatorResult(records)

    def _propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync is not None:
                member.sync.future.set_result(sync_response(member.sync.api_version, error))
                member.sync = None

    # --- members and sessions ------------------------------------------------------------------

    def validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> int:
        """FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID, or NONE."""
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return E.UNKNOWN_MEMBER_ID
            if known != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if member_id in group.members else E.UNKNOWN_MEMBER_ID

    def touch_member(self, group: ClassicGroup, member_id: str) -> None:
        """A sign of life (heartbeat, commit): the session restarts from now. O(1)."""
        member = group.members.get(member_id)
        if member is not None:
            self._set_deadline(group, member, self.clock.now_ms() + member.session_timeout_ms)

    def _set_deadline(self, group: ClassicGroup, member: ClassicGroupMember, deadline_ms: int) -> None:
        member.deadline_ms = deadline_ms
        slot = (group.group_id, member.member_id)
        due = self._timer_due.get(slot)
        if due is not None and due <= deadline_ms and self.timer.is_scheduled(heartbeat_key(*slot)):
            return  # the timer fires first and re-arms itself for the rest (rule 4)
        self._arm_session(group.group_id, member.member_id, deadline_ms)

    def _arm_session(self, group_id: str, member_id: str, due_ms: int) -> None:
        self._timer_due[(group_id, member_id)] = due_ms
        self.timer.schedule(heartbeat_key(group_id, member_id), max(due_ms - self.clock.now_ms(), 0),
                            lambda: self._on_session_timer(group_id, member_id), name="expire-session")

    def _on_session_timer(self, group_id: str, member_id: str) -> CoordinatorResult[None]:
        self._timer_due.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return EMPTY_RESULT
        now = self.clock.now_ms()
        if not member.is_new and (member.join is not None or member.sync is not None):
            member.deadline_ms = max(member.deadline_ms, now + member.session_timeout_ms)
        if now < member.deadline_ms:
            self._arm_session(group_id, member_id, member.deadline_ms)
            return EMPTY_RESULT
        log.info("member %s of group %s: session expired", member_id, group_id)
        records: list[Record] = []
        self._remove_members_and_update(group, [member], records)
        return CoordinatorResult(records)

    def _expire_pending_member(self, group_id: str, member_id: str) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        if group is None or not group.is_pending(member_id):
            return EMPTY_RESULT
        group.remove(member_id)
        records: list[Record] = []
        self._maybe_complete_join_phase(group, records)
        return CoordinatorResult(records)

    def _drop_member(self, group: ClassicGroup, member_id: str) -> ClassicGroupMember | None:
        """Remove a member and its timers, answering its parked SyncGroup; no rebalance."""
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        self._timer_due.pop((group.group_id, member_id), None)
        member = group.remove(member_id)
        if member is not None and member.sync is not None:
            member.sync.future.set_result(sync_response(member.sync.api_version, E.UNKNOWN_MEMBER_ID))
            member.sync = None
        return member

    def _remove_members_and_update(self, group: ClassicGroup, members: list[ClassicGroupMember],
                                   records: list[Record]) -> None:
        """Members leave or fail: a parked JoinGroup gets UNKNOWN_MEMBER_ID (a live client will
        rejoin), then the group rebalances or re-checks its join phase."""
        for member in members:
            if member.join is not None:
                member.join.future.set_result(join_error(member.join.api_version, E.UNKNOWN_MEMBER_ID,
                                                         member.member_id))
                group.set_join(member, None)
            self._drop_member(group, member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, records)
        elif group.state is S.PREPARING_REBALANCE:
            self._maybe_complete_join_phase(group, records)

    def _received_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timer.cancel(sync_key(group.group_id))
