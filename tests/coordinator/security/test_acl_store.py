"""The ACL stores: the data-dir file, and ZooKeeper in Kafka's layout against a real ZooKeeper."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.config import ConfigError
from coordinator.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from coordinator.security.acl_bindings import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from coordinator.security.acl_store import FileAclStore, ZkAclStore
from coordinator.security.authorizer import AclAuthorizer

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ = AclOperation.READ


def binding(name: str, principal: str = "User:alice", op: AclOperation = READ, perm: AclPermissionType = ALLOW,
            pattern: PatternType = PatternType.LITERAL, rtype: ResourceType = ResourceType.TOPIC,
            host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry.of(principal, host, op, perm))


# --- the file ---------------------------------------------------------------------------------------


def test_file_store_survives_a_restart_and_removes(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path)
    acls = [binding("t1"), binding("t", pattern=PatternType.PREFIXED, perm=DENY, host="0:0:0:0:0:0:0:1"),
            binding("g", rtype=ResourceType.GROUP)]
    assert store.add(acls) == [None, None, None]
    again = FileAclStore(tmp_path)
    assert again.list() == sorted(acls)
    assert again.list()[0].entry.host in ("*", "::1")
    deleted = again.remove([AclBindingFilter(ResourceType.TOPIC)])
    assert deleted == [sorted(acls[:2])]
    assert FileAclStore(tmp_path).list() == [acls[2]]
    assert not (tmp_path / "acls.json.tmp").exists()


def test_a_corrupt_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text('{"version": 1, "resources": [{"name": ')
    with pytest.raises(ConfigError, match=r"acls\.json: unreadable ACL file"):
        FileAclStore(tmp_path)


# --- ZooKeeper --------------------------------------------------------------------------------------


@pytest.fixture
def clients(zookeeper: LocalZooKeeper, request: pytest.FixtureRequest) -> Iterator[list[KazooClient]]:
    chroot = "/" + request.node.name
    root = KazooClient(hosts=zookeeper.connect, timeout=10.0)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    made: list[KazooClient] = []
    for _ in range(3):
        client = KazooClient(hosts=zookeeper.connect + chroot, timeout=10.0)
        client.start(timeout=10)
        made.append(client)
    yield made
    for client in made:
        client.stop()
        client.close()


def wait_for(condition: Callable[[], object], what: str, timeout: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.01)


def test_a_change_on_one_node_is_in_force_on_the_other_within_a_second(clients: list[KazooClient]) -> None:
    one, two = ZkAclStore(clients[0]), ZkAclStore(clients[1])
    one.start()
    two.start()
    authorizer = AclAuthorizer(two.cache)
    assert not authorizer.authorize("User:alice", "10.0.0.1", READ, ResourceType.TOPIC, "orders")

    one.add([binding("orders"), binding("ord", pattern=PatternType.PREFIXED, principal="User:bob")])
    wait_for(lambda: authorizer.authorize("User:alice", "10.0.0.1", READ, ResourceType.TOPIC, "orders"),
             "alice's READ reaches the second node")
    wait_for(lambda: authorizer.authorize("User:bob", "10.0.0.1", READ, ResourceType.TOPIC, "orders-eu"),
             "bob's prefixed READ reaches the second node")

    two.remove([AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)])
    wait_for(lambda: len(one.cache) == 1, "the removal reaches the first node")

    # A third node starting now loads what is there.
    three = ZkAclStore(clients[2])
    three.start()
    assert three.list() == one.list() == two.list()


def test_kafka_layout_in_zookeeper(clients: list[KazooClient]) -> None:
    store = ZkAclStore(clients[0])
    store.start()
    store.add([binding("t1", host="0:0:0:0:0:0:0:1"), binding("g", pattern=PatternType.PREFIXED,
                                                                rtype=ResourceType.GROUP, op=AclOperation.ALL)])
    data, _ = clients[1].get("/kafka-acl/Topic/t1")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "::1"}]}
    data, _ = clients[1].get("/kafka-acl-extended/prefixed/Group/g")
    assert json.loads(data)["acls"][0]["operation"] == "All"
    literal = clients[1].get_children("/kafka-acl-changes")
    assert [clients[1].get(f"/kafka-acl-changes/{c}")[0] for c in literal] == [b"TOPIC:t1"]
    extended = clients[1].get_children("/kafka-acl-extended-changes")
    assert json.loads(clients[1].get(f"/kafka-acl-extended-changes/{extended[0]}")[0]) == {
        "version": 1, "resourceType": "GROUP", "name": "g", "patternType": "PREFIXED"}
    # The last ACL of a resource removed: its znode goes, as Kafka deletes it.
    store.remove([AclBindingFilter(ResourceType.TOPIC)])
    assert clients[1].exists("/kafka-acl/Topic/t1") is None


def test_acls_written_by_kafka_are_read(clients: list[KazooClient]) -> None:
    kafka = clients[1]
    kafka.ensure_path("/kafka-acl/Topic")
    kafka.create("/kafka-acl/Topic/payments", json.dumps({"version": 1, "acls": [
        {"principal": "User:carol", "permissionType": "Deny", "operation": "Write",
         "host": "0:0:0:0:0:0:0:1"}]}).encode())
    store = ZkAclStore(clients[0])
    store.start()
    authorizer = AclAuthorizer(store.cache, allow_if_no_acl=True)
    assert not authorizer.authorize("User:carol", "::1", AclOperation.WRITE, ResourceType.TOPIC, "payments")
    # And a change Kafka makes (znode, then its "TOPIC:name" change node) is picked up.
    kafka.set("/kafka-acl/Topic/payments", b'{"version":1,"acls":[]}')
    kafka.create("/kafka-acl-changes/acl_changes_", b"Topic:payments", sequence=True)
    wait_for(lambda: len(store.cache) == 0, "Kafka's change is applied")


def test_acls_cli_on_zookeeper(zookeeper: LocalZooKeeper, clients: list[KazooClient]) -> None:
    """``groupcoord acls --authorizer-properties zookeeper.connect=…``: a running node's store sees it."""
    import io

    from coordinator.acls_cli import run_acls
    from coordinator.cli import _parser

    node = ZkAclStore(clients[0])
    node.start()
    connect = f"zookeeper.connect={zookeeper.connect}/test_acls_cli_on_zookeeper"
    args = _parser().parse_args(["acls", "--authorizer-properties", connect, "--add", "--allow-principal",
                                 "User:alice", "--operation", "Read", "--topic", "t1"])
    assert run_acls(args, io.StringIO()) == 0
    wait_for(lambda: node.list() == [binding("t1")], "the CLI's ACL reaches the node")
