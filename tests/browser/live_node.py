"""A live ``groupcoord serve`` with the HTTP listener and real consumer groups, for the dashboard's
end-to-end tests (tests/browser/ and tests/coordinator/ops/test_dashboard_live.py).

The groups are made by kafka-python consumers over the wire: ``dash-active`` stays a Stable
member (its consumer is open until the node stops) with 10 of 40 records committed, so it lags by
30; ``dash-idle`` and a group whose id is HTML commit everything and leave (Empty).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO, free_ports

TOPIC = "orders"
PARTITIONS = 2
RECORDS = 40
ACTIVE, IDLE = "dash-active", "dash-idle"
EVIL = '<img src=x onerror="alert(1)">&\'g'
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@dataclass
class LiveNode:
    kafka_port: int
    http_port: int
    log: Path
    proc: subprocess.Popen[bytes]
    sasl_port: int | None = None
    consumers: list[Any] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets as the coordinator's OffsetFetch answers them (kafka-python's admin)."""
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000)
        try:
            return {(tp.topic, tp.partition): om.offset
                    for tp, om in admin.list_group_offsets(group)[group].items()}
        finally:
            admin.close()


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"port {port} not listening:\n{log.read_text()}"
            time.sleep(0.05)


def _consume(bootstrap: str, group: str, count: int, **conf: Any) -> Any:
    """A consumer of ``group`` that has read and committed ``count`` records (every partition's
    share: the records alternate between the two partitions)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=count // PARTITIONS,
                             **conf)
    got = 0
    deadline = time.monotonic() + 30
    while got < count:
        assert time.monotonic() < deadline, f"{group}: read {got} of {count}"
        for records in consumer.poll(timeout_ms=500, max_records=count - got).values():
            got += len(records)
    consumer.commit()
    return consumer


@contextmanager
def live_node(root: Path, *, sasl: bool = False, admin: bool = True) -> Iterator[LiveNode]:
    base = free_ports(3)
    kafka_port, http_port, sasl_port = base, base + 1, base + 2
    listeners = f"PLAINTEXT://127.0.0.1:{kafka_port}"
    settings = {"http.listen": f"127.0.0.1:{http_port}", "http.admin.enabled": str(admin).lower(),
                "lag.sample.interval.ms": "300", "offsets.topic.num.partitions": "3",
                "group.initial.rebalance.delay.ms": "0"}
    if sasl:
        listeners += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
        settings.update({"sasl.enabled.mechanisms": "PLAIN",
                         "sasl.jaas.config": f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
                         "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                         "super.users": "User:ANONYMOUS"})
    settings["listeners"] = listeners
    args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / "data")]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    log = root / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    node = LiveNode(kafka_port, http_port, log, proc, sasl_port if sasl else None)
    try:
        deadline = time.monotonic() + 30
        _wait_port(kafka_port, proc, log, deadline)
        _wait_port(http_port, proc, log, deadline)
        _make_groups(node)
        yield node
    finally:
        for consumer in node.consumers:
            consumer.close()
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _make_groups(node: LiveNode) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    for i in range(RECORDS):
        producer.send(TOPIC, f"record-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(10)
    producer.close()
    node.consumers.append(_consume(node.bootstrap, ACTIVE, 10, client_id="dash-active-client"))
    for group in (IDLE, EVIL):
        _consume(node.bootstrap, group, RECORDS).close()
    # The dashboard shows what the view shows: wait until it has the three groups, the active one Stable.
    deadline = time.monotonic() + 20
    while True:
        groups = {g["group_id"]: g for g in node.get_json("/api/groups")["groups"]}
        if {ACTIVE, IDLE, EVIL} <= set(groups) and groups[ACTIVE]["state"] == "Stable" \
                and groups[IDLE]["state"] == "Empty" and groups[EVIL]["state"] == "Empty":
            return
        assert time.monotonic() < deadline, f"groups not as expected: {groups}\n{node.log.read_text()[-3000:]}"
        time.sleep(0.1)
