"""KIP-848 consumer groups of one ``__consumer_offsets`` partition: ConsumerGroupHeartbeat (its
update, target assignment and reconciliation steps, the online upgrade of a classic group it may
trigger) and the regexes a heartbeat brings.

Kafka ``GroupMetadataManager`` (consumer part):
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java

The rest of the manager lives in its bases and helpers, one module each: ``validation.py`` (the
heartbeat's request and member-epoch checks, the offset commit/fetch checks), ``timers.py``
(timer keys; session, rebalance and regex-resolution timers), ``describe.py``
(ConsumerGroupDescribe), ``fencing.py`` (leaving, fencing and the online downgrade they may
trigger), ``target_assignment.py`` (the server assignor's run and KIP-1263 batching),
``replay.py`` (the replay of record types 3-8 and 16 and the snapshot), ``records.py`` (the record
builders).

Rules (as for classic groups, ``group_manager.py``):

1. Hard state is what the records say (:class:`ConsumerGroup` objects in ``groups``); only
   :meth:`replay` changes it, at load, on a hot standby and after a write alike. Handlers compute
   on copies and return records.
2. Soft state: timers (session and rebalance timeouts, keyed as Kafka keys them), when each
   group last computed a target assignment (KIP-1263 batching) and the topics-image version each
   group last hashed its topics at.

One heartbeat (KIP-848 "Consumer Group Heartbeat"): (1) create or update the member, bumping the
group epoch when membership, subscriptions or the subscribed topics' metadata hash change;
(2) when the group epoch is ahead of the assignment epoch, and the group's last computation is
at least ``consumer.assignment.interval.ms`` old (KIP-1263), compute a new target assignment with
the server assignor; (3) reconcile the member one step towards its target; (4) re-arm its session
timeout; (5) answer, with the assignment on a full request or when it changed.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from protocol.consumer_group_messages import ConsumerGroupHeartbeatResponse
from protocol.consumer_group_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
)
from protocol.consumer_offsets import GroupMetadataKey, GroupMetadataValue
from protocol.errors import ErrorCode
from protocol.hot_responses import AssignedTopicPartitions, ConsumerGroupAssignment, ConsumerGroupHeartbeatAnswer
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ...runtime.contract import Clock, CoordinatorResult, Record, Timer
from ..assignors.spec import PartitionAssignor
from ..classic_group import ClassicGroup
from ..config import GroupConfig
from ..topic_regex import resolve as resolve_topic_regex
from ..topics_image import TopicsImage
from .describe import ConsumerGroupDescriber
from .fencing import Fencing
from .group import ConsumerGroup, ResolvedRegex
from .member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from .metadata_hash import topics_hash
from .migration import (
    UpgradeRefused,
    consumer_group_from_classic,
    upgrade_enabled,
)
from .reconciliation import FencedByUnknownState, OwnedPartitions, reconcile
from .records import (
    consumer_group_records,
    current_value,
    group_tombstones,
    replacement_records,
    subscription,
    subscription_value,
)
from .replay import ConsumerGroupReplay
from .target_assignment import TargetAssignment
from .timers import ConsumerGroupTimers, rebalance_timeout_key
from .validation import HeartbeatError, OffsetChecks, check_member_epoch, validate_heartbeat

__all__ = ["ConsumerGroupManager", "RegexResolver", "CONSUMER_GROUP_TYPE"]

log = logging.getLogger("groupcoord.group.consumer")

E = ErrorCode
R = ConsumerGroupHeartbeatResponse

CONSUMER_GROUP_TYPE = "consumer"
#: (pattern, topic names) -> the names the pattern fully matches (RE2 semantics); raises a
#: ValueError for a pattern that does not compile (the heartbeat then answers
#: INVALID_REGULAR_EXPRESSION with its message); by default ``topic_regex.resolve`` (RE2).
RegexResolver = Callable[[str, Iterable[str]], frozenset[str]]
INVALID_REGULAR_EXPRESSION = ErrorCode.INVALID_REGULAR_EXPRESSION


class ConsumerGroupManager(Fencing, TargetAssignment, ConsumerGroupTimers, ConsumerGroupDescriber, ConsumerGroupReplay,
                           OffsetChecks):
    """Call only from the partition's serial executor."""

    # The record builders (``records.py``), as the shard and ``classic_members.py`` call them.
    group_tombstones = staticmethod(group_tombstones)
    consumer_group_records = staticmethod(consumer_group_records)
    replacement_records = staticmethod(replacement_records)

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer, topics: TopicsImage,
                 group_configs: Callable[[str], Mapping[str, int]],
                 assignors: Mapping[str, PartitionAssignor],
                 regex_resolver: RegexResolver | None = None,
                 new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        self.topics = topics
        self.group_configs = group_configs
        self.assignors = assignors
        self.regex_resolver = regex_resolver or resolve_topic_regex
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        #: Hard state (replay only).
        self.groups: dict[str, ConsumerGroup] = {}
        #: Soft state: when each group last computed a target assignment (KIP-1263).
        self.last_assignment_ms: dict[str, int] = {}
        #: Soft state: each member's session deadline, (group id, member id) -> ms.
        self.session_deadlines: dict[tuple[str, str], int] = {}
        #: Soft state: the topics-image version each group's metadata hash was last checked at.
        self.hash_checked_at: dict[str, int] = {}
        #: Soft state, with an authorizer only: per group, the DESCRIBE check of the principal of
        #: the member that heartbeat last, which the regexes' resolution applies.
        self.topic_filters: dict[str, Callable[[str], bool]] = {}
        self.loaded = False
        #: Called when a record for a consumer group arrives: the shard drops the Empty classic
        #: group that only held the id's offsets (one namespace for both kinds of group).
        self.on_group_created: Callable[[str], None] = lambda group_id: None
        #: The classic GroupMetadata record of an id, set by the shard: a consumer-group record of
        #: an id that has one fails the replay (``replay.py``).
        self.classic_group_record: Callable[[str], GroupMetadataValue | None] = lambda group_id: None
        #: Online migration (``migration.py``), set by the shard: the live classic group a
        #: heartbeat would upgrade (None: no such group); called once a heartbeat that replaces a
        #: classic group (an upgrade, or an Empty group giving up its id) can no longer fail (the
        #: shard retires the classic group's soft state before its tombstone is replayed); called
        #: once a downgrade's records are durable (the shard makes the classic group rebalance).
        self.classic_group: Callable[[str], ClassicGroup | None] = lambda group_id: None
        self.on_classic_replaced: Callable[[str], None] = lambda group_id: None
        self.on_downgraded: Callable[[str], None] = lambda group_id: None

    # --- per-group settings -----------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        return self.group_configs(group_id).get("consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)

    def member_session_timeout_ms(self, group_id: str, member: ConsumerGroupMember | None) -> int:
        """A classic member keeps the session timeout of its JoinGroup (ClassicMemberMetadata)."""
        if member is not None and member.classic_member_metadata is not None:
            return member.classic_member_metadata.session_timeout_ms
        return self.session_timeout_ms(group_id)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.group_configs(group_id).get("consumer.heartbeat.interval.ms",
                                                self.config.consumer_heartbeat_interval_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self.group_configs(group_id).get("consumer.assignment.interval.ms",
                                                self.config.consumer_assignment_interval_ms)

    # =========================================================================================
    # ConsumerGroupHeartbeat (v0-1)

    def heartbeat(self, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
                  classic_group_state: Callable[[str], str | None],
                  classic_group_tombstones: Callable[[str], list[Record]],
                  describable: Callable[[str], bool] | None = None) -> CoordinatorResult[KafkaResponse]:
        """``classic_group_state(group_id)``: the state of a classic group of that id ("Empty",
        ...), or None when there is none; an Empty one is replaced by the consumer group, its
        offsets kept (``classic_group_tombstones`` gives the records that delete it).
        ``describable``: with an authorizer, which topics the member's principal may DESCRIBE;
        the group's regexes, resolved on behalf of the member that heartbeats, match only those
        (Kafka 4.0, KAFKA-18813)."""
        if describable is not None:
            self.topic_filters[request.group_id] = describable
        try:
            validate_heartbeat(request, api_version, self.config.consumer_assignors)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request, api_version)
            return self._heartbeat(request, api_version, client_id, client_host, classic_group_state,
                                   classic_group_tombstones)
        except HeartbeatError as error:
            return CoordinatorResult([], R(version=api_version, throttle_time_ms=0, error_code=int(error.code),
                                           error_message=error.message, member_id=None, member_epoch=0,
                                           heartbeat_interval_ms=0, assignment=None))

    def _group_or_error(self, group_id: str, classic_group_state: Callable[[str], str | None]) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if classic_group_state(group_id) is not None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")

    def _heartbeat(self, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
                   classic_group_state: Callable[[str], str | None],
                   classic_group_tombstones: Callable[[str], list[Record]]) -> CoordinatorResult[KafkaResponse]:
        now = self.clock.now_ms()
        records: list[Record] = []
        group_id: str = request.group_id
        epoch: int = request.member_epoch
        joining = epoch == 0
        upgraded = replaces_classic = False
        group = self.groups.get(group_id)
        if group is None:
            if not joining:
                self._group_or_error(group_id, classic_group_state)
            classic_state = classic_group_state(group_id)
            replaces_classic = classic_state is not None
            if classic_state is not None and classic_state != "Empty":
                group = self._upgrade(group_id, now, records)
                upgraded = True
            else:
                if classic_state is not None:
                    records += classic_group_tombstones(group_id)
                group = ConsumerGroup(group_id, creation_time_ms=now)
        member_id: str = request.member_id or ""
        if len(group.members) >= self.config.consumer_max_size and (not member_id or member_id not in group.members):
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                 f"{self.config.consumer_max_size} members.")
        if not member_id:
            member_id = self._new_uuid()
        owned = self._owned(request.topic_partitions)
        instance_id: str | None = request.instance_id
        replaced: ConsumerGroupMember | None = None
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
                member = ConsumerGroupMember(member_id)
            else:
                check_member_epoch(member, epoch, owned)
        else:
            existing = group.static_member(instance_id)
            if joining:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                else:
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise HeartbeatError(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                             f"{instance_id} cannot join the group because the instance id is owned "
                                             f"by {existing.member_id} member.")
                    replaced = existing
                    member = dataclasses.replace(existing, member_id=member_id, member_epoch=0,
                                                 previous_member_epoch=0)
            else:
                if existing is None:
                    raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                         f"{instance_id} was fenced by member {existing.member_id}.")
                check_member_epoch(existing, epoch, owned)
                member = existing
        if replaced is not None:
            records += self.replacement_records(group, replaced, member)

        regex = request.subscribed_topic_regex if api_version >= 1 else None
        rack_id = request.rack_id
        rebalance_timeout_ms = request.rebalance_timeout_ms
        server_assignor = request.server_assignor
        names = request.subscribed_topic_names
        if (instance_id is None or instance_id == member.instance_id) and (rack_id is None or rack_id == member.rack_id) \
                and rebalance_timeout_ms in (-1, member.rebalance_timeout_ms) \
                and (server_assignor is None or server_assignor == member.server_assignor) \
                and names is None and (regex is None or regex == member.subscribed_topic_regex) \
                and client_id == member.client_id and client_host == member.client_host \
                and member.classic_member_metadata is None:
            updated = member  # a steady heartbeat: nothing to copy
        else:
            updated = dataclasses.replace(
                member,
                instance_id=instance_id if instance_id is not None else member.instance_id,
                rack_id=rack_id if rack_id is not None else member.rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms,
                server_assignor=server_assignor if server_assignor is not None else member.server_assignor,
                subscribed_topic_names=tuple(names) if names is not None else member.subscribed_topic_names,
                subscribed_topic_regex=regex if regex is not None else member.subscribed_topic_regex,
                client_id=client_id, client_host=client_host,
                classic_member_metadata=None)  # a ConsumerGroupHeartbeat speaks the consumer protocol
        reconciled = self._update_member(group, member, updated, replaced, owned, now, records)
        if replaces_classic:
            self.on_classic_replaced(group_id)
        if upgraded:
            for classic in group.members.values():
                self._schedule_session_timeout(group_id, classic.member_id, self.member_session_timeout_ms(
                    group_id, classic))
        self._schedule_session_timeout(group_id, member_id)

        full = joining or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                           and request.topic_partitions is not None)
        assignment = None
        if full or reconciled.assigned_partitions != member.assigned_partitions:
            assignment = ConsumerGroupAssignment([
                AssignedTopicPartitions(t, sorted(p)) for t, p in sorted(reconciled.assigned_partitions.items())])
        # The hand-written answer: a steady member's heartbeat is most of a group's traffic, and
        # kafka-python's generic message plus its schema walker cost about 7 us of it (bench/RESULTS.md).
        return CoordinatorResult(records, ConsumerGroupHeartbeatAnswer(
            0, None, member_id, reconciled.member_epoch, self.heartbeat_interval_ms(group_id), assignment))

    def _update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                       replaced: ConsumerGroupMember | None, owned: OwnedPartitions, now: int,
                       records: list[Record]) -> ConsumerGroupMember:
        """Steps (1)-(3) of a heartbeat, shared with a classic member's JoinGroup: record the
        member as ``updated`` (``member`` as the group knows it, a new one when absent), bump the
        group epoch when needed, maybe compute a new target assignment, and reconcile the member
        one step; returns the reconciled member. Raises HeartbeatError before any soft state moves."""
        group_id = group.group_id
        member_id = updated.member_id
        is_new = member_id not in group.members
        bump = False
        if (updated is not member and subscription(updated) != subscription(member)) or (is_new and replaced is None):
            records.append((ConsumerGroupMemberMetadataKey(group_id, member_id), subscription_value(updated)))
            bump = (is_new and replaced is None) \
                or updated.subscribed_topic_names != member.subscribed_topic_names \
                or updated.subscribed_topic_regex != member.subscribed_topic_regex

        topics_changed = self.hash_checked_at.get(group_id) != self.topics.version
        members: Mapping[str, ConsumerGroupMember] = group.members
        regexes: Mapping[str, ResolvedRegex] = group.regexes
        if updated is not member or replaced is not None or is_new or topics_changed \
                or group.group_epoch > group.assignment_epoch:
            # The group as it will be (a steady heartbeat skips this O(members) copy).
            members = dict(group.members)
            if replaced is not None:
                del members[replaced.member_id]
            members[member_id] = updated
            if bump or topics_changed or replaced is not None:
                regexes = self._regex_records(group, members, now, records, refresh=topics_changed)
        group_epoch = group.group_epoch
        metadata_hash = group.metadata_hash
        if bump or topics_changed:
            metadata_hash = topics_hash(self._subscribed_names(members, regexes), self.topics)
            if metadata_hash != group.metadata_hash:
                bump = True
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupMetadataKey(group_id),
                            ConsumerGroupMetadataValue(group_epoch, metadata_hash, group.creation_time_ms)))

        assigned_now = False
        target_epoch = group.assignment_epoch
        target = group.target.get(replaced.member_id if replaced is not None else member_id, {})
        if group_epoch > group.assignment_epoch and self._may_assign(group_id, now):
            new_targets = self._compute_target(group, group_epoch, members, regexes, replaced, records)
            assigned_now = True
            target_epoch = group_epoch
            target = new_targets.get(member_id, {})

        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            try:
                reconciled = reconcile(updated, target_epoch, target, group.partition_epoch, owned)
            except FencedByUnknownState:
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH, "The consumer group member is in a unknown state. "
                                     "The member must abandon all its partitions and rejoin.") from None
        if (reconciled is not updated and reconciled != updated) or (is_new and replaced is None):
            records.append((ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), current_value(reconciled)))
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group_id, member_id, reconciled.member_epoch,
                                                 reconciled.rebalance_timeout_ms)
            else:
                self.timer.cancel(rebalance_timeout_key(group_id, member_id))
        # Soft state moves only once nothing can refuse the heartbeat any more.
        if topics_changed:
            self.hash_checked_at[group_id] = self.topics.version
        if assigned_now:
            self.last_assignment_ms[group_id] = now
        return reconciled

    def _upgrade(self, group_id: str, now: int, records: list[Record]) -> ConsumerGroup:
        """The consumer group a non-empty classic group becomes (Kafka ``validateOnlineUpgrade``
        and ``convertToConsumerGroup``): the classic GroupMetadata tombstone, then the records of
        the converted group; the heartbeat goes on against the returned group."""
        classic = self.classic_group(group_id)
        assert classic is not None
        prefix = f"Cannot upgrade classic group {group_id} to consumer group because"

        def refused(message: str) -> HeartbeatError:
            # Logged as Kafka's validateOnlineUpgrade/convertToConsumerGroup do: the member only
            # sees GROUP_ID_NOT_FOUND (fatal for librdkafka), the operator needs the reason.
            log.info("%s", message)
            return HeartbeatError(E.GROUP_ID_NOT_FOUND, message)

        if not upgrade_enabled(self.config.consumer_migration_policy):
            raise refused(f"{prefix} online upgrade is disabled.")
        if classic.protocol_type != CONSUMER_GROUP_TYPE:
            raise refused(f"{prefix} the group does not use the consumer embedded protocol.")
        if len(classic.members) > self.config.consumer_max_size:
            raise refused(f"{prefix} the group size exceeds the consumer group maximum size.")
        subscribed: set[str] = set()
        try:
            group = consumer_group_from_classic(classic, self.topics, 0, now)
        except UpgradeRefused as refusal:
            raise refused(str(refusal)) from None
        for member in group.members.values():
            subscribed.update(member.subscribed_topic_names)
        group.metadata_hash = topics_hash(subscribed, self.topics)
        records.append((GroupMetadataKey(group_id), None))
        records += self.consumer_group_records(group)
        log.info("[GroupId %s] Converting the classic group to a consumer group.", group_id)
        return group

    @staticmethod
    def _owned(topic_partitions: Any) -> OwnedPartitions:
        if topic_partitions is None:
            return None
        return [(tp.topic_id, list(tp.partitions)) for tp in topic_partitions]

    # --- regular expressions and subscribed topics --------------------------------------------

    def _regex_records(self, group: ConsumerGroup, members: Mapping[str, ConsumerGroupMember], now: int,
                       records: list[Record], refresh: bool = False) -> dict[str, ResolvedRegex]:
        """The group's regexes after this change: a regex new to the group is only compiled
        here (a bad one refuses the heartbeat) and resolved just after, by its own operation
        (:meth:`_schedule_regex_resolution`), as Kafka's ``maybeUpdateRegularExpressions`` hands
        it to an executor: the heartbeat that brings it is answered with the other subscriptions'
        partitions, and the regex's follow with the group epoch its resolution bumps (librdkafka's
        0045 test expects that order). With ``refresh``, a regex resolved at an older topics
        version is resolved again now and recorded when its topics changed (Kafka waits for its
        periodic refresh, at least 10 s apart); one no member uses any more is tombstoned."""
        wanted = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        out: dict[str, ResolvedRegex] = {}
        version = self.topics.version
        for pattern in sorted(wanted):
            known = group.regexes.get(pattern)
            if known is None:
                try:
                    self.regex_resolver(pattern, ())  # compiles it
                except ValueError as exc:
                    raise HeartbeatError(INVALID_REGULAR_EXPRESSION, str(exc)) from None
                self._schedule_regex_resolution(group.group_id)
                continue
            if refresh and known.version != version:
                try:
                    topics = tuple(sorted(self.regex_resolver(pattern, self._regex_candidates(group.group_id))))
                except ValueError as exc:
                    raise HeartbeatError(INVALID_REGULAR_EXPRESSION, str(exc)) from None
                if known is None or known.topics != topics:
                    records.append((ConsumerGroupRegularExpressionKey(group.group_id, pattern),
                                    ConsumerGroupRegularExpressionValue(topics, version, now)))
                    known = ResolvedRegex(topics, version, now)
            out[pattern] = known
        for pattern in group.regexes:
            if pattern not in wanted:
                records.append((ConsumerGroupRegularExpressionKey(group.group_id, pattern), None))
        return out

    @staticmethod
    def _subscribed_names(members: Mapping[str, ConsumerGroupMember], regexes: Mapping[str, ResolvedRegex]
                          ) -> set[str]:
        names: set[str] = set()
        for m in members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex and m.subscribed_topic_regex in regexes:
                names.update(regexes[m.subscribed_topic_regex].topics)
        return names

    def subscribed_topic_names(self, group: ConsumerGroup) -> set[str]:
        """The topics some member subscribes to, by name or through a regex."""
        return self._subscribed_names(group.members, group.regexes)
