"""One consumer-group member process for the group tests, for the Python stock clients.

    python tests/clients/group_member.py CLIENT bootstrap topic group strategy instanceId|- sessionMs \
        stopFile pollDelayMs maxPollRecords

CLIENT: confluent | kafka-python | aiokafka. strategy: range | roundrobin | cooperative-sticky, or (confluent
only) consumer | consumer-uniform | consumer-range: group.protocol=consumer (KIP-848). confluent only: a
topic starting with "^" is a regex subscription, and the lines name the topic (TA/TR/TC/TREV/TLOST).
Prints the line protocol of ``java/GroupConsumer.java`` (A/REV/LOST/R/C/CF/STARTED/CLOSED), commits
synchronously after every non-empty poll, and runs until stopFile exists (then closes) or is killed.
Standalone on purpose (no imports from the repo), so it can be started and SIGKILLed as a process.
confluent only: the environment variable GROUP_MEMBER_CONFIG, a JSON object of librdkafka settings, is
added to the consumer's configuration (e.g. security.protocol, sasl.*, ssl.ca.location for a secured cluster).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parts(ps) -> str:  # type: ignore[no-untyped-def]
    return ",".join(str(p) for p in sorted(ps))


def run_confluent(bootstrap, topic, group, strategy, instance, session, stop, delay, max_poll) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.interval.ms": 30000,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "reconnect.backoff.max.ms": 500}
    conf.update(json.loads(os.environ.get("GROUP_MEMBER_CONFIG", "{}")))
    if strategy.startswith("consumer"):
        # KIP-848 (librdkafka 2.12+): the server assigns and sets the session timeout and heartbeat
        # interval; "consumer-<name>" picks the server assignor. Rebalances are incremental.
        conf["group.protocol"] = "consumer"
        if strategy.startswith("consumer-"):
            conf["group.remote.assignor"] = strategy.removeprefix("consumer-")
    else:
        conf.update({"partition.assignment.strategy": strategy, "session.timeout.ms": session,
                     "heartbeat.interval.ms": 500})
    if instance != "-":
        conf["group.instance.id"] = instance
    # A topic starting with "^" is a regular expression (librdkafka's convention); with
    # group.protocol=consumer librdkafka sends it to the broker (SubscribedTopicRegex), which
    # resolves it. Lines then name the topic: TA/TREV/TLOST "t:p,...", TR/TC "t p o".
    by_pattern = topic.startswith("^")
    c = Consumer(conf)
    owned: set[tuple[str, int]] = set()
    cooperative = strategy == "cooperative-sticky" or strategy.startswith("consumer")

    def show(tag: str, tps: set[tuple[str, int]]) -> str:
        if by_pattern:
            return f"T{tag} " + ",".join(f"{t}:{p}" for t, p in sorted(tps))
        return f"{tag} " + parts(p for _, p in tps)

    def on_assign(consumer, tps) -> None:  # type: ignore[no-untyped-def]
        nonlocal owned
        ps = {(tp.topic, tp.partition) for tp in tps}
        owned = owned | ps if cooperative else ps
        out(show("A", owned))

    pending: dict[tuple[str, int], int] = {}  # processed, not yet committed: retried, and committed before a revoke

    def commit(offsets: dict[tuple[str, int], int]) -> bool:
        if not offsets:
            return True
        try:
            c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
            for (t, p), o in offsets.items():
                out(f"TC {t} {p} {o}" if by_pattern else f"C {p} {o}")
            return True
        except KafkaException as e:
            out(f"CF {e}")
            return False

    def on_revoke(consumer, tps) -> None:  # type: ignore[no-untyped-def]
        ps = {(tp.topic, tp.partition) for tp in tps}
        commit({k: pending.pop(k) for k in ps if k in pending})
        if ps:
            out(show("REV", ps))
        owned.difference_update(ps)

    def on_lost(consumer, tps) -> None:  # type: ignore[no-untyped-def]
        ps = {(tp.topic, tp.partition) for tp in tps}
        if ps:
            out(show("LOST", ps))
        owned.difference_update(ps)

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    out("STARTED")
    try:
        while not os.path.exists(stop):
            msgs = c.consume(num_messages=max_poll, timeout=0.2)
            if not msgs:
                continue
            for m in msgs:
                if m.error() is not None:
                    out(f"E {m.error()}")
                    continue
                out(f"TR {m.topic()} {m.partition()} {m.offset()}" if by_pattern else f"R {m.partition()} {m.offset()}")
                pending[(m.topic(), m.partition())] = m.offset() + 1
            for k in [k for k in pending if k not in owned]:
                del pending[k]
            if commit(dict(pending)):
                pending.clear()
            if delay:
                time.sleep(delay / 1000)
    finally:
        c.close()
        out("CLOSED")


def run_kafka_python(bootstrap, topic, group, strategy, instance, session, stop, delay, max_poll) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "cooperative-sticky": CooperativeStickyAssignor}[strategy]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=[assignor],
                      group_instance_id=None if instance == "-" else instance, session_timeout_ms=session,
                      heartbeat_interval_ms=500, max_poll_interval_ms=30000, enable_auto_commit=False,
                      auto_offset_reset="earliest", reconnect_backoff_max_ms=500, request_timeout_ms=40000)
    # Metadata for the topic before joining: a kafka-python 3.0.12 leader that assigns without it
    # gives itself an empty assignment and then, now and then, stops heartbeating for good (a
    # client hang, tests/clients/FINDINGS.md); the group scenarios are not about that race.
    deadline = time.monotonic() + 30
    while not c.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.1)

    pending: dict[int, int] = {}  # processed, not yet committed: retried, and committed before a revoke

    def commit(offsets: dict[int, int]) -> bool:
        if not offsets:
            return True
        try:
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
            for p, o in offsets.items():
                out(f"C {p} {o}")
            return True
        except Exception as e:  # noqa: BLE001 - reported as a line
            out(f"CF {type(e).__name__}: {e}")
            return False

    class L(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            commit({tp.partition: pending.pop(tp.partition) for tp in revoked if tp.partition in pending})
            if revoked:
                out("REV " + parts(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            out("A " + parts(tp.partition for tp in c.assignment()))

        def on_partitions_lost(self, lost):  # type: ignore[no-untyped-def]
            if lost:
                out("LOST " + parts(tp.partition for tp in lost))

    c.subscribe([topic], listener=L())
    out("STARTED")
    try:
        while not os.path.exists(stop):
            try:
                batch = c.poll(timeout_ms=200, max_records=max_poll)
            except KafkaError as e:
                # kafka-python 3.0.12 lets a retriable error out of poll(): when its coordinator's
                # node goes, FindCoordinator and then the Metadata refresh that
                # ensure_coordinator_ready_async asks for both go to the least loaded node, which is
                # the gone node itself (the live ones have fetches in flight) and refuse the
                # connection; the refresh's KafkaConnectionError escapes (that method catches only
                # KafkaTimeoutError around it). The consumer is intact (nothing was returned, no
                # position moved): a real application polls again, as the Java client does inside
                # poll(). Anything not retriable still ends the member.
                if not e.retriable:
                    raise
                out(f"E {type(e).__name__}: {e}")
                time.sleep(0.1)
                continue
            if not batch:
                continue
            for msgs in batch.values():
                for m in msgs:
                    out(f"R {m.partition} {m.offset}")
                    pending[m.partition] = m.offset + 1
            owned = {tp.partition for tp in c.assignment()}
            for p in [p for p in pending if p not in owned]:
                del pending[p]
            if commit(dict(pending)):
                pending.clear()
            if delay:
                time.sleep(delay / 1000)
    finally:
        c.close()
        out("CLOSED")


async def _aiokafka(bootstrap, topic, group, strategy, instance, session, stop, delay, max_poll) -> None:  # type: ignore[no-untyped-def]
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]
    kw = {}
    if instance != "-":
        kw["group_instance_id"] = instance
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=(assignor,),
                         session_timeout_ms=session, heartbeat_interval_ms=500, max_poll_interval_ms=30000,
                         enable_auto_commit=False, auto_offset_reset="earliest", retry_backoff_ms=200, **kw)

    pending: dict[int, int] = {}  # processed, not yet committed: retried, and committed before a revoke

    async def commit(offsets: dict[int, int]) -> bool:
        if not offsets:
            return True
        try:
            await c.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
            for p, o in offsets.items():
                out(f"C {p} {o}")
            return True
        except Exception as e:  # noqa: BLE001 - reported as a line
            out(f"CF {type(e).__name__}: {e}")
            return False

    class L(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            await commit({tp.partition: pending.pop(tp.partition) for tp in revoked if tp.partition in pending})
            if revoked:
                out("REV " + parts(tp.partition for tp in revoked))

        async def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            out("A " + parts(tp.partition for tp in assigned))

    await c.start()
    c.subscribe([topic], listener=L())
    out("STARTED")
    try:
        while not os.path.exists(stop):
            batch = await c.getmany(timeout_ms=200, max_records=max_poll)
            if not batch:
                continue
            for msgs in batch.values():
                for m in msgs:
                    out(f"R {m.partition} {m.offset}")
                    pending[m.partition] = m.offset + 1
            owned = {tp.partition for tp in c.assignment()}
            for p in [p for p in pending if p not in owned]:
                del pending[p]
            if await commit(dict(pending)):
                pending.clear()
            if delay:
                await asyncio.sleep(delay / 1000)
    finally:
        await c.stop()
        out("CLOSED")


def main(argv: list[str]) -> None:
    # the clients' own warnings and errors go to stderr, which a failing test shows
    logging.basicConfig(level=os.environ.get("GROUP_MEMBER_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    client, bootstrap, topic, group, strategy, instance, session, stop, delay, max_poll = argv
    args = (bootstrap, topic, group, strategy, instance, int(session), stop, int(delay), int(max_poll))
    if client == "confluent":
        run_confluent(*args)
    elif client == "kafka-python":
        run_kafka_python(*args)
    elif client == "aiokafka":
        asyncio.run(_aiokafka(*args))
    else:
        raise SystemExit(f"unknown client {client}")


if __name__ == "__main__":
    main(sys.argv[1:])
