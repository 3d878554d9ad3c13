"""A consume-transform-produce copier with confluent-kafka (librdkafka), the counterpart of
java/TxnCopier.java: a read_committed consumer reads the input topic, a transactional producer
writes each record to the same partition of the output and commits the consumer's offsets in the
same transaction (``send_offsets_to_transaction`` with ``consumer_group_metadata()``); every
``abort_every``-th transaction is flushed and aborted, and the consumer goes back to the committed
offsets. It stops once the group's committed offset of every input partition reaches the end the
input had at start. Used in-process, or as a program a test can SIGKILL::

    python -m tests.clients.txn_confluent_copier <bootstrap> <input> <output> <group> <transactional-id>
        <batch> <abort-every> <assign|subscribe>

printing "copier.ready", "C <n> <records>" per commit, "A <n> <records>" per abort and
"copier.done aborted=<records>", flushed."""

from __future__ import annotations

import sys
import time
from typing import Any


def say(line: str) -> None:
    print(line, flush=True)


def committed(consumer: Any, tps: list[Any]) -> list[Any]:
    """``Consumer.committed``, asked again while the group's coordinator moves. librdkafka hands
    NOT_COORDINATOR (and the other coordinator errors, all retriable in Kafka's protocol) back to
    the caller of committed() rather than retrying it, as seen when the coordinator's node was
    SIGKILLed and restarted just before the copier's abort on a loaded machine."""
    from confluent_kafka import KafkaError, KafkaException

    moving = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    deadline = time.monotonic() + 30
    while True:
        try:
            return list(consumer.committed(tps, timeout=15))
        except KafkaException as exc:
            if exc.args[0].code() not in moving or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def copy(bootstrap: str, inp: str, out: str, group: str, txn_id: str, batch: int, abort_every: int,
         mode: str = "subscribe", timeout: float = 60.0) -> int:
    """Copy until done; returns the number of aborted records."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
                  "transaction.timeout.ms": 20000})
    aborted = 0
    try:
        # First fence any previous incarnation and abort its open transaction.
        p.init_transactions(30)
        say("copier.ready")
        partitions = len(c.list_topics(inp, timeout=10).topics[inp].partitions)
        tps = [TopicPartition(inp, q) for q in range(partitions)]
        ends = [c.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps]
        if mode == "subscribe":
            c.subscribe([inp])
        else:
            c.assign(tps)  # from the committed offsets (OffsetFetch with RequireStable)
        n = commits = 0
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"copier not done after {timeout} s ({n} transactions)"
            msgs = c.consume(num_messages=batch, timeout=0.5)
            for m in msgs:
                assert m.error() is None, m.error()
            if not msgs:
                # librdkafka's position() of a partition sought back to its end stays invalid until
                # a message arrives, so ask the group instead.
                committed_offsets = committed(c, tps)
                if all(tp.offset >= end for tp, end in zip(committed_offsets, ends, strict=True)):
                    return aborted
                continue
            n += 1
            offsets: dict[int, int] = {}
            p.begin_transaction()
            for m in msgs:
                p.produce(out, value=m.value(), key=m.key(), partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            p.send_offsets_to_transaction([TopicPartition(inp, q, o) for q, o in offsets.items()],
                                          c.consumer_group_metadata(), 30)
            if n % abort_every == 0:
                assert p.flush(30) == 0
                p.abort_transaction(30)
                aborted += len(msgs)
                say(f"A {n} {len(msgs)}")
                for tp in committed(c, c.assignment()):
                    c.seek(TopicPartition(inp, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
            else:
                p.commit_transaction(30)
                commits += 1
                say(f"C {commits} {len(msgs)}")
    finally:
        c.close()


def main(argv: list[str]) -> int:
    bootstrap, inp, out, group, txn_id, batch, abort_every, mode = argv
    aborted = copy(bootstrap, inp, out, group, txn_id, int(batch), int(abort_every), mode, timeout=90)
    say(f"copier.done aborted={aborted}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
