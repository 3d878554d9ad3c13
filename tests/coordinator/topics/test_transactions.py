"""Transactions on hosted partitions: transactional produce, markers, read_committed Fetch and
ListOffsets, DescribeProducers and WriteTxnMarkers, through real sockets against a node served in
this process — so a test can write markers with ``TxnMarkerApis.write_markers`` itself, as the
transaction coordinator would, and hand ``ProduceApis`` a verifier."""

from __future__ import annotations

import asyncio
import io
import struct
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeProducersRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, WriteTxnMarkersRequest

from coordinator.admin.cluster_apis import ClusterApis
from coordinator.config import load_config
from coordinator.context import NodeInfo
from coordinator.dump_log import dump_log
from coordinator.server.server import Handler, KafkaServer
from coordinator.topics.apis import TopicApis
from coordinator.topics.describe_producers import DescribeProducersApis
from coordinator.topics.fetch import FetchApis, _read_stable
from coordinator.topics.log_manager import LogManager
from coordinator.topics.offset_apis import OffsetApis
from coordinator.topics.produce import ProduceApis
from coordinator.topics.producer_ids import ProducerIdApis, ProducerIdManager
from coordinator.topics.registry import CONSUMER_OFFSETS, TopicRegistry
from coordinator.topics.service import TopicService
from coordinator.topics.txn_markers import TxnMarkerApis
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.fetch_response import RecordsRef
from protocol.records import (
    ControlRecordType,
    Record,
    build_batch,
    decode_control_record,
    decode_records,
    encode_batch,
    iter_batch_positions,
)
from tests.wire_client import WireClient

CT = CreateTopicsRequest.CreatableTopic
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class Node:
    """One node's topics, logs and request handlers on an event loop of their own thread."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self._start(data_dir))

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self, data_dir: Path) -> None:
        config = load_config(data_dir=str(data_dir), overrides=["auto.create.topics.enable=false"])
        self.registry = TopicRegistry(config.data_dir, persistent=True)
        self.topics = TopicService(self.registry, config)
        self.logs = LogManager(config.data_dir, self.registry, config)
        self.topics.listeners.append(self.logs)
        await self.logs.open_all()
        self.server = KafkaServer({}, max_request_size=100 << 20, max_connections=100, idle_timeout_ms=600_000)
        self.host, self.port = await self.server.bind("127.0.0.1", 0)
        node = NodeInfo(0, self.host, self.port, "txn-test-cluster")
        self.produce = ProduceApis(self.logs)
        self.markers = TxnMarkerApis(self.logs)
        handlers: dict[ApiKey, Handler] = {}
        for apis in (ClusterApis(node, self.topics), TopicApis(node, self.topics), self.produce,
                     FetchApis(self.logs), OffsetApis(self.logs), ProducerIdApis(ProducerIdManager(config.data_dir)),
                     self.markers, DescribeProducersApis(self.logs)):
            handlers.update(apis.handlers())
        self.server.set_handlers(handlers)
        await self.server.start()

    def write_markers(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                      partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        result: dict[tuple[str, int], int] = self.call(
            self.markers.write_markers(pid, epoch, commit, coordinator_epoch, partitions))
        return result

    def client(self) -> WireClient:
        return WireClient(self.host, self.port)

    def close(self) -> None:
        async def stop() -> None:
            await self.server.shutdown(grace=2.0)
            await self.logs.close_all()
        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("txn-node"))
    yield n
    n.close()


# --- wire helpers ---------------------------------------------------------------------------------


def create(c: WireClient, name: str, partitions: int = 1) -> None:
    resp = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])]))
    assert resp.topics[0].error_code == 0, resp


def init_pid(c: WireClient) -> int:
    resp = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        version=4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
    assert resp.error_code == 0 and resp.producer_epoch == 0
    return int(resp.producer_id)


def produce(c: WireClient, topic: str, batch: bytes, transactional_id: str | None = "tx", version: int = 9,
            partition: int = 0) -> Any:
    P = ProduceRequest.TopicProduceData
    req = ProduceRequest(version=version, transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)])])
    return c.request(ApiKey.PRODUCE, version, req).responses[0].partition_responses[0]


def txn_batch(pid: int, seq: int, values: list[bytes], ts: int | None = None, epoch: int = 0) -> bytes:
    # Now by default: markers carry the append time, and a batch far older than the next one
    # rolls the segment (segment.ms), which would split reads.
    ts = int(time.time() * 1000) if ts is None else ts
    return build_batch([(None, v) for v in values], timestamp_ms=ts, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def fetch(c: WireClient, topic: str, offset: int, isolation: int, max_wait_ms: int = 0, min_bytes: int = 0,
          version: int = 11) -> Any:
    F = FetchRequest.FetchTopic
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                       max_bytes=1 << 20, isolation_level=isolation, session_id=0, session_epoch=-1,
                       topics=[F(topic=topic, partitions=[F.FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    return c.request(ApiKey.FETCH, version, req).responses[0].partitions[0]


def aborted(p: Any) -> list[tuple[int, int]] | None:
    if p.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in p.aborted_transactions]


def list_offset(c: WireClient, topic: str, timestamp: int, isolation: int) -> tuple[int, int, int]:
    L = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=isolation, topics=[L(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    p = c.request(ApiKey.LIST_OFFSETS, 7, req).topics[0].partitions[0]
    return p.error_code, p.offset, p.timestamp


def read_all(c: WireClient, topic: str, isolation: int, offset: int = 0) -> tuple[bytes, list[tuple[int, int]]]:
    """Every batch from ``offset`` up to what the isolation level may read, fetch after fetch (a
    fetch returns one segment's batches at most), and the aborted transactions answered."""
    data, found = b"", []
    while True:
        p = fetch(c, topic, offset, isolation)
        assert p.error_code == 0
        found += aborted(p) or []
        if not p.records:
            return data, found
        data += p.records
        last = list(iter_batch_positions(p.records))[-1][1]
        offset = last.base_offset + last.last_offset_delta + 1


def batches(data: bytes) -> list[tuple[int, bool, list[bytes | None]]]:
    """(base offset, is control, values) of every batch."""
    out = []
    for pos, header in iter_batch_positions(data):
        out.append((header.base_offset, header.is_control, [r.value for r in decode_records(data, pos, header)]))
    return out


# --- tests ----------------------------------------------------------------------------------------


def test_commit_abort_and_read_committed(node: Node) -> None:
    with node.client() as c:
        create(c, "txn")
        pid = init_pid(c)
        first = produce(c, "txn", txn_batch(pid, 0, [b"a0", b"a1"]))
        assert (first.error_code, first.base_offset) == (0, 0)
        # An open transaction: read_committed sees nothing yet, read_uncommitted everything.
        committed = fetch(c, "txn", 0, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (2, 0)
        assert committed.records in (b"", None) and aborted(committed) == []
        uncommitted = fetch(c, "txn", 0, READ_UNCOMMITTED)
        assert uncommitted.last_stable_offset == 0 and aborted(uncommitted) is None
        assert [v for _, _, v in batches(uncommitted.records)] == [[b"a0", b"a1"]]
        assert list_offset(c, "txn", -1, READ_COMMITTED)[:2] == (0, 0)
        assert list_offset(c, "txn", -1, READ_UNCOMMITTED)[:2] == (0, 2)

        assert node.write_markers(pid, 0, False, 5, [("txn", 0)]) == {("txn", 0): 0}  # ABORT at offset 2
        assert produce(c, "txn", txn_batch(pid, 2, [b"c0"])).base_offset == 3
        assert node.write_markers(pid, 0, True, 5, [("txn", 0)]) == {("txn", 0): 0}  # COMMIT at offset 4

        p = fetch(c, "txn", 0, READ_COMMITTED)
        assert (p.high_watermark, p.last_stable_offset) == (5, 5)
        assert aborted(p) == [(pid, 0)]
        for version in (4, 12):  # the oldest served, and a flexible one
            old = fetch(c, "txn", 0, READ_COMMITTED, version=version)
            assert (old.last_stable_offset, aborted(old)) == (5, [(pid, 0)])
        data, found = read_all(c, "txn", READ_COMMITTED)
        # The server returns every batch, markers included; the consumer drops what was aborted.
        assert [(o, ctl) for o, ctl, _ in batches(data)] == [(0, False), (2, True), (3, False), (4, True)]
        assert set(found) == {(pid, 0)}
        assert read_all(c, "txn", READ_COMMITTED, 3)[1] == []  # the aborted one ended before 3
        assert aborted(fetch(c, "txn", 0, READ_UNCOMMITTED)) is None
        kinds = []
        for pos, header in iter_batch_positions(data):
            if header.is_control:
                (marker,) = decode_records(data, pos, header)
                kinds.append((header.base_offset, decode_control_record(marker)[1]))
        assert kinds == [(2, ControlRecordType.ABORT), (4, ControlRecordType.COMMIT)]
        assert list_offset(c, "txn", -1, READ_COMMITTED)[:2] == (0, 5)


def test_open_transaction_holds_back_read_committed(node: Node) -> None:
    with node.client() as c:
        create(c, "hold")
        pid, other = init_pid(c), init_pid(c)
        assert produce(c, "hold", txn_batch(pid, 0, [b"open"], ts=9_000)).base_offset == 0
        # Another producer's data after it, even committed, waits for the open transaction.
        assert produce(c, "hold", build_batch([(None, b"plain")], timestamp_ms=9_500), None).base_offset == 1
        assert produce(c, "hold", txn_batch(other, 0, [b"other"])).base_offset == 2
        assert node.write_markers(other, 0, True, 1, [("hold", 0)]) == {("hold", 0): 0}
        p = fetch(c, "hold", 0, READ_COMMITTED)
        assert p.last_stable_offset == 0 and p.records in (b"", None)
        # A timestamp lookup at or beyond the LSO finds nothing under read_committed.
        assert list_offset(c, "hold", 9_000, READ_COMMITTED) == (0, -1, -1)
        assert list_offset(c, "hold", 9_000, READ_UNCOMMITTED) == (0, 0, 9_000)
        assert list_offset(c, "hold", -1, READ_COMMITTED)[:2] == (0, 0)
        # A long poll under read_committed waits for the LSO to move, not for appends.
        got: dict[str, Any] = {}

        def poll() -> None:
            with node.client() as w:
                got["p"] = fetch(w, "hold", 0, READ_COMMITTED, max_wait_ms=5000, min_bytes=1)
                got["at"] = time.monotonic()

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.3)
        assert produce(c, "hold", txn_batch(pid, 1, [b"more"])).base_offset == 4
        time.sleep(0.3)
        assert "p" not in got  # an append inside the open transaction is not readable
        node.write_markers(pid, 0, True, 1, [("hold", 0)])
        committed_at = time.monotonic()
        t.join(10)
        assert got["at"] - committed_at < 1.0
        assert got["p"].last_stable_offset == 6 and got["p"].records
        assert [o for o, _, _ in batches(read_all(c, "hold", READ_COMMITTED)[0])] == [0, 1, 2, 3, 4, 5]


def test_produce_refusals(node: Node) -> None:
    with node.client() as c:
        create(c, "refuse")
        pid = init_pid(c)
        control = encode_batch([Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], base_timestamp=1,
                               producer_id=pid, producer_epoch=0, transactional=True, control=True)
        assert produce(c, "refuse", control).error_code == ErrorCode.INVALID_RECORD
        # Kafka refuses a transactional batch sent without the request's transactional id outright.
        assert produce(c, "refuse", txn_batch(pid, 0, [b"x"]), None).error_code == \
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        no_pid = build_batch([(None, b"x")], timestamp_ms=1, transactional=True)
        assert produce(c, "refuse", no_pid).error_code == ErrorCode.INVALID_RECORD
        no_seq = build_batch([(None, b"x")], timestamp_ms=1, producer_id=pid, producer_epoch=0, base_sequence=-1)
        assert produce(c, "refuse", no_seq, None).error_code == ErrorCode.INVALID_RECORD
        assert list_offset(c, "refuse", -1, READ_UNCOMMITTED)[1] == 0  # nothing appended
        # Idempotent data of a producer inside a transaction here: INVALID_TXN_STATE.
        assert produce(c, "refuse", txn_batch(pid, 0, [b"in"])).error_code == 0
        plain = build_batch([(None, b"out")], timestamp_ms=1, producer_id=pid, producer_epoch=0, base_sequence=1)
        assert produce(c, "refuse", plain, None).error_code == ErrorCode.INVALID_TXN_STATE
        node.write_markers(pid, 0, False, 0, [("refuse", 0)])
        plain = build_batch([(None, b"out")], timestamp_ms=1, producer_id=pid, producer_epoch=0, base_sequence=1)
        assert produce(c, "refuse", plain, None).error_code == 0


class FakeVerifier:
    def __init__(self, answer: int) -> None:
        self.answer = answer
        self.calls: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls.append((transactional_id, producer_id, producer_epoch, partitions))
        return {p: self.answer for p in partitions}


@pytest.mark.parametrize(("answer", "version", "expected"), [
    (ErrorCode.TRANSACTION_ABORTABLE, 9, ErrorCode.INVALID_TXN_STATE),
    (ErrorCode.TRANSACTION_ABORTABLE, 11, ErrorCode.TRANSACTION_ABORTABLE),
    (ErrorCode.PRODUCER_FENCED, 9, ErrorCode.INVALID_PRODUCER_EPOCH),
    (ErrorCode.CONCURRENT_TRANSACTIONS, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, 9, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
])
def test_verification_errors(node: Node, answer: int, version: int, expected: int) -> None:
    topic = f"verify-{answer}-{version}"
    with node.client() as c:
        create(c, topic)
        pid = init_pid(c)
        node.produce.verifier = FakeVerifier(answer)
        try:
            resp = produce(c, topic, txn_batch(pid, 0, [b"x"]), "tx-v", version=version)
        finally:
            node.produce.verifier = None
        assert resp.error_code == expected
        assert list_offset(c, topic, -1, READ_UNCOMMITTED)[1] == 0


class UnreachableVerifier:
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        raise ConnectionError("the transaction coordinator went away")


def test_unreachable_verifier_is_a_retriable_error(node: Node) -> None:
    with node.client() as c:
        create(c, "unverifiable")
        pid = init_pid(c)
        node.produce.verifier = UnreachableVerifier()
        try:
            resp = produce(c, "unverifiable", txn_batch(pid, 0, [b"x"]), "tx-u")
        finally:
            node.produce.verifier = None
        assert resp.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert produce(c, "unverifiable", txn_batch(pid, 0, [b"x"]), "tx-u").error_code == 0  # the retry


def test_verification_only_for_the_first_batch_of_a_transaction(node: Node) -> None:
    with node.client() as c:
        create(c, "verified", partitions=2)
        pid = init_pid(c)
        verifier = FakeVerifier(ErrorCode.NONE)
        node.produce.verifier = verifier
        try:
            assert produce(c, "verified", txn_batch(pid, 0, [b"1"]), "tx-ok").error_code == 0
            assert produce(c, "verified", txn_batch(pid, 1, [b"2"]), "tx-ok").error_code == 0
            assert produce(c, "verified", txn_batch(pid, 0, [b"3"]), "tx-ok", partition=1).error_code == 0
            # A retry of the first batch is answered from the producer state, not verified again.
            assert produce(c, "verified", txn_batch(pid, 0, [b"1"]), "tx-ok").base_offset == 0
            assert verifier.calls == [("tx-ok", pid, 0, [("verified", 0)]), ("tx-ok", pid, 0, [("verified", 1)])]
            node.write_markers(pid, 0, True, 0, [("verified", 0), ("verified", 1)])
            assert produce(c, "verified", txn_batch(pid, 2, [b"4"]), "tx-ok").error_code == 0
            assert len(verifier.calls) == 3  # a new transaction on the partition: verified again
        finally:
            node.produce.verifier = None


def test_describe_producers(node: Node) -> None:
    with node.client() as c:
        create(c, "described")
        pid = init_pid(c)
        produce(c, "described", txn_batch(pid, 0, [b"a", b"b"], ts=7_000))
        node.write_markers(pid, 0, True, 3, [("described", 0)])
        produce(c, "described", txn_batch(pid, 2, [b"c"], ts=8_000))
        T = DescribeProducersRequest.TopicRequest
        resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(version=0, topics=[
            T(name="described", partition_indexes=[0, 7]), T(name="nowhere", partition_indexes=[0])]))
        ok, beyond = resp.topics[0].partitions
        assert ok.error_code == 0
        (state,) = ok.active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence, state.last_timestamp,
                state.coordinator_epoch, state.current_txn_start_offset) == (pid, 0, 2, 8_000, 3, 3)
        assert beyond.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert resp.topics[1].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [0, 1])
def test_write_txn_markers_over_the_wire(node: Node, version: int) -> None:
    topic = f"wire-markers-{version}"
    with node.client() as c:
        create(c, topic)
        pid = init_pid(c)
        produce(c, topic, txn_batch(pid, 0, [b"x"]))
        M = WriteTxnMarkersRequest.WritableTxnMarker

        def send(epoch: int, coordinator_epoch: int, *targets: tuple[str, list[int]]) -> list[tuple[str, int, int]]:
            req = WriteTxnMarkersRequest(version=version, markers=[M(
                producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=coordinator_epoch,
                topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in targets])])
            (result,) = c.request(ApiKey.WRITE_TXN_MARKERS, version, req).markers
            assert result.producer_id == pid
            return [(t.name, p.partition_index, p.error_code) for t in result.topics for p in t.partitions]

        assert send(0, 4, (topic, [0, 3]), ("nowhere", [0])) == [
            (topic, 0, 0), (topic, 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("nowhere", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert fetch(c, topic, 0, READ_COMMITTED).last_stable_offset == 2
        assert send(0, 3, (topic, [0])) == [(topic, 0, ErrorCode.TRANSACTION_COORDINATOR_FENCED)]
        assert send(1, 4, (topic, [0])) == [(topic, 0, 0)]  # a bumped epoch (an abort on timeout)
        assert send(0, 4, (topic, [0])) == [(topic, 0, ErrorCode.INVALID_PRODUCER_EPOCH)]


def test_consumer_offsets_markers_go_to_the_group_coordinator(node: Node) -> None:
    async def make_offsets_topic() -> None:
        node.topics.create(CONSUMER_OFFSETS, 1, {"cleanup.policy": "compact"})
        while node.logs.get(CONSUMER_OFFSETS, 0) is None:
            await asyncio.sleep(0.01)

    node.call(make_offsets_topic())
    assert node.write_markers(7, 0, True, 0, [(CONSUMER_OFFSETS, 0)]) == {(CONSUMER_OFFSETS, 0): ErrorCode.NOT_COORDINATOR}
    calls = []

    async def writer(topic: str, partition: int, pid: int, epoch: int, commit: bool, coordinator_epoch: int) -> int:
        calls.append((topic, partition, pid, epoch, commit, coordinator_epoch))
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if len(calls) == 1 else ErrorCode.NONE

    node.markers.internal_marker_writer = writer
    try:
        assert node.write_markers(7, 0, True, 2, [(CONSUMER_OFFSETS, 0)]) == {
            (CONSUMER_OFFSETS, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
        assert node.write_markers(7, 0, False, 2, [(CONSUMER_OFFSETS, 0)]) == {(CONSUMER_OFFSETS, 0): 0}
    finally:
        node.markers.internal_marker_writer = None
    assert calls == [(CONSUMER_OFFSETS, 0, 7, 0, True, 2), (CONSUMER_OFFSETS, 0, 7, 0, False, 2)]
    assert node.logs.get(CONSUMER_OFFSETS, 0).log_end_offset == 0  # type: ignore[union-attr]  # nothing written here


def test_large_read_committed_reads_go_out_with_sendfile(node: Node) -> None:
    with node.client() as c:
        create(c, "large")
        pid = init_pid(c)
        values = [bytes([i]) * 20_000 for i in range(8)]
        assert produce(c, "large", txn_batch(pid, 0, values[:4])).error_code == 0
        assert produce(c, "large", txn_batch(pid, 4, values[4:])).error_code == 0
        node.write_markers(pid, 0, True, 0, [("large", 0)])
        assert produce(c, "large", txn_batch(pid, 8, [b"open"])).base_offset == 9  # LSO stays at 9
        plog = node.logs.get("large", 0)
        assert plog is not None
        records, upper = _read_stable(plog, 0, 1 << 20, True, plog.last_stable_offset)
        assert isinstance(records, RecordsRef) and upper == 9
        data = read_all(c, "large", READ_COMMITTED)[0]
        assert [(o, ctl) for o, ctl, _ in batches(data)] == [(0, False), (4, False), (8, True)]
        assert [v for _, ctl, vs in batches(data) if not ctl for v in vs] == values


def test_dump_log_prints_markers(node: Node) -> None:
    with node.client() as c:
        create(c, "dumped")
        pid = init_pid(c)
        produce(c, "dumped", txn_batch(pid, 0, [b"x"]))
        node.write_markers(pid, 0, False, 11, [("dumped", 0)])
    plog = node.logs.get("dumped", 0)
    assert plog is not None
    out = io.StringIO()
    assert dump_log(plog.log.directory, False, out) == 0
    lines = out.getvalue().splitlines()
    batch_lines = [line for line in lines if line.startswith("baseOffset:")]
    assert "isTransactional: true isControl: false" in batch_lines[0]
    assert f"producerId: {pid} producerEpoch: 0" in batch_lines[1]
    assert "isTransactional: true isControl: true" in batch_lines[1]
    assert any(line.startswith("| offset: 1 ") and line.endswith("endTxnMarker: ABORT coordinatorEpoch: 11")
               for line in lines)
    # The segment's .txnindex follows it: the aborted transaction, its marker and the LSO after it.
    index_at = next(i for i, line in enumerate(lines) if line.endswith(".txnindex"))
    assert lines[index_at + 1] == f"version: 0 producerId: {pid} firstOffset: 0 lastOffset: 1 lastStableOffset: 2"


def test_dump_log_of_a_txn_index_file(tmp_path: Path) -> None:
    index = tmp_path / "00000000000000000000.txnindex"
    index.write_bytes(struct.pack(">hqqqq", 0, 7, 10, 12, 13) + struct.pack(">hqqqq", 0, 8, 11, 14, 15)[:20])
    out = io.StringIO()
    assert dump_log(index, False, out) == 1  # a torn last entry
    lines = out.getvalue().splitlines()
    assert lines[1] == "version: 0 producerId: 7 firstOffset: 10 lastOffset: 12 lastStableOffset: 13"
    assert lines[2].startswith("Incomplete entry") and len(lines) == 3


def test_kafka_python_consumer_skips_aborted_data(node: Node) -> None:
    from kafka import KafkaConsumer, TopicPartition

    with node.client() as c:
        create(c, "kp")
        pid = init_pid(c)
        produce(c, "kp", txn_batch(pid, 0, [b"aborted-1", b"aborted-2"]))
        node.write_markers(pid, 0, False, 0, [("kp", 0)])
        produce(c, "kp", txn_batch(pid, 2, [b"committed"]))
        node.write_markers(pid, 0, True, 0, [("kp", 0)])
        produce(c, "kp", txn_batch(pid, 3, [b"open"]))
    for isolation, expected in (("read_committed", [b"committed"]),
                                ("read_uncommitted", [b"aborted-1", b"aborted-2", b"committed", b"open"])):
        consumer = KafkaConsumer(bootstrap_servers=f"{node.host}:{node.port}", isolation_level=isolation,
                                 enable_auto_commit=False, auto_offset_reset="earliest", group_id=None)
        try:
            tp = TopicPartition("kp", 0)
            consumer.assign([tp])
            got: list[bytes] = []
            deadline = time.monotonic() + 10
            while len(got) < len(expected) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    got += [r.value for r in records]
            assert got == expected
            assert consumer.end_offsets([tp])[tp] == (5 if isolation == "read_committed" else 6)
        finally:
            consumer.close()


def test_markers_wait_for_the_isr_and_need_the_leader(node: Node) -> None:
    """Cluster mode on one partition, its followers played by the test: a marker is answered once
    the ISR has it, as an acks=all produce; a follower answers NOT_LEADER_OR_FOLLOWER."""
    with node.client() as c:
        create(c, "replicated")
    plog = node.logs.get("replicated", 0)
    assert plog is not None

    async def lead() -> None:
        plog.replicate(1, None).become_leader(1, (1,), (1, 2), 0)

    node.call(lead())
    repl = plog.replication
    assert repl is not None
    assert node.write_markers(5, 0, True, 0, [("replicated", 0)]) == {("replicated", 0): 0}  # an ISR of one

    async def widen_then_write() -> dict[tuple[str, int], int]:
        repl.update_isr((1, 2), 1)
        write = asyncio.ensure_future(node.markers.write_markers(5, 0, False, 0, [("replicated", 0)]))
        await asyncio.sleep(0.2)
        assert not write.done()  # the follower has not fetched the marker yet
        repl.follower_fetched(2, plog.log_end_offset)
        return await asyncio.wait_for(write, 5)

    assert node.call(widen_then_write()) == {("replicated", 0): 0}
    assert plog.high_watermark == plog.log_end_offset == 2

    async def follow() -> None:
        repl.become_follower(2, 2, (1, 2), (1, 2), 2)

    node.call(follow())
    assert node.write_markers(5, 0, True, 0, [("replicated", 0)]) == {
        ("replicated", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    with node.client() as c:
        T = DescribeProducersRequest.TopicRequest
        resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(version=0, topics=[
            T(name="replicated", partition_indexes=[0])]))
        assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
