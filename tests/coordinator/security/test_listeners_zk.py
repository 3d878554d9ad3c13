"""Two nodes with an INTERNAL and an EXTERNAL listener each, in ZooKeeper: every endpoint is
registered in /brokers/ids/<id>, clients of each listener are told that listener's endpoints,
and replication (acks=all over two replicas) runs between the nodes."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from tests.conftest import REPO, free_ports
from tests.coordinator.cluster.conftest import wait_for


@pytest.fixture(scope="module")
def nodes(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, tuple[int, int]]]:
    root = tmp_path_factory.mktemp("two-listeners")
    base = free_ports(4)
    ports = {1: (base, base + 1), 2: (base + 2, base + 3)}
    procs = []
    for broker_id, (internal, external) in ports.items():
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / f"node-{broker_id}"),
                "--set", f"listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
                "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                "--set", "inter.broker.listener.name=INTERNAL", "--set", f"broker.id={broker_id}",
                "--set", f"zookeeper.connect={zookeeper.connect}/two_listeners",
                "--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.fetch.backoff.ms=200",
                "--set", "offsets.topic.replication.factor=2", "--set", "transaction.state.log.replication.factor=2"]
        log = open(root / f"node-{broker_id}.log", "wb")
        procs.append(subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
        log.close()

    def listening(port: int) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    try:
        for _, external in ports.values():
            wait_for(lambda p=external: listening(p), 30, f"a node listening on {external}")
        yield ports
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(30)


def test_every_endpoint_is_registered_and_advertised_per_listener(
        nodes: dict[int, tuple[int, int]], zookeeper: LocalZooKeeper) -> None:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=f"{zookeeper.connect}/two_listeners", timeout=10.0)
    client.start(timeout=10)
    try:
        data, _ = client.get("/brokers/ids/1")
    finally:
        client.stop()
        client.close()
    registration = json.loads(data)
    internal, external = nodes[1]
    assert registration["endpoints"] == [f"INTERNAL://127.0.0.1:{internal}", f"EXTERNAL://127.0.0.1:{external}"]
    assert registration["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}

    for index in (0, 1):  # INTERNAL, then EXTERNAL
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{nodes[1][index]}")
        try:
            brokers = wait_for(lambda a=admin: len(a.describe_cluster()["brokers"]) == 2 and a.describe_cluster(),
                               20, "both nodes registered")["brokers"]
        finally:
            admin.close()
        assert sorted((b["broker_id"], b["port"]) for b in brokers) == [(1, nodes[1][index]), (2, nodes[2][index])]


def test_replication_between_the_nodes(nodes: dict[int, tuple[int, int]]) -> None:
    bootstrap = f"127.0.0.1:{nodes[2][1]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic("replicated", 2, 2)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20)
    try:
        for partition in (0, 1):
            record = producer.send("replicated", b"both copies", partition=partition).get(timeout=20)
            assert record.offset == 0
    finally:
        producer.close()


# --- nodes reaching each other over SASL_SSL -------------------------------------------------------

BROKER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
               'password="broker-secret" user_broker="broker-secret";')


@pytest.fixture(scope="module")
def secure_nodes(zookeeper: LocalZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, int]]:
    import trustme

    root = tmp_path_factory.mktemp("sasl-ssl-between-nodes")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore, truststore = root / "node.pem", root / "ca.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(b.bytes() for b in cert.cert_chain_pems))
    truststore.write_bytes(ca.cert_pem.bytes())
    base = free_ports(4)
    external = {1: base + 1, 2: base + 3}
    procs = []
    for broker_id in (1, 2):
        internal = base + 2 * (broker_id - 1)
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(root / f"node-{broker_id}"),
                "--set", f"listeners=INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external[broker_id]}",
                "--set", "listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:PLAINTEXT",
                "--set", "inter.broker.listener.name=INTERNAL", "--set", "sasl.mechanism.inter.broker.protocol=PLAIN",
                "--set", "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
                "--set", f"listener.name.internal.plain.sasl.jaas.config={BROKER_JAAS}",
                "--set", f"ssl.keystore.location={keystore}", "--set", f"ssl.truststore.location={truststore}",
                "--set", f"broker.id={broker_id}", "--set", f"zookeeper.connect={zookeeper.connect}/sasl_ssl_nodes",
                "--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.fetch.backoff.ms=200",
                "--set", "offsets.topic.replication.factor=2", "--set", "transaction.state.log.replication.factor=2"]
        log = open(root / f"node-{broker_id}.log", "wb")
        procs.append(subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    try:
        for port in external.values():
            wait_for(lambda p=port: _listening(p), 30, f"a node listening on {port}")
        yield external
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(30)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def test_replication_over_sasl_ssl_between_the_nodes(secure_nodes: dict[int, int]) -> None:
    # acks=all on two replicas answers only once the follower fetched over INTERNAL (TLS, SASL
    # PLAIN as user broker); the ISR would not shrink within the 10 s waited here.
    bootstrap = f"127.0.0.1:{secure_nodes[1]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: len(admin.describe_cluster()["brokers"]) == 2, 20, "both nodes registered")
        admin.create_topics([NewTopic("secure", 2, 2)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20)
    try:
        for partition in (0, 1):
            assert producer.send("secure", b"over tls", partition=partition).get(timeout=10).offset == 0
    finally:
        producer.close()
