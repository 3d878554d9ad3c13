"""Crash and restart under a producing stock client.

* Java idempotent producer (acks=all, infinite retries) streams 20,000 records to a
  ``flush.messages=1`` topic; the server is SIGKILLed mid-stream and started again on the same
  data directory while the producer retries. Every acknowledged record must be in the log exactly
  once (no duplicates from retries), in per-partition send order, at the offset the ack named;
  a Java consumer running throughout continues where it was (no gap, no repeat).
* The same with a graceful restart (SIGTERM) under a confluent-kafka idempotent producer and a
  confluent-kafka consumer.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.clients import py_clients as pc
from tests.clients.background import start_java
from tests.clients.records_io import Got, create_topic, parse_acks, parse_got

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

P = 3
COUNT = 20_000


def _acked(lines: list[str]) -> int:
    return sum(1 for line in lines if line.startswith("A "))


def _seq(value: bytes | None) -> int:
    assert value is not None and value.startswith(b"seq-"), value
    return int(value[4:])


def check_log(log: list[Got], acks: dict[int, tuple[int, int]], count: int, ctx: str) -> None:
    """``log``: the whole topic read back. Exactly once, in order, at the acknowledged offsets."""
    seqs = [_seq(g.value) for g in log]
    dupes = sorted({s for s in seqs if seqs.count(s) > 1}) if len(set(seqs)) != len(seqs) else []
    assert not dupes, f"{len(seqs) - len(set(seqs))} duplicate records, e.g. seq {dupes[:20]}\n{ctx}"
    at = {(g.partition, g.offset): _seq(g.value) for g in log}
    for p in range(P):
        part = [g for g in log if g.partition == p]
        assert [g.offset for g in part] == list(range(len(part))), f"partition {p}: offsets not 0..n-1\n{ctx}"
        ps = [_seq(g.value) for g in part]
        assert ps == sorted(ps), f"partition {p}: out of send order\n{ctx}"
        assert all(s % P == p for s in ps), ctx
    missing = [s for s in acks if at.get(acks[s]) != s]
    assert not missing, (f"{len(missing)} acknowledged records not at their acked offset, e.g. "
                         f"{[(s, acks[s], at.get(acks[s])) for s in missing[:10]]}\n{ctx}")
    assert len(acks) == count, f"{count - len(acks)} records never acknowledged\n{ctx}"
    assert sorted(seqs) == list(range(count)), ctx


def check_consumer(got: list[Got], log: list[Got], ctx: str) -> None:
    """A consumer that ran across the restart saw every record once, in offset order."""
    want = {(g.partition, g.offset): g.value for g in log}
    for p in range(P):
        offs = [g.offset for g in got if g.partition == p]
        n = len([g for g in log if g.partition == p])
        assert offs == list(range(n)), f"consumer partition {p}: offsets not 0..{n - 1} (len {len(offs)}, " \
                                       f"first problems {[(i, o) for i, o in enumerate(offs) if o != i][:5]})\n{ctx}"
    assert all(want[(g.partition, g.offset)] == g.value for g in got), ctx


EVENTS = [["kill"], ["kill", "restart", "kill"]]


@pytest.mark.parametrize("events", EVENTS, ids=["-".join(e) for e in EVENTS])
def test_java_idempotent_producer_survives_sigkill(server_factory, events) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL (and, in the second variant, a graceful restart in between: producer state then
    comes from the snapshot plus the log written after it) while the stream is in flight."""
    server = server_factory()
    topic = f"crash-java-{int(time.time() * 1000)}"
    create_topic(server.bootstrap, topic, P, {"flush.messages": "1"})

    consumer = start_java("ProduceConsume", ["consume", server.bootstrap, topic, str(P), str(COUNT), "100000"],
                          sources=["ProduceConsume.java"])
    producer = start_java("ProduceConsume", [
        "stream", server.bootstrap, topic, str(P), str(COUNT),
        "delivery.timeout.ms=300000", "request.timeout.ms=5000", "retry.backoff.ms=100",
        "reconnect.backoff.ms=100", "reconnect.backoff.max.ms=500", "linger.ms=2", "batch.size=4096",
        # paced (at least COUNT / 2000 = 10 s): the stream once finished within a CI poll of the
        # test thread after the graceful restart, and the last kill then hit no stream at all
        "stream.rate=2000",
    ], sources=["ProduceConsume.java"])
    at_event = []
    try:
        for n, event in enumerate(events):
            threshold = (n + 1) * COUNT // (len(events) + 2)
            assert producer.wait_for(lambda ls, at_least=threshold: _acked(ls) >= at_least, 60), \
                producer.describe() + server.log_text()[-3000:]
            at_event.append(_acked(producer.lines))
            if event == "kill":
                server.kill()
                time.sleep(1.5)
                server.start()
            else:
                server.restart()
        rc = producer.wait(90)
        ctx = (f"acked at {events}: {at_event}\n" + producer.describe()
               + "\n--- server log ---\n" + server.log_text()[-6000:])
        assert rc == 0, ctx
        assert at_event[-1] < COUNT, "the last event came after the stream ended\n" + ctx
        acks = parse_acks(producer.stdout)
        log = pc.kafka_python_consume(server.bootstrap, topic, P, COUNT, timeout=30)
        check_log(log, acks, COUNT, ctx)

        crc = consumer.wait(60)
        cctx = consumer.describe(20) + "\n--- server log ---\n" + server.log_text()[-4000:]
        assert crc == 0, cctx
        check_consumer(parse_got(consumer.stdout), log, cctx)
    finally:
        producer.stop()
        consumer.stop()


def test_confluent_idempotent_producer_survives_graceful_restart(server_factory) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, Producer, TopicPartition

    server = server_factory()
    topic = f"restart-cf-{int(time.time())}"
    create_topic(server.bootstrap, topic, P)

    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    got: list[Got] = []
    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "groupcoord-unused",
                      "enable.auto.commit": False, "enable.auto.offset.store": False,
                      "reconnect.backoff.max.ms": 500})
        try:
            c.assign([TopicPartition(topic, p, 0) for p in range(P)])
            while not stop.is_set() and len(got) < COUNT:
                for m in c.consume(num_messages=1000, timeout=0.2):
                    if m.error() is None:
                        got.append(Got(m.partition(), m.offset(), m.timestamp()[1], "CreateTime", m.key(),
                                       m.value(), ()))
        finally:
            c.close()

    def produce() -> None:
        p = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 2, "batch.size": 4096, "message.timeout.ms": 120000,
                      "reconnect.backoff.max.ms": 500, "compression.type": "lz4"})

        def cb(seq: int):  # type: ignore[no-untyped-def]
            def done(err, msg) -> None:  # type: ignore[no-untyped-def]
                if err is not None:
                    errors.append(f"{seq}: {err}")
                else:
                    acks[seq] = (msg.partition(), msg.offset())
            return done

        for seq in range(COUNT):
            while True:
                try:
                    p.produce(topic, key=f"k{seq}".encode(), value=f"seq-{seq}".encode(), partition=seq % P,
                              on_delivery=cb(seq))
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
            if seq % 500 == 499:
                time.sleep(0.02)
        p.flush(100)

    tc = threading.Thread(target=consume, daemon=True)
    tp = threading.Thread(target=produce, daemon=True)
    tc.start()
    tp.start()
    try:
        deadline = time.monotonic() + 60
        while len(acks) < 4000 and time.monotonic() < deadline:
            time.sleep(0.02)
        acked_at_restart = len(acks)
        assert server.stop() == 0, server.log_text()[-3000:]
        time.sleep(1.0)
        server.start()
        tp.join(100)
        ctx = f"acked at restart: {acked_at_restart}; errors {errors[:10]}\n--- server log ---\n" + \
            server.log_text()[-6000:]
        assert not tp.is_alive(), "producer did not finish\n" + ctx
        assert not errors, ctx
        assert acked_at_restart < COUNT, "restart came after the stream ended\n" + ctx
        log = pc.kafka_python_consume(server.bootstrap, topic, P, COUNT, timeout=30)
        check_log(log, acks, COUNT, ctx)
        tc.join(30)
        check_consumer(got, log, ctx)
    finally:
        stop.set()
        tc.join(10)


# ------------------------------------------------------------------------------ Python producers


def _stream_confluent(bootstrap: str, topic: str, acks: dict, errors: list) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                  "batch.size": 4096, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500})

    def cb(seq: int):  # type: ignore[no-untyped-def]
        def done(err, msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(f"{seq}: {err}")
            else:
                acks[seq] = (msg.partition(), msg.offset())
        return done

    for seq in range(COUNT):
        while seq - len(acks) - len(errors) > 1000:
            p.poll(0.005)
        p.produce(topic, key=f"k{seq}".encode(), value=f"seq-{seq}".encode(), partition=seq % P, on_delivery=cb(seq))
        p.poll(0)
    p.flush(100)


def _stream_kafka_python(bootstrap: str, topic: str, acks: dict, errors: list) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=2,
                      batch_size=4096, delivery_timeout_ms=120000, request_timeout_ms=5000,
                      reconnect_backoff_max_ms=500)
    try:
        for seq in range(COUNT):
            while seq - len(acks) - len(errors) > 1000:
                time.sleep(0.002)
            f = p.send(topic, key=f"k{seq}".encode(), value=f"seq-{seq}".encode(), partition=seq % P)
            f.add_callback(lambda md, s=seq: acks.__setitem__(s, (md.partition, md.offset)))
            f.add_errback(lambda e, s=seq: errors.append(f"{s}: {e!r}"))
        p.flush(100)
    finally:
        p.close(10)


def _stream_aiokafka(bootstrap: str, topic: str, acks: dict, errors: list) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=2,
                             max_batch_size=4096, request_timeout_ms=5000, retry_backoff_ms=100)
        await p.start()
        try:
            futs = []
            for seq in range(COUNT):
                while seq - len(acks) - len(errors) > 1000:
                    await asyncio.sleep(0.002)
                fut = await p.send(topic, key=f"k{seq}".encode(), value=f"seq-{seq}".encode(), partition=seq % P)

                def done(f, s=seq) -> None:  # type: ignore[no-untyped-def]
                    if f.exception() is not None:
                        errors.append(f"{s}: {f.exception()!r}")
                    else:
                        acks[s] = (f.result().partition, f.result().offset)
                fut.add_done_callback(done)
                futs.append(fut)
            await asyncio.gather(*futs, return_exceptions=True)
        finally:
            await p.stop()

    asyncio.run(go())


STREAMERS = {"confluent": _stream_confluent, "kafka-python": _stream_kafka_python, "aiokafka": _stream_aiokafka}


@pytest.mark.parametrize("client", list(STREAMERS))
def test_python_idempotent_producers_survive_sigkill(server_factory, client) -> None:  # type: ignore[no-untyped-def]
    server = server_factory()
    topic = f"crash-{client}-{int(time.time() * 1000)}"
    create_topic(server.bootstrap, topic, P, {"flush.messages": "1"})
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    crashed: list[str] = []

    def run() -> None:
        try:
            STREAMERS[client](server.bootstrap, topic, acks, errors)
        except Exception as e:  # noqa: BLE001
            crashed.append(repr(e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while len(acks) < COUNT // 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    acked_at_kill = len(acks)
    server.kill()
    time.sleep(1.5)
    server.start()
    t.join(90)
    ctx = (f"{client}: acked at kill {acked_at_kill}; errors {errors[:10]}; crashed {crashed}\n--- server log ---\n"
           + server.log_text()[-6000:])
    assert not t.is_alive(), "producer did not finish\n" + ctx
    assert not crashed and not errors, ctx
    assert acked_at_kill < COUNT, ctx
    log = pc.kafka_python_consume(server.bootstrap, topic, P, COUNT, timeout=30)
    check_log(log, acks, COUNT, ctx)
