"""KIP-890 part 1 verification in cluster mode: the ``Verifier`` a partition leader's Produce calls.

Before a transactional batch may open a transaction on a partition, the partition's leader asks
the transaction coordinator of the batch's transactional id whether the partition is in that
transaction (https://cwiki.apache.org/confluence/display/KAFKA/KIP-890%3A+Transactions+Server-Side+Defense).
The coordinator is the leader of the id's ``__transaction_state`` partition
(``abs(javaHash(id)) % partitions``):

* this node → the local transaction service's ``verify`` (no request);
* another node → AddPartitionsToTxn v4 with ``VerifyOnly`` to it, as Kafka's
  ``AddPartitionsToTxnManager`` sends; checks waiting for the same node meanwhile share one
  request (at most one entry per transactional id, the answer's key), one request in flight per
  node (``node_client.NodeQueues``).

The answer is the coordinator's, per partition (NONE, TRANSACTION_ABORTABLE, or a code for the
whole transaction: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, ...; a
top-level error of the response applies to every partition, CLUSTER_AUTHORIZATION_FAILED as
INVALID_TXN_STATE). The rest of Kafka's mapping for Produce is the Produce handler's (seam C3, docs/transactions.md). When no coordinator can be asked —
``__transaction_state`` not created yet, its partition without a live leader, the connection
lost — every partition gets COORDINATOR_NOT_AVAILABLE, as Kafka's manager answers for an unknown
coordinator node; the Produce handler maps it to a code the producer retries.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode

from ..topics.registry import TRANSACTION_STATE
from .node_client import CONNECTION_ERRORS, NodeConnection, NodeQueues
from .view import ClusterView

__all__ = ["ClusterVerifier", "LocalVerifier", "VERIFY_VERSION"]

log = logging.getLogger("groupcoord.cluster.verification")

TopicPartition = tuple[str, int]

#: The first version with a batch of transactions and ``VerifyOnly`` (broker to broker only).
VERIFY_VERSION = 4


class LocalVerifier(Protocol):
    """Contract C3's ``Verifier``: ``TransactionService.verify`` for the ids this node owns."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, int]: ...


@dataclass(slots=True)
class _Check:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]]


class ClusterVerifier:
    """Implements the ``Verifier`` of seam C3 (docs/transactions.md) across nodes. ``local`` may be set after
    construction (the transaction service is built later); while it is None, ids owned here
    answer COORDINATOR_NOT_AVAILABLE."""

    def __init__(self, broker_id: int, view: ClusterView, local: LocalVerifier | None = None, *,
                 timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.view = view
        self.local = local
        self.timeout_s = timeout_s
        self._queues: NodeQueues[_Check] = NodeQueues(self._connection, self._send, _fail,
                                                      lambda c: c.transactional_id)

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker id of the transactional id's coordinator, -1 if there is none now."""
        broker = self.view.coordinator(TRANSACTION_STATE, transactional_id)
        return -1 if broker is None else broker.broker_id

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        coordinator = self.coordinator_of(transactional_id)
        if coordinator == self.broker_id and self.local is not None:
            return await self.local.verify(transactional_id, producer_id, producer_epoch, partitions)
        if coordinator < 0 or coordinator == self.broker_id:
            return {tp: int(ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        check = _Check(transactional_id, producer_id, producer_epoch, list(partitions),
                       asyncio.get_running_loop().create_future())
        self._queues.put(coordinator, check)
        return await check.answer

    async def close(self) -> None:
        await self._queues.close()

    def _connection(self, broker_id: int) -> NodeConnection:
        def endpoint() -> tuple[str, int] | None:
            return self.view.inter_broker_endpoint(broker_id)
        return NodeConnection(broker_id, endpoint, f"txn-verifier-{self.broker_id}", self.timeout_s,
                              self.view.inter_broker_security)

    async def _send(self, connection: NodeConnection, batch: list[_Check]) -> None:
        cls = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
        request = cls(transactions=[
            cls.AddPartitionsToTxnTransaction(
                transactional_id=c.transactional_id, producer_id=c.producer_id, producer_epoch=c.producer_epoch,
                verify_only=True,
                topics=[cls.AddPartitionsToTxnTopic(name=topic, partitions=indexes)
                        for topic, indexes in _by_topic(c.partitions).items()])
            for c in batch])
        try:
            response = await connection.call(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request)
        except CONNECTION_ERRORS as exc:
            log.info("verification not answered", extra={"coordinator": connection.broker_id, "error": repr(exc)})
            _fail(batch)
            return
        if response.error_code != ErrorCode.NONE:
            # A top-level error applies to every entry. This node lacking the right to ask
            # (CLUSTER_AUTHORIZATION_FAILED) is not the producer's to fix: Kafka's
            # AddPartitionsToTxnManager answers it INVALID_TXN_STATE.
            code = (ErrorCode.INVALID_TXN_STATE if response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    else response.error_code)
            for c in batch:
                _answer(c, {tp: int(code) for tp in c.partitions})
            return
        answered: dict[str, dict[TopicPartition, int]] = {}
        for result in response.results_by_transaction:
            codes = answered.setdefault(result.transactional_id, {})
            for topic in result.topic_results:
                for part in topic.results_by_partition:
                    codes[(topic.name, part.partition_index)] = part.partition_error_code
        for c in batch:
            codes = answered.get(c.transactional_id, {})
            _answer(c, {tp: codes.get(tp, int(ErrorCode.COORDINATOR_NOT_AVAILABLE)) for tp in c.partitions})


def _by_topic(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


def _answer(check: _Check, codes: dict[TopicPartition, int]) -> None:
    if not check.answer.done():
        check.answer.set_result(codes)


def _fail(checks: list[_Check]) -> None:
    for c in checks:
        _answer(c, {tp: int(ErrorCode.COORDINATOR_NOT_AVAILABLE) for tp in c.partitions})
