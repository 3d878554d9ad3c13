"""Transaction markers on this node's partitions: :class:`TxnMarkerApis`, and WriteTxnMarkers
(api key 27, v0–v1) on the wire.

The transaction coordinator ends a transaction by writing one control batch — COMMIT or ABORT,
with its coordinator epoch — on every partition the transaction wrote to (KIP-98,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-98+-+Exactly+Once+Delivery+and+Transactional+Messaging).
On one node it calls :meth:`TxnMarkerApis.write_markers` directly; in a cluster the leaders of
other nodes' partitions get WriteTxnMarkers. Both answer per partition as Kafka's
``KafkaApis.handleWriteTxnMarkersRequest`` does, so the coordinator's retry rules apply unchanged:

* a partition this node does not host: UNKNOWN_TOPIC_OR_PARTITION; hosted but not led here:
  NOT_LEADER_OR_FOLLOWER (the coordinator retries both with a fresh leader);
* the marker is appended as an acks=all write (origin coordinator: epochs checked, not
  sequences): NOT_ENOUGH_REPLICAS while the ISR is below ``min.insync.replicas``,
  INVALID_PRODUCER_EPOCH for an epoch older than the partition's, TRANSACTION_COORDINATOR_FENCED
  for an older coordinator epoch; the answer waits until the marker is durable (in the ISR in
  cluster mode: REQUEST_TIMED_OUT after ``REQUEST_TIMEOUT_MS``, NOT_ENOUGH_REPLICAS_AFTER_APPEND
  if the ISR shrank meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved);
* a ``__consumer_offsets`` partition is written by the group coordinator, which must apply the
  marker to its pending transactional offsets (``internal_marker_writer``); its "not loaded / not
  the coordinator" errors become NOT_LEADER_OR_FOLLOWER, so the transaction coordinator retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kafka.protocol.producer import WriteTxnMarkersResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse
from storage.errors import LogClosedError

from ..context import Handler, RequestContext
from ..security.acl import AclOperation, Authorizer
from ..security.request_checks import NO_AUTHORIZER, cluster_allowed
from .log_manager import LogManager
from .partition_log import PartitionLog
from .registry import CONSUMER_OFFSETS
from .replication import NotLeader

__all__ = ["TxnMarkerApis", "MarkerTarget", "InternalMarkerWriter", "REQUEST_TIMEOUT_MS"]

log = logging.getLogger("groupcoord.txn_markers")

#: (topic, partition)
MarkerTarget = tuple[str, int]
#: (topic, partition, producer_id, producer_epoch, commit, coordinator_epoch) -> error code
InternalMarkerWriter = Callable[[str, int, int, int, bool, int], Awaitable[int]]

#: How long a marker waits for the ISR in cluster mode: Kafka appends markers with the broker's
#: ``request.timeout.ms`` (30 s by default).
REQUEST_TIMEOUT_MS = 30_000

#: The group coordinator's "not here (yet)" errors, retried by the transaction coordinator once
#: they read NOT_LEADER_OR_FOLLOWER (KafkaApis.handleWriteTxnMarkersRequest, Kafka 4.0).
_RETRY_ELSEWHERE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                              ErrorCode.NOT_COORDINATOR})

_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult


class TxnMarkerApis:
    """Writes transaction markers on this node's partitions (seam C2, docs/transactions.md)."""

    def __init__(self, logs: LogManager, *, authorizer: Authorizer = NO_AUTHORIZER) -> None:
        self.logs = logs
        self.authorizer = authorizer
        #: Set by app.py: writes the marker of a ``__consumer_offsets`` partition through the group
        #: coordinator. None: those partitions get NOT_COORDINATOR.
        self.internal_marker_writer: InternalMarkerWriter | None = None

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[MarkerTarget]) -> dict[MarkerTarget, int]:
        """One control batch per partition; the error code of each once all are settled."""
        now_ms = int(time.time() * 1000)
        targets = list(dict.fromkeys(partitions))
        outcomes = await asyncio.gather(*(
            self._write_one(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
            for topic, partition in targets))
        return dict(zip(targets, outcomes, strict=True))

    async def _write_one(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int, now_ms: int) -> int:
        try:
            plog = self.logs.get(topic, partition)
            if plog is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if topic == CONSUMER_OFFSETS:
                return await self._write_internal(topic, partition, producer_id, producer_epoch, commit,
                                                  coordinator_epoch)
            if not plog.is_leader:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if not plog.accepts_writes():
                return ErrorCode.NOT_ENOUGH_REPLICAS
            appended = plog.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
            if isinstance(appended, int):
                return appended
            offset, durable = appended
            return await self._committed(plog, offset, durable)
        except Exception:
            log.exception("writing a transaction marker failed",
                          extra={"partition": f"{topic}-{partition}", "producer_id": producer_id})
            return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _write_internal(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                              commit: bool, coordinator_epoch: int) -> int:
        writer = self.internal_marker_writer
        if writer is None:
            return ErrorCode.NOT_COORDINATOR
        error = await writer(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if error in _RETRY_ELSEWHERE else error

    @staticmethod
    async def _committed(plog: PartitionLog, offset: int, durable: Awaitable[None]) -> int:
        """acks=all: the marker durable here, and in cluster mode in the ISR (as produce waits)."""
        try:
            await durable
            if plog.replication is not None:
                await asyncio.wait_for(plog.replication.wait_for(offset + 1), REQUEST_TIMEOUT_MS / 1000.0)
                if len(plog.replication.isr) < plog.config.min_insync_replicas:
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        except (LogClosedError, NotLeader):
            # The log closed under the append (topic deleted, node stopping) or leadership moved.
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        except Exception as exc:  # the log could not make it durable (disk full, I/O error)
            log.error("marker append failed", extra={"partition": f"{plog.topic}-{plog.partition}",
                                                      "reason": str(exc)})
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    async def write_txn_markers(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        """WriteTxnMarkers v0–v1: every marker of the request written at once; one answer. Only
        brokers send it: ALTER or else CLUSTER_ACTION on the cluster (KafkaApis
        handleWriteTxnMarkersRequest), CLUSTER_AUTHORIZATION_FAILED on every partition otherwise."""
        markers = list(request.markers)
        if self.authorizer.enabled and not cluster_allowed(self.authorizer, ctx, AclOperation.ALTER) \
                and not cluster_allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return WriteTxnMarkersResponse(version=ctx.api_version, markers=[_Result(
                producer_id=m.producer_id, topics=[_TopicResult(name=t.name, partitions=[
                    _PartitionResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for p in t.partition_indexes]) for t in m.topics]) for m in markers])
        outcomes = await asyncio.gather(*(
            self.write_markers(m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch,
                               [(t.name, p) for t in m.topics for p in t.partition_indexes])
            for m in markers))
        results = []
        for marker, outcome in zip(markers, outcomes, strict=True):
            topics = [_TopicResult(name=t.name, partitions=[
                _PartitionResult(partition_index=p, error_code=outcome[(t.name, p)]) for p in t.partition_indexes])
                for t in marker.topics]
            results.append(_Result(producer_id=marker.producer_id, topics=topics))
        return WriteTxnMarkersResponse(version=ctx.api_version, markers=results)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers}
