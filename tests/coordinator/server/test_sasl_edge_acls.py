"""The node end to end: principals from SASL reach the authorizer. A PLAINTEXT listener whose
anonymous clients are super users administers; alice, over SASL_PLAINTEXT, is refused until an
ACL (added with groupcoord acls) lets her produce and consume with a group."""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from tests.conftest import REPO, free_ports

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


class Node:
    def __init__(self, root: Path) -> None:
        base = free_ports(2)
        self.plain, self.sasl = base, base + 1
        log = root / "server.log"
        self.log = log
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / "data"),
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
                "--set", "sasl.enabled.mechanisms=PLAIN", "--set", f"sasl.jaas.config={JAAS}",
                "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "--set", "super.users=User:ANONYMOUS", "--set", "offsets.topic.num.partitions=1",
                "--set", "offsets.topic.replication.factor=1", "--set", "group.initial.rebalance.delay.ms=0"]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.sasl), timeout=0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)

    def acls(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "coordinator", "acls", "--bootstrap-server",
                               f"127.0.0.1:{self.plain}", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    node = Node(tmp_path_factory.mktemp("acl-node"))
    yield node
    node.proc.terminate()
    node.proc.wait(20)


def _alice(node: Node) -> dict[str, object]:
    return {"bootstrap_servers": f"127.0.0.1:{node.sasl}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}


def test_alice_is_refused_until_acls_allow_her(node: Node) -> None:
    # The topic exists (created by a super user on the PLAINTEXT listener).
    admin_producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{node.plain}")
    admin_producer.send("orders", b"first").get(timeout=10)
    admin_producer.close()

    producer = KafkaProducer(**_alice(node), max_block_ms=5000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("orders", b"denied").get(timeout=10)
    finally:
        producer.close()

    node.acls("--add", "--allow-principal", "User:alice", "--producer", "--topic", "orders")
    producer = KafkaProducer(**_alice(node))
    try:
        producer.send("orders", b"allowed").get(timeout=10)
    finally:
        producer.close()

    node.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    consumer = KafkaConsumer("orders", group_id="alice-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=8000, **_alice(node))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            next(iter(consumer))
    finally:
        consumer.close()

    node.acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "alice-group")
    consumer = KafkaConsumer("orders", group_id="alice-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=8000, **_alice(node))
    try:
        assert [m.value for m in itertools.islice(consumer, 2)] == [b"first", b"allowed"]
    finally:
        consumer.close()
