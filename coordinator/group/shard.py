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

Rules:

1. Hard state (committed offsets, each group's last GroupMetadata record) changes only in
   ``replay``; replaying every record written so far into a fresh shard rebuilds it exactly.
2. Soft state (live rebalances, parked responses, session deadlines, timers) belongs to the
   handlers and is rebuilt by ``on_loaded`` from the hard state: members get fresh session
   deadlines, groups that only have offsets become Empty "simple" groups, groups larger than
   ``group.max.size`` rebalance.
3. Every ``offsets.retention.check.interval.ms`` an expiry operation writes tombstones for expired
   offsets (KIP-211) and, for Empty groups left with no offsets, a GroupMetadata tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

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
from .config import GroupConfig
from .group_manager import GroupManager
from .group_state import GroupState
from .offset_manager import OffsetManager

__all__ = ["GroupCoordinatorShard", "EXPIRE_TIMER_KEY"]

E = ErrorCode
S = GroupState

EXPIRE_TIMER_KEY = "expire-group-metadata"

DescribedGroup = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember
ListedGroup = ListGroupsResponse.ListedGroup
DeletedGroup = DeleteGroupsResponse.DeletableGroupResult
#: ListGroups v5 group type (KIP-848): only classic groups exist here.
CLASSIC_GROUP_TYPE = "classic"


class GroupCoordinatorShard:
    """One partition's groups and offsets. Call only from the partition's serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, timer: Timer,
                 partition_exists: Callable[[str, int], bool] = lambda topic, partition: True,
                 new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.timer = timer
        self.group_manager = GroupManager(config, clock, timer, new_uuid)
        self.offset_manager = OffsetManager(config, clock, self.group_manager, partition_exists)

    # --- membership (write) --------------------------------------------------------------------

    def join_group(self, request: KafkaRequest, api_version: int, client_id: str, client_host: str,
                   future: ResponseHandle) -> CoordinatorResult[None]:
        return self.group_manager.join_group(request, api_version, client_id, client_host, future)

    def sync_group(self, request: KafkaRequest, api_version: int, future: ResponseHandle) -> CoordinatorResult[None]:
        return self.group_manager.sync_group(request, api_version, future)

    def heartbeat(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[HeartbeatAnswer]:
        return self.group_manager.heartbeat(request, api_version)

    def leave_group(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        return self.group_manager.leave_group(request, api_version)

    # --- offsets -------------------------------------------------------------------------------

    def commit_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[OffsetCommitAnswer]:
        return self.offset_manager.commit_offsets(request, api_version)

    def fetch_offsets(self, request: KafkaRequest, api_version: int) -> OffsetFetchAnswer:
        return self.offset_manager.fetch_offsets(request, api_version)

    def delete_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        return self.offset_manager.delete_offsets(request, api_version)

    # --- admin ---------------------------------------------------------------------------------

    def describe_groups(self, request: KafkaRequest, api_version: int) -> KafkaResponse:
        """DescribeGroups v0-6 (read). Metadata, assignments and protocol only when Stable; an
        unknown group is described as Dead (v6: GROUP_ID_NOT_FOUND, KIP-1043)."""
        described = []
        operations = authorized(api_version >= 3 and bool(request.include_authorized_operations), GROUP_OPERATIONS)
        for group_id in request.groups:
            group = self.group_manager.groups.get(group_id)
            if group is None or group.state is S.DEAD:
                described.append(DescribedGroup(
                    error_code=int(E.GROUP_ID_NOT_FOUND if api_version >= 6 else E.NONE),
                    error_message=None, group_id=group_id, group_state=S.DEAD.value, protocol_type="",
                    protocol_data="", members=[], authorized_operations=OMITTED))
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
        return ListGroupsResponse(version=api_version, throttle_time_ms=0, error_code=0, groups=listed)

    def delete_groups(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        """DeleteGroups v0-2 for the groups of this partition: only Empty groups can go; their
        offsets and their GroupMetadata are tombstoned."""
        records: list[Record] = []
        results = []
        for group_id in request.groups_names:
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
        self._schedule_expiry()
        return CoordinatorResult(records)

    def _schedule_expiry(self) -> None:
        self.timer.schedule(EXPIRE_TIMER_KEY, self.config.offsets_retention_check_interval_ms,
                            self.cleanup_group_metadata, name="cleanup-group-metadata")

    # --- replay and loading --------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, written: object = None) -> None:
        """Apply one record, as the log holds it (value None: tombstone). The only mutator of
        hard state. Raises UnknownRecordVersion for record types other than the classic two
        (the loader skips those) and MalformedRecordError for bytes that do not decode.

        ``written`` is the typed key when the record is one this shard's handler just produced
        (the runtime passes it): its bytes came from our own encoder, so decoding them again
        would only re-derive what we hold."""
        if type(written) is OffsetCommitKey:
            self.offset_manager.replay_offset_commit(written.group, written.topic, written.partition, value)
            return
        version = key_version(key)
        if version <= 1:
            group_id, topic, partition = decode_offset_commit_key(key)
            if value is not None:
                offset_commit_fields(value)  # refuse what a later read could not decode
            self.offset_manager.replay_offset_commit(group_id, topic, partition, value)
            return
        typed_key, typed_value = deserialize(key, value)
        assert isinstance(typed_key, GroupMetadataKey)
        assert typed_value is None or isinstance(typed_value, GroupMetadataValue)
        self.group_manager.replay_group_metadata(typed_key, typed_value)

    def snapshot_records(self) -> Iterator[tuple[bytes, bytes]]:
        """The hard state as records: replaying them into a fresh shard rebuilds it exactly.
        Groups first, then offsets, each a live value (a snapshot holds no tombstones)."""
        for group_id, value in self.group_manager.group_records.items():
            key, raw = serialize(GroupMetadataKey(group_id), value)
            assert raw is not None
            yield key, raw
        for group_id, committed in self.offset_manager.offsets.items():
            for topic, by_partition in committed.items():
                for partition, raw in by_partition.items():
                    yield encode_key(OffsetCommitKey(group_id, topic, partition)), raw

    def on_loaded(self) -> None:
        self.group_manager.on_loaded()
        # Replay keeps an Empty group for each group with offsets; one whose group record was
        # tombstoned while its offsets stayed gets it back here.
        for group_id in self.offset_manager.offsets:
            if group_id not in self.group_manager.groups:
                group = self.group_manager.ensure_group(group_id)
                group.state_timestamp_ms = None  # never persisted: expiry measures from commits
        self._schedule_expiry()

    def on_unloaded(self) -> None:
        """Answer every parked response NOT_COORDINATOR; the shard is dropped afterwards."""
        self.group_manager.on_unloaded()

    def hard_state(self) -> tuple[dict[str, GroupMetadataValue], dict[str, dict[tuple[str, int], OffsetCommitValue]]]:
        """A copy of everything the records determine (for tests and diagnostics)."""
        return (dict(self.group_manager.group_records),
                {g: self.offset_manager.committed(g) for g in self.offset_manager.offsets})
