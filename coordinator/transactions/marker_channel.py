"""Sending a decided transaction's markers, with Kafka's rules for each partition's answer
(``TransactionMarkerRequestCompletionHandler``, https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/transaction/TransactionMarkerRequestCompletionHandler.scala):

* NONE: that partition is done;
* UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: retry it (after a backoff; with a fresh leader, which
  the writer finds);
* a partition that no longer exists (deleted topic: no leader to send to): done;
* UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION: done (no marker is possible there);
  UNKNOWN_TOPIC_ID likewise (the cluster channel's word for a partition deleted meanwhile);
* INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: stop — a newer producer epoch or a
  newer coordinator owns the transaction now; no Complete record is written;
* anything else (Kafka: corrupt or too large, a bug): stop, loudly.

Async but no asyncio: the sleep between retries is injected, and the service runs each job as a
task. Pure in the sense of the layering test: the rules do no I/O of their own.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable

from protocol.errors import ErrorCode

from .markers import MarkerJob, MarkerWriter
from .metadata import TopicPartition

__all__ = ["MarkerChannel", "MarkerOutcome", "RETRIABLE", "DONE_ANYWAY", "FENCED"]

E = ErrorCode
log = logging.getLogger("groupcoord.transactions")

RETRIABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR})
#: UNKNOWN_TOPIC_ID: the cluster's marker channel's answer for a partition that left the
#: cluster view (its topic deleted): no leader to send to, done as in Kafka.
DONE_ANYWAY = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION, E.UNKNOWN_TOPIC_ID})
FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})


class MarkerOutcome(enum.Enum):
    #: Every partition has its marker (or cannot have one): write Complete*.
    COMPLETE = "complete"
    #: Fenced, failed, or no longer ours: write nothing.
    STOPPED = "stopped"


class MarkerChannel:
    def __init__(self, writer: MarkerWriter, partition_exists: Callable[[str, int], bool],
                 sleep_ms: Callable[[int], Awaitable[None]], retry_backoff_ms: int = 100) -> None:
        self.writer = writer
        self.partition_exists = partition_exists
        self.sleep_ms = sleep_ms
        self.retry_backoff_ms = retry_backoff_ms

    async def send(self, job: MarkerJob, coordinator_epoch: int,
                   still_ours: Callable[[], bool] = lambda: True) -> MarkerOutcome:
        """Write ``job``'s markers until every partition is done; ``still_ours`` is asked before
        every retry (the partition of ``__transaction_state`` may have been unloaded)."""
        pending: set[TopicPartition] = set(job.partitions)
        where = {"transactional_id": job.transactional_id, "producer_id": job.producer_id,
                 "producer_epoch": job.producer_epoch, "commit": job.commit}
        while True:
            pending = {tp for tp in pending if self.partition_exists(*tp)}
            if not pending:
                return MarkerOutcome.COMPLETE
            answers = await self.writer.write_markers(job.producer_id, job.producer_epoch, job.commit,
                                                      coordinator_epoch, sorted(pending))
            retry: set[TopicPartition] = set()
            for tp in pending:
                code = answers.get(tp, E.UNKNOWN_TOPIC_OR_PARTITION)
                if code == E.NONE or code in DONE_ANYWAY:
                    continue
                if code in RETRIABLE:
                    retry.add(tp)
                elif code in FENCED:
                    log.info("transaction markers stopped: fenced", extra={**where, "topic": tp[0],
                                                                           "partition": tp[1], "error": int(code)})
                    return MarkerOutcome.STOPPED
                else:
                    log.error("transaction markers stopped: unexpected error", extra={
                        **where, "topic": tp[0], "partition": tp[1], "error": int(code)})
                    return MarkerOutcome.STOPPED
            pending = retry
            if not pending:
                return MarkerOutcome.COMPLETE
            await self.sleep_ms(self.retry_backoff_ms)
            if not still_ours():
                return MarkerOutcome.STOPPED
