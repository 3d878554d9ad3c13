"""Transactions on a real 3-node cluster (ZooKeeper and three node processes).

What is checked: ``__transaction_state`` is created on first use with Kafka's layout and
replicated on every node; a transaction's markers reach partitions led by other nodes than its
coordinator (a read_committed consumer sees committed records and never aborted ones); a
transactional batch sent to a leader that does not coordinate the id is verified by the id's
coordinator (KIP-890: refused before AddPartitionsToTxn, accepted after); and a transaction whose
coordinator is SIGKILLed after its PrepareCommit while a partition's leader is unreachable is
completed by the new coordinator, which re-sends the markers (reference: Kafka's
``TransactionStateManager`` loads PrepareCommit and sends its markers again).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, InitProducerIdRequest, ProduceRequest

from coordinator.cluster.local_cluster import LocalCluster
from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode
from protocol.hashing import partition_for
from protocol.records import build_batch
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _zk
from tests.wire_client import WireClient

pytestmark = pytest.mark.timeout(120)

TXN_STATE = "__transaction_state"
#: Kafka's default; the topic's layout is part of what is checked.
TXN_PARTITIONS = 50


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # A replica that stops fetching leaves the ISR after 2 s, so a stopped node does not hold
    # acks=all writes for long; the transaction state log accepts one in-sync replica, so the
    # failover test's survivor can write alone.
    with running_cluster(tmp_path_factory.mktemp("txn") / "cluster", "replica.lag.time.max.ms=2000",
                         "transaction.state.log.min.isr=1", "offsets.topic.num.partitions=3") as c:
        yield c


def _port(cluster: LocalCluster, broker: int) -> int:
    return cluster.ports[broker - 1]


def _wire(cluster: LocalCluster, broker: int) -> WireClient:
    return WireClient(cluster.host, _port(cluster, broker), timeout=30.0)


def _state(zk: Any, topic: str, partition: int) -> dict[str, Any]:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])


def _find_coordinator(cluster: LocalCluster, transactional_id: str, via: int = 1, timeout: float = 30.0) -> int:
    cls = request_class(ApiKey.FIND_COORDINATOR)

    def ask() -> int:
        with _wire(cluster, via) as client:
            response = client.request(ApiKey.FIND_COORDINATOR, 1, cls(key=transactional_id, key_type=1))
        return response.node_id if response.error_code == ErrorCode.NONE else 0

    return int(wait_for(ask, timeout, f"a transaction coordinator for {transactional_id}"))


def _create_topic(cluster: LocalCluster, name: str, placement: dict[int, list[int]]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(name, replica_assignments=placement)])
    finally:
        admin.close()


def _read(cluster: LocalCluster, topic: str, partitions: list[int], isolation: str, expect: int,
          timeout: float = 20.0) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=1000, isolation_level=isolation)
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            got += [m.value for m in consumer]
            if len(got) >= expect:
                break
        time.sleep(0.3)  # anything more would be a record that must not be there
        got += [m.value for m in consumer]
    finally:
        consumer.close()
    return sorted(got)


def _producer(cluster: LocalCluster, transactional_id: str) -> Any:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=transactional_id,
                             request_timeout_ms=30000, max_block_ms=60000)
    producer.init_transactions()
    return producer


def test_transaction_state_is_created_and_markers_reach_every_leader(cluster: LocalCluster) -> None:
    coordinator = _find_coordinator(cluster, "tx-spread")
    zk = _zk(cluster)
    try:
        topic = json.loads(zk.get(f"/brokers/topics/{TXN_STATE}")[0])
        assert sorted(map(int, topic["partitions"])) == list(range(TXN_PARTITIONS))
        assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
        configs = json.loads(zk.get(f"/config/topics/{TXN_STATE}")[0])["config"]
        assert configs["cleanup.policy"] == "compact" and configs["unclean.leader.election.enable"] == "false"
        # Replicated: every node holds every partition's log, and the id's partition is led by
        # the node FindCoordinator named.
        wait_for(lambda: all((cluster.directory / f"node-{b}" / f"{TXN_STATE}-{p}").is_dir()
                             for b in (1, 2, 3) for p in range(TXN_PARTITIONS)), 20, "every replica opened")
        assert _state(zk, TXN_STATE, partition_for("tx-spread", TXN_PARTITIONS))["leader"] == coordinator
    finally:
        zk.stop()
        zk.close()

    # One partition led by each node: two of them by nodes that do not coordinate the id.
    _create_topic(cluster, "spread", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    producer = _producer(cluster, "tx-spread")
    try:
        producer.begin_transaction()
        for p in range(3):
            producer.send("spread", f"committed-{p}".encode(), partition=p)
        producer.commit_transaction()
        producer.begin_transaction()
        for p in range(3):
            producer.send("spread", f"aborted-{p}".encode(), partition=p)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        for p in range(3):
            producer.send("spread", f"second-{p}".encode(), partition=p)
        producer.commit_transaction()
    finally:
        producer.close()
    expected = sorted([f"committed-{p}".encode() for p in range(3)] + [f"second-{p}".encode() for p in range(3)])
    assert _read(cluster, "spread", [0, 1, 2], "read_committed", len(expected)) == expected
    everything = _read(cluster, "spread", [0, 1, 2], "read_uncommitted", 9)
    assert [v for v in everything if v.startswith(b"aborted")] == [f"aborted-{p}".encode() for p in range(3)]


def _transactional_batch(pid: int, epoch: int, sequence: int, value: bytes) -> bytes:
    return build_batch([(None, value)], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                       producer_epoch=epoch, base_sequence=sequence, transactional=True)


def _produce(client: WireClient, transactional_id: str, topic: str, partition: int, batch: bytes) -> int:
    cls = ProduceRequest
    request = cls(transactional_id=transactional_id, acks=-1, timeout_ms=20000, topic_data=[
        cls.TopicProduceData(name=topic, partition_data=[
            cls.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
    response = client.request(ApiKey.PRODUCE, 9, request)
    return int(response.responses[0].partition_responses[0].error_code)


def test_a_leader_asks_the_ids_coordinator_on_another_node_to_verify(cluster: LocalCluster) -> None:
    txn_id = "tx-verify"
    coordinator = _find_coordinator(cluster, txn_id)
    leader = next(b for b in (1, 2, 3) if b != coordinator)
    _create_topic(cluster, "verified", {0: [leader]})
    with _wire(cluster, coordinator) as client:
        init = client.request(ApiKey.INIT_PRODUCER_ID, 1,
                              InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000))
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
    with _wire(cluster, leader) as client:
        # Not added to the transaction: the coordinator (another node) says so; Produce v9
        # answers it as INVALID_TXN_STATE (Kafka's AddPartitionsToTxnManager mapping).
        # CreateTopics answers once the controller has written the assignment; the leader takes
        # it up from ZooKeeper a moment later (on a loaded machine, later still) and until then
        # answers with the retriable UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER, which a
        # producer retries: so does this test.
        retriable = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        deadline = time.monotonic() + 20
        while (error := _produce(client, txn_id, "verified", 0, _transactional_batch(pid, epoch, 0, b"x"))) \
                in retriable and time.monotonic() < deadline:
            time.sleep(0.05)
        assert error == ErrorCode.INVALID_TXN_STATE
    with _wire(cluster, coordinator) as client:
        cls = AddPartitionsToTxnRequest
        added = client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 1, cls(
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name="verified", partitions=[0])]))
        codes = [r.partition_error_code for t in added.results_by_topic_v3_and_below for r in t.results_by_partition]
        assert codes == [ErrorCode.NONE]
    with _wire(cluster, leader) as client:
        assert _produce(client, txn_id, "verified", 0, _transactional_batch(pid, epoch, 0, b"x")) == ErrorCode.NONE


def _describe(cluster: LocalCluster, broker: int, transactional_id: str) -> Any:
    with _wire(cluster, broker) as client:
        response = client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                  DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    return response.transaction_states[0]


def test_a_new_coordinator_completes_a_prepared_commit(cluster: LocalCluster) -> None:
    """The coordinator C writes PrepareCommit while the leader X of one partition is stopped (its
    marker cannot be written); C is SIGKILLed; the third node Y takes over the id's partition,
    loads PrepareCommit and re-sends the markers; once X is back, the commit completes there."""
    leaders = _txn_state_leaders(cluster)
    txn_id = next(f"tx-failover-{i}" for i in range(1000) if leaders[partition_for(f"tx-failover-{i}", TXN_PARTITIONS)] == 1)
    c, x, y = 1, 2, 3
    assert _find_coordinator(cluster, txn_id) == c
    _create_topic(cluster, "failover", {0: [x], 1: [y]})
    producer = _producer(cluster, txn_id)
    procs = cluster.procs
    try:
        producer.begin_transaction()
        producer.send("failover", b"on-x", partition=0)
        producer.send("failover", b"on-y", partition=1)
        producer.flush()
        procs[x].send_signal(signal.SIGSTOP)  # its partition 0 cannot take a marker now
        producer.commit_transaction()  # answered once PrepareCommit is durable
        assert _describe(cluster, c, txn_id).transaction_state == "PrepareCommit"
        procs[c].send_signal(signal.SIGKILL)
        procs[c].wait()
        wait_for(lambda: _describe_state(cluster, y, txn_id) == "PrepareCommit", (SESSION_MS / 1000) * 2 + 10,
                 "the new coordinator loaded the prepared transaction")
        procs[x].send_signal(signal.SIGCONT)
        wait_for(lambda: _describe_state(cluster, y, txn_id) == "CompleteCommit", 30,
                 "the new coordinator completed the commit")
    finally:
        procs[x].send_signal(signal.SIGCONT)
        producer.close(timeout=1)
    assert _read(cluster, "failover", [0, 1], "read_committed", 2) == [b"on-x", b"on-y"]


def _txn_state_leaders(cluster: LocalCluster) -> dict[int, int]:
    """The leader of each ``__transaction_state`` partition, the topic created first if need be."""
    _find_coordinator(cluster, "tx-bootstrap")
    zk = _zk(cluster)
    try:
        def read() -> dict[int, int] | None:
            try:
                return {p: int(_state(zk, TXN_STATE, p)["leader"]) for p in range(TXN_PARTITIONS)}
            except Exception:  # a state not written yet (NoNodeError): read again
                return None
        leaders: dict[int, int] = wait_for(read, 20, f"every {TXN_STATE} partition has a state")
        return leaders
    finally:
        zk.stop()
        zk.close()


def _describe_state(cluster: LocalCluster, broker: int, transactional_id: str) -> str | None:
    try:
        state = _describe(cluster, broker, transactional_id)
    except (OSError, ConnectionError):
        return None
    return str(state.transaction_state) if state.error_code == ErrorCode.NONE else None
