"""The node's live view of its groups and partitions, read in-process for /metrics, /readyz and
the dashboard.

Everything here is read on the event loop from the objects the server runs (the coordinator
runtime's shards, the partition logs, the cluster view), so it is as current as the server and
needs no request to itself. In cluster mode the offsets of partitions led by other nodes are
their leaders' latest answers, kept by ``remote_offsets.py``. Nothing here writes: a shard is
only read between its operations (asyncio runs one callback at a time), never changed.

It must stay cheap, a scrape of 10,000 groups of 10 partitions each well under 200 ms: the
committed values are decoded once per value (a commit replaces the bytes object, so identity says
whether it changed) and classic assignments once per assignment, and the first unconsumed
record's timestamp is read from disk once per (topic, partition, offset).

What it returns is for reading only: committed views and assignment lists are shared between
scrapes (and between groups with equal values) and must not be changed.

Expiry times are the server's own: ``OffsetManager.deadlines`` (``coordinator/group/offset_manager.py``),
the function its expiry operation uses (KIP-211).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.consumer_offsets import OffsetCommitFields, offset_commit_fields
from protocol.consumer_protocol import MalformedConsumerProtocol, decode_assignment
from protocol.records import CorruptBatchError, decode_records, read_batch_header
from storage.errors import StorageError

from ..cluster.view import ClusterView
from ..group.classic_group import CONSUMER_PROTOCOL_TYPE
from ..group.group_state import GroupState
from ..group.shard import GroupCoordinatorShard
from ..runtime.errors import CoordinatorState
from ..runtime.runtime import CoordinatorRuntime
from ..topics.log_manager import LogManager, PartitionLog
from .remote_offsets import RemoteOffsets

__all__ = ["StateView", "GroupView", "MemberView", "CommittedView", "PartitionView", "CoordinatorPartitionView",
           "NodeView"]

TopicPartition = tuple[str, int]

#: Caches are dropped whole when they grow past this many entries (groups and commits come and go).
_CACHE_LIMIT = 100_000
_VIEWS_MIN = 100_000
#: How many batches past a control batch (a transaction marker) to look for the next record.
_MARKER_SKIP = 8


@dataclass(frozen=True, slots=True)
class CommittedView:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    #: When the expiry operation will delete it (KIP-211); None: not while the group stays as it is.
    expires_at_ms: int | None
    #: The value's decoded fields (``offset_commit_fields``), for recomputing the deadline.
    fields: OffsetCommitFields = field(repr=False, compare=False, default=(0, -1, "", 0, None))


@dataclass(slots=True)
class MemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass(slots=True)
class GroupView:
    group_id: str
    #: ListGroups v5's group types (KIP-848): "classic" or "consumer".
    type: str
    protocol_type: str
    #: Kafka's state names: Empty, PreparingRebalance, CompletingRebalance, Stable (classic);
    #: Empty, Assigning, Reconciling, Stable (consumer).
    state: str
    #: The classic group's protocol (its assignor, for the consumer protocol), or the consumer
    #: group's server assignor.
    assignor: str
    #: The generation (classic) or the group epoch (consumer).
    epoch: int
    coordinator_partition: int
    members: list[MemberView] = field(default_factory=list)
    offsets: dict[TopicPartition, CommittedView] = field(default_factory=dict)


@dataclass(slots=True)
class PartitionView:
    #: None for a partition not hosted here (cluster mode): its offsets are its leader's.
    log_start: int | None
    #: The high watermark: what consumers can read, and what lag is measured against.
    log_end: int | None
    lso: int | None
    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    local: bool


@dataclass(slots=True)
class CoordinatorPartitionView:
    topic: str
    partition: int
    #: "loading", "active", "failed" or "standby" (``runtime/errors.py``).
    state: str
    #: How long its last load took, ms (None: not loaded since the start).
    load_time_ms: float | None


@dataclass(slots=True)
class NodeView:
    node_id: int
    host: str
    port: int
    rack: str | None


class StateView:
    """Read-only accessors over the node's running objects (module docstring).

    ``runtime``: the group coordinator's runtime; ``logs``: the partition logs; ``cluster``: the
    cluster view (cluster mode; None on one node); ``txn_runtime``: the transaction coordinator's
    runtime, listed among the coordinator partitions; ``node_id`` and ``endpoint`` (host, port):
    this node, as one node lists itself. ``remote`` (cluster mode, set by app.py once both exist):
    the offsets of partitions this node does not lead, as their leaders gave them
    (``remote_offsets.py``)."""

    def __init__(self, *, runtime: CoordinatorRuntime[GroupCoordinatorShard], logs: LogManager,
                 cluster: ClusterView | None = None, txn_runtime: CoordinatorRuntime[Any] | None = None,
                 node_id: int = -1, endpoint: tuple[str, int] | None = None, rack: str | None = None) -> None:
        self.runtime = runtime
        self.logs = logs
        self.cluster = cluster
        self.txn_runtime = txn_runtime
        self.node_id = node_id
        self.endpoint = endpoint
        self.rack = rack
        self.remote: RemoteOffsets | None = None
        #: OffsetCommitValue bytes -> its view (``_offsets``); topic -> partition -> key tuple.
        self._views: dict[bytes, CommittedView] = {}
        self._keys: dict[str, dict[int, TopicPartition]] = {}
        #: Twice the offsets of the last full scrape: old values do not pile up.
        self._views_limit = _VIEWS_MIN
        #: classic assignment bytes -> its partitions.
        self._assignments: dict[bytes, list[TopicPartition]] = {}
        #: (topic, partition, offset) -> the timestamp of the record there (None: none readable).
        self._timestamps: dict[tuple[str, int, int], int | None] = {}

    # --- groups -------------------------------------------------------------------------------

    def _shards(self) -> list[tuple[int, GroupCoordinatorShard]]:
        return [(p, shard) for p, state, shard in self.runtime.hosted() if shard is not None]

    def groups(self) -> list[GroupView]:
        """Every group of the coordinator partitions active here."""
        out: list[GroupView] = []
        for partition, shard in self._shards():
            classic = shard.group_manager.groups
            consumer = shard.consumer_manager.groups
            for group_id in consumer:
                out.append(self._consumer_group(partition, shard, group_id))
            for group_id, group in classic.items():
                if group.state is not GroupState.DEAD and group_id not in consumer:
                    out.append(self._classic_group(partition, shard, group_id))
        self._views_limit = max(_VIEWS_MIN, 2 * sum(len(g.offsets) for g in out))
        return out

    def group_counts(self) -> tuple[dict[tuple[str, str], int], int]:
        """What ``groups()`` lists, counted without building it (the coordinator metrics read this
        at every scrape): groups by (type, state), and their committed offsets."""
        counts: dict[tuple[str, str], int] = {}
        offsets = 0
        for _partition, shard in self._shards():
            classic = shard.group_manager.groups
            consumer = shard.consumer_manager.groups
            committed = shard.offset_manager.offsets
            for group_id, cgroup in consumer.items():
                key = ("consumer", cgroup.state.value)
                counts[key] = counts.get(key, 0) + 1
                by_topic = committed.get(group_id)
                if by_topic:
                    offsets += sum(map(len, by_topic.values()))
            for group_id, group in classic.items():
                if group.state is not GroupState.DEAD and group_id not in consumer:
                    key = ("classic", group.state.value)
                    counts[key] = counts.get(key, 0) + 1
                    by_topic = committed.get(group_id)
                    if by_topic:
                        offsets += sum(map(len, by_topic.values()))
        return counts, offsets

    def group(self, group_id: str) -> GroupView | None:
        for partition, shard in self._shards():
            if group_id in shard.consumer_manager.groups:
                return self._consumer_group(partition, shard, group_id)
            group = shard.group_manager.groups.get(group_id)
            if group is not None and group.state is not GroupState.DEAD:
                return self._classic_group(partition, shard, group_id)
        return None

    def _classic_group(self, partition: int, shard: GroupCoordinatorShard, group_id: str) -> GroupView:
        group = shard.group_manager.groups[group_id]
        consumer_protocol = group.protocol_type == CONSUMER_PROTOCOL_TYPE
        members = [MemberView(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                              self._classic_assignment(m.assignment) if consumer_protocol else [])
                   for m in group.members.values()]
        return GroupView(group_id, "classic", group.protocol_type or "", group.state.value, group.protocol_name or "",
                         group.generation_id, partition, members, self._offsets(shard, group_id))

    def _classic_assignment(self, data: bytes) -> list[TopicPartition]:
        if not data:
            return []
        found = self._assignments.get(data)
        if found is None:
            try:
                decoded = decode_assignment(data)
                found = [(topic, p) for topic, parts in decoded.assigned_partitions for p in parts]
            except MalformedConsumerProtocol:
                found = []
            if len(self._assignments) >= _CACHE_LIMIT:
                self._assignments.clear()
            self._assignments[data] = found
        return found

    def _consumer_group(self, partition: int, shard: GroupCoordinatorShard, group_id: str) -> GroupView:
        manager = shard.consumer_manager
        group = manager.groups[group_id]
        topics = manager.topics
        names: dict[uuid.UUID, str] = {}

        def name(topic_id: uuid.UUID) -> str:
            found = names.get(topic_id)
            if found is None:
                topic = topics.by_id(topic_id)
                found = names[topic_id] = topic.name if topic is not None else str(topic_id)
            return found

        members = [MemberView(m.member_id, m.instance_id, m.client_id, m.client_host,
                              sorted((name(t), p) for t, parts in m.assigned_partitions.items() for p in parts))
                   for m in group.members.values()]
        assignor = manager.preferred_assignor(group.members.values()) if group.members else ""
        return GroupView(group_id, "consumer", "consumer", group.state.value, assignor, group.group_epoch,
                         partition, members, self._offsets(shard, group_id))

    def _offsets(self, shard: GroupCoordinatorShard, group_id: str) -> dict[TopicPartition, CommittedView]:
        # Objects are reused from scrape to scrape (the views by value bytes and deadline, the
        # keys by topic and partition): a scrape then allocates a few objects per group rather
        # than per offset, which keeps the cyclic GC from walking a hundred thousand new ones.
        manager = shard.offset_manager
        views = self._views
        get = views.get
        keys = self._keys
        decode = self._decode
        out: dict[TopicPartition, CommittedView] = {}
        topic_keys: dict[int, TopicPartition] | None = None
        last_topic = None
        for topic, partition, value, deadline in manager.deadlines(group_id, decode):
            if topic is not last_topic:
                last_topic = topic
                topic_keys = keys.get(topic)
                if topic_keys is None:
                    topic_keys = keys[topic] = {}
            assert topic_keys is not None
            key = topic_keys.get(partition)
            if key is None:
                key = topic_keys[partition] = (topic, partition)
            view = get(value)
            if view is None or view.expires_at_ms != deadline:
                f = decode(value)
                if view is None and len(views) >= self._views_limit:
                    views.clear()  # old values of later commits; the live ones come back
                view = views[value] = CommittedView(f[0], f[1], f[2], f[3], deadline, f)
            out[key] = view
        return out

    def _decode(self, value: bytes) -> OffsetCommitFields:
        view = self._views.get(value)
        if view is not None:
            return view.fields
        return offset_commit_fields(value)

    def committed_partitions(self) -> set[TopicPartition]:
        """The partitions any group coordinated here has an offset committed on (what
        ``remote_offsets.py`` keeps polled)."""
        by_topic: dict[str, set[int]] = {}
        for _partition, shard in self._shards():
            for offsets in shard.offset_manager.offsets.values():
                for topic, committed in offsets.items():
                    found = by_topic.get(topic)
                    if found is None:
                        found = by_topic[topic] = set()
                    found.update(committed)
        return {(topic, p) for topic, partitions in by_topic.items() for p in partitions}

    # --- partitions ---------------------------------------------------------------------------

    def partitions(self) -> dict[TopicPartition, PartitionView]:
        """The partitions hosted here, and in cluster mode every other partition the view knows
        (``local`` False; offsets as their leader last gave them, None until it did)."""
        out: dict[TopicPartition, PartitionView] = {}
        me: tuple[int, ...] = (self.node_id,)
        remote = self.remote
        for plog in self.logs.partitions():
            repl = plog.replication
            start, end = plog.log_start_offset, plog.high_watermark
            if repl is None:
                leader, isr, replicas = self.node_id, me, me
            else:
                leader, isr, replicas = repl.leader_id, tuple(repl.isr), tuple(repl.replicas)
                if remote is not None and not plog.is_leader:
                    # A follower: the leader's offsets once asked (remote_offsets.py says why).
                    ends = remote.ends(plog.topic, plog.partition)
                    if ends is not None:
                        start = ends.log_start if ends.log_start is not None else start
                        end = ends.log_end if ends.log_end is not None else end
            out[(plog.topic, plog.partition)] = PartitionView(
                start, end, plog.last_stable_offset, leader, isr, replicas, True)
        cluster = self.cluster
        if cluster is not None:
            for name, assignment in cluster.topics.items():
                for p, replicas in assignment.partitions.items():
                    if (name, p) in out:
                        continue
                    state = cluster.states.get((name, p))
                    ends = remote.ends(name, p) if remote is not None else None
                    out[(name, p)] = PartitionView(None if ends is None else ends.log_start,
                                                   None if ends is None else ends.log_end, None,
                                                   -1 if state is None else state.leader,
                                                   () if state is None else tuple(state.isr), tuple(replicas), False)
        return out

    def _log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def is_led_here(self, topic: str, partition: int) -> bool:
        """Whether this node answers for the partition itself: it leads it with its log open
        (always so on one node)."""
        plog = self._log(topic, partition)
        return plog is not None and (plog.replication is None or plog.is_leader)

    def led_partition_offsets(self) -> dict[TopicPartition, tuple[int, int]] | None:
        """Cluster mode: (high watermark, log start) of every partition this node leads, whether
        or not its groups consume it — the partitions whose ``kafka_partition_latest_offset`` this
        node serves, so that a scrape of every node has each partition once (Grafana's
        kafka-lag-exporter dashboard joins committed offsets with it on topic and partition, and
        two nodes serving one partition make that join many-to-many). None on one node, which
        serves the partitions its groups consume, as kafka-lag-exporter does."""
        if self.cluster is None:
            return None
        return {(plog.topic, plog.partition): (plog.high_watermark, plog.log_start_offset)
                for plog in self.logs.partitions() if plog.replication is None or plog.is_leader}

    def earliest(self, topic: str, partition: int) -> int | None:
        """The log start offset (ListOffsets EARLIEST): the local log's when led here, else the
        leader's last answer (a follower's own while none came); None: not known here."""
        plog = self._log(topic, partition)
        if self.remote is not None and not self.is_led_here(topic, partition):
            found = self.remote.earliest(topic, partition)
            if found is not None:
                return found
        return None if plog is None else plog.log_start_offset

    def latest(self, topic: str, partition: int) -> int | None:
        """The high watermark (ListOffsets LATEST, read_uncommitted): the local log's when led
        here, else the leader's last answer (a follower's own while none came); None: not known here."""
        plog = self._log(topic, partition)
        if self.remote is not None and not self.is_led_here(topic, partition):
            found = self.remote.latest(topic, partition)
            if found is not None:
                return found
        return None if plog is None else plog.high_watermark

    async def refresh_offsets(self, partitions: list[TopicPartition]) -> None:
        """Ask the leaders of ``partitions`` not led here for their latest and earliest offsets now
        (the dashboard's reset plans against current values); nothing on one node."""
        if self.remote is not None:
            await self.remote.refresh(partitions)

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset whose timestamp is at or after ``timestamp_ms`` (ListOffsets with a
        timestamp); the high watermark when none is (as the reset tool treats Kafka's -1);
        None: not known here. A partition led by another node is asked of its leader."""
        if self.remote is not None and not self.is_led_here(topic, partition):
            return await self.remote.offset_for_timestamp(topic, partition, timestamp_ms)
        plog = self._log(topic, partition)
        if plog is None:
            return None
        try:
            found = plog.offset_for_timestamp(timestamp_ms)
        except (StorageError, OSError):
            return None
        hw = plog.high_watermark
        if found is None or found[0] >= hw:
            return hw
        return found[0]

    def first_unconsumed_timestamp(self, topic: str, partition: int, offset: int) -> int | None:
        """The timestamp of the record a consumer committed at ``offset`` reads next, from the
        local log (None: not hosted here, or nothing unconsumed below the high watermark).
        Cached by (topic, partition, offset): a scrape does not read the disk again until the
        group commits further."""
        plog = self._log(topic, partition)
        if plog is None:
            return None
        start = plog.log_start_offset
        hw = plog.high_watermark
        offset = max(offset, start)
        if offset >= hw:
            return None
        key = (topic, partition, offset)
        if key in self._timestamps:
            return self._timestamps[key]
        found = _record_timestamp(plog, offset, hw)
        if len(self._timestamps) >= 100_000:
            self._timestamps.clear()
        self._timestamps[key] = found
        return found

    # --- coordinators and nodes --------------------------------------------------------------

    def coordinator_partitions(self) -> list[CoordinatorPartitionView]:
        out: list[CoordinatorPartitionView] = []
        for runtime in (self.runtime, self.txn_runtime):
            if runtime is None:
                continue
            for p, state, _shard in sorted(runtime.hosted(), key=lambda item: item[0]):
                seconds = runtime.load_seconds.get(p)
                out.append(CoordinatorPartitionView(runtime.topic, p, state.value,
                                                    None if seconds is None else seconds * 1000.0))
        return out

    def led_coordinator_partitions(self) -> list[tuple[str, int, CoordinatorState | None]]:
        """The coordinator topics' partitions this node leads, with their runtime state (None:
        the runtime has not been told yet). In cluster mode also those ZooKeeper names this node
        the leader of before this node has opened their log."""
        out: dict[tuple[str, int], CoordinatorState | None] = {}
        cluster = self.cluster
        for runtime in (self.runtime, self.txn_runtime):
            if runtime is None:
                continue
            for plog in self.logs.partitions():
                if plog.topic == runtime.topic and plog.is_leader:
                    out[(plog.topic, plog.partition)] = runtime.state(plog.partition)
            if cluster is not None and runtime.topic in cluster.topics:
                for p in cluster.topics[runtime.topic].partitions:
                    if (runtime.topic, p) not in out and cluster.leader(runtime.topic, p) == self.node_id:
                        out[(runtime.topic, p)] = runtime.state(p)
        return [(topic, p, state) for (topic, p), state in out.items()]

    def nodes(self) -> list[NodeView]:
        if self.cluster is None:
            if self.endpoint is None:
                return []
            return [NodeView(self.node_id, self.endpoint[0], self.endpoint[1], self.rack)]
        return [NodeView(b.broker_id, b.host, b.port, b.rack) for _id, b in sorted(self.cluster.brokers.items())]

    def controller_id(self) -> int:
        """The controller (cluster mode), this node on one node."""
        return self.node_id if self.cluster is None else self.cluster.controller_id


def _record_timestamp(plog: PartitionLog, offset: int, below: int) -> int | None:
    """The timestamp of the first data record at or after ``offset`` (below ``below``)."""
    for _ in range(_MARKER_SKIP):
        if offset >= below:
            return None
        try:
            data = plog.log.read(offset, 1)
        except (StorageError, OSError):  # retention or a truncation moved the log meanwhile
            return None
        if len(data) < 61:
            return None
        try:
            header = read_batch_header(data, 0)
            if header.is_control:
                offset = header.last_offset + 1
                continue
            for record in decode_records(data, 0, header, check_crc=False):
                if header.base_offset + record.offset_delta >= offset:
                    return record.timestamp(header)
        except CorruptBatchError:
            return None
        offset = header.last_offset + 1
    return None
