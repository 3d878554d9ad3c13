"""Transactions with aiokafka 0.14 and kafkajs 2.2.4, which send v0 (aiokafka) and v0-1 (kafkajs) of
every transaction API and TxnOffsetCommit without generation or member id: three transactions,
each producing to two partitions and committing a group offset (sendOffsets), the third aborted.
read_committed consumers (aiokafka, confluent-kafka) see the two committed ones only, in order;
read_uncommitted ones (kafka-python) see the aborted records too; the group's offset is the last
committed one, not the aborted one. And a kafkajs producer left with an open transaction is fenced
by a confluent-kafka producer taking over its transactional id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.clients.background import start_node
from tests.clients.records_io import create_topic
from tests.clients.tools import run_node, unique_topic
from tests.clients.txn_io import TXN_SERVER, by_partition, committed_offsets, read_topic
from tests.conftest import ServerProcess

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

PER_TXN = 6
P = 2


@pytest.fixture(scope="module")
def txn_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path_factory.mktemp("txn-aio-kjs") / "data", TXN_SERVER)
    s.start()
    yield s
    if s.alive():
        s.stop()


def expected(tag: str, partition: int) -> list[str]:
    return [f"{tag}-{i}" for i in range(PER_TXN) if i % P == partition]


def check_isolation(bootstrap: str, topic: str, ctx: str) -> None:
    """c1 and c2 committed, a3 aborted: read_committed (confluent-kafka and aiokafka) sees c1, c2;
    read_uncommitted (kafka-python) sees all three."""
    committed = by_partition(read_topic(bootstrap, topic, P, "read_committed", 2 * PER_TXN))
    for q in range(P):
        assert committed.get(q) == expected("c1", q) + expected("c2", q), f"partition {q}\n{ctx}"
    aio = asyncio.run(aiokafka_read(bootstrap, topic, 2 * PER_TXN))
    for q in range(P):
        assert aio.get(q) == expected("c1", q) + expected("c2", q), f"aiokafka, partition {q}\n{ctx}"
    from tests.clients.py_clients import kafka_python_consume

    everything: dict[int, list[str]] = {}
    for g in kafka_python_consume(bootstrap, topic, P, 3 * PER_TXN):
        assert g.value is not None
        everything.setdefault(g.partition, []).append(g.value.decode())
    for q in range(P):
        assert everything.get(q) == expected("c1", q) + expected("c2", q) + expected("a3", q), \
            f"read_uncommitted, partition {q}\n{ctx}"


async def aiokafka_read(bootstrap: str, topic: str, total: int) -> dict[int, list[str]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", isolation_level="read_committed")
    await c.start()
    out: dict[int, list[str]] = {}
    try:
        tps = [TopicPartition(topic, q) for q in range(P)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        count = 0
        while loop.time() < deadline:
            for msgs in (await c.getmany(timeout_ms=300)).values():
                for m in msgs:
                    out.setdefault(m.partition, []).append(m.value.decode())
                    count += 1
            if count >= total:
                # Anything past the committed records would be an aborted one: read a little longer.
                ends = await c.end_offsets(tps)
                positions = [await c.position(tp) for tp in tps]
                if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                    break
        return out
    finally:
        await c.stop()


async def aiokafka_transactions(bootstrap: str, topic: str, group: str, inp: str, txn_id: str) -> list[int]:
    """c1 (offset 5), c2 (offset 7) committed, a3 (offset 9) aborted; returns the group's offset of
    ``inp`` partition 0 after each."""
    from aiokafka import AIOKafkaProducer, TopicPartition

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, enable_idempotence=True)
    await p.start()
    seen = []
    try:
        for tag, offset, commit in (("c1", 5, True), ("c2", 7, True), ("a3", 9, False)):
            await p.begin_transaction()
            for i in range(PER_TXN):
                await p.send_and_wait(topic, value=f"{tag}-{i}".encode(), key=tag.encode(), partition=i % P)
            await p.send_offsets_to_transaction({TopicPartition(inp, 0): offset}, group)
            if commit:
                await p.commit_transaction()
            else:
                await p.abort_transaction()
            seen.append(committed_offsets(bootstrap, group, inp, 1)[0])
    finally:
        await p.stop()
    return seen


def test_aiokafka_commit_and_abort(txn_server) -> None:  # type: ignore[no-untyped-def]
    server = txn_server
    topic, inp, group = unique_topic("aio-txn"), unique_topic("aio-txn-in"), unique_topic("aio-txn-g")
    create_topic(server.bootstrap, topic, P)
    create_topic(server.bootstrap, inp, 1)
    seen = asyncio.run(aiokafka_transactions(server.bootstrap, topic, group, inp, unique_topic("aio-txn-id")))
    ctx = "--- server log ---\n" + server.log_text()[-3000:]
    assert seen == [5, 7, 7], ctx
    check_isolation(server.bootstrap, topic, ctx)


def test_kafkajs_commit_and_abort(txn_server) -> None:  # type: ignore[no-untyped-def]
    server = txn_server
    topic, inp, group = unique_topic("kjs-txn"), unique_topic("kjs-txn-in"), unique_topic("kjs-txn-g")
    create_topic(server.bootstrap, topic, P)
    create_topic(server.bootstrap, inp, 1)
    res = run_node("txn.js", ["txn", server.bootstrap, topic, str(P), unique_topic("kjs-txn-id"), group, inp,
                              str(PER_TXN)], timeout=60)
    ctx = res.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert res.returncode == 0, ctx
    assert res.stdout.split() == ["committed", "c1", "committed", "c2", "aborted", "a3", "txn.done=true"], ctx
    assert committed_offsets(server.bootstrap, group, inp, 1) == [7], ctx
    check_isolation(server.bootstrap, topic, ctx)


def test_kafkajs_zombie_fenced_by_confluent(txn_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """kafkajs holds an open transaction; a confluent-kafka producer with the same transactional id
    aborts it and fences kafkajs, whose late send/commit is refused."""
    from confluent_kafka import Producer

    server = txn_server
    topic, txn_id = unique_topic("kjs-zombie"), unique_topic("kjs-zid")
    create_topic(server.bootstrap, topic, 1)
    go = tmp_path / "go"
    zombie = start_node("txn.js", ["fenced", server.bootstrap, topic, txn_id, str(go)])
    try:
        assert zombie.wait_for(lambda ls: "open" in ls, 30), zombie.describe()
        new = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": txn_id})
        new.init_transactions(30)
        new.begin_transaction()
        new.produce(topic, value=b"z-new", partition=0)
        new.commit_transaction(30)
        go.touch()
        assert zombie.wait(30) == 0, zombie.describe()
    finally:
        zombie.stop()
    ctx = zombie.describe() + "\n--- server log ---\n" + server.log_text()[-3000:]
    assert any(x.startswith("fenced ") for x in zombie.lines), ctx
    assert by_partition(read_topic(server.bootstrap, topic, 1, "read_committed", 1)).get(0) == ["z-new"], ctx
    assert by_partition(read_topic(server.bootstrap, topic, 1, "read_uncommitted", 2)).get(0) == ["z-old", "z-new"], ctx
