"""A stand-in for the coordinator runtime: mock clock and timer, an in-memory record log.

Like Kafka's ``GroupMetadataManagerTestContext``: every request wrapper runs the shard's handler,
appends the result's records to the in-memory log, replays them into the shard (as the runtime
does), then runs ``on_appended``. ``sleep(ms)`` moves the clock, firing due timers in deadline
order and treating each timer operation like a write. ``reload()`` builds a fresh shard from the
log alone, as a partition load after a crash would.
"""

from __future__ import annotations

import heapq
import itertools
import struct
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.producer import TxnOffsetCommitRequest

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import serialize_record as serialize
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.contract import CoordinatorResult, Record, ResponseFuture
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey

Protocols = list[tuple[str, bytes]]
#: A log position: ("record", producer id or -1, producer epoch, key, value) or ("marker",
#: producer id, producer epoch, commit).
Entry = tuple[Any, ...]


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, topics, nullable user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return out


def protocols(*topics: str, names: tuple[str, ...] = ("range",)) -> Protocols:
    return [(name, subscription(*topics)) for name in names]


class MockClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now


class MockTimer:
    """Keyed timers that fire only when ``GroupTestContext.sleep`` moves the clock past them.

    A heap ordered by (deadline, scheduling order); a replaced or cancelled timer leaves a stale
    heap entry that is skipped when popped.
    """

    def __init__(self, clock: MockClock) -> None:
        self.clock = clock
        self.timeouts: dict[str, tuple[int, int, Callable[[], CoordinatorResult]]] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._seq = itertools.count()
        #: How many times schedule() was called (to check that heartbeats do not churn timers).
        self.schedule_calls = 0

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult], *,
                 name: str = "timer") -> None:
        self.schedule_calls += 1
        entry = (self.clock.now + max(delay_ms, 0), next(self._seq), operation)
        self.timeouts[key] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], key))

    def cancel(self, key: str) -> None:
        self.timeouts.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self.timeouts

    def deadline(self, key: str) -> int | None:
        entry = self.timeouts.get(key)
        return entry[0] if entry else None

    def pop_next_due(self, until_ms: int) -> tuple[int, Callable[[], CoordinatorResult]] | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self.timeouts.get(key)
            if entry is None or entry[1] != seq:
                heapq.heappop(self._heap)  # cancelled or replaced
                continue
            if deadline > until_ms:
                return None
            heapq.heappop(self._heap)
            del self.timeouts[key]
            return deadline, entry[2]
        return None


class GroupTestContext:
    def __init__(self, config: GroupConfig | None = None, partition_exists: Callable[[str, int], bool] | None = None,
                 log: list[Record] | None = None, now_ms: int = 1_000_000,
                 ids: itertools.count[int] | None = None, entries: list[Entry] | None = None,
                 **shard_kwargs: Any) -> None:
        """``shard_kwargs``: the shard's keyword arguments (``topics``, ``group_configs``,
        ``assignors``, ``regex_resolver``), kept for ``reload``. ``entries``: a log with
        transactional records and markers (``Entry``) to load instead of ``log``."""
        self.shard_kwargs = shard_kwargs
        self.config = config or GroupConfig()
        self.partition_exists = partition_exists or (lambda topic, partition: True)
        self.clock = MockClock(now_ms)
        self.timer = MockTimer(self.clock)
        self._ids = ids or itertools.count(1)
        self.shard = GroupCoordinatorShard(self.config, self.clock, self.timer, self.partition_exists,
                                           new_uuid=lambda: f"uuid{next(self._ids)}", **shard_kwargs)
        #: Every record written, in order: the partition's log.
        self.log: list[Record] = []
        #: The same log with what transactions add: each position (its index is its offset) is
        #: ("record", producer id or -1, epoch, key, value) or ("marker", producer id, epoch, commit).
        self.entries: list[Entry] = []
        for key, value in log or ():
            self.log.append((key, value))
            self.entries.append(("record", -1, -1, key, value))
            self.shard.replay(*serialize(key, value))
        for entry in entries or ():
            self._replay_entry(entry)
        self.shard.on_loaded()
        #: Records written by the last request or sleep.
        self.last_records: list[Record] = []

    @property
    def groups(self) -> Any:
        return self.shard.group_manager.groups

    def group(self, group_id: str) -> Any:
        return self.shard.group_manager.groups[group_id]

    # --- runtime stand-in ----------------------------------------------------------------------

    def _replay_entry(self, entry: Entry) -> None:
        offset = len(self.entries)
        self.entries.append(entry)
        if entry[0] == "marker":
            self.shard.replay_end_transaction(entry[1], entry[2], entry[3])
            return
        _kind, producer_id, epoch, key, value = entry
        self.log.append((key, value))
        if producer_id < 0:
            self.shard.replay(*serialize(key, value))  # as the runtime does: the log's bytes
        else:
            self.shard.replay_transactional(offset, producer_id, epoch, *serialize(key, value))

    def _apply(self, result: CoordinatorResult, collect: list[Record] | None = None) -> CoordinatorResult:
        for key, value in result.records:
            self._replay_entry(("record", result.producer_id, result.producer_epoch, key, value))
        if collect is None:
            self.last_records = list(result.records)
        else:
            collect.extend(result.records)
        if result.on_appended is not None:
            result.on_appended()
        return result

    def sleep(self, ms: int) -> list[Record]:
        """Advance the clock by ``ms``, running due timer operations as writes, in order."""
        target = self.clock.now + ms
        written: list[Record] = []
        while (due := self.timer.pop_next_due(target)) is not None:
            deadline, op = due
            self.clock.now = max(self.clock.now, deadline)
            self._apply(op(), written)
        self.clock.now = target
        self.last_records = written
        return written

    def reload(self) -> GroupTestContext:
        """A new context whose shard was loaded from this context's log (a crash and restart)."""
        return type(self)(self.config, self.partition_exists, None, self.clock.now, self._ids,
                          entries=list(self.entries), **self.shard_kwargs)

    def end_transaction(self, producer_id: int, commit: bool, producer_epoch: int = 0) -> None:
        """The producer's COMMIT or ABORT marker lands on the partition (WriteTxnMarkers)."""
        self._replay_entry(("marker", producer_id, producer_epoch, commit))

    # --- requests ------------------------------------------------------------------------------

    def join_group(self, group_id: str, member_id: str = "", *, protocols: Protocols | None = None,
                   protocol_type: str = "consumer", session_timeout_ms: int = 10_000,
                   rebalance_timeout_ms: int = 30_000, group_instance_id: str | None = None, version: int = 9,
                   client_id: str = "client", client_host: str = "/127.0.0.1") -> ResponseFuture:
        request = JoinGroupRequest(
            version=version, group_id=group_id, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id, group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                       for n, m in (protocols if protocols is not None else globals()["protocols"]("foo"))],
            reason=None)
        future = ResponseFuture()
        self._apply(self.shard.join_group(request, version, client_id, client_host, future))
        return future

    def join_new_member(self, group_id: str, **kwargs: Any) -> tuple[str, ResponseFuture]:
        """A dynamic member's two-step join (KIP-394): MEMBER_ID_REQUIRED, then the real join."""
        first = self.join_group(group_id, **kwargs).result()
        assert first.error_code == 79, first
        return first.member_id, self.join_group(group_id, first.member_id, **kwargs)

    def sync_group(self, group_id: str, member_id: str, generation_id: int, *,
                   assignments: dict[str, bytes] | None = None, group_instance_id: str | None = None,
                   protocol_type: str | None = None, protocol_name: str | None = None,
                   version: int = 5) -> ResponseFuture:
        request = SyncGroupRequest(
            version=version, group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])
        future = ResponseFuture()
        self._apply(self.shard.sync_group(request, version, future))
        return future

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                  group_instance_id: str | None = None, version: int = 4) -> Any:
        request = HeartbeatRequest(version=version, group_id=group_id, generation_id=generation_id,
                                   member_id=member_id, group_instance_id=group_instance_id)
        return self._apply(self.shard.heartbeat(request, version)).response

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]], *, version: int = 5) -> Any:
        if version < 3:
            request = LeaveGroupRequest(version=version, group_id=group_id, member_id=members[0][0])
        else:
            request = LeaveGroupRequest(version=version, group_id=group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i, reason=None) for m, i in members])
        return self._apply(self.shard.leave_group(request, version)).response

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], int | tuple[int, str | None, int]], *,
                       generation_id: int = -1, member_id: str = "", group_instance_id: str | None = None,
                       retention_time_ms: int = -1, version: int = 8) -> Any:
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), spec in offsets.items():
            offset, metadata, epoch = spec if isinstance(spec, tuple) else (spec, "", -1)
            by_topic.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
                committed_metadata=metadata))
        request = OffsetCommitRequest(
            version=version, group_id=group_id, generation_id_or_member_epoch=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, retention_time_ms=retention_time_ms,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p) for t, p in by_topic.items()])
        return self._apply(self.shard.commit_offsets(request, version)).response

    def txn_commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], int | tuple[int, str | None, int]],
                           *, producer_id: int = 1000, producer_epoch: int = 0, generation_id: int = -1,
                           member_id: str = "", group_instance_id: str | None = None, version: int = 4) -> Any:
        by_topic: dict[str, list[Any]] = {}
        Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        for (topic, partition), spec in offsets.items():
            offset, metadata, epoch = spec if isinstance(spec, tuple) else (spec, "", -1)
            by_topic.setdefault(topic, []).append(Topic.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=epoch,
                committed_metadata=metadata))
        request = TxnOffsetCommitRequest(
            version=version, transactional_id="txn", group_id=group_id, producer_id=producer_id,
            producer_epoch=producer_epoch, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id,
            topics=[Topic(name=t, partitions=p) for t, p in by_topic.items()])
        return self._apply(self.shard.txn_commit_offsets(request, version)).response

    def fetch_offsets(self, group_id: str, topics: dict[str, list[int]] | None, *, version: int = 7,
                      require_stable: bool = False) -> Any:
        if version >= 8:
            request = OffsetFetchRequest(version=version, require_stable=require_stable, groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id, member_id=None, member_epoch=-1,
                    topics=None if topics is None else [
                        OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                            name=t, partition_indexes=p) for t, p in topics.items()])])
        else:
            request = OffsetFetchRequest(
                version=version, group_id=group_id, require_stable=require_stable,
                topics=None if topics is None else [
                    OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in topics.items()])
        return self.shard.fetch_offsets(request, version)

    def committed(self, group_id: str, topic: str, partition: int, version: int = 7) -> int:
        response = self.fetch_offsets(group_id, {topic: [partition]}, version=version)
        return response.topics[0].partitions[0].committed_offset

    def delete_offsets(self, group_id: str, offsets: dict[str, list[int]]) -> Any:
        request = OffsetDeleteRequest(version=0, group_id=group_id, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                    partition_index=p) for p in ps]) for t, ps in offsets.items()])
        return self._apply(self.shard.delete_offsets(request, 0)).response

    def describe_groups(self, *group_ids: str, version: int = 5) -> Any:
        request = DescribeGroupsRequest(version=version, groups=list(group_ids), include_authorized_operations=False)
        return self.shard.describe_groups(request, version)

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None, version: int = 5) -> Any:
        request = ListGroupsRequest(version=version, states_filter=states or [], types_filter=types or [])
        return self.shard.list_groups(request, version)

    def delete_groups(self, *group_ids: str, version: int = 2) -> Any:
        request = DeleteGroupsRequest(version=version, groups_names=list(group_ids))
        return self._apply(self.shard.delete_groups(request, version)).response

    # --- scenarios -----------------------------------------------------------------------------

    def stable_group(self, group_id: str, count: int, *, topics: tuple[str, ...] = ("foo",),
                     session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 30_000) -> tuple[list[str], int]:
        """``count`` dynamic members join an new group, the leader assigns ``b"assign-<i>"``,
        everyone syncs. Returns (member ids with the leader first, generation)."""
        kwargs = dict(protocols=protocols(*topics), session_timeout_ms=session_timeout_ms,
                      rebalance_timeout_ms=rebalance_timeout_ms)
        joins = [self.join_new_member(group_id, **kwargs) for _ in range(count)]
        for _ in range(100):  # members joining during the initial delay extend it (KIP-134)
            if all(f.done() for _, f in joins):
                break
            self.sleep(max(self.config.initial_rebalance_delay_ms, 1))
        responses = [f.result() for _, f in joins]
        assert all(r.error_code == 0 for r in responses), responses
        leader = responses[0].leader
        generation = responses[0].generation_id
        ids = [leader] + [m for m, _ in joins if m != leader]
        syncs = [self.sync_group(group_id, m, generation,
                                 assignments={x: f"assign-{x}".encode() for x in ids} if m == leader else None)
                 for m in ids[1:] + ids[:1]]
        assert all(s.result().error_code == 0 for s in syncs), [s.result() for s in syncs]
        return ids, generation


def offset_key(group: str, topic: str, partition: int) -> OffsetCommitKey:
    return OffsetCommitKey(group, topic, partition)


def group_key(group: str) -> GroupMetadataKey:
    return GroupMetadataKey(group)
