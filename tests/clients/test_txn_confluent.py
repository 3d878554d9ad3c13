"""Transactions with confluent-kafka (librdkafka 2.16): a consume-transform-produce copier
(txn_confluent_copier.py: ``init_transactions`` / ``send_offsets_to_transaction`` with the
consumer's group metadata) copies a seeded topic exactly once with every fourth transaction
aborted, and again when SIGKILLed at random points and restarted; zombie fencing — a
second producer with the same transactional id fences the first and aborts its open transaction;
an open transaction holds read_committed consumers at its first offset (the last stable offset,
also through ListOffsets) until the coordinator's transaction timeout aborts it; and offsets sent in
a transaction stay pending (invisible, or UNSTABLE_OFFSET_COMMIT with RequireStable) until its end."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator

import pytest

from tests.clients.background import Background
from tests.clients.records_io import create_topic
from tests.clients.tools import unique_topic
from tests.clients.txn_confluent_copier import copy
from tests.clients.txn_io import (
    TXN_SERVER,
    assert_exactly_once,
    by_partition,
    committed_offsets,
    end_offsets,
    read_topic,
    seed_input,
)
from tests.conftest import REPO, ServerProcess

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

#: Kafka's name and meaning (TransactionStateManagerConfig): how often the coordinator looks for
#: transactions past their timeout (default 10 s); 1 s keeps the timeout test short.
TIMEOUT_SERVER = {**TXN_SERVER, "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


@pytest.fixture(scope="module")
def txn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("txn-confluent") / "data", TIMEOUT_SERVER)
    s.start()
    yield s
    if s.alive():
        s.stop()


def test_confluent_copier_copies_exactly_once(txn_server) -> None:  # type: ignore[no-untyped-def]
    server = txn_server
    partitions, per_partition = 3, 150
    inp, out, group = unique_topic("ctxn-in"), unique_topic("ctxn-out"), unique_topic("ctxn-copier")
    inputs = seed_input(server.bootstrap, inp, partitions, per_partition)
    create_topic(server.bootstrap, out, partitions)
    total = partitions * per_partition
    aborted = copy(server.bootstrap, inp, out, group, unique_topic("ctxn-id"), batch=30, abort_every=4)
    assert aborted > 0
    ctx = "--- server log ---\n" + server.log_text()[-4000:]
    assert_exactly_once(inputs, read_topic(server.bootstrap, out, partitions, "read_committed", total), ctx)
    uncommitted = read_topic(server.bootstrap, out, partitions, "read_uncommitted", total + aborted)
    assert len(uncommitted) == total + aborted, ctx
    assert committed_offsets(server.bootstrap, group, inp, partitions) == [per_partition] * partitions, ctx


def test_confluent_copier_sigkilled_and_restarted(txn_server) -> None:  # type: ignore[no-untyped-def]
    """The confluent-kafka copier (assigned partitions, every 5th transaction aborted) run as a
    program, SIGKILLed three times at random points and restarted with the same transactional id:
    read_committed output = input, once each, in order."""
    server = txn_server
    rng = random.Random()
    partitions, per_partition = 3, 200
    inp, out, group = unique_topic("ctxn-kin"), unique_topic("ctxn-kout"), unique_topic("ctxn-kg")
    inputs = seed_input(server.bootstrap, inp, partitions, per_partition)
    create_topic(server.bootstrap, out, partitions)
    args = [sys.executable, "-m", "tests.clients.txn_confluent_copier", server.bootstrap, inp, out, group,
            unique_topic("ctxn-kid"), "20", "5", "assign"]
    history: list[str] = []
    for kill in range(3):
        copier = Background(args, env={"PYTHONPATH": str(REPO)})
        commits = rng.randint(1, 5)
        try:
            reached = copier.wait_for(lambda ls, n=commits: sum(x.startswith("C ") for x in ls) >= n, 60)
            assert reached, copier.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            copier.stop()  # SIGKILL
            copier.wait(10)
        history.append(f"incarnation {kill}: killed after {commits} commits:\n" + copier.stdout)
        assert "copier.done" not in copier.stdout, "finished before its kill: more input needed\n" + "\n".join(history)
    last = Background(args, env={"PYTHONPATH": str(REPO)})
    try:
        rc = last.wait(90)
    finally:
        last.stop()
    ctx = "\n".join(history) + "\n" + last.describe() + "\n--- server log ---\n" + server.log_text()[-4000:]
    assert rc == 0 and "copier.done" in last.stdout, ctx
    output = read_topic(server.bootstrap, out, partitions, "read_committed", partitions * per_partition)
    assert_exactly_once(inputs, output, ctx)
    assert committed_offsets(server.bootstrap, group, inp, partitions) == [per_partition] * partitions, ctx


def test_confluent_zombie_producer_is_fenced(txn_server) -> None:  # type: ignore[no-untyped-def]
    """Two producers with one transactional id: the second's init_transactions aborts the first's
    open transaction and fences it; the first's next commit fails with a fatal fencing error, and
    read_committed sees only what the second committed."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    server = txn_server
    topic, txn_id = unique_topic("ctxn-zombie"), unique_topic("ctxn-zid")
    create_topic(server.bootstrap, topic, 1)
    conf = {"bootstrap.servers": server.bootstrap, "transactional.id": txn_id, "linger.ms": 0}
    old = Producer(conf)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, value=b"old-1", partition=0)
    assert old.flush(15) == 0

    new = Producer(conf)
    new.init_transactions(30)
    new.begin_transaction()
    new.produce(topic, value=b"new-1", partition=0)
    new.commit_transaction(30)

    old.produce(topic, value=b"old-2", partition=0)
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(15)
    err = raised.value.args[0]
    fenced = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
    assert err.fatal() and err.code() in fenced, f"{err!r}\n--- server log ---\n{server.log_text()[-3000:]}"

    committed = by_partition(read_topic(server.bootstrap, topic, 1, "read_committed", 1)).get(0, [])
    assert committed == ["new-1"]
    uncommitted = by_partition(read_topic(server.bootstrap, topic, 1, "read_uncommitted", 2)).get(0, [])
    # The fenced producer's late record was refused, not just hidden.
    assert uncommitted == ["old-1", "new-1"]
    # The new producer goes on working.
    new.begin_transaction()
    new.produce(topic, value=b"new-2", partition=0)
    new.commit_transaction(30)
    assert by_partition(read_topic(server.bootstrap, topic, 1, "read_committed", 2))[0] == ["new-1", "new-2"]


def test_open_transaction_holds_read_committed_until_its_timeout(txn_server) -> None:  # type: ignore[no-untyped-def]
    """An open transaction on partition 0 (transaction.timeout.ms 5 s, then abandoned) with
    committed plain records after it: read_committed stops at its first offset (ListOffsets
    read_committed = LSO < high watermark) while partition 1 reads on; the coordinator aborts it
    after its timeout, which releases the reader (the plain records, not the transaction's), and
    the abandoned producer, whose epoch the abort bumped, can no longer commit."""
    from confluent_kafka import KafkaException, Producer

    server = txn_server
    topic, txn_id = unique_topic("ctxn-lso"), unique_topic("ctxn-lid")
    create_topic(server.bootstrap, topic, 2)
    hung = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                     "transaction.timeout.ms": 5000})
    hung.init_transactions(30)
    hung.begin_transaction()
    began = time.monotonic()
    for i in range(5):
        hung.produce(topic, value=f"open-{i}".encode(), partition=0)
    assert hung.flush(15) == 0
    plain = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    for i in range(5):
        plain.produce(topic, value=f"after-{i}".encode(), partition=0)
        plain.produce(topic, value=f"other-{i}".encode(), partition=1)
    assert plain.flush(15) == 0

    ctx = "--- server log ---\n" + server.log_text()[-3000:]
    assert end_offsets(server.bootstrap, topic, 2, "read_uncommitted") == [10, 5], ctx
    assert end_offsets(server.bootstrap, topic, 2, "read_committed") == [0, 5], ctx
    held = by_partition(read_topic(server.bootstrap, topic, 2, "read_committed", 5, timeout=3))
    assert held.get(0, []) == [] and held.get(1) == [f"other-{i}" for i in range(5)], ctx

    released = by_partition(read_topic(server.bootstrap, topic, 2, "read_committed", 10, timeout=30))
    waited = time.monotonic() - began
    ctx = f"released after {waited:.1f} s\n--- server log ---\n" + server.log_text()[-3000:]
    assert released.get(0) == [f"after-{i}" for i in range(5)], ctx
    # Kafka's bound: the timeout plus the cleanup interval, with room for a loaded machine.
    assert waited < 5 + 1 + 10, ctx
    # The abort marker closed the transaction: the LSO is the high watermark again.
    hw = end_offsets(server.bootstrap, topic, 2, "read_uncommitted")
    assert end_offsets(server.bootstrap, topic, 2, "read_committed") == hw and hw[0] == 11, ctx
    with pytest.raises(KafkaException):
        hung.commit_transaction(15)


def test_pending_transactional_offsets(txn_server) -> None:  # type: ignore[no-untyped-def]
    """Between TxnOffsetCommit and the marker the group's offset is pending (KIP-447): OffsetFetch
    without RequireStable (a read_uncommitted consumer) still answers the old offset, with
    RequireStable (read_committed) it is UNSTABLE_OFFSET_COMMIT, which librdkafka retries until its
    timeout; the commit makes the new offset visible, an abort leaves the old one."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

    server = txn_server
    topic, group = unique_topic("ctxn-pending"), unique_topic("ctxn-pg")
    create_topic(server.bootstrap, topic, 1)
    base = {"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False}
    committer = Consumer(base)
    committer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
    metadata = committer.consumer_group_metadata()
    committer.close()

    def committed(isolation: str, timeout: float) -> int:
        c = Consumer({**base, "isolation.level": isolation})
        try:
            return int(c.committed([TopicPartition(topic, 0)], timeout=timeout)[0].offset)
        finally:
            c.close()

    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": unique_topic("ctxn-pid")})
    p.init_transactions(30)
    for offset, commit in ((42, True), (50, False)):
        p.begin_transaction()
        p.produce(topic, value=b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], metadata, 30)
        assert p.flush(15) == 0
        before = 10 if offset == 42 else 42
        assert committed("read_uncommitted", 10) == before
        with pytest.raises(KafkaException) as raised:
            committed("read_committed", 2)
        assert raised.value.args[0].code() == KafkaError._TIMED_OUT, raised.value
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        assert committed("read_committed", 15) == (offset if commit else before)
