"""A three-node cluster (real ZooKeeper) whose only listener is SASL_SSL, for clients and between the
nodes (SCRAM-SHA-512, certificates from trustme for 127.0.0.1/localhost), with ACLs on: the nodes'
principal ``User:broker`` is a super user, the consumers' ``User:alice`` has only what a consumer needs
(READ, DESCRIBE on its topics, READ on its groups; ``kafka-acls.sh --consumer``, reference:
https://kafka.apache.org/documentation/#security_authz_cli). Issue 33's "done when":

* ACL and SCRAM changes made through one node hold on every node: a CreateAcls through node 1 lets a
  denied client fetch a group's offsets at the coordinators on the other nodes within a second; a user created with
  AlterUserScramCredentials through node 1 logs in on every node; both are in ZooKeeper at Kafka's
  paths (``/kafka-acl…``, ``/config/users/<user>``).
* The group failover of test_consumer_group_failover_clients.py over SASL_SSL: a group of stock
  consumers (confluent-kafka, KIP-848) consuming and committing while the coordinator's node is
  SIGKILLed moves to another node; no acknowledged commit is lost or rewound, consumption goes on.

One cluster for the module; the failover test runs last (it kills a node).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from coordinator.cluster.local_cluster import LocalCluster
from coordinator.security.sasl.scram_formatter import make_credential
from coordinator.security.scram_credentials import ZkScramStore
from protocol.hashing import partition_for
from tests.clients.group_consumer_protocol import CONSUMER_PROTOCOL_SERVER
from tests.clients.group_scenario import (
    P,
    all_consumed,
    check_exactly_once,
    ctx,
    start_member,
    uid,
    wait_stable,
    wait_until,
)
from tests.clients.records_io import Rec
from tests.coordinator.cluster.conftest import SESSION_MS, running_cluster, wait_for
from tests.coordinator.cluster.test_replication import _leader

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

OFFSETS_PARTITIONS = 3
MEMBER_SESSION_MS = 20000
MECHANISM = "SCRAM-SHA-512"
BROKER, BROKER_PASSWORD = "broker", "broker-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
#: The consumers' topics and groups: alice's ACLs are PREFIXED on these.
TOPIC_PREFIX, GROUP_PREFIX = "sec-t-", "sec-g-"


class Secured:
    def __init__(self, cluster: LocalCluster, ca: Path) -> None:
        self.cluster = cluster
        self.ca = ca
        self._admins: dict[tuple[str, tuple[int, ...]], Any] = {}

    def client_conf(self, user: str, password: str, nodes: tuple[int, ...] = (1, 2, 3)) -> dict[str, Any]:
        """librdkafka settings for ``user`` on the given nodes (reference/security.md §9)."""
        return {"bootstrap.servers": ",".join(f"127.0.0.1:{self.cluster.ports[n - 1]}" for n in nodes),
                "security.protocol": "sasl_ssl", "sasl.mechanism": MECHANISM, "sasl.username": user,
                "sasl.password": password, "ssl.ca.location": str(self.ca)}

    def broker_conf(self, nodes: tuple[int, ...] = (1, 2, 3)) -> dict[str, Any]:
        return self.client_conf(BROKER, BROKER_PASSWORD, nodes)

    def admin(self, nodes: tuple[int, ...] = (1, 2, 3), user: str = BROKER, password: str = BROKER_PASSWORD) -> Any:
        """One AdminClient per user and nodes, kept for the module: a handle destroyed before its
        futures are done fails them (_DESTROY)."""
        from confluent_kafka.admin import AdminClient

        key = (user, nodes)
        if key not in self._admins:
            self._admins[key] = AdminClient(self.client_conf(user, password, nodes))
        return self._admins[key]

    def zk(self) -> Any:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.cluster.zookeeper.connect, timeout=10.0)
        client.start(timeout=10)
        return client


def _write_certs(root: Path) -> tuple[Path, Path]:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore, truststore = root / "node.pem", root / "ca.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(b.bytes() for b in cert.cert_chain_pems))
    truststore.write_bytes(ca.cert_pem.bytes())
    return keystore, truststore


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    root = tmp_path_factory.mktemp("sasl-ssl-cluster")
    keystore, truststore = _write_certs(root)
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{BROKER}" '
            f'password="{BROKER_PASSWORD}";')
    settings = [
        # {port}: each node's own port (local_cluster.py); the one listener serves clients and nodes.
        "listeners=SASL_SSL://127.0.0.1:{port}", "inter.broker.listener.name=SASL_SSL",
        f"sasl.enabled.mechanisms={MECHANISM}", f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config={jaas}",
        f"ssl.keystore.location={keystore}", f"ssl.truststore.location={truststore}",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer", f"super.users=User:{BROKER}",
        f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
        *(f"{k}={v}" for k, v in {**CONSUMER_PROTOCOL_SERVER,
                                  "group.consumer.session.timeout.ms": str(MEMBER_SESSION_MS)}.items()),
    ]
    with running_cluster(root / "cluster", *settings) as cluster:
        s = Secured(cluster, truststore)
        # The first SCRAM users go straight to ZooKeeper, as `kafka-configs.sh --zookeeper` would
        # (no one can log in to ask the nodes yet); the nodes' watches pick them up.
        zk = s.zk()
        try:
            class _Session:
                client = zk
            store = ZkScramStore(_Session())
            store.start()
            store.alter({(BROKER, MECHANISM): make_credential(MECHANISM, BROKER_PASSWORD),
                         (ALICE, MECHANISM): make_credential(MECHANISM, ALICE_PASSWORD)}, set())
        finally:
            zk.stop()
            zk.close()
        admin = s.admin()
        consumer_acls = [
            AclBinding(ResourceType.TOPIC, TOPIC_PREFIX, ResourcePatternType.PREFIXED, f"User:{ALICE}", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, TOPIC_PREFIX, ResourcePatternType.PREFIXED, f"User:{ALICE}", "*",
                       AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, GROUP_PREFIX, ResourcePatternType.PREFIXED, f"User:{ALICE}", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        for future in admin.create_acls(consumer_acls, request_timeout=20).values():
            future.result()
        yield s


def _produce(s: Secured, topic: str, start: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**s.broker_conf(), "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        rec = Rec(i % P, int(time.time() * 1000), f"k{i}".encode(), f"v{i}".encode())
        producer.produce(topic, key=rec.key, value=rec.value, partition=rec.partition)
        producer.poll(0)
    assert producer.flush(30) == 0


def _create_topic(s: Secured, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = s.admin()
    for future in admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})],
                                      request_timeout=20).values():
        future.result()
    wait_for(lambda: topic in admin.list_topics(timeout=10).topics, 20, f"{topic} in the metadata")


def _offsets_as(s: Secured, user: str, password: str, group: str, nodes: tuple[int, ...] = (1, 2, 3)) -> dict[int, int]:
    """OffsetFetch of ``group`` as ``user`` (FindCoordinator, then its coordinator) with kafka-python:
    librdkafka's AdminClient (2.x) crashes (SIGSEGV in rd_kafka_cgrp_op, from
    rd_kafka_handle_OffsetFetch) when ListConsumerGroupOffsets meets a coordinator error."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(
        bootstrap_servers=[f"127.0.0.1:{s.cluster.ports[n - 1]}" for n in nodes], security_protocol="SASL_SSL",
        sasl_mechanism=MECHANISM, sasl_plain_username=user, sasl_plain_password=password, ssl_cafile=str(s.ca),
        request_timeout_ms=10000)
    try:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items()}
    finally:
        admin.close()


def _committed(s: Secured, group: str, nodes: tuple[int, ...]) -> dict[int, int]:
    return _offsets_as(s, BROKER, BROKER_PASSWORD, group, nodes)


def _ensure_offsets_topic(s: Secured) -> None:
    """FindCoordinator as the super user creates __consumer_offsets, so its leaders can be read."""
    wait_for(lambda: _fetch_offsets_as(s, BROKER, BROKER_PASSWORD, GROUP_PREFIX + "warm-up") is None, 20,
             "the offsets topic's coordinators loaded")


def _group_coordinated_by(s: Secured, node: int, prefix: str) -> str:
    for i in range(10000):
        group = f"{prefix}{i}"
        if _leader(s.cluster, "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS)) == node:
            return group
    raise AssertionError(f"no group name coordinated by node {node}")


def _fetch_offsets_as(s: Secured, user: str, password: str, group: str) -> str | None:
    """The error class name of an OffsetFetch of ``group`` as ``user``, or None when answered."""
    from kafka.errors import KafkaError

    try:
        _offsets_as(s, user, password, group)
        return None
    except KafkaError as exc:
        return type(exc).__name__


def _allowed(s: Secured, group: str) -> bool:
    return _fetch_offsets_as(s, ALICE, ALICE_PASSWORD, group) is None


def test_acl_created_through_one_node_holds_on_every_node_within_a_second(secured: Secured) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    _ensure_offsets_topic(secured)
    # Groups outside alice's prefix, one coordinated by each node: denied until the new ACL.
    groups = {node: _group_coordinated_by(secured, node, f"late-{uid('g')}-") for node in (1, 2, 3)}
    for group in groups.values():
        assert _fetch_offsets_as(secured, ALICE, ALICE_PASSWORD, group) == "GroupAuthorizationFailedError"

    binding = AclBinding(ResourceType.GROUP, "late-", ResourcePatternType.PREFIXED, f"User:{ALICE}", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin = secured.admin((1,))
    for future in admin.create_acls([binding], request_timeout=20).values():
        future.result()
    created = time.monotonic()
    for node in (2, 3, 1):
        wait_for(partial(_allowed, secured, groups[node]),
                 max(0.0, 1.0 - (time.monotonic() - created)) + 1.0,  # + 1 s: the client's own connects
                 f"alice fetching offsets at node {node}'s coordinator after the ACL was created through node 1")
    applied = time.monotonic() - created
    assert applied < 2.0, applied
    zk = secured.zk()
    try:
        data, _ = zk.get("/kafka-acl-extended/prefixed/Group/late-")
        assert json.loads(data)["acls"] == [{"principal": f"User:{ALICE}", "permissionType": "Allow",
                                             "operation": "Read", "host": "*"}]
        assert json.loads(zk.get(f"/kafka-acl-extended/prefixed/Topic/{TOPIC_PREFIX}")[0])["version"] == 1
    finally:
        zk.stop()
        zk.close()


def test_scram_user_created_through_one_node_logs_in_on_every_node(secured: Secured) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    user, password = uid("bob"), "bob-secret"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          password.encode())
    admin = secured.admin((1,))
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=20).values():
        future.result()
    created = time.monotonic()

    def logs_in(node: int) -> bool:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(secured.client_conf(user, password, (node,)))
        try:
            # Metadata needs no ACL: it answers (brokers, no topics) once SCRAM succeeded.
            return bool(admin.list_topics(timeout=2).brokers)
        except KafkaException:
            return False

    for node in (2, 3, 1):
        wait_for(partial(logs_in, node), 3, f"{user} logging in on node {node}")
    assert time.monotonic() - created < 4.0
    zk = secured.zk()
    try:
        config = json.loads(zk.get(f"/config/users/{user}")[0])["config"]
        assert set(config) == {MECHANISM} and "iterations=4096" in config[MECHANISM]
    finally:
        zk.stop()
        zk.close()
    # A wrong password is still refused on the other nodes (librdkafka reports it at the timeout).
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    for node in (2, 3):
        with pytest.raises(KafkaException):
            AdminClient(secured.client_conf(user, "wrong", (node,))).list_topics(timeout=1.5)


class _Log:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def log_text(self) -> str:
        return "\n".join(f"[node {b}] {line}" for b in (1, 2, 3)
                         for line in self.cluster.log_path(b).read_text(errors="replace").splitlines()[-20:])


def test_consumer_group_fails_over_over_sasl_ssl(secured: Secured, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """test_consumer_group_failover_clients.py's scenario, as alice over SASL_SSL: runs last."""
    cluster = secured.cluster
    topic, group = uid(TOPIC_PREFIX + "fo"), uid(GROUP_PREFIX + "fo")
    _create_topic(secured, topic, P)
    _produce(secured, topic, 0, 1200)
    conf = secured.client_conf(ALICE, ALICE_PASSWORD)
    monkeypatch.setenv("GROUP_MEMBER_CONFIG", json.dumps({k: v for k, v in conf.items() if k != "bootstrap.servers"}))
    members = [start_member("confluent", f"m{i}", conf["bootstrap.servers"], topic, group, "consumer", tmp_path)
               for i in range(2)]
    log = _Log(cluster)
    try:
        assert wait_until(lambda: all_consumed(members, 1200), 60), ctx(members, log)
        assert wait_stable(members, 30), ctx(members, log)
        coordinator = _leader(cluster, "__consumer_offsets", partition_for(group, OFFSETS_PARTITIONS))
        marks = {m.name: m.mark() for m in members}
        acked: dict[int, int] = {}
        for m in members:
            for p, o in m.commits().items():
                acked[p] = max(acked.get(p, 0), o)
        killed = time.monotonic()
        cluster.procs[coordinator].kill()
        live = tuple(b for b in (1, 2, 3) if b != coordinator)
        _produce(secured, topic, 1200, 1200)
        assert wait_until(lambda: any(tag == "C" for m in members for tag, _ in m.events()[marks[m.name]:]),
                          SESSION_MS / 1000 + 30, 0.05), "no commit acknowledged after the kill\n" + ctx(members, log)
        committing = time.monotonic() - killed
        assert wait_until(lambda: all_consumed(members, 2400), 60), ctx(members, log)

        # No acknowledged commit lost, none rewound, no reassignment across the failover.
        got = _committed(secured, group, live)
        assert all(got.get(p, -1) >= o for p, o in acked.items()), (got, acked)
        moved = {m.name: [e for e in m.events()[marks[m.name]:] if e[0] in ("A", "REV", "LOST")] for m in members}
        assert not any(moved.values()), f"assignment changes across the coordinator failover: {moved}\n" + \
            ctx(members, log)
        for m in members:
            last: dict[int, int] = {}
            for tag, rest in m.events():
                if tag == "C":
                    p, o = map(int, rest.split())
                    assert o >= last.get(p, -1), f"{m.name}: partition {p} committed {o} after {last[p]}"
                    last[p] = o
        check_exactly_once(members, 2400, lambda p, o, who: o >= acked.get(p, 0), ctx(members, log))
        for m in members:
            m.request_stop()
        for m in members:
            assert m.bg.wait(30) is not None, f"{m.name} did not stop\n{ctx(members, log)}"
        want = {p: 2400 // P for p in range(P)}
        assert wait_until(lambda: _committed(secured, group, live) == want, 20, 0.5), \
            f"committed {_committed(secured, group, live)}, want {want}\n{ctx(members, log)}"
        print(f"SASL_SSL: first acknowledged commit {committing:.2f} s after the SIGKILL of node {coordinator}")
    finally:
        for m in members:
            m.bg.stop()
