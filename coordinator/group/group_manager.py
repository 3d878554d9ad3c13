"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, their timers, and the
replay of GroupMetadata records.

Kafka ``GroupMetadataManager`` (classic part) and the old ``GroupCoordinator``; reference
``kafka_coordinator.md`` §1.3-1.6. Like Kafka's managers, this class has two kinds of methods:
1) request handlers and timer operations, which validate, move the live rebalance state and return
records in a :class:`CoordinatorResult`; 2) ``replay_group_metadata``, which applies a record.

Rules:

1. Hard state is what the GroupMetadata records say (``group_records``: each group's last
   persisted generation, protocol type, protocol, leader, members with subscription and
   assignment, state timestamp). Only :meth:`replay_group_metadata` changes it, and it is the same
   function a partition load uses. Handlers never touch it; they return records.
2. Soft state is the live rebalance: :class:`ClassicGroup` objects in ``groups`` with their state,
   members joining, pending members, parked responses, session deadlines and timers. Handlers
   change it, as Kafka's coordinator does for classic groups. Replaying a GroupMetadata record
   onto a live group only updates ``group_records``; it never rebuilds the live group. A record
   replayed before :meth:`on_loaded` (loading) or for a group with no live object creates it.
3. Loading replays every record, then :meth:`on_loaded` builds each group from its last record
   (Stable with members, else Empty), gives every member a fresh session deadline and makes
   groups over ``group.max.size`` rebalance.
4. Sessions cost O(1) per heartbeat and create no timer churn: a heartbeat only moves the
   member's stored deadline. The member's session timer, when it fires, compares the time to the
   deadline and re-arms itself for the remainder; only a past deadline expires the member. A
   member parked in JoinGroup or SyncGroup counts as alive, except a brand-new member, which has
   the 5-minute new-member deadline instead of its session timeout.

Timer keys: ``heartbeat-<group>-<member>`` (session), ``pending-<group>-<member>`` (a
MEMBER_ID_REQUIRED member that has not come back), ``join-<group>`` (rebalance timeout or
initial delay), ``sync-<group>`` (pending-sync timeout, KAFKA-12890).

Where Kafka leaves a parked response unanswered (a JoinGroup superseded by another JoinGroup of
the same member, a SyncGroup of a member that is removed) we answer it, so the runtime never
holds a future forever: the superseded JoinGroup gets REBALANCE_IN_PROGRESS (the client rejoins)
and a removed member's SyncGroup gets UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable

from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue
from protocol.errors import ErrorCode

from .classic_group import ClassicGroup, ClassicGroupMember, ParkedResponse
from .config import GroupConfig
from .group_state import GroupState
from .responses import JoinMember, heartbeat_response, join_error, join_response, leave_response, sync_response
from .timing import EMPTY_RESULT, Clock, CoordinatorResult, Record, ResponseHandle, Timer

__all__ = ["GroupManager"]

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


class GroupManager:
    """Classic groups of one ``__consumer_offsets`` partition. Call only from the partition's
    serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer,
                 new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        #: Live groups (soft state).
        self.groups: dict[str, ClassicGroup] = {}
        #: The last GroupMetadata record of each group (hard state; replay only).
        self.group_records: dict[str, GroupMetadataValue] = {}
        #: False while the partition is being loaded.
        self.loaded = False
        #: When each member's session timer will fire, to re-arm it only if a deadline moves earlier.
        self._timer_due: dict[tuple[str, str], int] = {}

    # =========================================================================================
    # JoinGroup (v0-9)

    def join_group(self, request: Any, api_version: int, client_id: str, client_host: str,
                   future: ResponseHandle) -> CoordinatorResult:
        """Answer through ``future`` (now or when the join phase completes); the result carries
        records only, its ``response`` is None."""
        records: list[Record] = []
        group_id = request.group_id
        member_id = request.member_id or ""
        instance_id = request.group_instance_id if api_version >= 5 else None
        session_ms = request.session_timeout_ms
        rebalance_ms = request.rebalance_timeout_ms if api_version >= 1 and request.rebalance_timeout_ms >= 0 \
            else session_ms
        protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        parked = ParkedResponse(future, api_version)

        def fail(error: int, answer_member_id: str = member_id) -> CoordinatorResult:
            future.set_result(join_error(api_version, error, answer_member_id))
            return CoordinatorResult(records)

        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        if not self.config.session_timeout_min_ms <= session_ms <= self.config.session_timeout_max_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        created = group is None
        if group is None:
            if member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(group_id, state_timestamp_ms=self.clock.now_ms())
            self.groups[group_id] = group
        try:
            if not self._accept_joining_member(group, member_id):
                self._drop_member(group, member_id)
                return fail(E.GROUP_MAX_SIZE_REACHED, "")
            if group.state is S.DEAD:
                return fail(E.COORDINATOR_NOT_AVAILABLE)
            if not group.supports_protocols(request.protocol_type, protocols):
                return fail(E.INCONSISTENT_GROUP_PROTOCOL)
            if not member_id:
                return self._join_new_member(group, request.protocol_type, protocols, instance_id, client_id,
                                             client_host, session_ms, rebalance_ms, parked, records)
            return self._join_existing_member(group, member_id, request.protocol_type, protocols, instance_id,
                                              client_id, client_host, session_ms, rebalance_ms, parked, records)
        finally:
            if created and not group.members and not group.pending_members and group.state is S.EMPTY \
                    and group_id not in self.group_records:
                del self.groups[group_id]

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """group.max.size (KIP-389), counted as Kafka counts it in each state."""
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.state is S.PREPARING_REBALANCE:
            return member_id in group.awaiting_join or len(group.awaiting_join) < self.config.max_size
        return member_id in group.members or len(group.members) < self.config.max_size

    def _join_new_member(self, group: ClassicGroup, protocol_type: str, protocols: list[tuple[str, bytes]],
                         instance_id: str | None, client_id: str, client_host: str, session_ms: int,
                         rebalance_ms: int, parked: ParkedResponse, records: list[Record]) -> CoordinatorResult:
        prefix = instance_id if instance_id is not None else client_id
        new_member_id = f"{prefix}-{self._new_uuid()}"
        while new_member_id in group.members or new_member_id in group.pending_members:
            new_member_id = f"{prefix}-{self._new_uuid()}"  # only a broken id source repeats itself
        if instance_id is not None:
            old_member_id = group.static_members.get(instance_id)
            if old_member_id is not None:
                return self._replace_static_member(group, instance_id, old_member_id, new_member_id, protocols,
                                                   session_ms, rebalance_ms, parked, records)
        elif parked.api_version >= 4:
            # KIP-394: hand out the id and wait for the client to come back with it, so a client
            # retrying after a timeout cannot leave phantom members behind.
            group.pending_members.add(new_member_id)
            self.timer.schedule(pending_key(group.group_id, new_member_id), session_ms,
                                lambda: self._expire_pending_member(group.group_id, new_member_id))
            parked.future.set_result(join_error(parked.api_version, E.MEMBER_ID_REQUIRED, new_member_id))
            return CoordinatorResult(records)
        member = ClassicGroupMember(new_member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                                    protocol_type, protocols)
        self._add_member_and_rebalance(group, member, parked, records)
        return CoordinatorResult(records)

    def _join_existing_member(self, group: ClassicGroup, member_id: str, protocol_type: str,
                              protocols: list[tuple[str, bytes]], instance_id: str | None, client_id: str,
                              client_host: str, session_ms: int, rebalance_ms: int, parked: ParkedResponse,
                              records: list[Record]) -> CoordinatorResult:
        version = parked.api_version
        if group.is_pending(member_id):
            if instance_id is not None:  # pending ids are only handed to dynamic members
                parked.future.set_result(join_error(version, E.UNKNOWN_SERVER_ERROR, member_id))
                return CoordinatorResult(records)
            self.timer.cancel(pending_key(group.group_id, member_id))
            member = ClassicGroupMember(member_id, None, client_id, client_host, rebalance_ms, session_ms,
                                        protocol_type, protocols)
            self._add_member_and_rebalance(group, member, parked, records)
            return CoordinatorResult(records)
        error = self.validate_member(group, member_id, instance_id)
        if error:
            parked.future.set_result(join_error(version, error, member_id))
            return CoordinatorResult(records)
        member = group.members[member_id]
        if group.state is S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, session_ms, rebalance_ms, parked, records)
        elif group.state is S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                parked.future.set_result(self._current_generation_response(group, member_id, version))
            else:
                self._update_member_and_rebalance(group, member, protocols, session_ms, rebalance_ms, parked, records)
        elif group.state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader's JoinGroup always rebalances: it may have seen topic metadata change.
                self._update_member_and_rebalance(group, member, protocols, session_ms, rebalance_ms, parked, records)
            else:
                parked.future.set_result(self._current_generation_response(group, member_id, version))
        else:
            parked.future.set_result(join_error(version, E.UNKNOWN_MEMBER_ID, member_id))
        return CoordinatorResult(records)

    def _current_generation_response(self, group: ClassicGroup, member_id: str, version: int) -> Any:
        return join_response(
            version, generation_id=group.generation_id, protocol_type=group.protocol_type,
            protocol_name=group.protocol_name, leader=group.leader_id or "", member_id=member_id,
            members=self._member_list(group) if group.is_leader(member_id) else ())

    @staticmethod
    def _member_list(group: ClassicGroup) -> list[Any]:
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

    def _replace_static_member(self, group: ClassicGroup, instance_id: str, old_member_id: str, new_member_id: str,
                               protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                               parked: ParkedResponse, records: list[Record]) -> CoordinatorResult:
        """KIP-345: a known instance id joins with a new member id; the old id is fenced."""
        old = group.members[old_member_id]
        for waiting, build in ((old.join, lambda v: join_error(v, E.FENCED_INSTANCE_ID, old_member_id)),
                               (old.sync, lambda v: sync_response(v, E.FENCED_INSTANCE_ID))):
            if waiting is not None:
                waiting.future.set_result(build(waiting.api_version))
        leader_before = group.leader_id
        self.timer.cancel(heartbeat_key(group.group_id, old_member_id))
        self._timer_due.pop((group.group_id, old_member_id), None)
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        group.update_member(member, protocols, rebalance_ms, session_ms)
        self._set_deadline(group, member, self.clock.now_ms() + session_ms)
        if group.state is S.STABLE and group.select_protocol() == group.protocol_name:
            # Same protocol: no rebalance. Persist the new member id with unchanged assignments,
            # then answer with the current generation.
            version = parked.api_version
            if version >= 9:
                leader, skip = group.leader_id or "", group.is_leader(new_member_id)
            else:
                # Before KIP-814 a rejoining static leader must not think it is the leader (it
                # would run the assignor); report the leader as it was.
                leader, skip = leader_before or "", False
            response = join_response(
                version, generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=leader, member_id=new_member_id,
                members=self._member_list(group) if skip else (), skip_assignment=skip)
            records.append((GroupMetadataKey(group.group_id), group.to_record_value()))
            return CoordinatorResult(records, on_appended=lambda: parked.future.set_result(response))
        group.set_join(member, parked)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            # The leader may already have assigned partitions to the old member id: rebalance.
            self._prepare_rebalance(group, records)
        else:
            self._maybe_complete_join_phase(group, records)
        return CoordinatorResult(records)

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
                            lambda: self._on_initial_delay(group_id, delay, remaining))

    def _on_initial_delay(self, group_id: str, delay: int, remaining: int) -> CoordinatorResult:
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
        self.timer.schedule(join_key(group_id), group.rebalance_timeout_ms(), lambda: self._on_join_timeout(group_id))

    def _on_join_timeout(self, group_id: str) -> CoordinatorResult:
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
                            lambda: self._expire_pending_sync(group_id, generation))

    def _expire_pending_sync(self, group_id: str, generation: int) -> CoordinatorResult:
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
                            lambda: self._on_session_timer(group_id, member_id))

    def _on_session_timer(self, group_id: str, member_id: str) -> CoordinatorResult:
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

    def _expire_pending_member(self, group_id: str, member_id: str) -> CoordinatorResult:
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

    # =========================================================================================
    # SyncGroup (v0-5)

    def sync_group(self, request: Any, api_version: int, future: ResponseHandle) -> CoordinatorResult:
        """Answer through ``future``; the leader's assignment is answered (to everyone) only
        after the GroupMetadata record holding it is durable (``on_appended``)."""
        def fail(error: int) -> CoordinatorResult:
            future.set_result(sync_response(api_version, error))
            return CoordinatorResult()

        group_id, member_id = request.group_id, request.member_id
        instance_id = request.group_instance_id if api_version >= 3 else None
        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return fail(E.UNKNOWN_MEMBER_ID)
        if group.state is S.DEAD:
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        error = self.validate_member(group, member_id, instance_id)
        if error:
            return fail(error)
        if request.generation_id != group.generation_id:
            return fail(E.ILLEGAL_GENERATION)
        if api_version >= 5 and (
                (request.protocol_type is not None and request.protocol_type != group.protocol_type)
                or (request.protocol_name is not None and request.protocol_name != group.protocol_name)):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is S.EMPTY:
            return fail(E.UNKNOWN_MEMBER_ID)
        if group.state is S.PREPARING_REBALANCE:
            return fail(E.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._received_sync(group, member_id)
        if group.state is S.STABLE:
            self.touch_member(group, member_id)
            future.set_result(sync_response(api_version, E.NONE, member.assignment, group.protocol_type,
                                            group.protocol_name))
            return CoordinatorResult()
        # CompletingRebalance: park; the leader's SyncGroup carries everyone's assignment.
        if member.sync is not None and member.sync.future is not future:
            member.sync.future.set_result(sync_response(member.sync.api_version, E.REBALANCE_IN_PROGRESS))
        member.sync = ParkedResponse(future, api_version)
        if not group.is_leader(member_id):
            return CoordinatorResult()
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments if a.member_id in group.members}
        assignments = {m: assignments.get(m, b"") for m in group.members}
        generation = group.generation_id

        def on_appended() -> None:
            if self.groups.get(group_id) is not group or group.state is not S.COMPLETING_REBALANCE \
                    or group.generation_id != generation:
                return
            now = self.clock.now_ms()
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
                if m.sync is not None:
                    m.sync.future.set_result(sync_response(m.sync.api_version, E.NONE, m.assignment,
                                                           group.protocol_type, group.protocol_name))
                    m.sync = None
                self._set_deadline(group, m, now + m.session_timeout_ms)
            group.transition_to(S.STABLE, now)

        record = (GroupMetadataKey(group_id), group.to_record_value(assignments))
        return CoordinatorResult([record], on_appended=on_appended)

    def _received_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timer.cancel(sync_key(group.group_id))

    # =========================================================================================
    # Heartbeat (v0-4)

    def heartbeat(self, request: Any, api_version: int) -> CoordinatorResult:
        return CoordinatorResult(response=heartbeat_response(api_version, self._heartbeat(request, api_version)))

    def _heartbeat(self, request: Any, api_version: int) -> int:
        if not request.group_id:
            return E.INVALID_GROUP_ID
        group = self.groups.get(request.group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, request.member_id, request.group_instance_id if api_version >= 3 else None)
        if error:
            return error
        if request.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.state is S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self.touch_member(group, request.member_id)
        return E.REBALANCE_IN_PROGRESS if group.state is S.PREPARING_REBALANCE else E.NONE

    # =========================================================================================
    # LeaveGroup (v0-5)

    def leave_group(self, request: Any, api_version: int) -> CoordinatorResult:
        if api_version < 3:
            identities: list[tuple[str, str | None]] = [(request.member_id, None)]
        else:
            identities = [(m.member_id, m.group_instance_id) for m in request.members]
        if not request.group_id:
            return CoordinatorResult(response=leave_response(api_version, E.INVALID_GROUP_ID, []))
        group = self.groups.get(request.group_id)
        if group is None:
            return CoordinatorResult(response=leave_response(
                api_version, E.NONE, [(m, i, E.UNKNOWN_MEMBER_ID) for m, i in identities]))
        if group.state is S.DEAD:
            return CoordinatorResult(response=leave_response(api_version, E.COORDINATOR_NOT_AVAILABLE, []))
        results: list[tuple[str, str | None, int]] = []
        leaving: list[ClassicGroupMember] = []
        pending_left = False
        for member_id, instance_id in identities:
            if not member_id and instance_id is not None:
                # Administrative removal by instance id (AdminClient removeMembersFromConsumerGroup).
                known = group.static_members.get(instance_id)
                error = E.NONE if known is not None else E.UNKNOWN_MEMBER_ID
                if known is not None and group.members[known] not in leaving:
                    leaving.append(group.members[known])
            elif group.is_pending(member_id):
                group.remove(member_id)
                self.timer.cancel(pending_key(group.group_id, member_id))
                error, pending_left = E.NONE, True
            else:
                error = self.validate_member(group, member_id, instance_id)
                if not error and group.members[member_id] not in leaving:
                    leaving.append(group.members[member_id])
            results.append((member_id, instance_id, error))
        records: list[Record] = []
        if leaving:
            self._remove_members_and_update(group, leaving, records)
        elif pending_left:
            self._maybe_complete_join_phase(group, records)
        return CoordinatorResult(records, leave_response(api_version, E.NONE, results))

    # =========================================================================================
    # Groups as a whole (used by the shard's admin and expiry operations)

    def delete_group_soft_state(self, group: ClassicGroup) -> None:
        """The group is going away (DeleteGroups, expiry): Dead, timers cancelled. Its tombstone,
        once replayed, removes it."""
        for member_id in list(group.members) + list(group.pending_members):
            self.timer.cancel(heartbeat_key(group.group_id, member_id))
            self.timer.cancel(pending_key(group.group_id, member_id))
            self._timer_due.pop((group.group_id, member_id), None)
        self.timer.cancel(join_key(group.group_id))
        self.timer.cancel(sync_key(group.group_id))
        group.transition_to(S.DEAD, self.clock.now_ms())

    def ensure_group(self, group_id: str) -> ClassicGroup:
        """The group, created Empty if absent (a "simple" group: offsets, no protocol)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=self.clock.now_ms())
        return group

    # =========================================================================================
    # Replay and loading

    def replay_group_metadata(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        group_id = key.group
        if value is None:
            self.group_records.pop(group_id, None)
            group = self.groups.pop(group_id, None)
            if group is not None and group.state is not S.DEAD and self.loaded:
                log.warning("tombstone replayed for live group %s in state %s", group_id, group.state.value)
            return
        self.group_records[group_id] = value
        if self.loaded and group_id not in self.groups:
            self._install_loaded_group(ClassicGroup.from_record(group_id, value))

    def on_loaded(self) -> None:
        """Build the live groups from their records (rule 3)."""
        self.loaded = True
        for group_id, value in self.group_records.items():
            self._install_loaded_group(ClassicGroup.from_record(group_id, value))

    def on_unloaded(self) -> None:
        """The partition moved away (Kafka ``onResignation``): parked JoinGroups and SyncGroups
        are answered NOT_COORDINATOR so their clients look the coordinator up again."""
        for group in self.groups.values():
            for member in group.members.values():
                if member.join is not None:
                    member.join.future.set_result(join_error(member.join.api_version, E.NOT_COORDINATOR,
                                                             member.member_id))
                    group.set_join(member, None)
                if member.sync is not None:
                    member.sync.future.set_result(sync_response(member.sync.api_version, E.NOT_COORDINATOR))
                    member.sync = None
        self.groups.clear()

    def _install_loaded_group(self, group: ClassicGroup) -> None:
        self.groups[group.group_id] = group
        now = self.clock.now_ms()
        for member in group.members.values():
            self._set_deadline(group, member, now + member.session_timeout_ms)
        if len(group.members) > self.config.max_size:
            log.info("group %s has %d members, more than group.max.size: rebalancing", group.group_id,
                     len(group.members))
            records: list[Record] = []
            self._prepare_rebalance(group, records)

