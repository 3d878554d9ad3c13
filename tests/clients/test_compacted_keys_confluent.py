"""A record without a key on a ``cleanup.policy=compact`` topic is refused, as Kafka refuses it.

Compaction keeps the last record of each key, so a keyless record has no place in such a log:
Kafka's LogValidator answers INVALID_RECORD (87) for the partition, with a record error per
keyless record ("Compacted topic cannot accept message without key in topic partition t-0") —
librdkafka's test 0011 expects the delivery report to carry that error. The check covers
compressed batches too (the broker looks inside them), and a keyed record next to a keyless one
in the same batch is refused with it (the whole batch is).
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.producer import ProduceRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.records import Compression, encode_batch
from tests.clients.records_io import create_topic
from tests.clients.tools import unique_topic
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]


def _deliver(bootstrap: str, topic: str, key: bytes | None, compression: str) -> tuple[object, object]:
    """Produce one record with confluent-kafka; (the delivery error or None, the message)."""
    from confluent_kafka import Producer

    reports: list[tuple[object, object]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "compression.type": compression,
                         "message.send.max.retries": 0})
    producer.produce(topic, value=b"v", key=key, partition=0,
                     on_delivery=lambda err, msg: reports.append((err, msg)))
    assert producer.flush(15) == 0
    assert len(reports) == 1
    return reports[0]


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_keyless_record_on_compacted_topic_gets_invalid_record(server, compression: str) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import KafkaError

    topic = unique_topic("compacted")
    create_topic(server.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    err, _ = _deliver(server.bootstrap, topic, None, compression)
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    err, msg = _deliver(server.bootstrap, topic, b"k", compression)
    assert err is None and msg.offset() == 0, err  # type: ignore[attr-defined]

    # A topic that only deletes takes keyless records as before.
    plain = unique_topic("plain")
    create_topic(server.bootstrap, plain, 1, {"cleanup.policy": "delete"})
    err, _ = _deliver(server.bootstrap, plain, None, compression)
    assert err is None, err


def test_the_partition_names_every_keyless_record_as_kafka_does(server) -> None:  # type: ignore[no-untyped-def]
    """On the wire: the error message of Kafka's LogValidator and one record error (KIP-467) per
    keyless record of a compressed batch; nothing is appended."""
    from protocol.records import Record

    topic = unique_topic("compacted")
    create_topic(server.bootstrap, topic, 1, {"cleanup.policy": "compact,delete"})
    records = [Record(offset_delta=i, timestamp_delta=0, key=k, value=b"v", headers=())
               for i, k in enumerate([None, b"a", None])]
    batch = encode_batch(records, base_timestamp=int(time.time() * 1000), compression=Compression.GZIP)
    TD = ProduceRequest.TopicProduceData
    request = ProduceRequest(version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[TD(
        name=topic, partition_data=[TD.PartitionProduceData(index=0, records=bytes(batch))])])
    with WireClient(server.host, server.port) as c:
        (part,) = c.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses
    assert part.error_code == ErrorCode.INVALID_RECORD
    what = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [(0, what), (2, what)]
    assert part.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=0, message='{what}'), "
        f"RecordError(batchIndex=2, message='{what}')]")
    assert part.base_offset == -1
