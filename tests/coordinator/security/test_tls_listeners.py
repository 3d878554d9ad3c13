"""A node with PLAINTEXT, SSL and SASL_SSL listeners at once: each advertises its own endpoint in
Metadata, FindCoordinator and DescribeCluster, and kafka-python works over SSL and SASL_SSL."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from protocol.apis import ApiKey
from tests.conftest import REPO, free_ports
from tests.wire_client import WireClient

from .tls_fixtures import tls_client


class TwoListenerNode:
    def __init__(self, root: Path) -> None:
        self.ca = trustme.CA()
        cert = self.ca.issue_cert("localhost", "127.0.0.1")
        keystore = root / "server.pem"
        keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(b.bytes() for b in cert.cert_chain_pems))
        self.cafile = root / "ca.pem"
        self.cafile.write_bytes(self.ca.cert_pem.bytes())
        base = free_ports(3)
        self.plain_port, self.ssl_port, self.sasl_port = base, base + 1, base + 2
        self.log = root / "server.log"
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / "data"),
                "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.plain_port},SSL://127.0.0.1:{self.ssl_port},"
                         f"SASL_SSL://127.0.0.1:{self.sasl_port}",
                "--set", "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                "--set", "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
                         'PlainLoginModule required user_alice="alice-secret";',
                "--set", f"advertised.listeners=SSL://localhost:{self.ssl_port},"
                         f"SASL_SSL://localhost:{self.sasl_port}",
                "--set", f"ssl.keystore.location={keystore}", "--set", "offsets.topic.num.partitions=1",
                "--set", "offsets.topic.replication.factor=1"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.ssl_port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        self.ca.configure_trust(ctx)
        return ctx

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoListenerNode]:
    node = TwoListenerNode(tmp_path_factory.mktemp("listeners"))
    yield node
    node.stop()


def _brokers_and_coordinator(client: WireClient) -> tuple[list[tuple[int, str, int]], tuple[str, int]]:
    metadata = client.request(ApiKey.METADATA, 9, MetadataRequest(version=9, topics=None,
                                                                   allow_auto_topic_creation=False,
                                                                   include_cluster_authorized_operations=False,
                                                                   include_topic_authorized_operations=False))
    brokers = [(b.node_id, b.host, b.port) for b in metadata.brokers]
    for _ in range(50):
        found = client.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="g", key_type=0))
        if found.error_code == 0:
            return brokers, (found.host, found.port)
        time.sleep(0.1)
    raise AssertionError(found)


def test_each_listener_advertises_its_own_endpoint(node: TwoListenerNode) -> None:
    with WireClient("127.0.0.1", node.plain_port) as plain:
        brokers, coordinator = _brokers_and_coordinator(plain)
    assert brokers == [(1, "127.0.0.1", node.plain_port)] and coordinator == ("127.0.0.1", node.plain_port)
    with tls_client(node.ssl_port, node.ssl_context()) as secure:
        brokers, coordinator = _brokers_and_coordinator(secure)
    assert brokers == [(1, "localhost", node.ssl_port)] and coordinator == ("localhost", node.ssl_port)


def test_kafka_python_over_ssl(node: TwoListenerNode) -> None:
    options = {"bootstrap_servers": f"localhost:{node.ssl_port}", "security_protocol": "SSL",
               "ssl_cafile": str(node.cafile)}
    admin = KafkaAdminClient(**options)
    try:
        cluster = admin.describe_cluster()
        assert [(b["host"], b["port"]) for b in cluster["brokers"]] == [("localhost", node.ssl_port)]
    finally:
        admin.close()
    producer = KafkaProducer(**options)
    producer.send("tls-topic", b"over tls").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("tls-topic", group_id="tls-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **options)
    try:
        assert next(iter(consumer)).value == b"over tls"
        consumer.commit()
    finally:
        consumer.close()


def test_kafka_python_over_sasl_ssl(node: TwoListenerNode) -> None:
    options = {"bootstrap_servers": f"localhost:{node.sasl_port}", "security_protocol": "SASL_SSL",
               "ssl_cafile": str(node.cafile), "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
               "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(**options)
    producer.send("sasl-topic", b"authenticated").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("sasl-topic", group_id="sasl-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **options)
    try:
        assert next(iter(consumer)).value == b"authenticated"
        consumer.commit()
        brokers = consumer._client.cluster.brokers()
        assert {(b.host, b.port) for b in brokers} == {("localhost", node.sasl_port)}
    finally:
        consumer.close()


def test_scram_user_added_over_the_wire_then_kafka_python_over_sasl_ssl(node: TwoListenerNode) -> None:
    # AlterUserScramCredentials through the PLAINTEXT listener (groupcoord users), then SCRAM-SHA-512.
    done = subprocess.run([sys.executable, "-m", "coordinator", "users", "add", "bob", "--mechanism", "SCRAM-SHA-512",
                           "--password", "bob-secret", "--bootstrap-server", f"127.0.0.1:{node.plain_port}"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    producer = KafkaProducer(bootstrap_servers=f"localhost:{node.sasl_port}", security_protocol="SASL_SSL",
                             ssl_cafile=str(node.cafile), sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                             sasl_plain_password="bob-secret")
    try:
        producer.send("scram-topic", b"scram").get(timeout=10)
    finally:
        producer.close()


def test_confluent_kafka_over_ssl_and_sasl_ssl(node: TwoListenerNode) -> None:
    from confluent_kafka import Producer

    done = subprocess.run([sys.executable, "-m", "coordinator", "users", "add", "carol", "--mechanism", "SCRAM-SHA-512",
                           "--password", "carol-secret", "--bootstrap-server", f"127.0.0.1:{node.plain_port}"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    for settings in ({"bootstrap.servers": f"localhost:{node.ssl_port}", "security.protocol": "ssl"},
                     {"bootstrap.servers": f"localhost:{node.sasl_port}", "security.protocol": "sasl_ssl",
                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"}):
        delivered: list[object] = []
        producer = Producer({**settings, "ssl.ca.location": str(node.cafile), "message.timeout.ms": 10000})
        producer.produce("librdkafka-topic", b"v", on_delivery=lambda err, _msg, out=delivered: out.append(err))
        producer.flush(15)
        assert delivered == [None], (settings["security.protocol"], delivered)


def test_java_client_over_sasl_ssl_with_a_pem_truststore(node: TwoListenerNode) -> None:
    from tests.clients.tools import run_java

    done = subprocess.run([sys.executable, "-m", "coordinator", "users", "add", "dave", "--mechanism", "SCRAM-SHA-512",
                           "--password", "dave-secret", "--bootstrap-server", f"127.0.0.1:{node.plain_port}"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    props = ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
             "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
             'username="dave" password="dave-secret";',
             "ssl.truststore.type=PEM", f"ssl.truststore.location={node.cafile}"]
    res = run_java("ProduceConsume", ["stream", f"localhost:{node.sasl_port}", "java-topic", "1", "3", *props],
                   timeout=60).check()
    assert res.kv().get("stream.acked") == "3", res.describe()
