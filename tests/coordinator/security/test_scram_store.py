"""SCRAM credential stores: the data-directory file and ZooKeeper's /config/users as Kafka writes it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from coordinator.cluster.local_zookeeper import LocalZooKeeper
from coordinator.cluster.zookeeper import ZooKeeper
from coordinator.security.sasl.scram_formatter import credential_to_string, make_credential
from coordinator.security.scram_credentials import FileScramStore, ZkScramStore, desanitize_user, sanitize_user

ALICE_256 = make_credential("SCRAM-SHA-256", "alice-secret", 4096, b"salt1")
ALICE_512 = make_credential("SCRAM-SHA-512", "alice-secret", 8192, b"salt2")


def test_sanitize_like_kafka() -> None:
    assert sanitize_user("alice") == "alice"
    assert sanitize_user("a b*c~d,e=f/g") == "a%20b%2Ac%7Ed%2Ce%3Df%2Fg"
    assert sanitize_user("x.y-z_1") == "x.y-z_1"
    for name in ("a b*c~d,e=f/g", "ü", "%41"):
        assert desanitize_user(sanitize_user(name)) == name


def test_file_store_round_trip_and_durable_replace(tmp_path: Path) -> None:
    store = FileScramStore(tmp_path)
    assert store.get("alice", "SCRAM-SHA-256") is None
    store.alter({("alice", "SCRAM-SHA-256"): ALICE_256, ("alice", "SCRAM-SHA-512"): ALICE_512,
                 ("b,=\"", "SCRAM-SHA-256"): ALICE_256}, set())
    assert store.get("alice", "SCRAM-SHA-512") == ALICE_512
    body = json.loads((tmp_path / "scram-credentials.json").read_text())
    assert body["users"]["alice"]["SCRAM-SHA-256"] == credential_to_string(ALICE_256)
    assert not list(tmp_path.glob("*.tmp"))
    again = FileScramStore(tmp_path)
    assert again.users() == store.users()
    again.alter({}, {("alice", "SCRAM-SHA-256"), ("b,=\"", "SCRAM-SHA-256")})
    assert FileScramStore(tmp_path).users() == {"alice": {"SCRAM-SHA-512": ALICE_512}}


def test_file_store_refuses_a_damaged_file(tmp_path: Path) -> None:
    (tmp_path / "scram-credentials.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        FileScramStore(tmp_path)


def _session(zookeeper: LocalZooKeeper, chroot: str) -> ZooKeeper:
    zk = ZooKeeper(zookeeper.connect + chroot, 6000, 10000)
    zk.start()
    return zk


def _until(condition, what: str, timeout: float = 1.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.01)


def test_zookeeper_store_writes_kafkas_layout_and_other_nodes_follow(zookeeper: LocalZooKeeper) -> None:
    one, two = _session(zookeeper, "/scram1"), _session(zookeeper, "/scram1")
    try:
        # A user entity with a quota (written as Kafka would) keeps it when credentials change.
        one.client.ensure_path("/config/users")
        one.client.create("/config/users/alice", b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
        a, b = ZkScramStore(one), ZkScramStore(two)
        a.start()
        b.start()
        a.alter({("alice", "SCRAM-SHA-256"): ALICE_256, ("a b,c", "SCRAM-SHA-512"): ALICE_512}, set())
        assert a.get("alice", "SCRAM-SHA-256") == ALICE_256  # at once on the writer
        _until(lambda: b.get("a b,c", "SCRAM-SHA-512") == ALICE_512 and b.get("alice", "SCRAM-SHA-256"),
               "the other node sees the new users")
        data, _ = one.client.get("/config/users/alice")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024",
                                                             "SCRAM-SHA-256": credential_to_string(ALICE_256)}}
        assert one.client.exists("/config/users/a%20b%2Cc")
        changes = sorted(one.client.get_children("/config/changes"))
        entities = [json.loads(one.client.get(f"/config/changes/{c}")[0]) for c in changes]
        assert {"version": 2, "entity_path": "users/alice"} in entities
        assert {"version": 2, "entity_path": "users/a%20b%2Cc"} in entities
        a.alter({}, {("alice", "SCRAM-SHA-256")})
        _until(lambda: b.get("alice", "SCRAM-SHA-256") is None, "the deletion reaches the other node")
        # A credential written by another tool straight into ZooKeeper is picked up too.
        one.client.create("/config/users/carol", json.dumps(
            {"version": 1, "config": {"SCRAM-SHA-512": credential_to_string(ALICE_512)}}).encode())
        _until(lambda: b.get("carol", "SCRAM-SHA-512") == ALICE_512, "a new znode is watched")
        one.client.delete("/config/users/carol")
        _until(lambda: b.get("carol", "SCRAM-SHA-512") is None, "a deleted znode is forgotten")
    finally:
        one.close()
        two.close()
