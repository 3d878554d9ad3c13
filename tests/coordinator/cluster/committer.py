"""A kafka-python group member that consumes and commits synchronously in a thread, recording what
was acknowledged: the client side of the group failover and reassignment tests."""

from __future__ import annotations

import threading
import time
from typing import Any


class Committer:
    """Consumes ``topic`` in ``group``; after each polled batch commits every assigned partition's
    position. ``acked`` holds, per partition, the last offset whose commit was acknowledged (a
    failed commit may or may not be there: only acknowledged ones are promised), ``assigned`` the
    time of each assignment (one per rebalance), ``failures`` the commit errors."""

    def __init__(self, bootstrap: str, group: str, topic: str, *, max_poll_records: int = 20,
                 pause_s: float = 0.02) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.max_poll_records, self.pause_s = max_poll_records, pause_s
        self.acked: dict[int, int] = {}
        self.assigned: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"committer-{group}")

    def __enter__(self) -> Committer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def total(self) -> int:
        return sum(self.acked.values())

    def _run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener

        assigned = self.assigned

        class Count(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, got: Any) -> None:
                assigned.append(time.monotonic())

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=30000, heartbeat_interval_ms=1000,
                                 max_poll_records=self.max_poll_records, request_timeout_ms=40000,
                                 retry_backoff_ms=100)
        # The topic's partitions known before the first join: kafka-python 3.0 otherwise may join
        # before its metadata comes, be assigned nothing and rebalance again (docs/testing.md).
        deadline = time.monotonic() + 30
        while not consumer.partitions_for_topic(self.topic) and time.monotonic() < deadline:
            time.sleep(0.05)
        consumer.subscribe([self.topic], listener=Count())
        try:
            while not self._stop.is_set():
                if not consumer.poll(timeout_ms=200):
                    continue
                try:
                    consumer.commit()
                except Exception as exc:  # not acknowledged: may or may not be there
                    self.failures.append(repr(exc))
                    continue
                # commit() committed every assigned partition's position, which no poll moved since.
                for tp in consumer.assignment():
                    self.acked[tp.partition] = consumer.position(tp)
                time.sleep(self.pause_s)
        finally:
            consumer.close(autocommit=False)
