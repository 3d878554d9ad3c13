"""Members that speak the classic protocol inside a consumer group (online migration): their
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, translated onto the consumer group's rules.

Kafka 4's ``GroupMetadataManager`` (``classicGroupJoinToConsumerGroup``,
``classicGroupSyncToConsumerGroup``, ``classicGroupHeartbeatToConsumerGroup``,
``classicGroupLeaveToConsumerGroup``):
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
and KIP-848's "Upgrade & Downgrade"
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol).

* JoinGroup is a heartbeat in disguise: it records the member's subscription (decoded from its
  ConsumerProtocol metadata) with ClassicMemberMetadata (its session timeout and protocols), may
  bump the group epoch and compute a target assignment with the server assignor, and reconciles
  the member one step, its owned partitions being those of its subscription. It answers at once
  (no waiting for other members) with the member epoch as generation id and the member's first
  protocol; there is no leader, the server assigned.
* SyncGroup answers the member's current assignment as a ConsumerProtocol assignment, or
  REBALANCE_IN_PROGRESS when the group moved on and the member must rejoin first.
* Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to reconcile: the group
  epoch is ahead of it, it has partitions to revoke, or partitions it waits for are now free.
  A classic member revokes by rejoining without them, so a partition it is giving up stays its
  own (pending revocation) until that JoinGroup, and goes to no one else before.
* LeaveGroup fences the members and bumps the group epoch.

Timers (soft state): the session timeout of ClassicMemberMetadata; after a JoinGroup, SyncGroup
must come within the rebalance timeout; once told to rejoin, JoinGroup must.
"""

from __future__ import annotations

import dataclasses
import logging

from protocol.consumer_group_records import ClassicMemberMetadata, ClassicProtocol
from protocol.consumer_protocol import MalformedConsumerProtocol, decode_subscription, protocol_version
from protocol.errors import ErrorCode
from protocol.hot_responses import HeartbeatAnswer
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ...runtime.contract import CoordinatorResult, Record, ResponseHandle
from ..responses import heartbeat_response, join_error, join_response, leave_response, sync_response
from .group import ConsumerGroup
from .manager import CONSUMER_GROUP_TYPE, ConsumerGroupManager
from .member import ConsumerGroupMember, MemberState
from .migration import assignment_bytes, owned_partitions
from .timers import classic_join_timeout_key, classic_sync_timeout_key
from .validation import HeartbeatError

__all__ = ["ClassicMembers"]

log = logging.getLogger("groupcoord.group.consumer")

E = ErrorCode
#: JoinGroup v4+ makes a new dynamic member rejoin with the id it is given (KIP-394).
JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION = 4


class _Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ClassicMembers:
    """The classic protocol's handlers for consumer groups; call only from the partition's
    serial executor."""

    def __init__(self, manager: ConsumerGroupManager) -> None:
        self.manager = manager

    # --- JoinGroup -----------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
             future: ResponseHandle) -> CoordinatorResult[None]:
        """Answer through ``future`` once the records are durable."""
        m = self.manager
        group_id = group.group_id
        instance_id: str | None = request.group_instance_id if api_version >= 5 else None
        session_ms: int = request.session_timeout_ms
        rebalance_ms: int = request.rebalance_timeout_ms if api_version >= 1 and request.rebalance_timeout_ms >= 0 \
            else session_ms
        protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
        member_id: str = request.member_id or ""
        unknown = not member_id

        def fail(error: int, answer_member_id: str = member_id) -> CoordinatorResult[None]:
            future.set_result(join_error(api_version, error, answer_member_id))
            return CoordinatorResult()

        if not m.config.session_timeout_min_ms <= session_ms <= m.config.session_timeout_max_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        if unknown:
            member_id = m._new_uuid()
        if len(group.members) >= m.config.consumer_max_size and member_id not in group.members:
            return fail(E.GROUP_MAX_SIZE_REACHED, "")
        if not self._supports(group, request.protocol_type, protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and instance_id is None and api_version >= JOIN_REQUIRES_KNOWN_MEMBER_ID_VERSION:
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group; it rejoins "
                     "with member id %s.", group_id, member_id)
            return fail(E.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedConsumerProtocol:
            return fail(E.UNKNOWN_SERVER_ERROR)

        records: list[Record] = []
        replaced: ConsumerGroupMember | None = None
        existing = group.static_member(instance_id)
        if existing is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
            if member.member_id in group.members and not member.uses_classic_protocol:
                return fail(E.UNKNOWN_MEMBER_ID)
        elif existing.member_id == member_id:
            member = existing
        elif unknown:
            # A static member comes back under a new id: it takes over the old one's state.
            replaced = existing
            member = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            records += m.replacement_records(group, existing, member)
        else:
            return fail(E.FENCED_INSTANCE_ID)

        updated = dataclasses.replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=subscription.topics,
            client_id=client_id, client_host=client_host,
            classic_member_metadata=ClassicMemberMetadata(
                session_ms, tuple(ClassicProtocol(name, data) for name, data in protocols)))
        now = m.clock.now_ms()
        try:
            reconciled = m._update_member(group, member, updated, replaced, owned_partitions(
                subscription.owned_partitions, m.topics), now, records)
        except HeartbeatError as error:
            return fail(error.code)
        # A classic static member replacing the last consumer-protocol member downgrades the
        # group (Kafka ``validateOnlineDowngradeWithReplacedMemberId``); it rebalances only when
        # the subscription changed.
        downgrade = replaced is not None and m.may_downgrade_replacing(group, replaced.member_id)
        rebalance = False
        if downgrade:
            assert replaced is not None
            records += m.downgrade_replacing_records(group, replaced.member_id, reconciled)
            rebalance = reconciled.subscribed_topic_names != replaced.subscribed_topic_names
        response = join_response(api_version, generation_id=reconciled.member_epoch,
                                 protocol_type=CONSUMER_GROUP_TYPE, protocol_name=protocols[0][0],
                                 member_id=member_id)

        def on_appended() -> None:
            if rebalance:
                m.on_downgraded(group_id)
            if group_id in m.groups and member_id in m.groups[group_id].members:
                m.timer.cancel(classic_join_timeout_key(group_id, member_id))
                m._schedule_session_timeout(group_id, member_id, session_ms)
                self._schedule_fence(classic_sync_timeout_key(group_id, member_id), group_id, member_id,
                                     rebalance_ms, "the member failed to sync within timeout", if_absent=False)
            future.set_result(response)

        return CoordinatorResult(records, on_appended=on_appended)

    @staticmethod
    def _supports(group: ConsumerGroup, protocol_type: str | None, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka ``ConsumerGroup.supportsClassicProtocols``: protocol type "consumer" and a
        protocol every classic member supports."""
        if protocol_type != CONSUMER_GROUP_TYPE or not protocols:
            return False
        classic = [mem.classic_member_metadata for mem in group.members.values()
                   if mem.classic_member_metadata is not None]
        return any(all(any(p.name == name for p in c.supported_protocols) for c in classic) for name, _ in protocols)

    # --- SyncGroup -----------------------------------------------------------------------------

    def sync(self, group: ConsumerGroup, request: KafkaRequest, api_version: int,
             future: ResponseHandle) -> CoordinatorResult[None]:
        m = self.manager
        group_id = group.group_id
        try:
            member = self._classic_member(group, request.member_id,
                                          request.group_instance_id if api_version >= 3 else None)
            if request.generation_id != member.member_epoch:
                raise _Refused(E.ILLEGAL_GENERATION)
            assert member.classic_member_metadata is not None
            protocol = member.classic_member_metadata.supported_protocols[0]
            if api_version >= 5 and (
                    (request.protocol_type is not None and request.protocol_type != CONSUMER_GROUP_TYPE)
                    or (request.protocol_name is not None and request.protocol_name != protocol.name)):
                raise _Refused(E.INCONSISTENT_GROUP_PROTOCOL)
            self._refuse_if_rebalancing(group, member)
        except _Refused as refused:
            future.set_result(sync_response(api_version, refused.code))
            return CoordinatorResult()
        member_id = member.member_id
        m.timer.cancel(classic_sync_timeout_key(group_id, member_id))
        m._schedule_session_timeout(group_id, member_id, member.classic_member_metadata.session_timeout_ms)
        try:
            version = protocol_version(protocol.metadata)
        except MalformedConsumerProtocol:
            version = 0
        future.set_result(sync_response(api_version, E.NONE,
                                        assignment_bytes(member.assigned_partitions, version, m.topics),
                                        CONSUMER_GROUP_TYPE, protocol.name))
        return CoordinatorResult()

    def _refuse_if_rebalancing(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka ``throwIfRebalanceInProgress``: the group epoch moved past the member, which must
        rejoin (unless it is still revoking: its next rejoin comes by itself)."""
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group.group_id, member)
            raise _Refused(E.REBALANCE_IN_PROGRESS)

    # --- Heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, group: ConsumerGroup, request: KafkaRequest,
                  api_version: int) -> CoordinatorResult[HeartbeatAnswer]:
        m = self.manager
        try:
            member = self._classic_member(group, request.member_id,
                                          request.group_instance_id if api_version >= 3 else None)
            if request.generation_id != member.member_epoch:
                raise _Refused(E.ILLEGAL_GENERATION)
        except _Refused as refused:
            return CoordinatorResult(response=heartbeat_response(api_version, refused.code))
        assert member.classic_member_metadata is not None
        m._schedule_session_timeout(group.group_id, member.member_id,
                                    member.classic_member_metadata.session_timeout_ms)
        error = E.NONE
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member)):
            error = E.REBALANCE_IN_PROGRESS
            self._schedule_join_timeout(group.group_id, member)
        return CoordinatorResult(response=heartbeat_response(api_version, error))

    # --- LeaveGroup ----------------------------------------------------------------------------

    def leave(self, group: ConsumerGroup, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        m = self.manager
        group_id = group.group_id
        if api_version < 3:
            identities: list[tuple[str, str | None]] = [(request.member_id, None)]
        else:
            identities = [(i.member_id, i.group_instance_id) for i in request.members]
        results: list[tuple[str, str | None, int]] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id in identities:
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise _Refused(E.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise _Refused(E.UNKNOWN_MEMBER_ID)
                    # An admin client removes a static member by instance id alone.
                    if member_id and member.member_id != member_id:
                        raise _Refused(E.FENCED_INSTANCE_ID)
                if not member.uses_classic_protocol:
                    raise _Refused(E.UNKNOWN_MEMBER_ID)
            except _Refused as refused:
                results.append((member_id, instance_id, refused.code))
                continue
            log.info("[GroupId %s] Member %s left the consumer group through LeaveGroup.", group_id, member.member_id)
            leaving[member.member_id] = member
            results.append((member.member_id, instance_id, E.NONE))
        records: list[Record] = []
        if leaving:
            records = m.remove_members_records(group, set(leaving))
        return CoordinatorResult(records, leave_response(api_version, E.NONE, results))

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _Refused(E.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _Refused(E.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise _Refused(E.FENCED_INSTANCE_ID)
        if not member.uses_classic_protocol:
            raise _Refused(E.UNKNOWN_MEMBER_ID)
        return member

    def _schedule_join_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        self._schedule_fence(classic_join_timeout_key(group_id, member.member_id), group_id, member.member_id,
                             member.rebalance_timeout_ms, "the classic member failed to join within the rebalance "
                             "timeout", if_absent=True)

    def _schedule_fence(self, key: str, group_id: str, member_id: str, delay_ms: int, reason: str, *,
                        if_absent: bool) -> None:
        m = self.manager
        if if_absent and m.timer.is_scheduled(key):
            return

        def fence() -> CoordinatorResult[None]:
            group = m.groups.get(group_id)
            if group is None or member_id not in group.members:
                return CoordinatorResult()
            log.info("[GroupId %s] Member %s fenced from the group because %s.", group_id, member_id, reason)
            return m.fence_member(group, member_id)

        m.timer.schedule(key, max(delay_ms, 0), fence, name="consumer-group-classic-member-timeout")


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka ``ConsumerGroup.waitingOnUnreleasedPartition``: a partition of the member's target
    it does not have yet is still owned by another member."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, parts in group.target.get(member.member_id, {}).items():
        have = member.assigned_partitions.get(topic_id, frozenset())
        for p in parts:
            if p not in have and group.partition_epoch(topic_id, p) != -1:
                return True
    return False
