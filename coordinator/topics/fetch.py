"""Fetch (api key 1, v4–v17): read whole batches, long-poll for more, send file ranges zero-copy.

Per partition, in Kafka's order: the topic and partition exist; the client's current leader epoch
(v9+) matches ours (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH otherwise); the fetch offset lies
within [log start, high watermark] (OFFSET_OUT_OF_RANGE otherwise). Records are whole batches from
the one containing the fetch offset, up to ``partition_max_bytes`` and the response's
``max_bytes`` — except that the first partition with data always gets at least one whole batch,
so an oversized batch cannot stall a consumer (KIP-74).

Long poll: when the response would hold fewer than ``min_bytes`` and ``max_wait_ms`` is positive,
the request parks until an append to one of its partitions becomes durable or the wait ends;
nothing polls, so an idle consumer costs no CPU.

In cluster mode only the leader serves a partition (NOT_LEADER_OR_FOLLOWER elsewhere). A
consumer reads below the high watermark; a follower (``replica_id`` >= 0, in ``ReplicaState``
from v15, KIP-903) reads to the log end, and its fetch offset tells the leader how far its log
goes, which moves the ISR and the high watermark (``replication.py``).

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells clients
to keep sending full requests.

Transactions (KIP-98): every response carries the partition's last stable offset (LSO). A
read_committed fetch (``isolation_level`` 1) reads only below the LSO — so a long poll counts
only those bytes, and an append that moves the LSO (a marker) wakes it — and gets the aborted
transactions overlapping what it read, ``(producer id, first offset)`` from the partition's
``.txnindex``, up to the offset of the first batch after the returned bytes (Kafka's
``LocalLog.addAbortedTransactions``). The records themselves are never filtered: the consumer
drops aborted data and control batches itself, and needs the abort markers to do so
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging).
read_uncommitted gets a null aborted list; a read_committed read that returns nothing, an empty one.
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections.abc import Awaitable

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.fetch_response import FetchPartitionData, FetchTopicData, RecordsRef, encode_fetch_response
from protocol.kafka_types import KafkaRequest
from protocol.records import BATCH_HEADER_SIZE, read_batch_header
from protocol.responses import EncodedResponse, FileRange
from storage.files import pread_exact

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed_names, cluster_allowed
from .log_manager import LogManager
from .partition_log import SENDFILE_MIN_BYTES, PartitionLog
from .replication_quota import ReplicationThrottle

__all__ = ["FetchApis", "check_leader_epoch"]

READ_COMMITTED = 1


def check_leader_epoch(plog: PartitionLog, current_leader_epoch: int) -> int:
    """KIP-320: a client that names a leader epoch must name ours."""
    if current_leader_epoch == -1 or current_leader_epoch == plog.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch > plog.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


class FetchApis:
    def __init__(self, logs: LogManager, throttle: ReplicationThrottle | None = None, *,
                 authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: Cluster mode: the leader's replication quota (KIP-73) for followers' fetches.
        self.throttle = throttle
        #: READ on each topic; a follower's fetch needs CLUSTER_ACTION on the cluster instead
        #: (KafkaApis handleFetchRequest).
        self.authorizer = authorizer

    def fetch(self, ctx: RequestContext, request: KafkaRequest) -> EncodedResponse | Awaitable[EncodedResponse]:
        version = ctx.api_version
        refused = self._refused(ctx, request) if self.authorizer.enabled else None
        first = self._read(version, request, refused)
        topics, size, logs, immediate = first
        if immediate or size >= request.min_bytes or request.max_wait_ms <= 0 or not logs:
            return self._encode(version, ctx.correlation_id, topics)
        return self._long_poll(ctx, request, logs, refused)

    def _refused(self, ctx: RequestContext, request: KafkaRequest) -> frozenset[str]:
        """The requested topics this fetch may not read (TOPIC_AUTHORIZATION_FAILED on their
        partitions): those without READ for a consumer, every one for a follower without
        CLUSTER_ACTION. Topics are named as the request names them, by id from v13."""
        version = ctx.api_version
        names = set()
        for topic in request.topics:
            if version < 13:
                names.add(topic.topic)
            else:
                info = self.logs.topic_info(None, getattr(topic, "topic_id", None))
                if info is not None:  # an unknown id stays UNKNOWN_TOPIC_ID: it names nothing
                    names.add(info.name)
        if _replica_id(version, request) >= 0:
            return frozenset() if cluster_allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION) \
                else frozenset(names)
        return frozenset(names - allowed_names(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names))

    async def _long_poll(self, ctx: RequestContext, request: KafkaRequest, logs: list[PartitionLog],
                         refused: frozenset[str] | None = None) -> EncodedResponse:
        version = ctx.api_version
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000.0
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await self.logs.wait_for_data(logs, remaining)
            topics, size, logs, immediate = self._read(version, request, refused)
            if immediate or size >= request.min_bytes:
                return self._encode(version, ctx.correlation_id, topics)
        topics, _, _, _ = self._read(version, request, refused)
        return self._encode(version, ctx.correlation_id, topics)

    @staticmethod
    def _encode(version: int, correlation_id: int, topics: list[FetchTopicData]) -> EncodedResponse:
        return EncodedResponse(encode_fetch_response(version, correlation_id, topics, session_id=0))

    def _read(self, version: int, request: KafkaRequest, refused: frozenset[str] | None = None
              ) -> tuple[list[FetchTopicData], int, list[PartitionLog], bool]:
        """One pass over the requested partitions: (topics, bytes found, logs read, errors seen).
        ``refused``: topics answered TOPIC_AUTHORIZATION_FAILED, before any existence check."""
        replica_id = _replica_id(version, request)
        response_budget = request.max_bytes if request.max_bytes is not None else 2**31 - 1
        total = 0
        immediate = False
        logs: list[PartitionLog] = []
        topics = []
        for topic in request.topics:
            topic_id = getattr(topic, "topic_id", None) if version >= 13 else None
            info = self.logs.topic_info(topic.topic if version < 13 else None, topic_id)
            out = FetchTopicData(topic.topic if version < 13 else None, topic_id)
            topics.append(out)
            if refused and (topic.topic if version < 13 else info.name if info is not None else None) in refused:
                for part in topic.partitions:
                    data = FetchPartitionData(part.partition)
                    data.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    out.partitions.append(data)
                immediate = True
                continue
            for part in topic.partitions:
                data = FetchPartitionData(part.partition)
                out.partitions.append(data)
                plog = self.logs.get(info.name, part.partition) if info is not None else None
                if plog is None:
                    data.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 and info is None
                                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    immediate = True
                    continue
                if not plog.is_leader:
                    data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    immediate = True
                    continue
                # ``follower`` implies ``plog.replication``, ``throttled`` also ``self.throttle``: mypy cannot
                # narrow through a bool, hence the union-attr ignores below (a check would cost the fetch path).
                follower = replica_id >= 0 and plog.replication is not None
                if follower:
                    error = check_leader_epoch(plog, part.current_leader_epoch if version >= 9 else -1)
                    if not error and part.fetch_offset <= plog.log_end_offset:
                        plog.replication.follower_fetched(  # type: ignore[union-attr]
                            replica_id, part.fetch_offset, part.log_start_offset)
                high_watermark = plog.high_watermark
                # Followers read to the log end (the records that will move the high watermark).
                read_end = plog.log_end_offset if follower else high_watermark
                data.high_watermark = high_watermark
                last_stable = plog.last_stable_offset
                data.last_stable_offset = last_stable
                data.log_start_offset = plog.log_start_offset
                committed = request.isolation_level == READ_COMMITTED and not follower
                if committed:
                    data.aborted_transactions = []
                error = check_leader_epoch(plog, part.current_leader_epoch if version >= 9 else -1)
                if error:
                    data.error_code = error
                    immediate = True
                    continue
                offset = part.fetch_offset
                # Out of range is beyond the log end, as Kafka checks: a consumer at an offset
                # above the high watermark (a new leader's lags the old one's for a moment) gets
                # no records, not OFFSET_OUT_OF_RANGE, which would send it back to its reset policy.
                if offset < plog.log_start_offset or offset > plog.log_end_offset:
                    data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    immediate = True
                    continue
                logs.append(plog)
                throttled = (follower and self.throttle is not None and self.throttle.leader_applies(
                    plog.topic, plog.partition, replica_id, plog.replication.isr))  # type: ignore[union-attr]
                if throttled and self.throttle.leader.exceeded():  # type: ignore[union-attr]
                    # Over the leader's quota: no records now; the follower's long poll waits.
                    data.records = b""
                    continue
                limit = min(part.partition_max_bytes, response_budget - total)
                if committed:
                    records, upper_bound = _read_stable(plog, offset, max(limit, 0), total == 0,
                                                       min(last_stable, read_end))
                    if records is not None:
                        data.aborted_transactions = plog.aborted_transactions(offset, upper_bound)
                else:
                    records = (plog.read(offset, max(limit, 0), min_one=total == 0, max_offset=read_end)
                               if offset < read_end else None)
                if records is None:
                    data.records = b""
                    continue
                length = records.length if isinstance(records, RecordsRef) else len(records)
                data.records = records
                if throttled:
                    self.throttle.leader.record(length)  # type: ignore[union-attr]
                total += length
        return topics, total, logs, immediate

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.FETCH: self.fetch}


def _read_stable(plog: PartitionLog, offset: int, max_bytes: int, min_one: bool,
                 last_stable: int) -> tuple[bytes | RecordsRef | None, int]:
    """read_committed: whole batches from ``offset`` below the last stable offset, and the upper
    bound for the aborted transactions — the offset of the first batch after the returned bytes,
    else the next segment's base, else the log end (Kafka's ``LocalLog.addAbortedTransactions``).

    Like ``PartitionLog.read``, a large read goes out with sendfile: the file range is only cut
    short, at the first batch reaching the LSO, found through the segment's offset index.
    """
    if offset >= last_stable:
        return None, offset
    storage = plog.log
    found = storage.slice(offset, max_bytes)
    if found is None or (not min_one and found.length > max_bytes):
        return None, offset
    segments = storage.segments
    i = bisect.bisect_right(segments, found.first_offset, key=lambda seg: seg.base_offset) - 1
    seg = segments[i]
    end = found.position + found.length
    cut = seg.find(last_stable, max_position=end)
    if cut is not None:
        # The first batch holding the LSO or beyond: the read stops before it.
        position, header = cut
        length = position - found.position
        if length <= 0:
            return None, offset
        upper_bound = header.base_offset
    else:
        length = found.length
        if end + BATCH_HEADER_SIZE <= seg.size:
            upper_bound = read_batch_header(seg.read_bytes(end, BATCH_HEADER_SIZE), 0).base_offset
        elif i + 1 < len(segments):
            upper_bound = segments[i + 1].base_offset
        else:
            upper_bound = storage.log_end_offset
    if length < SENDFILE_MIN_BYTES:
        return pread_exact(found.fd, length, found.position), upper_bound
    # closefd=False: the segment owns the descriptor (see PartitionLog.read).
    file = os.fdopen(found.fd, "rb", closefd=False, buffering=0)
    return RecordsRef(length, FileRange(file, found.position, length, release=file.close)), upper_bound


def _replica_id(version: int, request: KafkaRequest) -> int:
    """-1 for consumers; a broker id for a follower (v15+ carries it in ReplicaState, KIP-903)."""
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return -1 if state is None else int(getattr(state, "replica_id", -1))
    return int(getattr(request, "replica_id", -1))
