"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, their timers, and the
replay of GroupMetadata records.

Kafka ``GroupMetadataManager`` (classic part) and the old ``GroupCoordinator``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
https://github.com/apache/kafka/blob/3.9.0/core/src/main/scala/kafka/coordinator/group/GroupCoordinator.scala
Like Kafka's managers, this class has two kinds of methods:
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
   onto a live group only updates ``group_records``; it never rebuilds the live group. While the
   partition loads (or a hot standby replays), replay stores records, and keeps an Empty group
   for each group that has offsets (what loading would build for it anyway, built as the records
   arrive: a takeover does not build them all at once); after :meth:`on_loaded`, a record for a
   group with no live object builds one from the record.
3. Loading replays every record, then :meth:`on_loaded` builds each group from its last record
   (Stable with members, else Empty), gives every member a fresh session deadline and makes
   groups over ``group.max.size`` rebalance.
4. Sessions cost O(1) per heartbeat and create no timer churn: a heartbeat only moves the
   member's stored deadline; its session timer re-arms itself lazily (see ``rebalance``). A
   member parked in JoinGroup or SyncGroup counts as alive, except a brand-new member, which has
   the 5-minute new-member deadline instead of its session timeout.

The rebalance machinery (phases, sessions, timers) lives in ``rebalance.Rebalancer``, this
class's base; this module holds the request handlers and the replay.

Where Kafka leaves a parked response unanswered (a JoinGroup superseded by another JoinGroup of
the same member, a SyncGroup of a member that is removed) we answer it, so the runtime never
holds a future forever: the superseded JoinGroup gets REBALANCE_IN_PROGRESS (the client rejoins)
and a removed member's SyncGroup gets UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue
from protocol.errors import ErrorCode
from protocol.hot_responses import HeartbeatAnswer
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..runtime.contract import Clock, CoordinatorResult, Record, ResponseHandle, Timer
from .classic_group import ClassicGroup, ClassicGroupMember, ParkedResponse
from .config import GroupConfig
from .group_state import GroupState
from .rebalance import Rebalancer, heartbeat_key, join_key, pending_key, sync_key
from .responses import heartbeat_response, join_error, join_response, leave_response, sync_response

__all__ = ["GroupManager"]

log = logging.getLogger("groupcoord.group")

E = ErrorCode
S = GroupState


class GroupManager(Rebalancer):
    """Classic groups of one ``__consumer_offsets`` partition. Call only from the partition's
    serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer,
                 new_uuid: Callable[[], str] | None = None) -> None:
        super().__init__(config, clock, timer)
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        #: The last GroupMetadata record of each group (hard state; replay only).
        self.group_records: dict[str, GroupMetadataValue] = {}
        #: False while the partition is being loaded.
        self.loaded = False

    # =========================================================================================
    # JoinGroup (v0-9)

    def join_group(self, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
                   future: ResponseHandle) -> CoordinatorResult[None]:
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

        def fail(error: int, answer_member_id: str = member_id) -> CoordinatorResult[None]:
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
                         rebalance_ms: int, parked: ParkedResponse, records: list[Record]) -> CoordinatorResult[None]:
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
                                lambda: self._expire_pending_member(group.group_id, new_member_id),
                                name="expire-pending-member")
            parked.future.set_result(join_error(parked.api_version, E.MEMBER_ID_REQUIRED, new_member_id))
            return CoordinatorResult(records)
        member = ClassicGroupMember(new_member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                                    protocol_type, protocols)
        self._add_member_and_rebalance(group, member, parked, records)
        return CoordinatorResult(records)

    def _join_existing_member(self, group: ClassicGroup, member_id: str, protocol_type: str,
                              protocols: list[tuple[str, bytes]], instance_id: str | None, client_id: str,
                              client_host: str, session_ms: int, rebalance_ms: int, parked: ParkedResponse,
                              records: list[Record]) -> CoordinatorResult[None]:
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

    def _replace_static_member(self, group: ClassicGroup, instance_id: str, old_member_id: str, new_member_id: str,
                               protocols: list[tuple[str, bytes]], session_ms: int, rebalance_ms: int,
                               parked: ParkedResponse, records: list[Record]) -> CoordinatorResult[None]:
        """KIP-345: a known instance id joins with a new member id; the old id is fenced."""
        old = group.members[old_member_id]
        fenced: list[tuple[ParkedResponse | None, Callable[[int], KafkaResponse]]] = [
            (old.join, lambda v: join_error(v, E.FENCED_INSTANCE_ID, old_member_id)),
            (old.sync, lambda v: sync_response(v, E.FENCED_INSTANCE_ID))]
        for waiting, build in fenced:
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

    # =========================================================================================
    # SyncGroup (v0-5)

    def sync_group(self, request: KafkaRequest, api_version: int, future: ResponseHandle) -> CoordinatorResult[None]:
        """Answer through ``future``; the leader's assignment is answered (to everyone) only
        after the GroupMetadata record holding it is durable (``on_appended``)."""
        def fail(error: int) -> CoordinatorResult[None]:
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

    # =========================================================================================
    # Heartbeat (v0-4)

    def heartbeat(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[HeartbeatAnswer]:
        return CoordinatorResult(response=heartbeat_response(api_version, self._heartbeat(request, api_version)))

    def _heartbeat(self, request: KafkaRequest, api_version: int) -> int:
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

    def leave_group(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
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
        error: int
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

    def answer_parked(self, group: ClassicGroup, error: int) -> None:
        """Answer every parked JoinGroup and SyncGroup of the group with ``error``."""
        for member in group.members.values():
            if member.join is not None:
                member.join.future.set_result(join_error(member.join.api_version, error, member.member_id))
                group.set_join(member, None)
            if member.sync is not None:
                member.sync.future.set_result(sync_response(member.sync.api_version, error))
                member.sync = None

    def rebalance_converted_group(self, group_id: str) -> None:
        """A consumer group became this classic group (online downgrade) and its GroupMetadata
        is durable and replayed: the live group (built from the record by the replay, Stable)
        rebalances, as Kafka's ``convertToClassicGroup`` makes it. Starting a rebalance from
        Stable writes no record (it only arms the join timer)."""
        value = self.group_records.get(group_id)
        if value is None:
            return
        group = self.groups.get(group_id)
        if group is None or (not group.members and value.members):
            self.groups.pop(group_id, None)
            self._install_loaded_group(ClassicGroup.from_record(group_id, value))
            group = self.groups[group_id]
        if group.state is S.STABLE:
            records: list[Record] = []
            self._prepare_rebalance(group, records)
            assert not records, records

    def force_rebalance(self, group: ClassicGroup, records: list[Record]) -> bool:
        """Start a rebalance of a Stable or CompletingRebalance group now, as Kafka's
        ``prepareRebalance`` does when it must rebalance one (members heartbeating get
        REBALANCE_IN_PROGRESS and rejoin; parked SyncGroups get it at once; the join completes
        into the next generation). False for a group with nothing to rebalance (Empty, Dead);
        True for one already preparing a rebalance (its members rejoin anyway)."""
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, records)
            return True
        return group.state is S.PREPARING_REBALANCE

    def expire_member(self, group: ClassicGroup, member: ClassicGroupMember, records: list[Record]) -> None:
        """Remove ``member`` as its session expiry would (``_on_session_timer``): its parked
        JoinGroup is answered UNKNOWN_MEMBER_ID and the group rebalances."""
        log.info("member %s of group %s: removed as if its session expired", member.member_id, group.group_id)
        self._remove_members_and_update(group, [member], records)

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
            self.answer_parked(group, E.NOT_COORDINATOR)
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
