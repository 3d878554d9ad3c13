"""Fetch errors reach the application of a stock client.

A partition in error (here OFFSET_OUT_OF_RANGE, a fetch at offset 100 of a 5-record log) must be
answered with an empty record set, as Kafka does (``MemoryRecords.EMPTY``). With a null one,
librdkafka 2.16 logs ``invalid MessageSetSize -1`` / ``Protocol parse failure for Fetch v16``,
drops the whole response and fetches again at once, forever: ``auto.offset.reset=error`` never
surfaces ``_AUTO_OFFSET_RESET`` and ``earliest`` never resets.

The stock clients send different Fetch versions (seen in request frames recorded from each
client, and for librdkafka checked below through its debug log): librdkafka 2.16 v16, the Java
client 3.9 v17, kafka-python 3.0 v12 (flexible versions start at v12), aiokafka 0.14 v11
(classic). Each of them is driven through the same out-of-range fetch here; only librdkafka
failed on the null record set, the others read it as empty. Below the clients, every Fetch
version and every partition error this server gives is checked on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.clients.records_io import create_topic, parse_got
from tests.clients.test_produce_consume_java import java_consume
from tests.clients.tools import unique_topic
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]

N = 5
OUT_OF_RANGE = 100
#: How long a consumer may take, from its first poll, to report the out-of-range offset. Measured
#: with the fix: 0.05-0.11 s for librdkafka (metadata, then one fetch); without it the error never
#: came (10 s and counting).
ERROR_BOUND_S = 5.0


def _topic_with_records(bootstrap: str, prefix: str) -> tuple[str, list[bytes]]:
    from confluent_kafka import Producer

    topic = unique_topic(prefix)
    create_topic(bootstrap, topic, 1)
    values = [b"value-%d" % i for i in range(N)]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(15) == 0
    return topic, values


class _Lines(logging.Handler):
    """Collects librdkafka's log lines (confluent-kafka hands them to a Python logger on poll)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _confluent_consumer(bootstrap: str, reset: str, name: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    handler = _Lines()
    logger = logging.getLogger(f"groupcoord-test.rdkafka.{name}")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    # "protocol" debug names every request with its version ("Sent FetchRequest (v16, ...)").
    # The group id is required by librdkafka; with assign() and no commits no group is joined.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "groupcoord-unused", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "auto.offset.reset": reset, "debug": "protocol,fetch"},
                 logger=logger)
    return c, handler


def _parse_failures(lines: list[str]) -> list[str]:
    return [line for line in lines if "MessageSetSize" in line or "Protocol parse failure" in line]


def _fetch_versions(lines: list[str]) -> set[int]:
    return {int(v) for line in lines for v in re.findall(r"Sent FetchRequest \(v(\d+)", line)}


def test_confluent_out_of_range_with_reset_error_surfaces_auto_offset_reset(shared_server) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import KafkaError, TopicPartition

    topic, _ = _topic_with_records(shared_server.bootstrap, "cf-oor-error")
    c, log = _confluent_consumer(shared_server.bootstrap, "error", "error")
    try:
        c.assign([TopicPartition(topic, 0, OUT_OF_RANGE)])
        t0 = time.monotonic()
        error = None
        while error is None and time.monotonic() - t0 < ERROR_BOUND_S + 5:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is not None, f"a record at offset {m.offset()} from an out-of-range position"
                error = m.error()
        elapsed = time.monotonic() - t0
    finally:
        c.close()
    ctx = "\n".join(log.lines[-40:]) + "\n--- server log ---\n" + shared_server.log_text()[-3000:]
    print(f"confluent-kafka: _AUTO_OFFSET_RESET after {elapsed:.3f}s from the first poll")
    assert error is not None, f"no error within {elapsed:.1f}s\n{ctx}"
    assert error.code() == KafkaError._AUTO_OFFSET_RESET, f"{error}\n{ctx}"
    assert elapsed < ERROR_BOUND_S, f"{elapsed:.1f}s\n{ctx}"
    assert not _parse_failures(log.lines), ctx
    # librdkafka 2.16 sends the highest Fetch version it knows, v16 (the server has v17): the
    # flexible encoding the null record set broke.
    assert _fetch_versions(log.lines) == {16}, ctx


def test_confluent_out_of_range_with_reset_earliest_reads_from_the_start(shared_server) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import TopicPartition

    topic, values = _topic_with_records(shared_server.bootstrap, "cf-oor-earliest")
    c, log = _confluent_consumer(shared_server.bootstrap, "earliest", "earliest")
    got: list[tuple[int, bytes]] = []
    try:
        c.assign([TopicPartition(topic, 0, OUT_OF_RANGE)])
        deadline = time.monotonic() + 15
        while len(got) < N and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.2):
                # With "earliest" librdkafka resets without an error event: any error fails.
                assert m.error() is None, str(m.error())
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    ctx = "\n".join(log.lines[-40:]) + "\n--- server log ---\n" + shared_server.log_text()[-3000:]
    assert got == list(enumerate(values)), ctx
    assert not _parse_failures(log.lines), ctx


def _kafka_python_out_of_range(bootstrap: str, topic: str, reset: str | None) -> tuple[list[tuple[int, bytes]], Exception | None]:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError as KPError

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset=reset or "none", request_timeout_ms=10000)
    got: list[tuple[int, bytes]] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, OUT_OF_RANGE)
        deadline = time.monotonic() + 15
        while len(got) < N and time.monotonic() < deadline:
            try:
                batch = c.poll(timeout_ms=200)
            except KPError as exc:
                return got, exc
            got += [(m.offset, m.value) for msgs in batch.values() for m in msgs]
        return got, None
    finally:
        c.close()


async def _aiokafka_out_of_range(bootstrap: str, topic: str, reset: str | None) -> tuple[list[tuple[int, bytes]], Exception | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError as AIOError

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset=reset or "none", request_timeout_ms=10000)
    await c.start()
    got: list[tuple[int, bytes]] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, OUT_OF_RANGE)
        deadline = time.monotonic() + 15
        while len(got) < N and time.monotonic() < deadline:
            try:
                batch = await c.getmany(timeout_ms=200)
            except AIOError as exc:
                return got, exc
            got += [(m.offset, m.value) for msgs in batch.values() for m in msgs]
        return got, None
    finally:
        await c.stop()


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_out_of_range(shared_server, client) -> None:  # type: ignore[no-untyped-def]
    """kafka-python (Fetch v12, flexible) and aiokafka (v11, classic): no reset policy raises
    OffsetOutOfRangeError; earliest reads the 5 records."""
    def run(topic: str, reset: str | None):  # type: ignore[no-untyped-def]
        if client == "kafka-python":
            return _kafka_python_out_of_range(shared_server.bootstrap, topic, reset)
        return asyncio.run(_aiokafka_out_of_range(shared_server.bootstrap, topic, reset))

    topic, values = _topic_with_records(shared_server.bootstrap, f"{client}-oor")
    t0 = time.monotonic()
    got, exc = run(topic, None)
    elapsed = time.monotonic() - t0
    assert got == [] and exc is not None and type(exc).__name__ == "OffsetOutOfRangeError", (got, repr(exc))
    assert elapsed < ERROR_BOUND_S + 2, elapsed  # the consumer's own start-up included
    got, exc = run(topic, "earliest")
    assert exc is None and got == list(enumerate(values)), (got, repr(exc))


def test_java_out_of_range_resets_to_earliest(shared_server) -> None:  # type: ignore[no-untyped-def]
    """The Java client (Fetch v17) resets an out-of-range position and reads the 5 records."""
    topic, values = _topic_with_records(shared_server.bootstrap, "java-oor")
    res = java_consume(shared_server.bootstrap, topic, 1, N, offsets=[OUT_OF_RANGE])
    assert res.returncode == 0, res.describe()[-4000:]
    assert [(g.offset, g.value) for g in parse_got(res.stdout)] == list(enumerate(values)), res.describe()[-4000:]


def _wire_fetch(c: WireClient, version: int, topic: str, topic_id: uuid.UUID, partition: int, offset: int,
                leader_epoch: int = -1) -> Any:
    F = FetchRequest.FetchTopic
    # v13+ names topics by id only.
    named = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
    req = FetchRequest(version=version, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                       topics=[F(**named, partitions=[F.FetchPartition(
                           partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
                           log_start_offset=-1, partition_max_bytes=1 << 20)])])
    return c.request(ApiKey.FETCH, version, req).responses[0].partitions[0]


@pytest.mark.parametrize("version", range(4, 18))
def test_every_fetch_version_answers_error_partitions_with_empty_records(shared_server, version: int) -> None:
    """Below the clients, on the wire: each error a Fetch partition can get from this server comes
    with an empty record set, never null, in every version (decoded by kafka-python's codec,
    which keeps the two apart)."""
    topic, _ = _topic_with_records(shared_server.bootstrap, f"wire-v{version}")
    with WireClient(shared_server.host, shared_server.port) as c:
        meta = c.request(ApiKey.METADATA, 12, MetadataRequest(
            version=12, topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        topic_id = meta.topics[0].topic_id
        cases = [(0, OUT_OF_RANGE, -1, ErrorCode.OFFSET_OUT_OF_RANGE),
                 (7, 0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        if version >= 9:  # the client's current leader epoch (KIP-320); ours is 0
            cases.append((0, 0, 5, ErrorCode.UNKNOWN_LEADER_EPOCH))
        for partition, offset, epoch, code in cases:
            got = _wire_fetch(c, version, topic, topic_id, partition, offset, epoch)
            assert (got.error_code, got.records) == (code, b""), (version, code, got)
        if version >= 13:
            got = _wire_fetch(c, version, topic, uuid.uuid4(), 0, 0)
            assert (got.error_code, got.records) == (ErrorCode.UNKNOWN_TOPIC_ID, b""), got
        # A partition without error still gets its records.
        got = _wire_fetch(c, version, topic, topic_id, 0, 0)
        assert got.error_code == 0 and len(got.records) > 0, got
