"""Transaction markers across the cluster: the transaction coordinator's ``MarkerWriter`` in cluster mode.

The transaction coordinator ends a transaction by writing a COMMIT or ABORT control batch on
every partition of it (KIP-98). Those partitions are led by any node; this channel sends each to
its leader, as Kafka's ``TransactionMarkerChannelManager`` does:

* a partition this node leads goes to the local ``TxnMarkerApis.write_markers`` (no request);
* the others are grouped per leader, as the cluster view has it, and sent as one WriteTxnMarkers
  v1 request per leader (Kafka 4.0's baseline version). Markers of several transactions for one
  leader that wait meanwhile share a request, as Kafka's per-broker queues do; one request holds
  at most one marker per producer id, since the answer is keyed by producer id
  (``WriteTxnMarkersResponse``; ``node_client.NodeQueues``);
* each partition's error code comes back as the leader answered it.

What the coordinator does with the codes is its own (reference: Kafka's
``TransactionMarkerRequestCompletionHandler``). Codes this channel makes up itself:

* :data:`PARTITION_DELETED` (UNKNOWN_TOPIC_ID) — the partition is not in the cluster view at all
  (its topic was deleted): Kafka skips such a partition ("treat as done"). It is not
  UNKNOWN_TOPIC_OR_PARTITION, which a leader answers for a partition it does not host yet, and
  which must be retried;
* NOT_LEADER_OR_FOLLOWER — the partition has no live leader now, or the connection to its leader
  failed or timed out before the answer (Kafka re-queues those markers): retry with a fresh
  leader.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode

from .node_client import CONNECTION_ERRORS, NodeConnection, NodeQueues
from .view import ClusterView

__all__ = ["ClusterMarkerChannel", "LocalMarkerWriter", "PARTITION_DELETED", "WRITE_TXN_MARKERS_VERSION"]

log = logging.getLogger("groupcoord.cluster.markers")

MarkerTarget = tuple[str, int]

#: The answer for a partition the cluster view does not know (a deleted topic): done.
PARTITION_DELETED = int(ErrorCode.UNKNOWN_TOPIC_ID)
#: Kafka 4.0 removed v0; v1 is flexible. v2 (KIP-1228) only adds the transaction version (TV2).
WRITE_TXN_MARKERS_VERSION = 1


class LocalMarkerWriter(Protocol):
    """This node's marker writer: ``topics/txn_markers.py``'s ``TxnMarkerApis`` (seam C2, docs/transactions.md)."""

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[MarkerTarget]) -> dict[MarkerTarget, int]: ...


@dataclass(slots=True)
class _Marker:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[MarkerTarget]
    answer: asyncio.Future[dict[MarkerTarget, int]]


class ClusterMarkerChannel:
    """Implements the ``MarkerWriter`` Protocol (``transactions/markers.py``) across nodes."""

    def __init__(self, broker_id: int, view: ClusterView, local: LocalMarkerWriter, *,
                 timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.view = view
        self.local = local
        #: How long a leader may take to answer (its appends wait for its ISR): Kafka's
        #: ``request.timeout.ms`` of the channel's client, 30 s.
        self.timeout_s = timeout_s
        self._queues: NodeQueues[_Marker] = NodeQueues(self._connection, self._send, _fail,
                                                       lambda m: m.producer_id)

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[MarkerTarget]) -> dict[MarkerTarget, int]:
        result: dict[MarkerTarget, int] = {}
        here: list[MarkerTarget] = []
        remote: dict[int, list[MarkerTarget]] = {}
        for tp in partitions:
            assignment = self.view.topics.get(tp[0])
            if assignment is None or tp[1] not in assignment.partitions:
                result[tp] = PARTITION_DELETED
                continue
            leader = self.view.leader(*tp)
            if leader < 0:
                result[tp] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif leader == self.broker_id:
                here.append(tp)
            else:
                remote.setdefault(leader, []).append(tp)
        waits: list[asyncio.Future[dict[MarkerTarget, int]]] = []
        if here:
            waits.append(asyncio.ensure_future(
                self.local.write_markers(producer_id, producer_epoch, commit, coordinator_epoch, here)))
        loop = asyncio.get_running_loop()
        for leader, tps in remote.items():
            marker = _Marker(producer_id, producer_epoch, commit, coordinator_epoch, tps, loop.create_future())
            self._queues.put(leader, marker)
            waits.append(marker.answer)
        for answer in await asyncio.gather(*waits):
            result.update(answer)
        return result

    async def close(self) -> None:
        """Stop the senders and close the connections (shutdown): markers still queued are
        answered NOT_LEADER_OR_FOLLOWER, as for a lost connection."""
        await self._queues.close()

    def _connection(self, broker_id: int) -> NodeConnection:
        def endpoint() -> tuple[str, int] | None:
            return self.view.inter_broker_endpoint(broker_id)
        return NodeConnection(broker_id, endpoint, f"txn-marker-sender-{self.broker_id}", self.timeout_s,
                              self.view.inter_broker_security)

    async def _send(self, connection: NodeConnection, batch: list[_Marker]) -> None:
        cls = request_class(ApiKey.WRITE_TXN_MARKERS)
        request = cls(markers=[
            cls.WritableTxnMarker(
                producer_id=m.producer_id, producer_epoch=m.producer_epoch, transaction_result=m.commit,
                topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=topic, partition_indexes=indexes)
                        for topic, indexes in _by_topic(m.partitions).items()],
                coordinator_epoch=m.coordinator_epoch)
            for m in batch])
        try:
            response = await connection.call(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, request)
        except CONNECTION_ERRORS as exc:
            log.info("transaction markers not answered; the coordinator retries",
                     extra={"leader": connection.broker_id, "error": repr(exc)})
            _fail(batch)
            return
        answered: dict[int, dict[MarkerTarget, int]] = {}
        for marker_result in response.markers:
            codes = answered.setdefault(marker_result.producer_id, {})
            for topic in marker_result.topics:
                for part in topic.partitions:
                    codes[(topic.name, part.partition_index)] = part.error_code
        for m in batch:
            codes = answered.get(m.producer_id, {})
            if not m.answer.done():
                m.answer.set_result({tp: codes.get(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER) for tp in m.partitions})


def _by_topic(partitions: list[MarkerTarget]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


def _fail(markers: list[_Marker]) -> None:
    for m in markers:
        if not m.answer.done():
            m.answer.set_result({tp: int(ErrorCode.NOT_LEADER_OR_FOLLOWER) for tp in m.partitions})
