"""SCRAM end to end: users made with ``groupcoord users`` (offline, then over the wire) log in to a
SASL_PLAINTEXT listener from stock clients — kafka-python (SCRAM-SHA-512), confluent-kafka
(librdkafka 2.16, SCRAM-SHA-256) and kcat (its bundled librdkafka 2.0.2 sends the client nonce
twice in client-final, which Kafka 3.8.1+ and we accept; reference/security.md §10) — and a bad
password and an unknown user fail alike, at client-final, with Kafka's generic error 58. With the
ACL authorizer on, only a super user may alter credentials."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.conftest import REPO, free_port
from tests.wire_client import WireClient

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


def _groupcoord(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


class ScramNode:
    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        self.data.mkdir()
        # Users made offline before the node starts: the node reads them from its data directory.
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            done = _groupcoord("users", "add", "admin", "--mechanism", mechanism, "--password", "admin-secret",
                               "--data-dir", str(self.data))
            assert done.returncode == 0, done.stderr
        done = _groupcoord("users", "add", "alice", "--mechanism", "SCRAM-SHA-512", "--password", "alice-secret",
                           "--iterations", "8192", "--data-dir", str(self.data))
        assert done.returncode == 0, done.stderr
        self.port = free_port()
        self.log = root / "server.log"
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(self.data),
                "--set", f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.port}",
                "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
                "--set", "authorizer.class.name=groupcoord", "--set", "super.users=User:admin",
                "--set", "connection.failed.authentication.delay.ms=50",
                "--set", "offsets.topic.num.partitions=1", "--set", "offsets.topic.replication.factor=1"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:
    node = ScramNode(tmp_path_factory.mktemp("scram"))
    yield node
    node.stop()


def _command_config(tmp_path: Path, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> Path:
    path = tmp_path / f"{user}.properties"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";\n')
    return path


def test_kafka_python_scram_sha_512_produces_consumes_and_commits(node: ScramNode) -> None:
    options = {"bootstrap_servers": node.bootstrap, "security_protocol": "SASL_PLAINTEXT",
               "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "admin",
               "sasl_plain_password": "admin-secret"}
    producer = KafkaProducer(**options)
    producer.send("scram-topic", b"authenticated").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("scram-topic", group_id="scram-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **options)
    try:
        assert next(iter(consumer)).value == b"authenticated"
        consumer.commit()
    finally:
        consumer.close()


def test_confluent_kafka_scram_sha_256(node: ScramNode) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    assert list(admin.list_topics(timeout=10).brokers) == [1]


def test_kcat_with_old_librdkafka_doubled_nonce(node: ScramNode) -> None:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by tests/clients/setup_clients.sh"
    done = subprocess.run([kcat, "-b", node.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
                           "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=alice",
                           "-X", "sasl.password=alice-secret", "-L", "-m", "10"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and " 1 brokers:" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_bad_password_and_unknown_user_fail_alike_at_client_final(node: ScramNode, user: str, password: str) -> None:
    with WireClient("127.0.0.1", node.port) as client:
        handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-512"))
        assert handshake.error_code == ErrorCode.NONE
        scram = ScramClient(["SCRAM-SHA-512"], user, password)
        first = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
            version=2, auth_bytes=scram.get_client_first().encode()))
        assert first.error_code == ErrorCode.NONE  # an unknown name gets a server-first too
        scram.set_server_first(bytes(first.auth_bytes).decode())
        final = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
            version=2, auth_bytes=scram.get_client_final().encode()))
        assert (final.error_code, final.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, GENERIC)
        client.sock.settimeout(5)
        assert client.sock.recv(1) == b""  # then the connection closes


def test_users_cli_over_the_wire_needs_alter_cluster(node: ScramNode, tmp_path: Path) -> None:
    wire = ["--bootstrap-server", node.bootstrap]
    as_alice = [*wire, "--command-config", str(_command_config(tmp_path, "alice", "alice-secret"))]
    denied = _groupcoord("users", "add", "carol", "--mechanism", "SCRAM-SHA-256", "--password", "c", *as_alice)
    assert denied.returncode == 1 and "error 31" in denied.stderr, denied.stderr
    as_admin = [*wire, "--command-config", str(_command_config(tmp_path, "admin", "admin-secret"))]
    done = _groupcoord("users", "add", "carol", "--mechanism", "SCRAM-SHA-256", "--password", "carol-secret",
                       *as_admin)
    assert done.returncode == 0, done.stderr
    listed = _groupcoord("users", "list", *as_admin)
    assert "user-principal 'carol' are SCRAM-SHA-256=iterations=4096" in listed.stdout, listed.stderr
    assert "user-principal 'alice' are SCRAM-SHA-512=iterations=8192" in listed.stdout
    # carol can log in at once (PLAIN is not enabled on this listener: her SCRAM credential is all she has).
    as_carol = [*wire, "--command-config", str(_command_config(tmp_path, "carol", "carol-secret", "SCRAM-SHA-256"))]
    described = _groupcoord("users", "list", *as_carol)
    assert described.returncode == 1 and "error 31" in described.stderr  # logged in, but no DESCRIBE CLUSTER
