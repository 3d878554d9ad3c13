"""Members leaving a KIP-848 consumer group or fenced from it: a heartbeat with member epoch -1
(leave) or -2 (a static member's temporary leave), the removal of members with the group epoch
bump it causes, and the online downgrade to a classic group when the last consumer-protocol
member goes (KIP-848's "Upgrade & Downgrade",
https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol).

Kafka ``GroupMetadataManager.consumerGroupLeave``, ``consumerGroupFenceMember(s)``,
``validateOnlineDowngradeWithFencedMember`` and ``convertToClassicGroup``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from protocol.consumer_group_messages import ConsumerGroupHeartbeatResponse
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
)
from protocol.consumer_offsets import GroupMetadataKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ...runtime.contract import Clock, CoordinatorResult, Record, Timer
from ..config import GroupConfig
from ..topics_image import TopicsImage
from .group import ConsumerGroup, ResolvedRegex
from .member import LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupMember
from .metadata_hash import topics_hash
from .migration import classic_group_value, downgrade_enabled
from .records import current_value, group_tombstones, remove_member_records
from .timers import rebalance_timeout_key, session_timeout_key
from .validation import HeartbeatError

__all__ = ["Fencing"]

log = logging.getLogger("groupcoord.group.consumer")

E = ErrorCode
R = ConsumerGroupHeartbeatResponse

ResponseT = TypeVar("ResponseT")


class Fencing:
    """Base of :class:`~coordinator.group.consumer.manager.ConsumerGroupManager`: leaving and
    fencing."""

    groups: dict[str, ConsumerGroup]
    config: GroupConfig
    clock: Clock
    timer: Timer
    topics: TopicsImage
    session_deadlines: dict[tuple[str, str], int]
    hash_checked_at: dict[str, int]
    on_downgraded: Callable[[str], None]

    if TYPE_CHECKING:
        # The manager's (regexes) and the timers'.
        def _regex_records(self, group: ConsumerGroup, members: Mapping[str, ConsumerGroupMember], now: int,
                           records: list[Record], refresh: bool = False) -> dict[str, ResolvedRegex]: ...

        @staticmethod
        def _subscribed_names(members: Mapping[str, ConsumerGroupMember], regexes: Mapping[str, ResolvedRegex]
                              ) -> set[str]: ...

        def cancel_classic_timers(self, group_id: str, member_id: str) -> None: ...

    def _leave(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        group_id: str = request.group_id
        member_id: str = request.member_id
        epoch: int = request.member_epoch
        group = self.groups.get(group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        instance_id: str | None = request.instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            static = group.static_member(instance_id)
            if static is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if static.member_id != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                     f"{instance_id} was fenced by member {static.member_id}.")
            member = static
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Kept until its session times out: the instance may come back under a new id.
                leaving = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                              partitions_pending_revocation={})
                return CoordinatorResult(
                    [(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), current_value(leaving))],
                    R(version=api_version, throttle_time_ms=0, error_code=0, error_message=None,
                      member_id=member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, heartbeat_interval_ms=0,
                      assignment=None))
        log.info("[GroupId %s] Member %s left the consumer group.", group_id, member_id)
        return self.fence_member(group, member.member_id, R(
            version=api_version, throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id,
            member_epoch=epoch, heartbeat_interval_ms=0, assignment=None))

    def fence_member(self, group: ConsumerGroup, member_id: str, response: ResponseT | None = None
                     ) -> CoordinatorResult[ResponseT]:
        """Remove a member (Kafka's ``consumerGroupFenceMember``): the group converts to a
        classic group when the member was its last consumer-protocol member and the policy allows
        it (``_may_downgrade``), else it loses the member and bumps its epoch."""
        if self._may_downgrade(group, member_id):
            return CoordinatorResult(self._downgrade_records(group, member_id), response,
                                     on_appended=lambda: self.on_downgraded(group.group_id))
        return CoordinatorResult(self.fence_member_records(group, member_id), response)

    def _may_downgrade(self, group: ConsumerGroup, member_id: str) -> bool:
        """Kafka ``validateOnlineDowngradeWithFencedMember``."""
        leaving = group.members.get(member_id)
        if leaving is None or leaving.uses_classic_protocol or len(group.members) <= 1:
            return False
        if any(not m.uses_classic_protocol for mid, m in group.members.items() if mid != member_id):
            return False
        if not downgrade_enabled(self.config.consumer_migration_policy):
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", group.group_id)
            return False
        if len(group.members) - 1 > self.config.max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", group.group_id)
            return False
        return True

    def may_downgrade_replacing(self, group: ConsumerGroup, replaced_id: str) -> bool:
        """Kafka ``validateOnlineDowngradeWithReplacedMemberId``: a classic static member
        replaces the group's last consumer-protocol member."""
        replaced = group.members.get(replaced_id)
        if replaced is None or replaced.uses_classic_protocol:
            return False
        if any(not m.uses_classic_protocol for mid, m in group.members.items() if mid != replaced_id):
            return False
        if not downgrade_enabled(self.config.consumer_migration_policy):
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", group.group_id)
            return False
        if len(group.members) > self.config.max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", group.group_id)
            return False
        return True

    def _downgrade_records(self, group: ConsumerGroup, member_id: str,
                           joining: ConsumerGroupMember | None = None) -> list[Record]:
        """The consumer group's tombstones, then the classic group's GroupMetadata (Kafka
        ``convertToClassicGroup``); every consumer-group timer of the group goes. ``joining``:
        the classic static member that replaced ``member_id`` earlier in the same batch."""
        gid = group.group_id
        records = group_tombstones(group, None if joining is None else (member_id, joining.member_id))
        records.append((GroupMetadataKey(gid), classic_group_value(group, member_id, self.topics, self.clock.now_ms(),
                                                                   joining)))
        if joining is not None:
            self.timer.cancel(rebalance_timeout_key(gid, joining.member_id))
        for mid in group.members:
            self.timer.cancel(session_timeout_key(gid, mid))
            self.timer.cancel(rebalance_timeout_key(gid, mid))
            self.session_deadlines.pop((gid, mid), None)
            self.cancel_classic_timers(gid, mid)
        log.info("[GroupId %s] Converting the consumer group to a classic group.", gid)
        return records

    def downgrade_replacing_records(self, group: ConsumerGroup, replaced_id: str,
                                    joining: ConsumerGroupMember) -> list[Record]:
        return self._downgrade_records(group, replaced_id, joining)

    def fence_member_records(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        """Remove a member and bump the group epoch."""
        return self.remove_members_records(group, {member_id})

    def remove_members_records(self, group: ConsumerGroup, member_ids: set[str]) -> list[Record]:
        """Remove members, tombstone the regexes only they used, bump the group epoch (with the
        metadata hash of what the others subscribe to) and cancel the members' timers."""
        records: list[Record] = []
        for member_id in member_ids:
            records += remove_member_records(group.group_id, member_id)
        members = {m: v for m, v in group.members.items() if m not in member_ids}
        regexes = self._regex_records(group, members, self.clock.now_ms(), records)
        metadata_hash = topics_hash(self._subscribed_names(members, regexes), self.topics)
        self.hash_checked_at[group.group_id] = self.topics.version
        records.append((ConsumerGroupMetadataKey(group.group_id),
                        ConsumerGroupMetadataValue(group.group_epoch + 1, metadata_hash, group.creation_time_ms)))
        for member_id in member_ids:
            self.timer.cancel(session_timeout_key(group.group_id, member_id))
            self.session_deadlines.pop((group.group_id, member_id), None)
            self.timer.cancel(rebalance_timeout_key(group.group_id, member_id))
            self.cancel_classic_timers(group.group_id, member_id)
        return records
