"""Transactions across nodes, one node's side: the marker channel and the KIP-890 verifier send
to the node the cluster view names, over a real loopback connection, and route what is led here
to the local writer/verifier; coordinator leadership goes to the service of its topic.

The other node is a small Kafka-protocol server in this test that decodes the requests with the
stock message classes (what every node serves them with) and answers what the test tells it.
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from coordinator.cluster.coordinator_leadership import CoordinatorLeadership
from coordinator.cluster.coordinator_topics import TRANSACTION_STATE
from coordinator.cluster.replica_manager import NOT_A_REPLICA
from coordinator.cluster.txn_marker_channel import PARTITION_DELETED, ClusterMarkerChannel
from coordinator.cluster.txn_verifier import ClusterVerifier
from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration, PartitionState, TopicAssignment
from protocol.errors import ErrorCode
from protocol.hashing import partition_for

pytestmark = pytest.mark.timeout(30)

ME = 1


@dataclass
class FakeNode:
    """Answers WriteTxnMarkers v1 and AddPartitionsToTxn v4 as told; records what it got."""

    marker_codes: dict[tuple[str, int], int] = field(default_factory=dict)
    verify_codes: dict[tuple[str, int], int] = field(default_factory=dict)
    top_level_error: int = 0
    requests: list[tuple[int, int, Any]] = field(default_factory=list)
    #: Held until set: lets a test queue more work while a request is in flight.
    release: asyncio.Event = field(default_factory=asyncio.Event)
    server: asyncio.Server | None = None
    port: int = 0

    async def start(self) -> None:
        self.release.set()
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api_key, version, cid, id_len = struct.unpack_from(">hhih", frame, 0)
                pos = 10 + id_len + 1  # flexible request header v2: empty tagged fields
                if api_key == 27:
                    request = WriteTxnMarkersRequest.decode(frame[pos:], version=version)
                    body = self._markers(request).encode(version=version)
                elif api_key == 24:
                    request = AddPartitionsToTxnRequest.decode(frame[pos:], version=version)
                    body = self._verify(request).encode(version=version)
                else:
                    raise AssertionError(f"unexpected api {api_key}")
                self.requests.append((api_key, version, request))
                await self.release.wait()
                out = struct.pack(">i", cid) + b"\x00" + body
                writer.write(struct.pack(">i", len(out)) + out)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    def _markers(self, request: Any) -> Any:
        cls = WriteTxnMarkersResponse
        return cls(markers=[cls.WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=self.marker_codes.get((t.name, p), 0))
                for p in t.partition_indexes])
            for t in m.topics]) for m in request.markers])

    def _verify(self, request: Any) -> Any:
        cls = AddPartitionsToTxnResponse
        return cls(throttle_time_ms=0, error_code=self.top_level_error, results_by_transaction=[
            cls.AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=[
                cls.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
                    cls.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=self.verify_codes.get((t.name, p), 0))
                    for p in t.partitions])
                for t in txn.topics]) for txn in request.transactions])


@pytest_asyncio.fixture
async def nodes() -> AsyncIterator[dict[int, FakeNode]]:
    fakes = {2: FakeNode(), 3: FakeNode()}
    for fake in fakes.values():
        await fake.start()
    yield fakes
    for fake in fakes.values():
        await fake.stop()


def make_view(nodes: dict[int, FakeNode], leaders: dict[tuple[str, int], int]) -> ClusterView:
    """Node 1 (this one) and the fake nodes registered; ``leaders`` gives each partition's leader
    (-1: none), its topic's other partitions unled."""
    view = ClusterView()
    view.set_brokers({ME: BrokerRegistration(ME, "127.0.0.1", 1),
                      **{b: BrokerRegistration(b, "127.0.0.1", n.port) for b, n in nodes.items()}})
    topics: dict[str, int] = {}
    for (topic, partition) in leaders:
        topics[topic] = max(topics.get(topic, 0), partition + 1)
    for topic, count in topics.items():
        view.set_topic(TopicAssignment(topic, uuid.uuid4(), {p: (1, 2, 3) for p in range(count)}), topic)
    for (topic, partition), leader in leaders.items():
        view.set_state(topic, partition, PartitionState(leader, 5, (1, 2, 3), 1, zk_version=0))
    return view


class LocalWriter:
    def __init__(self, codes: dict[tuple[str, int], int] | None = None) -> None:
        self.calls: list[tuple[int, int, bool, int, list[tuple[str, int]]]] = []
        self.codes = codes or {}

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls.append((producer_id, producer_epoch, commit, coordinator_epoch, list(partitions)))
        return {tp: self.codes.get(tp, 0) for tp in partitions}


# --- the marker channel ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_markers_go_to_each_partitions_leader_in_one_request_per_leader(nodes: dict[int, FakeNode]) -> None:
    view = make_view(nodes, {("a", 0): ME, ("a", 1): 2, ("a", 2): 3, ("b", 0): 2, ("b", 1): -1})
    nodes[2].marker_codes[("b", 0)] = ErrorCode.NOT_ENOUGH_REPLICAS
    local = LocalWriter({("a", 0): ErrorCode.INVALID_PRODUCER_EPOCH})
    channel = ClusterMarkerChannel(ME, view, local, timeout_s=5)
    try:
        result = await channel.write_markers(7, 3, True, 12, [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0)])
    finally:
        await channel.close()
    assert result == {
        ("a", 0): ErrorCode.INVALID_PRODUCER_EPOCH,   # the local writer's answer
        ("a", 1): 0, ("a", 2): 0,                     # written by nodes 2 and 3
        ("b", 0): ErrorCode.NOT_ENOUGH_REPLICAS,      # node 2's answer, passed back
        ("b", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,   # no live leader now: retry
        ("c", 0): PARTITION_DELETED,                  # not in the view: the topic is gone, done
    }
    assert local.calls == [(7, 3, True, 12, [("a", 0)])]
    (api, version, request), = nodes[2].requests
    assert (api, version) == (27, 1)
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (7, 3, True, 12)
    assert sorted((t.name, sorted(t.partition_indexes)) for t in marker.topics) == [("a", [1]), ("b", [0])]
    (_, _, request3), = nodes[3].requests
    assert [(t.name, t.partition_indexes) for t in request3.markers[0].topics] == [("a", [2])]


@pytest.mark.asyncio
async def test_markers_waiting_for_a_leader_share_a_request_one_per_producer(nodes: dict[int, FakeNode]) -> None:
    view = make_view(nodes, {("a", 0): 2, ("a", 1): 2})
    channel = ClusterMarkerChannel(ME, view, LocalWriter(), timeout_s=5)
    fake = nodes[2]
    fake.release.clear()
    try:
        first = asyncio.ensure_future(channel.write_markers(1, 0, True, 0, [("a", 0)]))
        while not fake.requests:
            await asyncio.sleep(0.005)
        # While the first request is in flight: two producers, one of them twice.
        rest = [asyncio.ensure_future(channel.write_markers(pid, 0, commit, 0, [("a", 1)]))
                for pid, commit in ((2, False), (3, True), (2, True))]
        await asyncio.sleep(0.05)
        fake.release.set()
        answers = await asyncio.gather(first, *rest)
    finally:
        await channel.close()
    assert all(a == {tp: 0 for tp in a} for a in answers)
    batches = [[(m.producer_id, m.transaction_result) for m in r.markers] for _, _, r in fake.requests]
    assert batches == [[(1, True)], [(2, False), (3, True)], [(2, True)]]


@pytest.mark.asyncio
async def test_a_leader_that_cannot_be_reached_is_answered_not_leader(nodes: dict[int, FakeNode]) -> None:
    view = make_view(nodes, {("a", 0): 2, ("a", 1): ME})
    await nodes[2].stop()  # registered, but nothing listens any more
    channel = ClusterMarkerChannel(ME, view, LocalWriter(), timeout_s=5)
    try:
        result = await channel.write_markers(1, 0, False, 3, [("a", 0), ("a", 1)])
    finally:
        await channel.close()
    assert result == {("a", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("a", 1): 0}
    await nodes[2].start()  # for the fixture's stop


# --- the verifier -------------------------------------------------------------------------------------


def _txn_state_leaders(partition_leader: Callable[[int], int]) -> dict[tuple[str, int], int]:
    return {(TRANSACTION_STATE, p): partition_leader(p) for p in range(50)}


class LocalVerifier:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        return {tp: ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}


def _id_on(partition_pred: Callable[[int], bool]) -> str:
    return next(f"txn-{i}" for i in range(10_000) if partition_pred(partition_for(f"txn-{i}", 50)))


@pytest.mark.asyncio
async def test_verification_goes_to_the_coordinator_of_the_transactional_id(nodes: dict[int, FakeNode]) -> None:
    view = make_view(nodes, _txn_state_leaders(lambda p: (ME, 2, 3)[p % 3]))
    local = LocalVerifier()
    verifier = ClusterVerifier(ME, view, local, timeout_s=5)
    here, there = _id_on(lambda p: p % 3 == 0), _id_on(lambda p: p % 3 == 1)
    nodes[2].verify_codes[("out", 1)] = ErrorCode.TRANSACTION_ABORTABLE
    try:
        assert await verifier.verify(here, 10, 1, [("out", 0)]) == {("out", 0): ErrorCode.TRANSACTION_ABORTABLE}
        assert local.calls == [(here, 10, 1, [("out", 0)])]
        assert await verifier.verify(there, 11, 2, [("out", 0), ("out", 1)]) == {
            ("out", 0): 0, ("out", 1): ErrorCode.TRANSACTION_ABORTABLE}
        nodes[2].top_level_error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # as Kafka's manager maps it
        assert await verifier.verify(there, 11, 2, [("out", 0)]) == {("out", 0): ErrorCode.INVALID_TXN_STATE}
    finally:
        await verifier.close()
    assert not nodes[3].requests
    (api, version, request), _ = nodes[2].requests
    assert (api, version) == (24, 4)
    (txn,) = request.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == (there, 11, 2, True)
    assert [(t.name, t.partitions) for t in txn.topics] == [("out", [0, 1])]


@pytest.mark.asyncio
async def test_verification_without_a_coordinator_answers_coordinator_not_available(nodes: dict[int, FakeNode]) -> None:
    no_topic = ClusterVerifier(ME, make_view(nodes, {}), LocalVerifier())
    assert await no_topic.verify("t", 1, 0, [("out", 0)]) == {("out", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    unled = ClusterVerifier(ME, make_view(nodes, _txn_state_leaders(lambda p: -1)), LocalVerifier())
    assert await unled.verify("t", 1, 0, [("out", 0)]) == {("out", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    # Led here, but the transaction service is not wired yet.
    early = ClusterVerifier(ME, make_view(nodes, _txn_state_leaders(lambda p: ME)), None)
    assert await early.verify("t", 1, 0, [("out", 0)]) == {("out", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}


# --- coordinator lookup and leadership ------------------------------------------------------------------


def test_the_view_names_the_coordinator_of_a_key_on_any_coordinator_topic(nodes: dict[int, FakeNode]) -> None:
    view = make_view(nodes, _txn_state_leaders(lambda p: (ME, 2, 3)[p % 3]))
    for key in ("a", "b", "payments-7", "ü"):
        broker = view.coordinator(TRANSACTION_STATE, key)
        assert broker is not None and broker.broker_id == (ME, 2, 3)[partition_for(key, 50) % 3]
    assert view.coordinator("__consumer_offsets", "a") is None  # not created yet
    view.set_brokers({ME: view.brokers[ME], 3: view.brokers[3]})  # node 2 gone: its partitions unled
    key = _id_on(lambda p: p % 3 == 1)
    assert view.coordinator(TRANSACTION_STATE, key) is None


class Service:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, object]] = []

    def become_coordinator(self, partition: int, leader_epoch: int) -> None:
        self.events.append(("lead", partition, leader_epoch))

    def resign(self, partition: int, *, standby: bool = True) -> None:
        self.events.append(("resign", partition, standby))


def test_each_coordinator_topic_leadership_goes_to_its_own_service() -> None:
    groups, txns = Service(), Service()
    leadership = CoordinatorLeadership()
    leadership.register("__consumer_offsets", groups)
    leadership.register(TRANSACTION_STATE, txns)
    with pytest.raises(ValueError):
        leadership.register(TRANSACTION_STATE, Service())
    leadership.on_leadership(TRANSACTION_STATE, 4, True, 7)
    leadership.on_leadership("__consumer_offsets", 4, False, 2)
    leadership.on_leadership("data", 0, True, 1)
    assert leadership.coordinator_epoch(TRANSACTION_STATE, 4) == 7
    leadership.on_leadership(TRANSACTION_STATE, 4, True, 8)  # a newer epoch of the same leadership
    assert leadership.coordinator_epoch(TRANSACTION_STATE, 4) == 8
    leadership.on_leadership(TRANSACTION_STATE, 4, False, 9)
    assert leadership.coordinator_epoch(TRANSACTION_STATE, 4) is None
    leadership.on_leadership(TRANSACTION_STATE, 5, False, NOT_A_REPLICA)
    assert txns.events == [("lead", 4, 7), ("lead", 4, 8), ("resign", 4, True), ("resign", 5, False)]
    assert groups.events == [("resign", 4, True)]
