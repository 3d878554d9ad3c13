"""DeleteRecords (api key 21, v0–v2): raise a partition's log start offset on its leader.

``kafka-delete-records.sh``, ``AdminClient.deleteRecords`` and librdkafka's
``rd_kafka_DeleteRecords`` send it (KIP-107,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-107%3A+Add+deleteRecordsBefore%28%29+API+in+AdminClient).
Per partition, as Kafka's ``ReplicaManager.deleteRecordsOnLocalLog`` and
``Partition.deleteRecordsOnLeader``:

- an internal topic (``__consumer_offsets``, ``__transaction_state``) → INVALID_TOPIC_EXCEPTION;
- a partition of no known topic, or beyond its partition count → UNKNOWN_TOPIC_OR_PARTITION;
  one this node does not lead → NOT_LEADER_OR_FOLLOWER;
- a topic whose ``cleanup.policy`` lacks ``delete`` → POLICY_VIOLATION;
- offset −1 means the high watermark; any other offset below 0 or above the high watermark →
  OFFSET_OUT_OF_RANGE;
- otherwise the log start offset rises to the offset (never falls: asking for less than the
  current start is a no-op), whole segments below it are deleted, and the new start is
  checkpointed (``storage.log.Log.advance_log_start_offset``) before the answer, which carries
  it as ``low_watermark``.

Records below the new start are gone for every reader; the last stable offset never falls below
it (``PartitionLog.last_stable_offset``), and producer state is kept, as Kafka keeps it (KIP-360).

Cluster mode: followers take the leader's log start from their fetch responses (up to their
high watermark) and report theirs in their next fetch; the leader answers once every follower in
the ISR has reported one at or past the new start, or REQUEST_TIMED_OUT after the request's
``timeout_ms`` (the deletion on the leader stands), as Kafka's ``DelayedDeleteRecords``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kafka.protocol.admin import DeleteRecordsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer, ResourceType
from ..security.request_checks import NO_AUTHORIZER, allowed_names
from .log_manager import LogManager
from .registry import INTERNAL_TOPICS, TopicInfo

__all__ = ["DeleteRecordsApis", "HIGH_WATERMARK"]

log = logging.getLogger(__name__)

#: The request's offset meaning "up to the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1

#: How often a leader looks at its followers' log starts while a DeleteRecords waits for them.
_POLL_S = 0.05

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult


class DeleteRecordsApis:
    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        #: DELETE on each topic (KafkaApis handleDeleteRecordsRequest).
        self.authorizer = authorizer

    async def delete_records(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        work = []
        topics = []
        names = [t.name for t in request.topics]
        permitted = allowed_names(self.authorizer, ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
        for topic in request.topics:
            info = self.logs.topic_info(topic.name, None)
            parts = []
            for part in topic.partitions:
                out = _Partition(partition_index=part.partition_index, low_watermark=-1, error_code=ErrorCode.NONE)
                parts.append(out)
                if topic.name not in permitted:  # before any existence check
                    out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                work.append(self._delete(info, topic.name, part.partition_index, part.offset, out,
                                         request.timeout_ms))
            topics.append(_Topic(name=topic.name, partitions=parts))
        await asyncio.gather(*work)
        return DeleteRecordsResponse(version=ctx.api_version, throttle_time_ms=0, topics=topics)

    async def _delete(self, info: TopicInfo | None, name: str, index: int, offset: int, out: KafkaStruct,
                      timeout_ms: int) -> None:
        if name in INTERNAL_TOPICS:  # by name, before any lookup, as Kafka
            out.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            return
        if info is None or not 0 <= index < info.num_partitions:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return
        plog = self.logs.get(info.name, index)
        if plog is None or not plog.is_leader:
            out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return
        policies = {p.strip() for p in info.configs.get("cleanup.policy", plog.log.options.cleanup_policy).split(",")}
        if "delete" not in policies:
            out.error_code = ErrorCode.POLICY_VIOLATION
            return
        hw = plog.high_watermark
        target = hw if offset == HIGH_WATERMARK else offset
        if target < 0 or target > hw:
            out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            return
        try:
            await plog.log.advance_log_start_offset(target)
        except Exception:
            log.exception("deleting records failed", extra={"partition": f"{name}-{index}"})
            out.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            return
        if plog.replication is not None:
            # Cluster mode: answer once every follower in the ISR reports (in its fetches) a log
            # start at the new one, within the request's timeout (Kafka's DelayedDeleteRecords).
            deadline = time.monotonic() + max(timeout_ms, 0) / 1000
            while True:
                if not plog.is_leader:
                    out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    return
                followers = plog.replication.followers_log_start()
                if followers is None or followers >= target:
                    break
                if time.monotonic() >= deadline:
                    out.error_code = ErrorCode.REQUEST_TIMED_OUT
                    return
                await asyncio.sleep(_POLL_S)
        out.low_watermark = plog.log_start_offset

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DELETE_RECORDS: self.delete_records}
