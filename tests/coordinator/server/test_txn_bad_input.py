"""One real node, served in this process, against out-of-order and malformed transaction calls
(issue 32, "Bad input").

Every case is answered with Kafka's error code and changes no state: before and after it the
node's DescribeTransactions and ListTransactions answers, the end offset of
``__transaction_state`` (one partition here) and of every data and offsets partition are the
same, and the node goes on serving on a fresh connection. The codes are those of Kafka's
``TransactionCoordinator`` (``handleInitProducerId``, ``handleAddPartitionsToTransaction``,
``endTransaction``:
https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala),
its ``KafkaApis`` handlers (PRODUCER_FENCED answered INVALID_PRODUCER_EPOCH to the versions before
KIP-588, control batches refused on Produce, the transactional id a transactional batch needs:
https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/server/KafkaApis.scala) and of
the group coordinator's ``validateTransactionalOffsetCommit`` (KIP-447:
https://github.com/apache/kafka/blob/3.9/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/OffsetMetadataManager.java).

The node is the whole ``App`` (the same handlers ``groupcoord serve`` runs), on an event loop
of its own thread; one test seam: its marker writer holds back the markers of the one
transaction kept in PrepareCommit, so the calls Kafka refuses while a decision waits for its
markers can be made at leisure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from coordinator.app import App
from coordinator.config import load_config
from coordinator.transactions.markers import MarkerWriter
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from protocol.records import Record, build_batch, encode_batch
from tests.conftest import free_port
from tests.wire_client import WireClient

TOPIC = "orders"
GROUP = "eos-group"
STATE = "__transaction_state"
OFFSETS = "__consumer_offsets"
MAX_TIMEOUT_MS = 900_000
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
CommitTopic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
#: Answers a call may get while a partition loads or a decision waits for its markers.
_RETRIABLE = (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_NOT_AVAILABLE)


class HeldMarkers:
    """The node's marker writer, except that the markers of producers in ``held`` wait until the
    node stops: their transactions stay in PrepareCommit/PrepareAbort."""

    def __init__(self, writer: MarkerWriter) -> None:
        self.writer = writer
        self.held: set[int] = set()

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        while producer_id in self.held:
            await asyncio.sleep(0.05)
        return await self.writer.write_markers(producer_id, producer_epoch, commit, coordinator_epoch, partitions)


class Node:
    """The whole ``App`` on an event loop of its own thread (``App.run`` installs signal
    handlers, which only the main thread may: here they are no-ops)."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.app = App(load_config(data_dir=str(data_dir), listen=f"127.0.0.1:{self.port}", overrides=[
            "transaction.state.log.num.partitions=1", "offsets.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0", f"transaction.max.timeout.ms={MAX_TIMEOUT_MS}"]))
        self.markers = HeldMarkers(self.app.transactions.marker_writer)  # type: ignore[arg-type]
        self.app.transactions.marker_writer = self.markers
        self.loop = asyncio.new_event_loop()
        self.loop.add_signal_handler = lambda *args: None  # type: ignore[method-assign]
        self.app._keep_second_signal_fatal = lambda loop: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.running = asyncio.run_coroutine_threadsafe(self.app.run(), self.loop)
        deadline = time.monotonic() + 20
        while self.app.server is None or not self.app.server._servers:
            assert time.monotonic() < deadline and not self.running.done(), self.running
            time.sleep(0.01)

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def end_offset(self, topic: str, partition: int) -> int | None:
        plog = self.app.logs.get(topic, partition)
        return None if plog is None else plog.log_end_offset

    def alive(self) -> bool:
        return not self.running.done() and self.thread.is_alive()

    def close(self) -> None:
        self.markers.held.clear()
        self.loop.call_soon_threadsafe(self.app._stop.set)
        assert self.running.result(30) == 0
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    def client(self, timeout: float = 30.0) -> WireClient:
        return WireClient("127.0.0.1", self.port, timeout=timeout)


@dataclass
class Producer:
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class Setup:
    node: Node
    #: In Ongoing with orders-0 and the group's offsets partition, one TxnOffsetCommit pending.
    ongoing: Producer
    #: In Empty (initialised, no transaction yet).
    empty: Producer
    #: In PrepareCommit with orders-1, its markers held back.
    prepared: Producer
    #: In CompleteCommit after a transaction on orders-1.
    committed: Producer
    #: The classic group's member and generation.
    member_id: str
    generation: int


# --- requests ---------------------------------------------------------------------------------


def retry(call: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if getattr(answer, "error_code", 0) not in _RETRIABLE or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def init(c: WireClient, txn: str, *, version: int = 4, timeout_ms: int = 60_000, pid: int = -1,
         epoch: int = -1) -> Any:
    request = InitProducerIdRequest(version=version, transactional_id=txn, transaction_timeout_ms=timeout_ms,
                                    producer_id=pid, producer_epoch=epoch)
    return c.request(ApiKey.INIT_PRODUCER_ID, version, request)


def add(c: WireClient, txn: str, pid: int, epoch: int, topics: list[Any] | None = None,
        version: int = 3) -> dict[tuple[str, int], int]:
    r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, AddPartitionsToTxnRequest(
        version=version, v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics or [Topic(name=TOPIC, partitions=[0])]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(c: WireClient, txn: str, pid: int, epoch: int, version: int = 3) -> int:
    return int(c.request(ApiKey.ADD_OFFSETS_TO_TXN, version, AddOffsetsToTxnRequest(
        version=version, transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=GROUP)).error_code)


def end(c: WireClient, txn: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(c.request(ApiKey.END_TXN, version, EndTxnRequest(
        version=version, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code)


def describe(c: WireClient, ids: list[str]) -> Any:
    return c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
        version=0, transactional_ids=ids)).transaction_states


def list_transactions(c: WireClient, states: list[str] | None = None, pids: list[int] | None = None,
                      duration: int = -1) -> Any:
    return c.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest(
        version=1, state_filters=states or [], producer_id_filters=pids or [], duration_filter=duration))


def txn_commit(c: WireClient, p: Producer, *, generation: int, member_id: str, offset: int = 7,
               version: int = 3) -> int:
    r = c.request(ApiKey.TXN_OFFSET_COMMIT, version, TxnOffsetCommitRequest(
        version=version, transactional_id=p.transactional_id, group_id=GROUP, producer_id=p.producer_id,
        producer_epoch=p.producer_epoch, generation_id=generation, member_id=member_id, group_instance_id=None,
        topics=[CommitTopic(name=TOPIC, partitions=[CommitTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]))
    return int(r.topics[0].partitions[0].error_code)


def produce(c: WireClient, batch: bytes, transactional_id: str | None, partition: int = 0) -> int:
    P = ProduceRequest.TopicProduceData
    r = c.request(ApiKey.PRODUCE, 9, ProduceRequest(
        version=9, transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
            P(name=TOPIC, partition_data=[P.PartitionProduceData(index=partition, records=batch)])]))
    return int(r.responses[0].partition_responses[0].error_code)


def txn_batch(p: Producer, seq: int = 0, epoch: int | None = None) -> bytes:
    return build_batch([(None, b"v")], timestamp_ms=int(time.time() * 1000), producer_id=p.producer_id,
                       producer_epoch=p.producer_epoch if epoch is None else epoch, base_sequence=seq,
                       transactional=True)


# --- the node and its state -------------------------------------------------------------------


def new_producer(c: WireClient, txn: str, timeout_ms: int = MAX_TIMEOUT_MS) -> Producer:
    r = retry(lambda: init(c, txn, timeout_ms=timeout_ms))
    assert r.error_code == E.NONE, r
    return Producer(txn, r.producer_id, r.producer_epoch)


def join_group(c: WireClient) -> tuple[str, int]:
    def join(member_id: str) -> Any:
        return c.request(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
            version=5, group_id=GROUP, session_timeout_ms=45_000, rebalance_timeout_ms=10_000, member_id=member_id,
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))

    first = retry(lambda: join(""))
    assert first.error_code == E.MEMBER_ID_REQUIRED, first
    joined = join(first.member_id)
    assert joined.error_code == E.NONE, joined
    synced = c.request(ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
        version=3, group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id=None, assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=joined.member_id, assignment=b"")]))
    assert synced.error_code == E.NONE, synced
    return joined.member_id, joined.generation_id


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    node = Node(tmp_path_factory.mktemp("txn-bad-input"))
    try:
        node.call(_create_topic(node))
        with node.client() as c:
            c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                version=4, key_type=1, coordinator_keys=["ongoing"]))
            c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                version=4, key_type=0, coordinator_keys=[GROUP]))
            member_id, generation = join_group(c)

            ongoing = new_producer(c, "ongoing")
            assert add(c, "ongoing", ongoing.producer_id, ongoing.producer_epoch) == {(TOPIC, 0): E.NONE}
            assert produce(c, txn_batch(ongoing), "ongoing") == E.NONE
            assert add_offsets(c, "ongoing", ongoing.producer_id, ongoing.producer_epoch) == E.NONE
            assert retry(lambda: _Code(txn_commit(c, ongoing, generation=generation, member_id=member_id))
                         ).error_code == E.NONE

            empty = new_producer(c, "empty")

            committed = new_producer(c, "committed")
            assert add(c, "committed", committed.producer_id, committed.producer_epoch,
                       [Topic(name=TOPIC, partitions=[1])]) == {(TOPIC, 1): E.NONE}
            assert end(c, "committed", committed.producer_id, committed.producer_epoch, True) == E.NONE
            _wait_state(c, "committed", "CompleteCommit")

            prepared = new_producer(c, "prepared")
            node.markers.held.add(prepared.producer_id)
            assert add(c, "prepared", prepared.producer_id, prepared.producer_epoch,
                       [Topic(name=TOPIC, partitions=[1])]) == {(TOPIC, 1): E.NONE}
            assert end(c, "prepared", prepared.producer_id, prepared.producer_epoch, True) == E.NONE
            _wait_state(c, "prepared", "PrepareCommit")
        yield Setup(node, ongoing, empty, prepared, committed, member_id, generation)
    finally:
        node.close()


class _Code:
    def __init__(self, error_code: int) -> None:
        self.error_code = error_code


async def _create_topic(node: Node) -> None:
    node.app.topics.create(TOPIC, 2, {})
    await node.app.logs.wait_opened(TOPIC)


def _wait_state(c: WireClient, txn: str, state: str) -> None:
    deadline = time.monotonic() + 10
    while (found := describe(c, [txn])[0].transaction_state) != state:
        assert time.monotonic() < deadline, found
        time.sleep(0.02)


IDS = ["ongoing", "empty", "prepared", "committed", "never-seen"]


def view(setup: Setup, c: WireClient) -> tuple[object, ...]:
    """Everything a bad call could change: each id as DescribeTransactions shows it, the list of
    transactions, the group's offsets as a stable read shows them, and the end offset of every
    partition the node hosts (the transaction log's first)."""
    described = [(d.error_code, d.transactional_id, d.transaction_state, d.transaction_timeout_ms,
                  d.transaction_start_time_ms, d.producer_id, d.producer_epoch,
                  sorted((t.topic, tuple(t.partitions)) for t in d.topics)) for d in describe(c, IDS)]
    listed = list_transactions(c)
    offsets = c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
        version=7, group_id=GROUP, require_stable=True,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]))
    node = setup.node
    ends = [node.end_offset(STATE, 0), node.end_offset(OFFSETS, 0), node.end_offset(TOPIC, 0),
            node.end_offset(TOPIC, 1)]
    return (described, listed.error_code, sorted((t.transactional_id, t.producer_id, t.transaction_state)
                                                 for t in listed.transaction_states),
            [(p.partition_index, p.committed_offset, p.error_code) for t in offsets.topics for p in t.partitions],
            ends)


@pytest.fixture
def client(setup: Setup) -> Iterator[WireClient]:
    with setup.node.client() as c:
        before = view(setup, c)
        states = [d[2] for d in before[0]]  # type: ignore[attr-defined]
        assert states == ["Ongoing", "Empty", "PrepareCommit", "CompleteCommit", ""], before
        yield c
    assert setup.node.alive()
    with setup.node.client() as c:  # a fresh connection: the node still serves
        assert view(setup, c) == before


# --- the cases --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_txn_without_a_transaction(setup: Setup, client: WireClient, version: int) -> None:
    p = setup.empty
    # Empty: nothing to end, commit or abort (``endTransaction``'s state table, TV0/TV1).
    assert end(client, p.transactional_id, p.producer_id, p.producer_epoch, True, version) == E.INVALID_TXN_STATE
    assert end(client, p.transactional_id, p.producer_id, p.producer_epoch, False, version) == E.INVALID_TXN_STATE
    # CompleteCommit: a commit is a retry (NONE, nothing written), an abort is out of order.
    q = setup.committed
    assert end(client, q.transactional_id, q.producer_id, q.producer_epoch, False, version) == E.INVALID_TXN_STATE
    assert end(client, q.transactional_id, q.producer_id, q.producer_epoch, True, version) == E.NONE


def test_calls_while_prepare_commit_waits_for_its_markers(setup: Setup, client: WireClient) -> None:
    p = setup.prepared
    txn, pid, epoch = p.transactional_id, p.producer_id, p.producer_epoch
    assert add(client, txn, pid, epoch, [Topic(name=TOPIC, partitions=[0])]) == {(TOPIC, 0): E.CONCURRENT_TRANSACTIONS}
    assert add(client, txn, pid, epoch, [Topic(name=TOPIC, partitions=[1])]) == {(TOPIC, 1): E.CONCURRENT_TRANSACTIONS}
    assert add_offsets(client, txn, pid, epoch) == E.CONCURRENT_TRANSACTIONS
    assert end(client, txn, pid, epoch, True) == E.CONCURRENT_TRANSACTIONS  # the commit again: not yet done
    assert end(client, txn, pid, epoch, False) == E.INVALID_TXN_STATE  # abort after commit
    assert init(client, txn, pid=pid, epoch=epoch).error_code == E.CONCURRENT_TRANSACTIONS
    assert init(client, txn).error_code == E.CONCURRENT_TRANSACTIONS
    # A produce of the decided transaction: its verification (KIP-890) says CONCURRENT_TRANSACTIONS,
    # which Produce answers as a retriable NOT_ENOUGH_REPLICAS (KAFKA-15459).
    assert produce(client, txn_batch(p), txn, partition=0) == E.NOT_ENOUGH_REPLICAS


@pytest.mark.parametrize(("version", "code"), [(0, E.INVALID_PRODUCER_EPOCH), (1, E.INVALID_PRODUCER_EPOCH),
                                               (2, E.PRODUCER_FENCED), (3, E.PRODUCER_FENCED)])
def test_stale_epochs(setup: Setup, client: WireClient, version: int, code: int) -> None:
    """PRODUCER_FENCED (KIP-588) to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2+,
    INVALID_PRODUCER_EPOCH before."""
    for p in (setup.ongoing, setup.empty, setup.committed, setup.prepared):
        txn, pid = p.transactional_id, p.producer_id
        for epoch in (p.producer_epoch - 1, p.producer_epoch + 1, -1, 32767):
            assert add(client, txn, pid, epoch, version=version) == {(TOPIC, 0): code}, (p, epoch)
            assert add_offsets(client, txn, pid, epoch, version) == code, (p, epoch)
            assert end(client, txn, pid, epoch, True, version) == code, (p, epoch)
            assert end(client, txn, pid, epoch, False, version) == code, (p, epoch)


@pytest.mark.parametrize(("version", "code"), [(3, E.INVALID_PRODUCER_EPOCH), (4, E.PRODUCER_FENCED),
                                               (5, E.PRODUCER_FENCED)])
def test_init_producer_id_with_a_stale_epoch(setup: Setup, client: WireClient, version: int, code: int) -> None:
    """v3+ name the producer: an epoch that is neither the current one nor a retry's is fenced
    (``prepareIncrementProducerEpoch``) in Empty and Complete*; in Ongoing the producer id alone is
    checked, since any call with it fences the transaction."""
    for p in (setup.empty, setup.committed):
        # (-1 with a producer id is the half-given pair: INVALID_REQUEST, in the next test.)
        for epoch in (p.producer_epoch + 1, p.producer_epoch + 2, 500):
            r = init(client, p.transactional_id, version=version, pid=p.producer_id, epoch=epoch)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (code, -1, -1), (p, epoch, r)


def test_a_producer_id_from_another_transactional_id(setup: Setup, client: WireClient) -> None:
    other = setup.empty
    for p in (setup.ongoing, setup.committed, setup.prepared):
        txn = p.transactional_id
        for version in (0, 3):
            assert add(client, txn, other.producer_id, other.producer_epoch, version=version) == {
                (TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING}
            assert add_offsets(client, txn, other.producer_id, other.producer_epoch, version) == \
                E.INVALID_PRODUCER_ID_MAPPING
            assert end(client, txn, other.producer_id, other.producer_epoch, True, version) == \
                E.INVALID_PRODUCER_ID_MAPPING
        # InitProducerId naming another id's producer: fenced (KIP-360's ``isValidProducerId``).
        assert init(client, txn, pid=other.producer_id, epoch=other.producer_epoch).error_code == E.PRODUCER_FENCED
        assert init(client, txn, version=3, pid=other.producer_id,
                    epoch=other.producer_epoch).error_code == E.INVALID_PRODUCER_EPOCH
    # An id the coordinator never saw has no producer at all.
    assert add(client, "never-seen", other.producer_id, 0) == {(TOPIC, 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert add_offsets(client, "never-seen", other.producer_id, 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert end(client, "never-seen", other.producer_id, 0, False) == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("timeout_ms", [MAX_TIMEOUT_MS + 1, 2**31 - 1, 0, -1, -(2**31)])
@pytest.mark.parametrize("version", [0, 4])
def test_a_timeout_outside_the_limit(setup: Setup, client: WireClient, timeout_ms: int, version: int) -> None:
    for txn in ("never-seen", "empty", "ongoing", "prepared"):
        r = init(client, txn, version=version, timeout_ms=timeout_ms)
        assert (r.error_code, r.producer_id) == (E.INVALID_TRANSACTION_TIMEOUT, -1), (txn, r)


def test_an_empty_transactional_id(setup: Setup, client: WireClient) -> None:
    assert init(client, "").error_code == E.INVALID_REQUEST
    assert init(client, "", version=0).error_code == E.INVALID_REQUEST
    assert add(client, "", setup.empty.producer_id, 0) == {(TOPIC, 0): E.INVALID_REQUEST}
    assert add_offsets(client, "", setup.empty.producer_id, 0) == E.INVALID_REQUEST
    assert end(client, "", setup.empty.producer_id, 0, True) == E.INVALID_REQUEST
    (d,) = describe(client, [""])
    assert (d.error_code, d.transaction_state) == (E.INVALID_REQUEST, ""), d
    # Only one of the v3+ pair given.
    assert init(client, "empty", pid=setup.empty.producer_id).error_code == E.INVALID_REQUEST
    assert init(client, "empty", epoch=setup.empty.producer_epoch).error_code == E.INVALID_REQUEST


def test_txn_offset_commit_with_a_stale_generation_or_member(setup: Setup, client: WireClient) -> None:
    p = setup.ongoing
    for version in (3, 4):
        for generation in (setup.generation - 1, setup.generation + 1, 1000):
            assert txn_commit(client, p, generation=generation, member_id=setup.member_id, version=version,
                              offset=99) == E.ILLEGAL_GENERATION
        assert txn_commit(client, p, generation=setup.generation, member_id="someone-else", version=version,
                          offset=99) == E.UNKNOWN_MEMBER_ID
    # A zombie's commit: an older epoch of the producer than its pending one.
    zombie = Producer(p.transactional_id, p.producer_id, p.producer_epoch - 1)
    assert txn_commit(client, zombie, generation=setup.generation, member_id=setup.member_id,
                      offset=99) == E.INVALID_PRODUCER_EPOCH


def test_control_batches_from_a_client(setup: Setup, client: WireClient) -> None:
    """Only the coordinator writes markers (``LogValidator``: a client's control batch is
    INVALID_RECORD), whether the producer has a transaction open there or not."""
    for p in (setup.ongoing, setup.empty):
        for commit in (True, False):
            key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
            control = encode_batch([Record(0, 0, key, b"\x00\x00\x00\x00\x00\x05")], base_timestamp=1,
                                   producer_id=p.producer_id, producer_epoch=p.producer_epoch, transactional=True,
                                   control=True)
            for partition in (0, 1):
                assert produce(client, control, p.transactional_id, partition) == E.INVALID_RECORD
                assert produce(client, control, None, partition) in (E.INVALID_RECORD,
                                                                     E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def test_transactional_batches_without_a_transactional_id(setup: Setup, client: WireClient) -> None:
    for p in (setup.ongoing, setup.empty):
        assert produce(client, txn_batch(p, seq=1), None) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactional_produce_out_of_order(setup: Setup, client: WireClient) -> None:
    # A partition never added to the transaction: its verification says TRANSACTION_ABORTABLE,
    # INVALID_TXN_STATE for Produce < 11 (``AddPartitionsToTxnManager``).
    assert produce(client, txn_batch(setup.ongoing), "ongoing", partition=1) == E.INVALID_TXN_STATE
    # No transaction at all (Empty).
    assert produce(client, txn_batch(setup.empty), "empty", partition=0) == E.INVALID_TXN_STATE
    # A stale epoch of a producer with a transaction open here.
    assert produce(client, txn_batch(setup.ongoing, seq=1, epoch=setup.ongoing.producer_epoch - 1),
                   "ongoing") == E.INVALID_PRODUCER_EPOCH
    # Data under another transactional id than the producer's: the verification's own answer,
    # passed on as ``AddPartitionsToTxnManager`` does.
    assert produce(client, txn_batch(setup.empty), "ongoing", partition=1) == E.INVALID_PRODUCER_ID_MAPPING


def test_write_txn_markers_for_unknown_partitions(setup: Setup, client: WireClient) -> None:
    M = WriteTxnMarkersRequest.WritableTxnMarker
    p = setup.ongoing
    for version in (0, 1):
        req = WriteTxnMarkersRequest(version=version, markers=[M(
            producer_id=p.producer_id, producer_epoch=p.producer_epoch, transaction_result=commit, coordinator_epoch=1,
            topics=[M.WritableTxnMarkerTopic(name="nowhere", partition_indexes=[0, 1]),
                    M.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[2, 99, -1])]) for commit in (True, False)])
        answers = client.request(ApiKey.WRITE_TXN_MARKERS, version, req).markers
        assert len(answers) == 2
        for answer in answers:
            assert answer.producer_id == p.producer_id
            assert sorted((t.name, q.partition_index, q.error_code) for t in answer.topics for q in t.partitions) == [
                ("nowhere", 0, E.UNKNOWN_TOPIC_OR_PARTITION), ("nowhere", 1, E.UNKNOWN_TOPIC_OR_PARTITION),
                (TOPIC, -1, E.UNKNOWN_TOPIC_OR_PARTITION), (TOPIC, 2, E.UNKNOWN_TOPIC_OR_PARTITION),
                (TOPIC, 99, E.UNKNOWN_TOPIC_OR_PARTITION)]


def test_describe_and_list_with_unknown_ids_and_filters(setup: Setup, client: WireClient) -> None:
    ids = [f"nope-{i}" for i in range(10_000)] + ["ongoing"]
    states = describe(client, ids)
    assert [d.transactional_id for d in states] == ids
    assert {d.error_code for d in states[:-1]} == {E.TRANSACTIONAL_ID_NOT_FOUND}
    assert (states[-1].error_code, states[-1].transaction_state) == (E.NONE, "Ongoing")
    r = list_transactions(client, states=["Bogus", "ongoing", "", "Dead"])
    assert (r.error_code, sorted(r.unknown_state_filters), r.transaction_states) == (E.NONE, ["", "Bogus", "ongoing"],
                                                                                     [])
    r = list_transactions(client, pids=[-1, 10**9, 2**63 - 1])
    assert (r.error_code, r.transaction_states) == (E.NONE, [])
    r = list_transactions(client, duration=2**62)
    assert (r.error_code, r.transaction_states) == (E.NONE, [])
    r = list_transactions(client, states=["Ongoing"], pids=[setup.empty.producer_id])
    assert (r.error_code, r.transaction_states) == (E.NONE, [])


def test_huge_partition_lists(setup: Setup, client: WireClient) -> None:
    p = setup.ongoing
    started = time.monotonic()
    # 200,000 partitions of a topic that does not exist and one that does: none is added.
    topics = [Topic(name="nowhere", partitions=list(range(100_000))), Topic(name=TOPIC, partitions=[0]),
              Topic(name="nowhere-either", partitions=list(range(100_000)))]
    results = add(client, p.transactional_id, p.producer_id, p.producer_epoch, topics)
    assert len(results) == 200_001
    assert results.pop((TOPIC, 0)) == E.OPERATION_NOT_ATTEMPTED
    assert set(results.values()) == {E.UNKNOWN_TOPIC_OR_PARTITION}
    # Partition ids beyond the topic's, and negative ones.
    results = add(client, p.transactional_id, p.producer_id, p.producer_epoch,
                  [Topic(name=TOPIC, partitions=[0, *range(2, 100_000), -1])])
    assert results.pop((TOPIC, 0)) == E.OPERATION_NOT_ATTEMPTED
    assert len(results) == 99_999 and set(results.values()) == {E.UNKNOWN_TOPIC_OR_PARTITION}
    # The one partition already in the transaction, 100,000 times: nothing new, nothing written.
    assert add(client, p.transactional_id, p.producer_id, p.producer_epoch,
               [Topic(name=TOPIC, partitions=[0] * 100_000)]) == {(TOPIC, 0): E.NONE}
    assert time.monotonic() - started < 30
