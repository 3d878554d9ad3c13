"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, expiry (KIP-211), and the replay of
OffsetCommit records.

Kafka ``OffsetMetadataManager``:
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/OffsetMetadataManager.java
Like Kafka's managers, this class has two kinds of methods: 1) request handlers, which validate
and return OffsetCommit records (tombstones to delete) in a :class:`CoordinatorResult`, or a
response for reads; 2) ``replay_offset_commit``, the only code that changes ``offsets``, also used
to load a partition.

Rules:

1. ``offsets`` (group -> topic -> partition -> value bytes) is hard state: only replay changes it,
   so an acknowledged commit stays visible until a later commit, a deletion or an expiry
   overwrites it. Each value is kept as the OffsetCommitValue bytes of its record and decoded
   when read: a cached offset then costs a 64-byte ``bytes`` object and a dict slot, instead of
   a dataclass, two large ints and a tuple key (issue #6 budgets 200 bytes per cached offset),
   and loading a partition does not decode values at all.
2. Commit validation follows Kafka's classic group (per state and generation); a commit with
   generation -1 from a client that is not a member ("simple" consumer, admin tool) is accepted
   only while the group is Empty, and creates the group if it does not exist.
3. Transactional offsets (TxnOffsetCommit, KIP-447): the OffsetCommit records of a transactional
   batch are *pending* for their producer id (``pending``, ``open_by_group``) until the
   producer's marker: COMMIT materialises each one unless a later log position already set that
   partition's offset (a plain commit, or another producer's transaction committed first),
   ABORT drops them (Kafka's ``OffsetMetadataManager.replayEndTransactionMarker``). Rather than
   remember the log offset of every committed value (issue #6's memory budget), a pending offset
   is marked *superseded* when a later-positioned value is stored for its partition — the same
   outcome as Kafka's comparison at COMMIT time, since a partition's stored position only grows
   until a tombstone, which drops the pending offsets too. Pending offsets are invisible to
   OffsetFetch; RequireStable answers UNSTABLE_OFFSET_COMMIT for their partitions; they never
   expire, and a group with open transactions is not expired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from kafka.protocol.consumer import OffsetDeleteResponse
from kafka.protocol.producer import TxnOffsetCommitResponse

from protocol.consumer_offsets import OffsetCommitFields, OffsetCommitKey, OffsetCommitValue, offset_commit_fields
from protocol.errors import ErrorCode
from protocol.hot_responses import (
    CommitPartition,
    CommitTopic,
    FetchGroup,
    FetchPartition,
    FetchTopic,
    OffsetCommitAnswer,
    OffsetFetchAnswer,
)
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..runtime.contract import Clock, CoordinatorResult, Record
from .classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from .config import GroupConfig
from .consumer.group import ConsumerGroupState
from .consumer.manager import ConsumerGroupManager
from .group_manager import GroupManager
from .group_state import GroupState

__all__ = ["OffsetManager", "utf16_length", "GroupOffsets", "PendingOffset", "expiry_deadlines", "classic_expiry_rule"]

E = ErrorCode
S = GroupState

DeleteTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
DeletePartition = DeleteTopic.OffsetDeleteResponsePartition
TxnTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
TxnPartition = TxnTopic.TxnOffsetCommitResponsePartition

#: One partition's fetch answer: (partition, offset, leader epoch, metadata, error).
FetchedPartition = tuple[int, int, int, str, int]
#: A group's committed offsets: topic -> partition -> OffsetCommitValue bytes.
GroupOffsets = dict[str, dict[int, bytes]]


def _from_commit(fields: OffsetCommitFields) -> int:
    return fields[3]


def expiry_deadlines(committed: GroupOffsets, retention_ms: int,
                     since: Callable[[OffsetCommitFields], int] | None, *,
                     kept_topic: Callable[[str], bool] | None = None,
                     kept: Callable[[str, int], bool] | None = None,
                     fields_of: Callable[[bytes], OffsetCommitFields] = offset_commit_fields,
                     ) -> Iterator[tuple[str, int, int | None]]:
    """When each committed offset of a group expires (KIP-211,
    https://cwiki.apache.org/confluence/display/KAFKA/KIP-211%3A+Revise+Expiration+Semantics+of+Consumer+Group+Offsets):
    ``(topic, partition, expire-at ms)`` for every offset, None for one that does not expire
    while the group stays as it is. Pure: the expiry operation tombstones the offsets whose
    deadline ``now`` has reached, and the operations view reports the same numbers.

    ``since``: what an offset's age is measured from (None: nothing of the group expires now);
    ``kept_topic``: topics the group still subscribes to (kept); ``kept``: partitions held by an
    open transaction (kept). A commit with its own expire timestamp (OffsetCommit v2-v4's
    retention time) expires then, as in Kafka's ``offsetExpirationCondition``."""
    for topic, by_partition in committed.items():
        if since is None or (kept_topic is not None and kept_topic(topic)):
            for partition in by_partition:
                yield topic, partition, None
            continue
        for partition, value in by_partition.items():
            if kept is not None and kept(topic, partition):
                yield topic, partition, None
                continue
            fields = fields_of(value)
            expire = fields[4]
            yield topic, partition, expire if expire is not None and expire >= 0 else since(fields) + retention_ms


def classic_expiry_rule(group: ClassicGroup) -> tuple[Callable[[OffsetCommitFields], int] | None,
                                                      Callable[[str], bool] | None]:
    """A classic group's ``since`` and ``kept_topic`` for ``expiry_deadlines`` (Kafka's
    ``ClassicGroup.offsetExpirationCondition`` and ``cleanupExpiredOffsets``)."""
    if group.protocol_type is None:  # simple group: from each commit
        since: Callable[[OffsetCommitFields], int] | None = _from_commit
    elif group.state is S.EMPTY:  # KIP-211: from when the group became Empty
        became_empty = group.state_timestamp_ms
        since = _from_commit if became_empty is None else (lambda _fields: became_empty)
    elif group.state is S.STABLE and group.protocol_type == CONSUMER_PROTOCOL_TYPE \
            and group.subscribed_topics is not None:
        since = _from_commit  # topics no member subscribes to any more
    else:
        since = None
    # A Stable group keeps the offsets of the topics its members subscribe to.
    return since, group.is_subscribed_to_topic if group.state is S.STABLE else None


class PendingOffset:
    """An offset of an open transaction: its record's log offset and OffsetCommitValue bytes, and
    whether a value at a later log position was stored for its partition since (then its COMMIT
    leaves it out: the last log position wins)."""

    __slots__ = ("offset", "value", "superseded")

    def __init__(self, offset: int, value: bytes) -> None:
        self.offset = offset
        self.value = value
        self.superseded = False


#: A producer's pending offsets of one group: topic -> partition -> PendingOffset.
PendingGroupOffsets = dict[str, dict[int, PendingOffset]]


def utf16_length(text: str) -> int:
    """Length as Java's ``String.length()`` counts it (UTF-16 code units), which is what
    offset.metadata.max.bytes is compared against."""
    return len(text.encode("utf-16-le")) // 2


class OffsetManager:
    """Offsets of one ``__consumer_offsets`` partition. Call only from its serial executor."""

    def __init__(self, config: GroupConfig, clock: Clock, groups: GroupManager,
                 partition_exists: Callable[[str, int], bool],
                 consumer_groups: ConsumerGroupManager | None = None) -> None:
        self.config = config
        self.clock = clock
        self.groups = groups
        self.partition_exists = partition_exists
        #: KIP-848 groups: their commits and fetches check member epochs instead of generations.
        self.consumer_groups = consumer_groups
        #: group -> topic -> partition -> OffsetCommitValue bytes (hard state; replay only).
        self.offsets: dict[str, GroupOffsets] = {}
        #: Transactional offsets awaiting their marker (hard state; replay only): producer id ->
        #: group -> topic -> partition -> PendingOffset; the groups each producer has pending
        #: offsets in; the producer's epoch (for snapshots).
        self.pending: dict[int, dict[str, PendingGroupOffsets]] = {}
        self.open_by_group: dict[str, set[int]] = {}
        self.pending_epochs: dict[int, int] = {}

    # =========================================================================================
    # OffsetCommit (v2-9)

    def commit_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[OffsetCommitAnswer]:
        now = self.clock.now_ms()
        group_id = request.group_id
        results: dict[str, list[tuple[int, int]]] = {}
        wanted: list[tuple[str, KafkaStruct]] = []
        for topic in request.topics:
            out = results.setdefault(topic.name, [])
            for part in topic.partitions:
                if self.partition_exists(topic.name, part.partition_index):
                    wanted.append((topic.name, part))
                else:  # the broker layer answers these before the coordinator sees the request
                    out.append((part.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION))
        error: int = E.NONE
        if wanted:
            error = self._validate_commit(request, api_version) if group_id is not None else E.INVALID_GROUP_ID
        records: list[Record] = []
        for topic_name, part in wanted:
            part_error = error
            if not error:
                metadata = part.committed_metadata or ""
                # A string of n code points is at most 2n UTF-16 units: count only when it matters.
                if 2 * len(metadata) > self.config.offset_metadata_max_bytes \
                        and utf16_length(metadata) > self.config.offset_metadata_max_bytes:
                    part_error = E.OFFSET_METADATA_TOO_LARGE
                else:
                    records.append((OffsetCommitKey(group_id, topic_name, part.partition_index),
                                    self._commit_value(request, api_version, part, metadata, now)))
            results[topic_name].append((part.partition_index, part_error))
        response = OffsetCommitAnswer([CommitTopic(name, [CommitPartition(p, int(e)) for p, e in parts])
                                       for name, parts in results.items()])
        return CoordinatorResult(records, response)

    def _commit_value(self, request: KafkaRequest, api_version: int, part: KafkaStruct, metadata: str, now: int) -> OffsetCommitValue:
        expire = None
        if 2 <= api_version <= 4 and request.retention_time_ms != -1:
            expire = now + request.retention_time_ms  # legacy per-commit retention (written as value v1)
        return OffsetCommitValue(
            offset=part.committed_offset,
            metadata=metadata,
            commit_timestamp=now,
            leader_epoch=part.committed_leader_epoch if api_version >= 6 else -1,
            expire_timestamp=expire,
        )

    def _validate_commit(self, request: KafkaRequest, api_version: int) -> int:
        generation = request.generation_id_or_member_epoch
        member_id = request.member_id or ""
        instance_id = request.group_instance_id if api_version >= 7 else None
        if self.consumer_groups is not None:
            consumer_group = self.consumer_groups.groups.get(request.group_id)
            if consumer_group is not None:
                return self.consumer_groups.validate_offset_commit(
                    consumer_group, member_id, generation, api_version,
                    [(t.name, p.partition_index) for t in request.topics for p in t.partitions])
        return self._validate_classic_commit(request.group_id, generation, member_id, instance_id,
                                             E.GROUP_ID_NOT_FOUND if api_version >= 9 else E.ILLEGAL_GENERATION,
                                             transactional=False)

    def _validate_classic_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                                 unknown_group: int, *, transactional: bool) -> int:
        """A commit's checks against a classic group (Kafka's ``ClassicGroup.validateOffsetCommit``
        with its ``isTransactional`` flag). ``unknown_group``: the answer when no group exists and
        the commit names a generation; without one a "simple" group is created (KIP-447)."""
        group = self.groups.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return unknown_group
            group = self.groups.ensure_group(group_id)
        if group.state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is S.EMPTY:
            return E.NONE
        if generation >= 0 or member_id or instance_id is not None:
            error = self.groups.validate_member(group, member_id, instance_id)
            if error:
                return error
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif not transactional and group.state is not S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        if transactional:
            # Unlike OffsetCommit: no UNKNOWN_MEMBER_ID for an anonymous commit to a live group,
            # no REBALANCE_IN_PROGRESS, and the member's session is not touched.
            return E.NONE
        if group.state is S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        self.groups.touch_member(group, member_id)
        return E.NONE

    # =========================================================================================
    # TxnOffsetCommit (v0-4, KIP-98 / KIP-447)

    def txn_commit_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        """The offsets of a transaction: OffsetCommit records written in a transactional batch of
        the request's producer (the result carries its id and epoch), pending until its marker.
        Checks of Kafka's ``OffsetMetadataManager.validateTransactionalOffsetCommit``."""
        now = self.clock.now_ms()
        group_id = request.group_id
        results: dict[str, list[tuple[int, int]]] = {}
        wanted: list[tuple[str, KafkaStruct]] = []
        for topic in request.topics:
            out = results.setdefault(topic.name, [])
            for part in topic.partitions:
                if self.partition_exists(topic.name, part.partition_index):
                    wanted.append((topic.name, part))
                else:
                    out.append((part.partition_index, E.UNKNOWN_TOPIC_OR_PARTITION))
        error: int = E.NONE
        if wanted:
            error = self._validate_txn_commit(request, api_version) if group_id else E.INVALID_GROUP_ID
        records: list[Record] = []
        for topic_name, part in wanted:
            part_error = error
            if not error:
                metadata = part.committed_metadata or ""
                if 2 * len(metadata) > self.config.offset_metadata_max_bytes \
                        and utf16_length(metadata) > self.config.offset_metadata_max_bytes:
                    part_error = E.OFFSET_METADATA_TOO_LARGE
                else:
                    records.append((OffsetCommitKey(group_id, topic_name, part.partition_index), OffsetCommitValue(
                        offset=part.committed_offset, metadata=metadata, commit_timestamp=now,
                        leader_epoch=part.committed_leader_epoch if api_version >= 2 else -1)))
            results[topic_name].append((part.partition_index, part_error))
        response = TxnOffsetCommitResponse(version=api_version, throttle_time_ms=0, topics=[
            TxnTopic(name=name, partitions=[TxnPartition(partition_index=p, error_code=int(e)) for p, e in parts])
            for name, parts in results.items()])
        return CoordinatorResult(records, response, producer_id=request.producer_id,
                                 producer_epoch=request.producer_epoch)

    def _validate_txn_commit(self, request: KafkaRequest, api_version: int) -> int:
        generation = request.generation_id if api_version >= 3 else -1
        member_id = (request.member_id or "") if api_version >= 3 else ""
        instance_id = request.group_instance_id if api_version >= 3 else None
        if self.consumer_groups is not None:
            consumer_group = self.consumer_groups.groups.get(request.group_id)
            if consumer_group is not None:
                # Member epochs; TxnOffsetCommit < v6 has no STALE_MEMBER_EPOCH, it becomes
                # ILLEGAL_GENERATION (KIP-848), and any version may commit (the v9 rule is
                # OffsetCommit's).
                error = self.consumer_groups.validate_offset_commit(
                    consumer_group, member_id, generation, 9,
                    [(t.name, p.partition_index) for t in request.topics for p in t.partitions])
                return E.ILLEGAL_GENERATION if error == E.STALE_MEMBER_EPOCH else error
        return self._validate_classic_commit(request.group_id, generation, member_id, instance_id,
                                             E.ILLEGAL_GENERATION, transactional=True)

    # =========================================================================================
    # OffsetFetch (v1-9)

    def fetch_offsets(self, request: KafkaRequest, api_version: int) -> OffsetFetchAnswer:
        """A read: the response itself. v8+ requests name several groups; all must belong to
        this partition (the service splits requests by partition)."""
        if api_version >= 8:
            groups = []
            for g in request.groups:
                if api_version >= 9 and self.consumer_groups is not None:
                    consumer_group = self.consumer_groups.groups.get(g.group_id)
                    if consumer_group is not None:
                        error = self.consumer_groups.validate_offset_fetch(consumer_group, g.member_id, g.member_epoch)
                        if error:
                            groups.append(FetchGroup(g.group_id, [], int(error)))
                            continue
                topics = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                fetched = self.fetch_group_offsets(g.group_id, topics, bool(request.require_stable))
                groups.append(FetchGroup(g.group_id, [FetchTopic(name, [FetchPartition(*part) for part in parts])
                                                      for name, parts in fetched]))
            return OffsetFetchAnswer(groups=groups)
        topics = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        fetched = self.fetch_group_offsets(request.group_id, topics, api_version >= 7 and bool(request.require_stable))
        with_epoch = api_version >= 5
        return OffsetFetchAnswer(topics=[FetchTopic(name, [FetchPartition(p, o, le if with_epoch else -1, m, e)
                                                           for p, o, le, m, e in parts])
                                         for name, parts in fetched])

    def fetch_group_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                            require_stable: bool = False) -> list[tuple[str, list[FetchedPartition]]]:
        """Committed offsets of a group: the requested partitions (unknown ones: offset -1, no
        error), or every committed partition when ``topics`` is None. ``require_stable``
        (OffsetFetch v7+, KIP-447): a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT with offset -1, and the client retries."""
        committed = self.offsets.get(group_id, {})
        if require_stable and group_id in self.open_by_group:
            return self._fetch_stable(group_id, committed, topics)
        if topics is None:
            out_all: list[tuple[str, list[FetchedPartition]]] = []
            for topic in sorted(committed):
                by_partition = committed[topic]
                out_all.append((topic, [(partition, *offset_commit_fields(by_partition[partition])[:3], E.NONE)
                                        for partition in sorted(by_partition)]))
            return out_all
        out: list[tuple[str, list[FetchedPartition]]] = []
        for topic, partitions in topics:
            by_partition = committed.get(topic, {})
            parts: list[FetchedPartition] = []
            for partition in partitions:
                value = by_partition.get(partition)
                if value is None:
                    parts.append((partition, -1, -1, "", E.NONE))
                else:
                    offset, leader_epoch, metadata = offset_commit_fields(value)[:3]
                    parts.append((partition, offset, leader_epoch, metadata, E.NONE))
            out.append((topic, parts))
        return out

    def _fetch_stable(self, group_id: str, committed: GroupOffsets, topics: list[tuple[str, list[int]]] | None
                      ) -> list[tuple[str, list[FetchedPartition]]]:
        if topics is None:
            topics = [(topic, sorted(committed[topic])) for topic in sorted(committed)]
        out: list[tuple[str, list[FetchedPartition]]] = []
        for topic, partitions in topics:
            by_partition = committed.get(topic, {})
            parts: list[FetchedPartition] = []
            for partition in partitions:
                value = by_partition.get(partition)
                if self.has_pending(group_id, topic, partition):
                    parts.append((partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                elif value is None:
                    parts.append((partition, -1, -1, "", E.NONE))
                else:
                    offset, leader_epoch, metadata = offset_commit_fields(value)[:3]
                    parts.append((partition, offset, leader_epoch, metadata, E.NONE))
            out.append((topic, parts))
        return out

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether a transaction holds a pending offset of the group for the partition."""
        for producer_id in self.open_by_group.get(group_id, ()):
            if partition in self.pending[producer_id][group_id].get(topic, ()):
                return True
        return False

    def committed(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue]:
        """A group's offsets as typed values, (topic, partition) -> value (tests, diagnostics)."""
        return {(topic, partition): OffsetCommitValue(offset, metadata, commit_ts, epoch, expire)
                for topic, by_partition in self.offsets.get(group_id, {}).items()
                for partition, value in by_partition.items()
                for offset, epoch, metadata, commit_ts, expire in (offset_commit_fields(value),)}

    # =========================================================================================
    # OffsetDelete (v0, KIP-496)

    def delete_offsets(self, request: KafkaRequest, api_version: int) -> CoordinatorResult[KafkaResponse]:
        is_subscribed: Callable[[str], bool]
        consumer_group = None if self.consumer_groups is None else self.consumer_groups.groups.get(request.group_id)
        if consumer_group is not None:
            # A consumer group may always delete offsets, except of topics its members subscribe to.
            assert self.consumer_groups is not None
            is_subscribed = self.consumer_groups.subscribed_topic_names(consumer_group).__contains__
            group_id = consumer_group.group_id
        else:
            group = self.groups.groups.get(request.group_id)
            if group is None or group.state is S.DEAD:
                return CoordinatorResult(response=OffsetDeleteResponse(
                    version=api_version, throttle_time_ms=0, error_code=int(E.GROUP_ID_NOT_FOUND), topics=[]))
            if group.state is not S.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return CoordinatorResult(response=OffsetDeleteResponse(
                    version=api_version, throttle_time_ms=0, error_code=int(E.NON_EMPTY_GROUP), topics=[]))
            classic = group
            is_subscribed = lambda name: classic.state is not S.EMPTY and classic.is_subscribed_to_topic(name)  # noqa: E731
            group_id = group.group_id
        committed = self.offsets.get(group_id, {})
        records: list[Record] = []
        topics = []
        for topic in request.topics:
            subscribed = is_subscribed(topic.name)
            parts = []
            for part in topic.partitions:
                p = part.partition_index
                if not self.partition_exists(topic.name, p):
                    error = E.UNKNOWN_TOPIC_OR_PARTITION
                elif subscribed:
                    error = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    error = E.NONE
                    # A pending transactional offset gets a tombstone too (Kafka's deleteOffsets).
                    if p in committed.get(topic.name, ()) or (group_id in self.open_by_group
                                                              and self.has_pending(group_id, topic.name, p)):
                        records.append((OffsetCommitKey(group_id, topic.name, p), None))
                parts.append(DeletePartition(partition_index=p, error_code=int(error)))
            topics.append(DeleteTopic(name=topic.name, partitions=parts))
        return CoordinatorResult(records, OffsetDeleteResponse(version=api_version, throttle_time_ms=0,
                                                               error_code=0, topics=topics))

    # =========================================================================================
    # Expiry (KIP-211) and group deletion

    def expired_offset_tombstones(self, group: ClassicGroup, now_ms: int) -> tuple[list[Record], bool]:
        """Tombstones for the group's expired offsets, and whether no offset would remain. An
        offset with a pending transactional one never expires, and a group with an open
        transaction always keeps something (Kafka's ``cleanupExpiredOffsets``). Which offsets
        expire when is ``expiry_deadlines``'s answer, the one the operations view reports."""
        committed = self.offsets.get(group.group_id)
        open_transactions = group.group_id in self.open_by_group
        if not committed:
            return [], not open_transactions
        return self._expired(group.group_id, self.deadlines(group.group_id), now_ms, open_transactions)

    def expired_consumer_group_offsets(self, group_id: str, now_ms: int) -> tuple[list[Record], bool]:
        """An Empty consumer group's expired offsets, measured from each commit (Kafka's
        ``ConsumerGroup.offsetExpirationCondition``), and whether none would remain."""
        committed = self.offsets.get(group_id)
        open_transactions = group_id in self.open_by_group
        if not committed:
            return [], not open_transactions
        return self._expired(group_id, expiry_deadlines(committed, self.config.offsets_retention_ms, _from_commit,
                                                        kept=self._pending_test(group_id)),
                             now_ms, open_transactions)

    @staticmethod
    def _expired(group_id: str, deadlines: Iterable[tuple[str, int, int | None]], now_ms: int,
                 open_transactions: bool) -> tuple[list[Record], bool]:
        records: list[Record] = []
        count = 0
        for topic, partition, deadline in deadlines:
            count += 1
            if deadline is not None and now_ms >= deadline:
                records.append((OffsetCommitKey(group_id, topic, partition), None))
        return records, len(records) == count and not open_transactions

    def deadlines(self, group_id: str, fields_of: Callable[[bytes], OffsetCommitFields] = offset_commit_fields
                  ) -> Iterator[tuple[str, int, int | None]]:
        """``(topic, partition, expire-at ms or None)`` for every committed offset of the group,
        as the expiry operation will treat it now (``expiry_deadlines``; None: it does not
        expire while the group stays as it is). ``fields_of`` decodes a value (a caller may
        hand in a cached decoder)."""
        committed = self.offsets.get(group_id)
        if not committed:
            return iter(())
        retention = self.config.offsets_retention_ms
        kept = self._pending_test(group_id)
        if self.consumer_groups is not None:
            consumer_group = self.consumer_groups.groups.get(group_id)
            if consumer_group is not None:
                # The expiry operation looks at Empty consumer groups only (shard.py).
                since: Callable[[OffsetCommitFields], int] | None = \
                    _from_commit if consumer_group.state is ConsumerGroupState.EMPTY else None
                return expiry_deadlines(committed, retention, since, kept=kept, fields_of=fields_of)
        group = self.groups.groups.get(group_id)
        if group is None or group.state is S.DEAD:
            return expiry_deadlines(committed, retention, None, fields_of=fields_of)
        since, subscribed = classic_expiry_rule(group)
        return expiry_deadlines(committed, retention, since, kept_topic=subscribed, kept=kept, fields_of=fields_of)

    def _pending_test(self, group_id: str) -> Callable[[str, int], bool] | None:
        """Whether a partition has a pending transactional offset (those never expire), or None
        when the group has no open transaction."""
        if group_id not in self.open_by_group:
            return None
        return lambda topic, partition: self.has_pending(group_id, topic, partition)

    def topic_tombstones(self, topics: set[str]) -> list[Record]:
        """Tombstones for every group's offsets of deleted topics (Kafka ``onPartitionsDeleted``),
        pending transactional ones included."""
        records: list[Record] = [(OffsetCommitKey(group_id, topic, partition), None)
                                 for group_id, committed in self.offsets.items()
                                 for topic in topics if topic in committed
                                 for partition in committed[topic]]
        if self.open_by_group:
            for group_id in self.open_by_group:
                committed = self.offsets.get(group_id, {})
                records += [(OffsetCommitKey(group_id, topic, partition), None)
                            for topic, partition in self._pending_partitions(group_id)
                            if topic in topics and partition not in committed.get(topic, ())]
        return records

    def offset_tombstones(self, group_id: str) -> list[Record]:
        """Tombstones for all of a group's offsets, and for partitions with only a pending
        transactional offset too (Kafka's ``deleteAllOffsets``)."""
        committed = self.offsets.get(group_id, {})
        records: list[Record] = [(OffsetCommitKey(group_id, topic, partition), None)
                                 for topic, by_partition in committed.items()
                                 for partition in by_partition]
        if group_id in self.open_by_group:
            records += [(OffsetCommitKey(group_id, topic, partition), None)
                        for topic, partition in self._pending_partitions(group_id)
                        if partition not in committed.get(topic, ())]
        return records

    def _pending_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The (topic, partition) pairs with a pending transactional offset of the group, sorted."""
        return sorted({(topic, partition) for producer_id in self.open_by_group.get(group_id, ())
                       for topic, by_partition in self.pending[producer_id][group_id].items()
                       for partition in by_partition})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id)) or group_id in self.open_by_group

    # =========================================================================================
    # Replay

    def replay_offset_commit(self, group_id: str, topic: str, partition: int, value: bytes | None) -> None:
        """Apply one OffsetCommit record: ``value`` is its OffsetCommitValue bytes, None a
        tombstone. The value must already be known to decode (``offset_commit_fields``)."""
        if self.open_by_group and group_id in self.open_by_group:
            # A later log position than every pending offset: a tombstone drops them, a value
            # supersedes them (rule 3).
            self._drop_or_supersede_pending(group_id, topic, partition, None, value is None)
        committed = self.offsets.get(group_id)
        if value is None:
            if committed is not None:
                by_partition = committed.get(topic)
                if by_partition is not None:
                    by_partition.pop(partition, None)
                    if not by_partition:
                        del committed[topic]
                        if not committed:
                            del self.offsets[group_id]
                            if not self.groups.loaded and group_id not in self.groups.group_records \
                                    and group_id not in self.open_by_group:
                                # Loading: nothing left that ``on_loaded`` would build it for.
                                self.groups.groups.pop(group_id, None)
            return
        if committed is None:
            committed = self.offsets[group_id] = {}
        if group_id not in self.groups.groups and (self.consumer_groups is None
                                                   or group_id not in self.consumer_groups.groups):
            self._ensure_group(group_id)  # inlined test: this runs for every commit replayed
        by_partition = committed.get(topic)
        if by_partition is None:
            by_partition = committed[topic] = {}
        by_partition[partition] = value

    def _ensure_group(self, group_id: str) -> None:
        if group_id not in self.groups.groups and (self.consumer_groups is None
                                                   or group_id not in self.consumer_groups.groups):
            group = self.groups.ensure_group(group_id)
            if not self.groups.loaded:
                # Loading, or a hot standby replaying: the Empty group ``on_loaded`` would build
                # for these offsets, built as they arrive so that a takeover does not pay for
                # ten thousand simple groups at once (issue 14). Never persisted: its expiry
                # measures from its commits.
                group.state_timestamp_ms = None

    def _drop_or_supersede_pending(self, group_id: str, topic: str, partition: int, below: int | None,
                                   drop: bool) -> None:
        """A value (or a tombstone, ``drop``) was stored for the partition at a log position
        after every pending offset of it (``below`` None), or after those below ``below`` (a
        COMMIT materialising the one at ``below``): those are superseded, or dropped."""
        for producer_id in list(self.open_by_group.get(group_id, ())):
            groups = self.pending[producer_id]
            by_topic = groups[group_id]
            by_partition = by_topic.get(topic)
            if by_partition is None:
                continue
            pending = by_partition.get(partition)
            if pending is None or (below is not None and pending.offset >= below):
                continue
            if not drop:
                pending.superseded = True
                continue
            del by_partition[partition]
            if not by_partition:
                del by_topic[topic]
                if not by_topic:
                    # Nothing of the group left in this transaction: it no longer holds the group
                    # open (its marker still comes, and finds nothing of it).
                    del groups[group_id]
                    self._close(group_id, producer_id)

    def _close(self, group_id: str, producer_id: int) -> None:
        open_pids = self.open_by_group[group_id]
        open_pids.discard(producer_id)
        if not open_pids:
            del self.open_by_group[group_id]
        if not self.pending[producer_id]:
            del self.pending[producer_id]
            del self.pending_epochs[producer_id]

    def replay_transactional_offset_commit(self, offset: int, producer_id: int, producer_epoch: int, group_id: str,
                                           topic: str, partition: int, value: bytes | None) -> None:
        """Apply an OffsetCommit record of a transactional batch at log offset ``offset``: pending
        for ``producer_id`` until its marker. A tombstone acts as in a plain batch."""
        if value is None:
            self.replay_offset_commit(group_id, topic, partition, None)
            return
        groups = self.pending.setdefault(producer_id, {})
        self.pending_epochs[producer_id] = producer_epoch
        groups.setdefault(group_id, {}).setdefault(topic, {})[partition] = PendingOffset(offset, value)
        self.open_by_group.setdefault(group_id, set()).add(producer_id)
        self._ensure_group(group_id)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's marker: COMMIT stores each of its pending offsets that no later log
        position superseded, ABORT drops them (Kafka's ``replayEndTransactionMarker``)."""
        groups = self.pending.pop(producer_id, None)
        self.pending_epochs.pop(producer_id, None)
        if groups is None:
            return
        for group_id, by_topic in groups.items():
            open_pids = self.open_by_group[group_id]
            open_pids.discard(producer_id)
            if not open_pids:
                del self.open_by_group[group_id]
            if not commit:
                continue
            for topic, by_partition in by_topic.items():
                for partition, pending in by_partition.items():
                    if pending.superseded:
                        continue
                    if group_id in self.open_by_group:
                        self._drop_or_supersede_pending(group_id, topic, partition, pending.offset, False)
                    self._store(group_id, topic, partition, pending.value)
            if not self.groups.loaded and group_id not in self.offsets and group_id not in self.open_by_group \
                    and group_id not in self.groups.group_records:
                # Loading: nothing left that ``on_loaded`` would build the group for (as after a
                # tombstone, ``replay_offset_commit``).
                self.groups.groups.pop(group_id, None)

    def _store(self, group_id: str, topic: str, partition: int, value: bytes) -> None:
        committed = self.offsets.get(group_id)
        if committed is None:
            committed = self.offsets[group_id] = {}
        self._ensure_group(group_id)
        committed.setdefault(topic, {})[partition] = value

    def snapshot_transactional_records(self) -> list[tuple[int, int, int, OffsetCommitKey, bytes]]:
        """The pending offsets as ``(offset, producer_id, producer_epoch, key, value)``, ascending
        offset, for a snapshot (``runtime/snapshot.py``). A superseded one is followed by its
        partition's stored value as a plain record (producer id -1) placed after it and before
        every pending offset of the partition that still counts, which supersedes it again when
        replayed (rule 3)."""
        out: list[tuple[int, int, int, OffsetCommitKey, bytes]] = []
        superseded: dict[tuple[str, str, int], int] = {}
        for producer_id, groups in self.pending.items():
            epoch = self.pending_epochs[producer_id]
            for group_id, by_topic in groups.items():
                for topic, by_partition in by_topic.items():
                    for partition, pending in by_partition.items():
                        out.append((pending.offset, producer_id, epoch, OffsetCommitKey(group_id, topic, partition),
                                    pending.value))
                        if pending.superseded:
                            where = (group_id, topic, partition)
                            superseded[where] = max(superseded.get(where, -1), pending.offset)
        for (group_id, topic, partition), last in superseded.items():
            # A superseded offset was stored over, so a value is stored (a tombstone would have
            # dropped the pending offset instead); every pending offset that still counts was
            # written after that value, so after ``last + 1``.
            out.append((last + 1, -1, -1, OffsetCommitKey(group_id, topic, partition),
                        self.offsets[group_id][topic][partition]))
        out.sort(key=lambda item: (item[0], item[1] >= 0))
        return out
