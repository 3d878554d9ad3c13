"""DeleteRecords (api key 21) against a ``groupcoord serve`` process, over real sockets: the log
start rises on the leader, whole segments below it go, the new start survives a SIGKILL, and the
refusals follow Kafka's ``ReplicaManager.deleteRecordsOnLocalLog``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.conftest import ServerProcess
from tests.wire_client import WireClient

CT = CreateTopicsRequest.CreatableTopic
EARLIEST, LATEST = -2, -1


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("delete-records") / "data",
                      {"auto.create.topics.enable": "false"})
    s.start()
    yield s
    if s.alive():
        s.stop()


def client(s: ServerProcess) -> WireClient:
    return WireClient(s.host, s.port)


def create(c: WireClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    C = CT.CreatableTopicConfig
    resp = c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=5000, topics=[CT(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[C(name=k, value=v) for k, v in (configs or {}).items()])]))
    assert resp.topics[0].error_code == 0, resp


def produce(c: WireClient, topic: str, count: int, partition: int = 0) -> None:
    """``count`` batches of one record each (so a small segment.bytes rolls often)."""
    P = ProduceRequest.TopicProduceData
    for i in range(count):
        batch = build_batch([(b"k%d" % i, b"v%d" % i)], timestamp_ms=int(time.time() * 1000))
        req = ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)])])
        part = c.request(ApiKey.PRODUCE, 9, req).responses[0].partition_responses[0]
        assert part.error_code == 0, part


def delete(c: WireClient, topic: str, offsets: dict[int, int], version: int = 2) -> dict[int, tuple[int, int]]:
    """{partition: offset} → {partition: (error_code, low_watermark)}"""
    T = DeleteRecordsRequest.DeleteRecordsTopic
    req = DeleteRecordsRequest(version=version, timeout_ms=5000, topics=[T(name=topic, partitions=[
        T.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in offsets.items()])])
    resp = c.request(ApiKey.DELETE_RECORDS, version, req)
    assert [t.name for t in resp.topics] == [topic]
    return {p.partition_index: (p.error_code, p.low_watermark) for p in resp.topics[0].partitions}


def list_offset(c: WireClient, topic: str, timestamp: int) -> int:
    L = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[L(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    p = c.request(ApiKey.LIST_OFFSETS, 7, req).topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def fetch(c: WireClient, topic: str, offset: int) -> Any:
    F = FetchRequest.FetchTopic
    req = FetchRequest(version=11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[F(topic=topic, partitions=[F.FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    return c.request(ApiKey.FETCH, 11, req).responses[0].partitions[0]


def segments(s: ServerProcess, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (s.data_dir / f"{topic}-0").glob("*.log"))


def test_log_start_rises_and_whole_segments_go(srv: ServerProcess) -> None:
    c = client(srv)
    create(c, "dr-basic", configs={"segment.bytes": "200"})
    produce(c, "dr-basic", 20)
    before = segments(srv, "dr-basic")
    assert len(before) > 3 and before[0] == 0

    assert delete(c, "dr-basic", {0: 7}) == {0: (ErrorCode.NONE, 7)}
    assert list_offset(c, "dr-basic", EARLIEST) == 7
    assert fetch(c, "dr-basic", 6).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    part = fetch(c, "dr-basic", 7)
    assert part.error_code == 0 and part.log_start_offset == 7 and part.records
    # Segments wholly below 7 are deleted (after file.delete.delay.ms: wait for it); the one
    # holding 7 stays.
    deadline = time.monotonic() + 90
    while segments(srv, "dr-basic")[0] < max(b for b in before if b <= 7) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert segments(srv, "dr-basic")[0] == max(b for b in before if b <= 7)

    # Asking for less than the current start changes nothing.
    assert delete(c, "dr-basic", {0: 3}) == {0: (ErrorCode.NONE, 7)}
    # Above the high watermark: out of range; -1: up to the high watermark.
    assert delete(c, "dr-basic", {0: 21}) == {0: (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    assert delete(c, "dr-basic", {0: -2}) == {0: (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    assert delete(c, "dr-basic", {0: -1}, version=0) == {0: (ErrorCode.NONE, 20)}
    assert list_offset(c, "dr-basic", EARLIEST) == 20 == list_offset(c, "dr-basic", LATEST)
    # The log goes on from there.
    produce(c, "dr-basic", 2)
    assert list_offset(c, "dr-basic", LATEST) == 22
    c.close()


def test_refusals(srv: ServerProcess) -> None:
    c = client(srv)
    create(c, "dr-two", partitions=2)
    create(c, "dr-compact", configs={"cleanup.policy": "compact"})
    produce(c, "dr-two", 3, partition=1)
    assert delete(c, "dr-two", {0: 0, 1: 2, 2: 0}, version=1) == {
        0: (ErrorCode.NONE, 0), 1: (ErrorCode.NONE, 2), 2: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert delete(c, "dr-none", {0: 0}) == {0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}
    assert delete(c, "dr-compact", {0: 0}) == {0: (ErrorCode.POLICY_VIOLATION, -1)}
    assert delete(c, "__consumer_offsets", {0: 0}) == {0: (ErrorCode.INVALID_TOPIC_EXCEPTION, -1)}
    assert delete(c, "__transaction_state", {0: 0}) == {0: (ErrorCode.INVALID_TOPIC_EXCEPTION, -1)}
    c.close()


def test_new_log_start_survives_a_crash(srv: ServerProcess) -> None:
    c = client(srv)
    create(c, "dr-durable", configs={"segment.bytes": "200"})
    produce(c, "dr-durable", 12)
    # 5 lies inside a segment: only the checkpoint, not a segment's name, carries it.
    assert delete(c, "dr-durable", {0: 5}) == {0: (ErrorCode.NONE, 5)}
    c.close()
    srv.kill()
    srv.start()
    c = client(srv)
    assert list_offset(c, "dr-durable", EARLIEST) == 5
    assert list_offset(c, "dr-durable", LATEST) == 12
    c.close()


def test_confluent_kafka_admin_delete_records(srv: ServerProcess) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    c = client(srv)
    create(c, "dr-admin")
    produce(c, "dr-admin", 5)
    c.close()
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})
    futures = admin.delete_records([TopicPartition("dr-admin", 0, 3)], request_timeout=10)
    result = futures[TopicPartition("dr-admin", 0)].result(15)
    assert result.low_watermark == 3
    # OFFSET_END (-1) = the high watermark, as kafka-delete-records.sh's offset -1
    futures = admin.delete_records([TopicPartition("dr-admin", 0, -1)], request_timeout=10)
    assert futures[TopicPartition("dr-admin", 0)].result(15).low_watermark == 5


def test_open_transaction_below_the_new_start(srv: ServerProcess) -> None:
    """An open transaction whose start is deleted no longer holds read_committed back there: the
    last stable offset is never below the log start (Kafka's maybeIncrementFirstUnstableOffset);
    the producer's state is kept, so it commits afterwards and its later records are read."""
    from confluent_kafka import Producer

    c = client(srv)
    create(c, "dr-txn")
    p = Producer({"bootstrap.servers": srv.bootstrap, "transactional.id": "dr-txn", "linger.ms": 0})
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce("dr-txn", b"open%d" % i, partition=0)
    assert p.flush(15) == 0
    produce(c, "dr-txn", 2)  # non-transactional records after the open transaction
    assert list_offset_committed(c, "dr-txn") == 0  # held at the transaction's first offset
    assert delete(c, "dr-txn", {0: 2}) == {0: (ErrorCode.NONE, 2)}
    assert list_offset_committed(c, "dr-txn") == 2
    assert delete(c, "dr-txn", {0: -1}) == {0: (ErrorCode.NONE, 5)}
    assert list_offset_committed(c, "dr-txn") == 5
    p.produce("dr-txn", b"later", partition=0)
    p.commit_transaction(15)
    # 5: the later record, 6: the COMMIT marker (written after EndTxn's answer); read_committed
    # then reaches the end.
    deadline = time.monotonic() + 10
    while list_offset(c, "dr-txn", LATEST) < 7 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list_offset(c, "dr-txn", LATEST) == 7 == list_offset_committed(c, "dr-txn")
    part = fetch(c, "dr-txn", 5)
    assert part.error_code == 0 and b"later" in bytes(part.records)
    c.close()


def list_offset_committed(c: WireClient, topic: str) -> int:
    L = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(version=7, replica_id=-1, isolation_level=1, topics=[L(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=LATEST)])])
    p = c.request(ApiKey.LIST_OFFSETS, 7, req).topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)
