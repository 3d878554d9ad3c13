"""The transaction APIs over real sockets against an in-process node (its marker writer a
stand-in recording the markers: the data partitions' side is another part's), and across a
restart: the coordinator epoch goes up, and a transaction left in PrepareCommit is finished."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from coordinator.app import App
from coordinator.config import load_config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode as E
from protocol.hashing import partition_for
from tests.conftest import free_port
from tests.wire_client import WireClient

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction


class RecordingWriter:
    """A ``MarkerWriter`` answering ``answer`` for every partition, recording each call."""

    def __init__(self, answer: int = E.NONE) -> None:
        self.calls: list[tuple[int, int, bool, int, list[tuple[str, int]]]] = []
        self.answer = answer

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        self.calls.append((producer_id, producer_epoch, commit, coordinator_epoch, list(partitions)))
        return {tp: self.answer for tp in partitions}


async def with_node(data_dir: Path, writer: RecordingWriter | None, work: Callable[[App, int], Any],
                    settings: tuple[str, ...] = ()) -> Any:
    """Run a node in this loop, ``work(app, port)`` in a thread (blocking clients), then stop it.
    ``writer`` None: the node's own marker writer (its hosted partitions)."""
    port = free_port()
    app = App(load_config(data_dir=str(data_dir), listen=f"127.0.0.1:{port}",
                          overrides=["transaction.state.log.num.partitions=4", *settings]))
    if writer is not None:
        app.transactions.marker_writer = writer
    app.transactions.marker_retry_backoff_ms = 20
    running = asyncio.ensure_future(app.run())
    try:
        # Bound once a connection is accepted (it waits in the backlog until the node serves);
        # app.server is set a step before its listeners bind, so it does not say that.
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                if asyncio.get_running_loop().time() > deadline or running.done():
                    raise
                await asyncio.sleep(0.01)
                continue
            writer.close()
            break
        if "orders" not in app.registry:
            app.topics.create("orders", 2, {})
        return await asyncio.to_thread(work, app, port)
    finally:
        app._stop.set()
        assert await asyncio.wait_for(running, 20) == 0


def retry(call: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 10.0) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        answer = call()
        if ok(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def init(c: WireClient, txn: str, version: int = 4, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1) -> Any:
    return retry(lambda: c.request(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
        version=version, transactional_id=txn, transaction_timeout_ms=timeout_ms, producer_id=pid,
        producer_epoch=epoch)), lambda r: r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS,
                                                              E.CONCURRENT_TRANSACTIONS))


def add_v0(c: WireClient, txn: str, pid: int, epoch: int, version: int = 0,
           topics: list[Any] | None = None) -> dict[tuple[str, int], int]:
    r = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, AddPartitionsToTxnRequest(
        version=version, v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics or [Topic(name="orders", partitions=[0, 1])]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(c: WireClient, txn: str, pid: int, epoch: int, commit: bool, version: int = 0) -> int:
    return int(c.request(ApiKey.END_TXN, version, EndTxnRequest(
        version=version, transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code)


def describe(c: WireClient, txn: str) -> Any:
    (state,) = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
        version=0, transactional_ids=[txn])).transaction_states
    return state


@pytest.mark.asyncio
async def test_a_transaction_over_the_wire(tmp_path: Path) -> None:
    writer = RecordingWriter()

    def work(app: App, port: int) -> None:
        with WireClient("127.0.0.1", port) as c:
            found = c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                version=4, key_type=1, coordinator_keys=["txn-1"])).coordinators[0]
            assert (found.error_code, found.node_id, found.port) == (E.NONE, 1, port)
            c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key_type=0, key="g"))
            # Bad requests first.
            assert init(c, "txn-1", timeout_ms=900_001).error_code == E.INVALID_TRANSACTION_TIMEOUT
            assert init(c, "txn-1", timeout_ms=0).error_code == E.INVALID_TRANSACTION_TIMEOUT
            assert init(c, "").error_code == E.INVALID_REQUEST
            assert init(c, "txn-1", pid=5).error_code == E.INVALID_REQUEST  # one of the pair only
            r = init(c, "txn-1", version=0)
            assert r.error_code == E.NONE and r.producer_epoch == 0
            pid = r.producer_id
            r = init(c, "txn-1", pid=pid, epoch=0)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, 1)
            # Another producer id (KIP-360): PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before.
            assert init(c, "txn-1", version=4, pid=pid + 100, epoch=0).error_code == E.PRODUCER_FENCED
            assert init(c, "txn-1", version=3, pid=pid + 100, epoch=0).error_code == E.INVALID_PRODUCER_EPOCH
            # Without a transactional id: the idempotent path, from the same id space.
            idem = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                version=4, transactional_id=None, transaction_timeout_ms=1, producer_id=-1, producer_epoch=-1))
            assert idem.error_code == E.NONE and idem.producer_id not in (pid, -1)

            unknown = add_v0(c, "txn-1", pid, 1, topics=[Topic(name="orders", partitions=[0]),
                                                         Topic(name="nope", partitions=[0])])
            assert unknown == {("orders", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
            assert add_v0(c, "txn-1", pid, 1, version=3) == {("orders", 0): E.NONE, ("orders", 1): E.NONE}
            assert add_v0(c, "txn-1", pid, 0) == {("orders", 0): E.INVALID_PRODUCER_EPOCH, ("orders", 1): 47}
            assert add_v0(c, "txn-1", pid, 0, version=2) == {("orders", 0): E.PRODUCER_FENCED,
                                                             ("orders", 1): E.PRODUCER_FENCED}
            offsets = c.request(ApiKey.ADD_OFFSETS_TO_TXN, 0, AddOffsetsToTxnRequest(
                version=0, transactional_id="txn-1", producer_id=pid, producer_epoch=1, group_id="g"))
            assert offsets.error_code == E.NONE
            # The brokers' VerifyOnly call (v4).
            v4 = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, AddPartitionsToTxnRequest(version=4, transactions=[
                Txn(transactional_id="txn-1", producer_id=pid, producer_epoch=1, verify_only=True,
                    topics=[Topic(name="orders", partitions=[1, 2])])]))
            (result,) = v4.results_by_transaction
            assert v4.error_code == 0 and {(t.name, p.partition_index): p.partition_error_code
                                           for t in result.topic_results for p in t.results_by_partition} == {
                ("orders", 1): E.NONE, ("orders", 2): E.TRANSACTION_ABORTABLE}
            assert asyncio.run_coroutine_threadsafe(
                app.transactions.verify("txn-1", pid, 1, [("orders", 0)]), loop).result() == {("orders", 0): 0}

            state = describe(c, "txn-1")
            group_partition = partition_for("g", 50)
            assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Ongoing", 1)
            assert {(t.topic, tuple(t.partitions)) for t in state.topics} == {
                ("orders", (0, 1)), ("__consumer_offsets", (group_partition,))}
            assert describe(c, "other").error_code == E.TRANSACTIONAL_ID_NOT_FOUND

            listed = c.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest(
                version=1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[], duration_filter=-1))
            assert listed.error_code == 0 and listed.unknown_state_filters == ["Bogus"]
            assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
                ("txn-1", pid, "Ongoing")]

            assert end(c, "txn-1", pid, 0, True, version=1) == E.INVALID_PRODUCER_EPOCH
            assert end(c, "txn-1", pid, 1, True) == E.NONE
            done = retry(lambda: describe(c, "txn-1"), lambda s: s.transaction_state == "CompleteCommit")
            assert done.transaction_state == "CompleteCommit" and done.topics == []
            assert end(c, "txn-1", pid, 1, True) == E.NONE  # a retry
            assert end(c, "txn-1", pid, 1, False) == E.INVALID_TXN_STATE

    loop = asyncio.get_running_loop()
    await with_node(tmp_path, writer, work)
    (call,) = writer.calls
    pid, epoch, commit, coordinator_epoch, partitions = call
    assert (epoch, commit, coordinator_epoch) == (1, True, 0)
    assert partitions == sorted([("orders", 0), ("orders", 1), ("__consumer_offsets", partition_for("g", 50))])


@pytest.mark.asyncio
async def test_restart_raises_the_coordinator_epoch_and_finishes_a_prepared_commit(tmp_path: Path) -> None:
    stuck = RecordingWriter(E.NOT_LEADER_OR_FOLLOWER)  # markers never land: stays PrepareCommit
    ids: dict[str, int] = {}

    def first(app: App, port: int) -> None:
        with WireClient("127.0.0.1", port) as c:
            r = init(c, "t")
            ids["pid"] = r.producer_id
            assert add_v0(c, "t", r.producer_id, 0, topics=[Topic(name="orders", partitions=[1])]) == {
                ("orders", 1): E.NONE}
            assert end(c, "t", r.producer_id, 0, True) == E.NONE
            retry(lambda: len(stuck.calls), lambda n: n >= 2)
            assert describe(c, "t").transaction_state == "PrepareCommit"
            again = c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                version=4, transactional_id="t", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
            assert again.error_code == E.CONCURRENT_TRANSACTIONS

    await with_node(tmp_path, stuck, first)
    assert {call[3] for call in stuck.calls} == {0}

    working = RecordingWriter()

    def second(app: App, port: int) -> None:
        with WireClient("127.0.0.1", port) as c:
            done = retry(lambda: describe(c, "t"), lambda s: s.transaction_state == "CompleteCommit")
            assert done.transaction_state == "CompleteCommit"
            r = init(c, "t")
            assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, ids["pid"], 1)

    await with_node(tmp_path, working, second)
    assert working.calls[0] == (ids["pid"], 0, True, 1, [("orders", 1)])


@pytest.mark.asyncio
async def test_kafka_python_transactional_producer_initialises_and_fences(tmp_path: Path) -> None:
    """kafka-python's own transaction manager: FindCoordinator(1) and InitProducerId; a second
    producer with the same id bumps the epoch (what fences the first). Sending needs the data
    partitions' side of transactions, tested where that lives."""
    from kafka import KafkaProducer

    def work(app: App, port: int) -> None:
        first = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", transactional_id="kp", max_block_ms=15_000)
        try:
            first.init_transactions()
            with WireClient("127.0.0.1", port) as c:
                state = describe(c, "kp")
                assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 0)
                pid = state.producer_id
                first.begin_transaction()
                first.commit_transaction()  # nothing added: no EndTxn, nothing written
                assert describe(c, "kp").transaction_state == "Empty"
                second = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", transactional_id="kp",
                                       max_block_ms=15_000)
                try:
                    second.init_transactions()
                    state = describe(c, "kp")
                    assert (state.producer_id, state.producer_epoch) == (pid, 1)
                finally:
                    second.close(timeout=5)
        finally:
            first.close(timeout=5)

    await with_node(tmp_path, RecordingWriter(), work)


@pytest.mark.asyncio
async def test_kafka_python_commits_and_aborts_end_to_end(tmp_path: Path) -> None:
    """The node's own markers (TxnMarkerApis): a committed transaction's record is read under
    read_committed, an aborted one's only under read_uncommitted, and the coordinator completes both."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    def read(port: int, isolation: str) -> list[bytes]:
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", isolation_level=isolation,
                                 enable_auto_commit=False, consumer_timeout_ms=1500)
        try:
            consumer.assign([TopicPartition("orders", 0)])
            consumer.seek_to_beginning()
            return [m.value for m in consumer]
        finally:
            consumer.close()

    def work(app: App, port: int) -> None:
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", transactional_id="e2e", max_block_ms=15_000)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("orders", b"kept", partition=0)
            producer.commit_transaction()
            producer.begin_transaction()
            producer.send("orders", b"dropped", partition=0)
            producer.flush()
            producer.abort_transaction()
        finally:
            producer.close(timeout=5)
        with WireClient("127.0.0.1", port) as c:
            done = retry(lambda: describe(c, "e2e"), lambda s: s.transaction_state == "CompleteAbort")
            assert (done.transaction_state, done.producer_epoch) == ("CompleteAbort", 0)
        assert read(port, "read_committed") == [b"kept"]
        assert read(port, "read_uncommitted") == [b"kept", b"dropped"]

    await with_node(tmp_path, None, work)


@pytest.mark.asyncio
async def test_a_zombie_is_fenced_and_a_stalled_transaction_times_out(tmp_path: Path) -> None:
    """Two producers with one transactional id: the second's init aborts the first's open
    transaction and fences it. A producer that stalls past its timeout is aborted by the
    coordinator under a bumped epoch and fenced too (reference §2.5)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    def producer(port: int, txn: str, timeout_ms: int = 60_000) -> KafkaProducer:
        p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", transactional_id=txn, max_block_ms=15_000,
                          transaction_timeout_ms=timeout_ms)
        p.init_transactions()
        return p

    def work(app: App, port: int) -> None:
        with WireClient("127.0.0.1", port) as c:
            zombie = producer(port, "z")
            zombie.begin_transaction()
            zombie.send("orders", b"zombie", partition=0)
            zombie.flush()
            successor = producer(port, "z")  # aborts the zombie's transaction first
            assert describe(c, "z").producer_epoch == 2  # fence (+1), then the successor's own (+1)
            with pytest.raises(KafkaError) as fenced:
                zombie.commit_transaction()
            assert "Fenced" in repr(fenced.value) or "Epoch" in repr(fenced.value), repr(fenced.value)
            zombie.close(timeout=5)
            successor.close(timeout=5)

            stalled = producer(port, "slow", timeout_ms=500)
            stalled.begin_transaction()
            stalled.send("orders", b"late", partition=1)
            stalled.flush()
            done = retry(lambda: describe(c, "slow"), lambda s: s.transaction_state == "CompleteAbort")
            assert (done.transaction_state, done.producer_epoch) == ("CompleteAbort", 1)
            with pytest.raises(KafkaError) as timed_out:
                stalled.commit_transaction()
            assert "Fenced" in repr(timed_out.value) or "Epoch" in repr(timed_out.value), repr(timed_out.value)
            stalled.close(timeout=5)

    await with_node(tmp_path, None, work,
                    settings=("transaction.abort.timed.out.transaction.cleanup.interval.ms=200",))


@pytest.mark.asyncio
async def test_consume_transform_produce_commits_offsets_in_the_transaction(tmp_path: Path) -> None:
    """The exactly-once loop with kafka-python: AddOffsetsToTxn, TxnOffsetCommit (the group
    coordinator's) and the marker on the group's __consumer_offsets partition: the offsets of a
    committed transaction become the group's, those of an aborted one never do."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    source = TopicPartition("orders", 0)

    def work(app: App, port: int) -> None:
        boot = f"127.0.0.1:{port}"
        plain = KafkaProducer(bootstrap_servers=boot)
        for i in range(3):
            plain.send("orders", f"in-{i}".encode(), partition=0)
        plain.flush()
        plain.close(timeout=5)
        consumer = KafkaConsumer(bootstrap_servers=boot, group_id="eos", enable_auto_commit=False,
                                 isolation_level="read_committed", consumer_timeout_ms=1500,
                                 auto_offset_reset="earliest")
        producer = KafkaProducer(bootstrap_servers=boot, transactional_id="eos-1", max_block_ms=15_000)
        try:
            consumer.assign([source])
            read = list(consumer)
            assert [m.value for m in read] == [b"in-0", b"in-1", b"in-2"]
            producer.init_transactions()
            producer.begin_transaction()
            for m in read:
                producer.send("orders", m.value.upper(), partition=1)
            producer.send_offsets_to_transaction({source: OffsetAndMetadata(3, "", -1)}, consumer.group_metadata())
            producer.commit_transaction()
            assert consumer.committed(source) == 3
            producer.begin_transaction()
            producer.send("orders", b"never", partition=1)
            producer.send_offsets_to_transaction({source: OffsetAndMetadata(2, "", -1)}, consumer.group_metadata())
            producer.abort_transaction()
            with WireClient("127.0.0.1", port) as c:
                retry(lambda: describe(c, "eos-1"), lambda s: s.transaction_state == "CompleteAbort")
            assert consumer.committed(source) == 3
        finally:
            producer.close(timeout=5)
            consumer.close()

    await with_node(tmp_path, None, work)


class SlowWriter(RecordingWriter):
    """Answers ``answer`` after ``delay_s``: markers that take a while to land (replicated writes)."""

    def __init__(self, delay_s: float, answer: int = E.NONE) -> None:
        super().__init__(answer)
        self.delay_s = delay_s

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        await asyncio.sleep(self.delay_s)
        return await super().write_markers(producer_id, producer_epoch, commit, coordinator_epoch, partitions)


@pytest.mark.asyncio
async def test_the_next_add_waits_for_the_previous_transactions_markers(tmp_path: Path) -> None:
    """An add arriving while the previous transaction's markers are being written is held until
    its Complete (bounded by ``concurrent_wait_ms``) instead of answered CONCURRENT_TRANSACTIONS
    at once: the client's backoff would cost more than the markers (service.CONCURRENT_WAIT_MS)."""
    import time

    one = [Topic(name="orders", partitions=[1])]

    def work(app: App, port: int) -> None:
        app.transactions.concurrent_wait_ms = 5_000  # far above the markers' 0.2 s: no timing race
        with WireClient("127.0.0.1", port) as c:
            r = init(c, "t")
            pid = r.producer_id
            assert add_v0(c, "t", pid, 0, topics=one) == {("orders", 1): E.NONE}
            assert end(c, "t", pid, 0, True) == E.NONE
            started = time.monotonic()
            assert add_v0(c, "t", pid, 0, topics=one) == {("orders", 1): E.NONE}
            assert time.monotonic() - started >= 0.15  # it did wait for the markers
            assert describe(c, "t").transaction_state == "Ongoing"
            # Markers that never land: the wait is bounded, then CONCURRENT_TRANSACTIONS as before.
            app.transactions.marker_writer = RecordingWriter(E.NOT_LEADER_OR_FOLLOWER)
            app.transactions.concurrent_wait_ms = 200
            assert end(c, "t", pid, 0, True) == E.NONE
            started = time.monotonic()
            assert add_v0(c, "t", pid, 0, topics=one) == {("orders", 1): E.CONCURRENT_TRANSACTIONS}
            assert time.monotonic() - started >= 0.15

    await with_node(tmp_path, SlowWriter(0.2), work)
