"""The group coordinator of one ``__consumer_offsets`` partition: request dispatch, record replay,
loading, and the periodic offset expiry.

Kafka ``GroupCoordinatorShard``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorShard.java
on the records-first runtime of KIP-848's "Group Coordinator" section
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol).

Theory of operation. The runtime creates a shard per partition it leads, replays the partition's
log into it record by record with :meth:`GroupCoordinatorShard.replay` and then calls
:meth:`GroupCoordinatorShard.on_loaded`. From then on it runs the handlers one at a time:

* write handlers (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetDelete,
  DeleteGroups, and timer operations) return a :class:`CoordinatorResult`; the runtime appends its
  records, replays them with the same ``replay``, runs ``on_appended`` once they are durable, and
  answers. JoinGroup and SyncGroup answer through the response handle they are given instead.
* read handlers (OffsetFetch, DescribeGroups, ListGroups) return the response itself.
* TxnOffsetCommit is a transactional write: its result carries the producer id, and its records
  are replayed with ``replay_transactional``; the producer's marker, written by the runtime's
  ``complete_transaction``, with ``replay_end_transaction`` (KIP-447).

Rules:

1. Hard state (committed offsets, each classic group's last GroupMetadata record, each KIP-848
   consumer group's records: ``consumer/replay.py``) changes only in ``replay``; replaying every
   record written so far into a fresh shard rebuilds it exactly. A group id names either a
   classic or a consumer group, never both: an Empty classic group becomes a consumer group on a
   ConsumerGroupHeartbeat (its offsets stay) and an Empty consumer group a classic one on a
   JoinGroup. Non-empty groups migrate online (``consumer/migration.py``): a ConsumerGroupHeartbeat
   upgrades a classic group in place, classic members then use the consumer group
   (``consumer/classic_members.py``), and the last consumer-protocol member leaving downgrades it.
2. Soft state (live rebalances, parked responses, session deadlines, timers) belongs to the
   handlers and is rebuilt by ``on_loaded`` from the hard state: members get fresh session
   deadlines, groups that only have offsets become Empty "simple" groups, groups larger than
   ``group.max.size`` rebalance.
3. Every ``offsets.retention.check.interval.ms`` an expiry operation writes tombstones for expired
   offsets (KIP-211) and, for Empty groups left with no offsets, a GroupMetadata tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

from protocol import consumer_group_records as cgr
from protocol.acl_operations import GROUP_OPERATIONS, OMITTED, authorized
from protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit_key,
    deserialize,
    encode_key,
    key_version,
    offset_commit_fields,
    serialize,
)
from protocol.errors import ErrorCode
from protocol.hot_responses import HeartbeatAnswer, OffsetCommitAnswer, OffsetFetchAnswer
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..runtime.contract import Clock, CoordinatorResult, Record, ResponseHandle, Timer
from .assignors import ASSIGNORS, PartitionAssignor
from .classic_group import ClassicGroup
from .config import GroupConfig
from .consumer.classic_members import ClassicMembers
from .consumer.group import ConsumerGroupState
from .consumer.manager import CONSUMER_GROUP_TYPE, ConsumerGroupManager, RegexResolver
from .fault_actions import force_rebalance, holds_group, kick_member
from .group_manager import GroupManager
from .group_state import GroupState
from .offset_manager import OffsetManager
from .topics_image import StaticTopicsImage, TopicsImage

__all__ = ["GroupCoordinatorShard", "EXPIRE_TIMER_KEY"]

E = ErrorCode
S = GroupState

EXPIRE_TIMER_KEY = "expire-group-metadata"

DescribedGroup = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember
ListedGroup = ListGroupsResponse.ListedGroup
DeletedGroup = DeleteGroupsResponse.DeletableGroupResult
#: ListGroups v5 group types (KIP-848).
CLASSIC_GROUP_TYPE = "classic"


class GroupCoordinatorShard:
    """One partition's groups and offsets. Call only from the partition's serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer,
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
                 new_uuid: Callable[[], str] | None = None, *, topics: TopicsImage | None = None,
                 group_configs: Callable[[str], Mapping[str, int]] = lambda group_id: {},
                 assignors: Mapping[str, PartitionAssignor] | None = None,
                 regex_resolver: RegexResolver | None = None) -> None:
        """``topics``: what consumer groups see of the topics (None: no topics); ``group_configs``:
        the per-group overrides (``consumer.session.timeout.ms`` ...); ``assignors``: the server
        assignors by name (None: ``coordinator/group/assignors``); ``regex_resolver``: resolves a
        SubscribedTopicRegex (None: ``topic_regex.resolve``, RE2)."""
        self.config = config
        self.clock = clock
        self.timer = timer
        self.group_manager = GroupManager(config, clock, timer, new_uuid)
        self.consumer_manager = ConsumerGroupManager(
            config, clock, timer, topics if topics is not None else StaticTopicsImage(), group_configs,
            assignors if assignors is not None else ASSIGNORS, regex_resolver, new_uuid)
        self.consumer_manager.on_group_created = self._drop_classic_shadow
        self.consumer_manager.classic_group_record = self.group_manager.group_records.get
        self.consumer_manager.classic_group = self._live_classic_group
        self.consumer_manager.on_classic_replaced = self._retire_classic_group
        self.consumer_manager.on_downgraded = self.group_manager.rebalance_converted_group
        self.classic_members = ClassicMembers(self.consumer_manager)
        self.offset_manager = OffsetManager(config, clock, self.group_manager, partition_exists,
                                            self.consumer_manager)

    def _drop_classic_shadow(self, group_id: str) -> None:
        """A consumer group now holds this id: drop the Empty classic group replay kept for its
        offsets (its GroupMetadata, if any, was tombstoned before)."""
        if group_id not in self.group_manager.group_records:
            self.group_manager.groups.pop(group_id, None)

    def _live_classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.group_manager.groups.get(group_id)
        return None if group is None or group.state is S.DEAD else group

    def _retire_classic_group(self, group_id: str) -> None:
        """A heartbeat replaces this classic group by a consumer group (its tombstone, if it has
        a record, is in the heartbeat's records): parked JoinGroups and SyncGroups are told to
        rejoin, as Kafka's ``convertToConsumerGroup`` does, and the group's timers go."""
        group = self.group_manager.groups.get(group_id)
        if group is not None:
            self.group_manager.answer_parked(group, E.REBALANCE_IN_PROGRESS)
            self.group_manager.delete_group_soft_state(group)

    # --- KIP-848 consumer groups ---------------------------------------------------------------

    def consumer_group_heartbeat(self, request: KafkaRequest, api_version: int, client_id: str,
                                 client_host: str, describable: Callable[[str], bool] | None = None
                                 ) -> CoordinatorResult[KafkaResponse]:
        """ConsumerGroupHeartbeat v0-1 (write op "consumer-group-heartbeat"). ``describable``: the
        topics the member's principal may DESCRIBE, when an authorizer is configured (its regex
        matches no other topic)."""
        return self.consumer_manager.heartbeat(request, api_version, client_id, client_host,
                                               self._classic_group_state, self._classic_group_tombstones,
                                               describable)

    def _classic_group_state(self, group_id: str) -> str | None:
        group = self.group_manager.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return None
        if group.state is S.EMPTY and group.pending_members:
            return S.PREPARING_REBALANCE.value  # a member is about to come back: not convertible
        state: str = group.state.value
        return state

    def _classic_group_tombstones(self, group_id: str) -> list[Record]:
        return [(GroupMetadataKey(group_id), None)] if group_id in self.group_manager.group_records else []

    def consumer_group_describe(self, group_ids: list[str], api_version: int,
                                include_authorized_operations: bool) -> list[Any]:
        """ConsumerGroupDescribe v0-1 (read): a DescribedGroup per id, in order; a classic group
        is GROUP_ID_NOT_FOUND as in Kafka."""
        described = self.consumer_manager.describe(group_ids, api_version, include_authorized_operations,
                                                   sum(1 << op for op in GROUP_OPERATIONS))
        for group in described:
            if group.error_code == E.GROUP_ID_NOT_FOUND and self._classic_group_state(group.group_id) is not None:
                group.error_message = f"Group {group.group_id} is not a consumer group."
        return described

    # --- membership (write) --------------------------------------------------------------------

    def join_group(self, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
                   future: ResponseHandle) -> CoordinatorResult[None]:
        consumer_group = self.consumer_manager.groups.get(request.group_id)
        if consumer_group is not None:
            if consumer_group.state is not ConsumerGroupState.EMPTY:
                # A classic member inside a consumer group (online migration).
                return self.classic_members.join(consumer_group, request, api_version, client_id, client_host,
                                                 future)
            # An Empty consumer group gives its id to the classic group the join creates (its
            # offsets stay); a join refused before that leaves it as it is.
            result = self.group_manager.join_group(request, api_version, client_id, client_host, future)
            if request.group_id in self.group_manager.groups:
                result.records[:0] = self.consumer_manager.group_tombstones(consumer_group)
            return result
        return self.group_manager.join_group(request, api_version, client_id, client_host, future)

    def sync_group(self, request: KafkaRequest, api_version: int, future: ResponseHandle) -> CoordinatorResult[None]:
        consumer_group = self.consumer_manager.groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.sync(consumer_group, request, api_version, future)
        return self.group_manager.sync_group(request, api_version, future)

    def heartbeat(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[HeartbeatAnswer]:
        consumer_group = self.consumer_manager.groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(consumer_group, request, api_version)
        return self.group_manager.heartbeat(request, api_version)

    def leave_group(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        consumer_group = self.consumer_manager.groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.leave(consumer_group, request, api_version)
        return self.group_manager.leave_group(request, api_version)

    # --- offsets -------------------------------------------------------------------------------

    def commit_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[OffsetCommitAnswer]:
        return self.offset_manager.commit_offsets(request, api_version)

    def fetch_offsets(self, request: KafkaRequest, api_version: int) -> OffsetFetchAnswer:
        return self.offset_manager.fetch_offsets(request, api_version)

    def delete_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        return self.offset_manager.delete_offsets(request, api_version)

    def txn_commit_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        """TxnOffsetCommit v0-4 (transactional write op "txn-commit-offset")."""
        return self.offset_manager.txn_commit_offsets(request, api_version)

    # --- admin ---------------------------------------------------------------------------------

    def describe_groups(self, request: KafkaRequest, api_version: int) -> KafkaResponse:
        """DescribeGroups v0-6 (read). Metadata, assignments and protocol only when Stable. Only
        classic groups are described, as in Kafka 4: an unknown group, and a consumer group (mixed
        ones too; ConsumerGroupDescribe describes them), is Dead with no members; v6 says why with
        GROUP_ID_NOT_FOUND and a message (KIP-1043,
        https://cwiki.apache.org/confluence/display/KAFKA/KIP-1043%3A+Administration+of+groups)."""
        described = []
        operations = authorized(api_version >= 3 and bool(request.include_authorized_operations), GROUP_OPERATIONS)
        for group_id in request.groups:
            group = self.group_manager.groups.get(group_id)
            if group is None or group.state is S.DEAD:
                if api_version >= 6:
                    error = E.GROUP_ID_NOT_FOUND
                    message: str | None = (f"Group {group_id} is not a classic group."
                                           if group_id in self.consumer_manager.groups
                                           else f"Group {group_id} not found.")
                else:
                    error, message = E.NONE, None
                described.append(DescribedGroup(
                    error_code=int(error), error_message=message, group_id=group_id, group_state=S.DEAD.value,
                    protocol_type="", protocol_data="", members=[], authorized_operations=OMITTED))
                continue
            stable = group.state is S.STABLE
            members = [DescribedMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id if api_version >= 4 else None,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"") for m in group.members.values()]
            described.append(DescribedGroup(
                error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "", members=members,
                authorized_operations=operations))
        return DescribeGroupsResponse(version=api_version, throttle_time_ms=0, groups=described)

    def list_groups(self, request: KafkaRequest, api_version: int) -> KafkaResponse:
        """ListGroups v0-5 (read); the states (v4+) and types (v5+) filters ignore case."""
        states = {s.lower() for s in request.states_filter} if api_version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if api_version >= 5 else set()
        listed = []
        if not types or CLASSIC_GROUP_TYPE in types:
            for group in self.group_manager.groups.values():
                if group.state is S.DEAD or (states and group.state.value.lower() not in states):
                    continue
                listed.append(ListedGroup(
                    group_id=group.group_id, protocol_type=group.protocol_type or "",
                    group_state=group.state.value if api_version >= 4 else "",
                    group_type=CLASSIC_GROUP_TYPE if api_version >= 5 else ""))
        if not types or CONSUMER_GROUP_TYPE in types:
            for consumer_group in self.consumer_manager.groups.values():
                state = consumer_group.state.value
                if states and state.lower() not in states:
                    continue
                listed.append(ListedGroup(
                    group_id=consumer_group.group_id, protocol_type="consumer",
                    group_state=state if api_version >= 4 else "",
                    group_type=CONSUMER_GROUP_TYPE if api_version >= 5 else ""))
        return ListGroupsResponse(version=api_version, throttle_time_ms=0, error_code=0, groups=listed)

    def delete_groups(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        """DeleteGroups v0-2 for the groups of this partition: only Empty groups can go; their
        offsets and their GroupMetadata are tombstoned."""
        records: list[Record] = []
        results = []
        for group_id in request.groups_names:
            consumer_group = self.consumer_manager.groups.get(group_id)
            if consumer_group is not None:
                if consumer_group.state is not ConsumerGroupState.EMPTY:
                    error = E.NON_EMPTY_GROUP
                else:
                    error = E.NONE
                    records += self.offset_manager.offset_tombstones(group_id)
                    records += self.consumer_manager.group_tombstones(consumer_group)
                results.append(DeletedGroup(group_id=group_id, error_code=int(error)))
                continue
            group = self.group_manager.groups.get(group_id)
            if group is None or group.state is S.DEAD:
                error = E.GROUP_ID_NOT_FOUND
            elif group.state is not S.EMPTY:
                error = E.NON_EMPTY_GROUP
            else:
                error = E.NONE
                records += self._group_tombstones(group_id)
                self.group_manager.delete_group_soft_state(group)
            results.append(DeletedGroup(group_id=group_id, error_code=int(error)))
        return CoordinatorResult(records, DeleteGroupsResponse(version=api_version, throttle_time_ms=0,
                                                               results=results))

    def fault_rebalance(self, group_id: str) -> CoordinatorResult[dict[str, object]]:
        """Injected fault "rebalance" (write op "fault-rebalance", ``fault_actions.py``); raises
        LookupError for a group this partition does not hold."""
        return force_rebalance(self.group_manager, self.consumer_manager, group_id)

    def fault_kick_member(self, group_id: str, member: str | None) -> CoordinatorResult[dict[str, object]]:
        """Injected fault "kick-member" (write op "fault-kick-member", ``fault_actions.py``); raises
        LookupError for an unknown group or member."""
        return kick_member(self.group_manager, self.consumer_manager, group_id, member)

    def holds_group(self, group_id: str) -> bool:
        """Whether a live group (classic or consumer) has this id here (read)."""
        return holds_group(self.group_manager, self.consumer_manager, group_id)

    def on_topics_deleted(self, topics: set[str]) -> CoordinatorResult[None]:
        """Topics were deleted: their committed offsets go at once, in every group (a write the
        service runs on every partition)."""
        return CoordinatorResult(self.offset_manager.topic_tombstones(set(topics)))

    def _group_tombstones(self, group_id: str) -> list[Record]:
        return self.offset_manager.offset_tombstones(group_id) + [(GroupMetadataKey(group_id), None)]

    # --- expiry --------------------------------------------------------------------------------

    def cleanup_group_metadata(self) -> CoordinatorResult[None]:
        """The periodic expiry operation (timer ``expire-group-metadata``); re-arms itself.

        An Empty group left without offsets dies, unless a MEMBER_ID_REQUIRED member is about to
        come back (Kafka deletes it anyway; the member would then rejoin from scratch).
        """
        now = self.clock.now_ms()
        records: list[Record] = []
        for group in list(self.group_manager.groups.values()):
            if group.state is S.DEAD:
                continue
            expired, none_left = self.offset_manager.expired_offset_tombstones(group, now)
            records += expired
            if none_left and group.state is S.EMPTY and not group.pending_members:
                records.append((GroupMetadataKey(group.group_id), None))
                self.group_manager.delete_group_soft_state(group)
        for consumer_group in list(self.consumer_manager.groups.values()):
            if consumer_group.state is not ConsumerGroupState.EMPTY:
                continue  # TODO(issue 31): offsets of topics no member subscribes to any more
            expired, none_left = self.offset_manager.expired_consumer_group_offsets(consumer_group.group_id, now)
            records += expired
            if none_left:
                records += self.consumer_manager.group_tombstones(consumer_group)
        self._schedule_expiry()
        return CoordinatorResult(records)

    def _schedule_expiry(self) -> None:
        self.timer.schedule(EXPIRE_TIMER_KEY, self.config.offsets_retention_check_interval_ms,
                            self.cleanup_group_metadata, name="cleanup-group-metadata")

    # --- replay and loading --------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, written: object = None) -> None:
        """Apply one record, as the log holds it (value None: tombstone). The only mutator of
        hard state. Raises UnknownRecordVersion for record types other than the classic two and
        the consumer-group ones (3-8, 16; the loader skips the others) and MalformedRecordError for bytes that do not decode.

        ``written`` is the typed key when the record is one this shard's handler just produced
        (the runtime passes it): its bytes came from our own encoder, so decoding them again
        would only re-derive what we hold."""
        if type(written) is OffsetCommitKey:
            self.offset_manager.replay_offset_commit(written.group, written.topic, written.partition, value)
            return
        version = key_version(key)
        if version in cgr.RECORD_TYPES:
            typed = cgr.decode_key(key)
            self.consumer_manager.replay(typed, cgr.decode_value(typed, value))
            return
        if version <= 1:
            group_id, topic, partition = decode_offset_commit_key(key)
            if value is not None:
                offset_commit_fields(value)  # refuse what a later read could not decode
            self.offset_manager.replay_offset_commit(group_id, topic, partition, value)
            return
        typed_key, typed_value = deserialize(key, value)
        assert isinstance(typed_key, GroupMetadataKey)
        assert typed_value is None or isinstance(typed_value, GroupMetadataValue)
        if typed_value is not None:
            self.consumer_manager.replaced_by_classic(typed_key.group)
        self.group_manager.replay_group_metadata(typed_key, typed_value)

    def replay_transactional(self, offset: int, producer_id: int, producer_epoch: int, key: bytes,
                             value: bytes | None, written: object = None) -> None:
        """A record of a transactional batch: an OffsetCommit is pending for the producer until
        its marker (``offset_manager.py`` rule 3); other records apply as in a plain batch."""
        if type(written) is OffsetCommitKey:
            group_id, topic, partition = written.group, written.topic, written.partition
        elif key_version(key) <= 1:
            group_id, topic, partition = decode_offset_commit_key(key)
            if value is not None:
                offset_commit_fields(value)  # refuse what a later read could not decode
        else:
            self.replay(key, value)
            return
        self.offset_manager.replay_transactional_offset_commit(offset, producer_id, producer_epoch, group_id, topic,
                                                               partition, value)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self.offset_manager.replay_end_transaction(producer_id, commit)

    def snapshot_transactional_records(self) -> Iterator[tuple[int, int, int, bytes, bytes | None]]:
        for offset, producer_id, producer_epoch, key, value in self.offset_manager.snapshot_transactional_records():
            yield offset, producer_id, producer_epoch, encode_key(key), value

    def snapshot_records(self) -> Iterator[tuple[bytes, bytes]]:
        """The hard state as records: replaying them into a fresh shard rebuilds it exactly.
        Groups first, then offsets, each a live value (a snapshot holds no tombstones)."""
        for group_id, value in self.group_manager.group_records.items():
            key, raw = serialize(GroupMetadataKey(group_id), value)
            assert raw is not None
            yield key, raw
        for typed_key, typed_value in self.consumer_manager.snapshot_records():
            yield cgr.encode_key(typed_key), cgr.encode_value(typed_value)
        for group_id, committed in self.offset_manager.offsets.items():
            for topic, by_partition in committed.items():
                for partition, raw in by_partition.items():
                    yield encode_key(OffsetCommitKey(group_id, topic, partition)), raw

    def on_loaded(self) -> None:
        self.group_manager.on_loaded()
        self.consumer_manager.on_loaded()
        # Replay keeps an Empty group for each group with offsets; one whose group record was
        # tombstoned while its offsets stayed gets it back here (unless a consumer group has it).
        for group_id in [*self.offset_manager.offsets, *self.offset_manager.open_by_group]:
            if group_id not in self.group_manager.groups and group_id not in self.consumer_manager.groups:
                group = self.group_manager.ensure_group(group_id)
                group.state_timestamp_ms = None  # never persisted: expiry measures from commits
        self._schedule_expiry()

    def on_unloaded(self) -> None:
        """Answer every parked response NOT_COORDINATOR; the shard is dropped afterwards."""
        self.group_manager.on_unloaded()
        self.consumer_manager.on_unloaded()

    def pending_state(self) -> dict[int, dict[tuple[str, str, int], tuple[int, bytes, bool]]]:
        """The pending transactional offsets: producer id -> (group, topic, partition) ->
        (record offset, value bytes, superseded) (for tests and diagnostics)."""
        return {pid: {(g, t, p): (o.offset, o.value, o.superseded) for g, by_topic in groups.items()
                      for t, by_partition in by_topic.items() for p, o in by_partition.items()}
                for pid, groups in self.offset_manager.pending.items()}

    def hard_state(self) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[tuple[str, int], OffsetCommitValue]]]:
        """A copy of everything the records determine (for tests and diagnostics)."""
        return (dict(self.group_manager.group_records),
                {g: self.offset_manager.committed(g) for g in self.offset_manager.offsets})
