"""KIP-368 re-authentication with stock clients, on a node whose SASL sessions last 3 s
(``connections.max.reauth.ms=3000``; https://cwiki.apache.org/confluence/display/KAFKA/KIP-368%3A+Allow+SASL+Connections+to+Periodically+Re-Authenticate).

- Java re-authenticates on its connections before the session ends (85–95 % of it) and keeps
  producing and consuming; its metrics count the re-authentications.
- librdkafka (confluent-kafka) re-authenticates too (since 2.2.0): its connections survive, by its
  statistics, and nothing is dropped by the node.
- aiokafka never re-authenticates (reference/security.md §9): the node drops it at its first request
  after expiry, logging why, and it reconnects and keeps working."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.security_io import PASSWORDS, SecureNode
from tests.clients.tools import run_java

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]
LIFETIME_S = 3.0
EXPIRED = "SASL session expired (connections.max.reauth.ms)"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    node = SecureNode(tmp_path_factory.mktemp("sec-reauth"), f"connections.max.reauth.ms={int(LIFETIME_S * 1000)}")
    yield node
    node.stop()


def _expired(node: SecureNode) -> int:
    """How many connections the node has closed for an expired session."""
    return node.log.read_text(errors="replace").count(EXPIRED)


def test_java_reauthenticates_and_keeps_consuming(node: SecureNode, tmp_path: Path) -> None:
    props = node.java_properties(tmp_path / "alice.properties", mechanism="SCRAM-SHA-512", user="alice",
                                 password=PASSWORDS["alice"])
    before = _expired(node)
    result = run_java("SecClient", ["reauth", str(props), "reauth-java", "reauth-java-group",
                                    str(int(LIFETIME_S * 2700))], timeout=60).check().kv()
    assert "reauth.error" not in result, result
    assert int(result["sent"]) >= 5 and result["received"] == result["sent"], result
    assert float(result["producer.reauthentications"]) >= 1, result
    assert float(result["consumer.reauthentications"]) >= 1, result
    assert float(result["producer.reauth_failures"]) == float(result["consumer.reauth_failures"]) == 0, result
    assert _expired(node) == before  # nothing was dropped


def test_librdkafka_reauthenticates_and_keeps_consuming(node: SecureNode) -> None:
    from confluent_kafka import Consumer, Producer

    stats: list[dict[str, object]] = []
    errors: list[str] = []
    conf = {**node.librdkafka(mechanism="SCRAM-SHA-256", user="bob", password=PASSWORDS["bob"]),
            "error_cb": lambda e: errors.append(str(e))}
    before = _expired(node)
    producer = Producer({**conf, "linger.ms": 0, "statistics.interval.ms": 500,
                         "stats_cb": lambda raw: stats.append(json.loads(raw))})
    consumer = Consumer({**conf, "group.id": "reauth-librdkafka", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["reauth-librdkafka"])
    sent = received = 0
    try:
        end = time.monotonic() + LIFETIME_S * 2.7
        while time.monotonic() < end or received < sent:
            assert time.monotonic() < end + 15, (sent, received, errors)
            if time.monotonic() < end:
                producer.produce("reauth-librdkafka", value=str(sent).encode())
                assert producer.flush(10) == 0
                sent += 1
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                received += 1
                consumer.commit(msg, asynchronous=False)
        producer.poll(1)  # a last statistics callback
    finally:
        consumer.close()
    assert received == sent >= 5 and not errors, (sent, received, errors)
    assert _expired(node) == before
    # One connection to the broker from start to end: re-authenticated in place, never reconnected.
    broker = next(b for name, b in stats[-1]["brokers"].items() if "bootstrap" not in name)  # type: ignore[union-attr]
    assert broker["connects"] == 1 and broker["disconnects"] == 0, broker


def test_aiokafka_is_dropped_after_expiry_and_reconnects(node: SecureNode) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    options = node.aiokafka(mechanism="SCRAM-SHA-512", user="alice", password=PASSWORDS["alice"])
    before = _expired(node)

    async def main() -> tuple[int, int]:
        producer = AIOKafkaProducer(**options, linger_ms=0)
        consumer = AIOKafkaConsumer("reauth-aiokafka", group_id="reauth-aiokafka", auto_offset_reset="earliest",
                                    enable_auto_commit=False, **options)
        await producer.start()
        await consumer.start()
        sent = received = 0
        try:
            end = time.monotonic() + LIFETIME_S * 2.7
            while time.monotonic() < end:
                await producer.send_and_wait("reauth-aiokafka", str(sent).encode())
                sent += 1
                batches = await consumer.getmany(timeout_ms=300)
                received += sum(len(records) for records in batches.values())
            async with asyncio.timeout(15):
                while received < sent:
                    batches = await consumer.getmany(timeout_ms=300)
                    received += sum(len(records) for records in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()
            await producer.stop()
        return sent, received

    sent, received = asyncio.run(main())
    assert received == sent >= 5, (sent, received)
    assert _expired(node) > before, node.log.read_text()[-3000:]
