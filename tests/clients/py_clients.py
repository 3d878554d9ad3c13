"""Produce/consume helpers for the Python stock clients (confluent-kafka, kafka-python, aiokafka),
shared by the produce/consume tests. Producers return ``{index: (partition, offset)}``;
consumers return ``Got`` records, reading with manual assignment and no consumer group."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from tests.clients.records_io import Got, Rec

TT = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


def _headers(hs) -> tuple:  # type: ignore[no-untyped-def]
    return tuple((k, None if v is None else bytes(v)) for k, v in (hs or []))


# ------------------------------------------------------------------------------ confluent-kafka


def confluent_produce(bootstrap: str, topic: str, recs: Sequence[Rec], compression: str = "none",
                      **conf: object) -> dict[int, tuple[int, int]]:
    from confluent_kafka import Producer

    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "compression.type": compression, "linger.ms": 5, **conf})

    def cb(i: int):  # type: ignore[no-untyped-def]
        def done(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"{i}: {err}")
            else:
                acks[i] = (msg.partition(), msg.offset())
        return done

    for i, r in enumerate(recs):
        while True:
            try:
                p.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                          headers=list(r.headers) or None, on_delivery=cb(i))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(30)
    assert left == 0 and not errors, f"confluent producer: {left} undelivered, errors {errors[:10]}"
    return acks


def confluent_consume(bootstrap: str, topic: str, partitions: int, total: int, timeout: float = 20.0,
                      offsets: Sequence[int] | None = None) -> list[Got]:
    from confluent_kafka import Consumer, TopicPartition

    # librdkafka requires a group.id for a Consumer; with assign() and no commits it never
    # talks to a group coordinator.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "groupcoord-unused", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, offsets[p] if offsets else 0) for p in range(partitions)])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < total and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    raise AssertionError(f"confluent consumer error: {m.error()}")
                tt, ts = m.timestamp()
                out.append(Got(m.partition(), m.offset(), ts, {1: "CreateTime", 2: "LogAppendTime"}.get(tt, str(tt)),
                               m.key(), m.value(), _headers(m.headers())))
        return out
    finally:
        c.close()


# ------------------------------------------------------------------------------ kafka-python


def kafka_python_produce(bootstrap: str, topic: str, recs: Sequence[Rec], compression: str | None = None,
                         **conf: object) -> dict[int, tuple[int, int]]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=compression, linger_ms=5,
                      **conf)
    try:
        futs = [p.send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp,
                       headers=list(r.headers)) for r in recs]
        p.flush(30)
        acks = {}
        for i, f in enumerate(futs):
            md = f.get(timeout=30)
            acks[i] = (md.partition, md.offset)
        return acks
    finally:
        p.close(5)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, total: int, timeout: float = 20.0,
                         offsets: Sequence[int] | None = None) -> list[Got]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=10000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        if offsets is None:
            c.seek_to_beginning(*tps)
        else:
            for tp, o in zip(tps, offsets, strict=True):
                c.seek(tp, o)
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < total and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500, max_records=1000).values():
                for m in msgs:
                    out.append(Got(m.partition, m.offset, m.timestamp, TT.get(m.timestamp_type, str(m.timestamp_type)),
                                   m.key, m.value, _headers(m.headers)))
        return out
    finally:
        c.close()


# ------------------------------------------------------------------------------ aiokafka


async def _aio_produce(bootstrap: str, topic: str, recs: Sequence[Rec], compression: str | None,
                       conf: dict) -> dict[int, tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                         compression_type=compression, linger_ms=5, **conf)
    await p.start()
    try:
        futs = [await p.send(topic, value=r.value, key=r.key, partition=r.partition, timestamp_ms=r.timestamp,
                             headers=list(r.headers)) for r in recs]
        mds = await asyncio.gather(*futs)
        return {i: (md.partition, md.offset) for i, md in enumerate(mds)}
    finally:
        await p.stop()


async def _aio_consume(bootstrap: str, topic: str, partitions: int, total: int, timeout: float,
                       offsets: Sequence[int] | None) -> list[Got]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", request_timeout_ms=10000)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        if offsets is None:
            await c.seek_to_beginning(*tps)
        else:
            for tp, o in zip(tps, offsets, strict=True):
                c.seek(tp, o)
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < total and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500, max_records=1000)
            for msgs in batch.values():
                for m in msgs:
                    out.append(Got(m.partition, m.offset, m.timestamp, TT.get(m.timestamp_type, str(m.timestamp_type)),
                                   m.key, m.value, _headers(m.headers)))
        return out
    finally:
        await c.stop()


def aiokafka_produce(bootstrap: str, topic: str, recs: Sequence[Rec], compression: str | None = None,
                     **conf: object) -> dict[int, tuple[int, int]]:
    return asyncio.run(_aio_produce(bootstrap, topic, recs, compression, conf))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, total: int, timeout: float = 20.0,
                     offsets: Sequence[int] | None = None) -> list[Got]:
    return asyncio.run(_aio_consume(bootstrap, topic, partitions, total, timeout, offsets))
