"""DescribeProducers (api key 61, v0): the producer state a partition leader keeps (KIP-664).

Per partition the leader's active producers — id, epoch, last sequence and timestamp, the
coordinator epoch of its last marker and the first offset of its open transaction (-1 if none) —
as ``kafka-transactions.sh describe-producers`` and ``find-hanging`` read them
(https://cwiki.apache.org/confluence/display/KAFKA/KIP-664%3A+Provide+tooling+to+detect+and+abort+hanging+transactions).
Errors as Kafka's ``ReplicaManager.activeProducerState``: a partition of no known topic, or beyond
its partition count, gets UNKNOWN_TOPIC_OR_PARTITION; one this node does not lead,
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeProducersResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed_names
from .log_manager import LogManager

__all__ = ["DescribeProducersApis"]

_Topic = DescribeProducersResponse.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


class DescribeProducersApis:
    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: READ on each topic (KafkaApis handleDescribeProducersRequest).
        self.authorizer = authorizer

    def describe_producers(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        topics = []
        permitted = allowed_names(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                  [t.name for t in request.topics])
        for topic in request.topics:
            info = self.logs.topic_info(topic.name, None)
            parts = []
            for index in topic.partition_indexes:
                out = _Partition(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                                 active_producers=[])
                parts.append(out)
                if topic.name not in permitted:
                    out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if info is None or not 0 <= index < info.num_partitions:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                plog = self.logs.get(info.name, index)
                if plog is None or not plog.is_leader:
                    out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                out.active_producers = [
                    _Producer(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                              last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                              coordinator_epoch=p.coordinator_epoch,
                              current_txn_start_offset=p.current_txn_start_offset)
                    for p in plog.producer_entries()]
            topics.append(_Topic(name=topic.name, partitions=parts))
        return DescribeProducersResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DESCRIBE_PRODUCERS: self.describe_producers}
