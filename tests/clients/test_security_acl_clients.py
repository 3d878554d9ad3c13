"""ACLs with stock clients, on one node (tests/clients/security_io.py) with the ACL authorizer and
``allow.everyone.if.no.acl.found=true``: a resource without ACLs is open, one with ACLs only to
the principals they allow (Kafka docs §7.5, https://kafka.apache.org/documentation/#security_authz).

- A member whose principal lacks GROUP READ (Java, confluent-kafka, kafka-python) gets
  GROUP_AUTHORIZATION_FAILED joining and committing, and changes nothing: the committed offset stays,
  the group it tried to join is never created.
- A prefixed ACL added offline with ``groupcoord acls --resource-pattern-type prefixed`` opens every
  group of the prefix to its principal and to no one else.
- A DENY overrides an ALLOW (ACLs created, listed and deleted with confluent-kafka's AdminClient).
- Java's Admin creates, lists and deletes ACLs, makes a SCRAM user with alterUserScramCredentials
  (as ``kafka-configs.sh`` does) who then logs in, and reads KIP-430 authorized operations of a
  group and of the cluster that follow the ACLs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.security.acl import AclOperation, ResourceType
from tests.clients.security_io import PASSWORDS, SecureNode, acl
from tests.clients.tools import run_java
from tests.conftest import REPO

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]
TOPIC = "acl-topic"
GUARDED = "guarded"  # has a committed offset (1); only admin may read it
LOCKED = "locked-new"  # never used; only admin may read it
OPS_GROUP = "ops-group"  # exists (admin committed); the Java test lets alice read it


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    root = tmp_path_factory.mktemp("sec-acls")
    (root / "data").mkdir()
    done = subprocess.run([sys.executable, "-m", "coordinator", "acls", "--add", "--data-dir", str(root / "data"),
                           "--allow-principal", "User:bob", "--operation", "Read", "--group", "team-",
                           "--resource-pattern-type", "prefixed"],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    node = SecureNode(root, acls=[acl("User:admin", AclOperation.READ, ResourceType.GROUP, group)
                                  for group in (GUARDED, LOCKED)])
    _setup(node)
    yield node
    node.stop()


def _setup(node: SecureNode) -> None:
    """As the super user: three records in acl-topic and deny-topic, offset 1 committed for guarded
    and ops-group."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**node.admin(), "linger.ms": 0})
    for topic in (TOPIC, "deny-topic"):
        for i in range(3):
            producer.produce(topic, value=f"r{i}".encode(), partition=0)
    assert producer.flush(20) == 0
    for group in (GUARDED, OPS_GROUP):
        consumer = Consumer({**node.admin(), "group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        consumer.close()


def _admin(node: SecureNode):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient(node.admin())


def _assert_nothing_changed(node: SecureNode) -> None:
    """guarded still has offset 1 and no members; locked-new does not exist."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = _admin(node)
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(GUARDED, [TopicPartition(TOPIC, 0)])])[GUARDED].result(10)
    assert [tp.offset for tp in offsets.topic_partitions] == [1]
    groups = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert GUARDED in groups and LOCKED not in groups, groups
    described = admin.describe_consumer_groups([GUARDED, LOCKED])
    assert described[GUARDED].result(10).members == []
    assert str(described[LOCKED].result(10).state) in ("ConsumerGroupState.DEAD", "ConsumerGroupState.UNKNOWN")


# ------------------------------------------------------------------------------ group READ denied


def test_java_member_without_group_read(node: SecureNode, tmp_path: Path) -> None:
    props = node.java_properties(tmp_path / "alice.properties", mechanism="SCRAM-SHA-512", user="alice",
                                 password=PASSWORDS["alice"])
    result = run_java("SecClient", ["denied", str(props), TOPIC, LOCKED, GUARDED], timeout=60).check().kv()
    for step in ("subscribe", "commit"):
        assert result[f"{step}.error"].startswith(
            "org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized to access group"), result
    _assert_nothing_changed(node)


def test_confluent_kafka_member_without_group_read(node: SecureNode) -> None:
    """librdkafka learns of the denial from FindCoordinator (DESCRIBE on the group is missing too) and
    hands it to poll(); an explicit commit would wait for a coordinator until its timeout, so the
    commit tried here is the auto-commit of a member of ``guarded``."""
    from confluent_kafka import Consumer, KafkaError

    conf = node.librdkafka(mechanism="PLAIN", user="bob", password=PASSWORDS["bob"])
    for group in (LOCKED, GUARDED):
        consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                             "auto.commit.interval.ms": 100})
        try:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 15
            error = None
            while error is None and time.monotonic() < deadline:
                msg = consumer.poll(0.3)
                assert msg is None or msg.error(), msg.value()
                if msg is not None:
                    error = msg.error()
            assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        finally:
            consumer.close()
    _assert_nothing_changed(node)


def test_kafka_python_member_without_group_read(node: SecureNode) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import GroupAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    options = node.kafka_python(mechanism=None, user="alice", listener="SSL")
    consumer = KafkaConsumer(TOPIC, group_id=LOCKED, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             **options)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            next(iter(consumer))
    finally:
        consumer.close()
    consumer = KafkaConsumer(group_id=GUARDED, enable_auto_commit=False, **options)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "", -1)})
    finally:
        consumer.close()
    _assert_nothing_changed(node)


# ------------------------------------------------------------------------------ prefixed, DENY


def test_prefixed_group_acl(node: SecureNode) -> None:
    """The ACL added offline for groups ``team-*`` lets bob in, and keeps alice out of them."""
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    bob = KafkaConsumer(TOPIC, group_id="team-blue", auto_offset_reset="earliest", enable_auto_commit=False,
                        consumer_timeout_ms=10000,
                        **node.kafka_python(mechanism="SCRAM-SHA-256", user="bob", password=PASSWORDS["bob"]))
    try:
        assert next(iter(bob)).value == b"r0"
        bob.commit()
    finally:
        bob.close()
    alice = KafkaConsumer(TOPIC, group_id="team-red", auto_offset_reset="earliest", consumer_timeout_ms=10000,
                          **node.kafka_python(mechanism="SCRAM-SHA-256", user="alice", password=PASSWORDS["alice"]))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            next(iter(alice))
    finally:
        alice.close()


def test_deny_overrides_allow_with_confluent_admin_acls(node: SecureNode) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    admin = _admin(node)
    allow = AclBinding(ResourceType.TOPIC, "deny-topic", ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, "deny-topic", ResourcePatternType.LITERAL, "User:bob", "*",
                      AclOperation.READ, AclPermissionType.DENY)
    for future in admin.create_acls([allow, deny], request_timeout=10).values():
        future.result()
    selector = AclBindingFilter(ResourceType.TOPIC, "deny-topic", ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(admin.describe_acls(selector, request_timeout=10).result(), key=str) == sorted([allow, deny], key=str)

    def read(user: str) -> object:
        consumer = Consumer({**node.librdkafka(mechanism="SCRAM-SHA-512", user=user, password=PASSWORDS[user]),
                             "group.id": f"deny-{user}", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("deny-topic", 0, 0)])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                msg = consumer.poll(0.3)
                if msg is not None:
                    return msg.error().code() if msg.error() else msg.value()
            return None
        finally:
            consumer.close()

    assert read("alice") == b"r0"
    assert read("bob") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    deleted = admin.delete_acls([selector], request_timeout=10)[selector].result()
    assert sorted(deleted, key=str) == sorted([allow, deny], key=str)
    assert admin.describe_acls(selector, request_timeout=10).result() == []


# ------------------------------------------------------------------------------ Java Admin


def test_java_admin_acls_scram_users_and_authorized_operations(node: SecureNode, tmp_path: Path) -> None:
    admin = node.java_properties(tmp_path / "admin.properties", mechanism="PLAIN", user="admin",
                                 password=PASSWORDS["admin"], listener="SASL_PLAINTEXT")
    alice = node.java_properties(tmp_path / "alice.properties", mechanism="SCRAM-SHA-512", user="alice",
                                 password=PASSWORDS["alice"])
    carol = node.java_properties(tmp_path / "carol.properties", mechanism="SCRAM-SHA-512", user="carol",
                                 password="carol-secret")
    result = run_java("SecClient", ["admin", str(admin), str(alice), str(carol), TOPIC, OPS_GROUP],
                      timeout=60).check().kv()
    assert not [key for key in result if key.endswith(".error")], result
    assert result["describe.acls"] == ";".join([
        "CLUSTER:LITERAL:kafka-cluster:User:alice:ALTER_CONFIGS:ALLOW",
        "CLUSTER:LITERAL:kafka-cluster:User:alice:DESCRIBE:ALLOW",
        f"GROUP:LITERAL:{OPS_GROUP}:User:alice:READ:ALLOW",
        "TOPIC:PREFIXED:java-:User:alice:WRITE:ALLOW"]), result
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS, READ implies DESCRIBE (Kafka's AclAuthorizer).
    assert result["cluster.ops"] == "ALTER_CONFIGS,DESCRIBE,DESCRIBE_CONFIGS", result
    assert result["group.ops"] == "DESCRIBE,READ", result
    assert result["delete.acls"] == ("CLUSTER:LITERAL:kafka-cluster:User:alice:ALTER_CONFIGS:ALLOW;"
                                      "CLUSTER:LITERAL:kafka-cluster:User:alice:DESCRIBE:ALLOW"), result
    assert result["describe.after_delete"] == (f"GROUP:LITERAL:{OPS_GROUP}:User:alice:READ:ALLOW;"
                                               "TOPIC:PREFIXED:java-:User:alice:WRITE:ALLOW"), result
    # No cluster ACLs left: allow.everyone.if.no.acl.found opens every cluster operation.
    assert set(result["cluster.ops_after_delete"].split(",")) >= {
        "ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"}, result
    assert result["scram.users"] == "true" and result["carol.ok"] == "1", result
