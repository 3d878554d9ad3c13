"""ListOffsets (api key 2, v1–v10) and OffsetForLeaderEpoch (api key 23, v2–v4) for hosted topics.

ListOffsets special timestamps (ListOffsetsRequest.json): -2 earliest, -1 latest (the high
watermark; under read_committed, ``isolation_level`` 1 from v2, the last stable offset: KIP-98), -3
the record with the largest timestamp (KIP-734), -4 earliest local (KIP-405: all data is local, so
the log start), -5 latest tiered (nothing is tiered: no offset). Any other timestamp finds the first
record whose timestamp is at or after it, through the time index; none → offset -1. A found offset
at or beyond what the isolation level may read (the high watermark, or the LSO) is not given
either: -1/-1, as Kafka's ``Partition.fetchOffsetForTimestamp``.

A single node leads every partition from epoch 0 on, so OffsetForLeaderEpoch answers epoch 0 with
the log end and any later epoch as unknown (undefined epoch and offset, as Kafka does for an epoch
newer than the leader's). In cluster mode both APIs are answered by the leader only
(NOT_LEADER_OR_FOLLOWER elsewhere) and OffsetForLeaderEpoch answers from the log's leader-epoch
cache (KIP-101/279): the largest epoch at or below the one asked for, and where it ends.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsResponse, OffsetForLeaderEpochResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed_names, cluster_allowed
from .fetch import READ_COMMITTED, check_leader_epoch
from .log_manager import LogManager
from .partition_log import PartitionLog

__all__ = ["OffsetApis"]

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5

LOTopic = ListOffsetsResponse.ListOffsetsTopicResponse
LOPartition = LOTopic.ListOffsetsPartitionResponse
EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochPartition = EpochTopic.EpochEndOffset


class OffsetApis:
    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: ListOffsets: DESCRIBE on each topic; OffsetForLeaderEpoch: CLUSTER_ACTION on the
        #: cluster (followers) or else DESCRIBE on each topic (KafkaApis, KIP-320).
        self.authorizer = authorizer

    def _denied(self, ctx: RequestContext, names: list[str]) -> set[str]:
        if not self.authorizer.enabled:
            return set()
        return set(names) - allowed_names(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)

    def list_offsets(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        topics = []
        denied = self._denied(ctx, [t.name for t in request.topics])
        for topic in request.topics:
            info = self.logs.topic_info(topic.name, None)
            parts = []
            for part in topic.partitions:
                out = LOPartition(partition_index=part.partition_index, error_code=0, timestamp=-1, offset=-1,
                                  leader_epoch=-1)
                parts.append(out)
                if topic.name in denied:  # before existence: a denied name tells nothing
                    out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                plog = self.logs.get(info.name, part.partition_index) if info is not None else None
                if plog is None:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if not plog.is_leader:
                    out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                error = check_leader_epoch(plog, part.current_leader_epoch if version >= 4 else -1)
                if error:
                    out.error_code = error
                    continue
                limit = (plog.last_stable_offset if version >= 2 and request.isolation_level == READ_COMMITTED
                         else plog.high_watermark)
                found = self._lookup(plog, part.timestamp, limit)
                if found is not None:
                    out.offset, out.timestamp = found
                    out.leader_epoch = plog.leader_epoch
            topics.append(LOTopic(name=topic.name, partitions=parts))
        return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)

    @staticmethod
    def _lookup(plog: PartitionLog, timestamp: int, limit: int) -> tuple[int, int] | None:
        """``limit``: the high watermark, or the LSO under read_committed."""
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1
        if timestamp == LATEST:
            return limit, -1
        if timestamp == LATEST_TIERED:
            return None
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
        elif timestamp < 0:
            return None
        else:
            found = plog.offset_for_timestamp(timestamp)
        if found is not None and found[0] >= limit:
            return None
        return found

    def offset_for_leader_epoch(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version
        topics = []
        denied: set[str] = set()
        if self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            denied = self._denied(ctx, [t.topic for t in request.topics])
        for topic in request.topics:
            info = self.logs.topic_info(topic.topic, None)
            parts = []
            for part in topic.partitions:
                out = EpochPartition(error_code=0, partition=part.partition, leader_epoch=-1, end_offset=-1)
                parts.append(out)
                if topic.topic in denied:
                    out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                plog = self.logs.get(info.name, part.partition) if info is not None else None
                if plog is None:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if not plog.is_leader:
                    out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                error = check_leader_epoch(plog, part.current_leader_epoch)
                if error:
                    out.error_code = error
                    continue
                if plog.replication is not None:
                    out.leader_epoch, out.end_offset = plog.log.leader_epochs.end_offset_for(
                        part.leader_epoch, plog.log_end_offset)
                elif 0 <= part.leader_epoch <= plog.leader_epoch:
                    out.leader_epoch = plog.leader_epoch
                    out.end_offset = plog.high_watermark
            topics.append(EpochTopic(topic=topic.topic, partitions=parts))
        return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.LIST_OFFSETS: self.list_offsets, ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch}
