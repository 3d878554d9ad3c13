"""Faults on a real ``groupcoord serve`` node, injected over its HTTP endpoint, seen by real
clients: raw requests (tests/wire_client.py) where the exact answer matters, kafka-python where a
client's behaviour is the point."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from coordinator.ops.faults_routes import FAULTS_OFF
from protocol.apis import ApiKey, request_class
from protocol.client import decode_response, encode_request
from protocol.errors import ErrorCode
from tests.conftest import ServerProcess, free_port, wait_for
from tests.wire_client import WireClient

TOPIC = "faulty"


class Http:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def inject(self, body: dict[str, object]) -> dict[str, Any]:
        status, answer = self.call("POST", "/faults", body)
        assert status == 200, answer
        return dict(answer)

    def faults(self) -> list[dict[str, Any]]:
        status, answer = self.call("GET", "/faults")
        assert status == 200
        return list(answer["faults"])


class Node:
    def __init__(self, server: ServerProcess, http: Http) -> None:
        self.server = server
        self.http = http

    def wire(self) -> WireClient:
        return WireClient(self.server.host, self.server.port)


def settings(http_port: int) -> dict[str, str]:
    return {"test.faults.enable": "true", "http.listen": f"127.0.0.1:{http_port}",
            "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500",
            "offsets.topic.num.partitions": "1"}


def create_topic(server: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    finally:
        admin.close()
    # __consumer_offsets is created by the first FindCoordinator: commits go through once it is loaded.
    with WireClient(server.host, server.port) as client:
        find = request_class(ApiKey.FIND_COORDINATOR)(version=4, key_type=0, coordinator_keys=["warm-up"])
        wait_for(lambda: client.request(ApiKey.FIND_COORDINATOR, 4, find).coordinators[0].error_code == 0,
                 20, "a group coordinator")
        wait_for(lambda: commit(client, "warm-up") == ErrorCode.NONE, 20, "the group coordinator to be loaded")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    http_port = free_port()
    server = ServerProcess(tmp_path_factory.mktemp("faults") / "data", settings(http_port))
    server.start()
    create_topic(server)
    yield Node(server, Http(http_port))
    server.stop()


@pytest.fixture(autouse=True)
def no_faults_left(node: Node) -> Iterator[None]:
    yield
    node.http.call("DELETE", "/faults")


def commit(client: WireClient, group: str, offset: int = 5) -> int:
    cls = request_class(ApiKey.OFFSET_COMMIT)
    topic = cls.OffsetCommitRequestTopic
    request = cls(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        topic(name=TOPIC, partitions=[topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                         committed_metadata="")])])
    response = client.request(ApiKey.OFFSET_COMMIT, 8, request)
    (error,) = [p.error_code for t in response.topics for p in t.partitions]
    return int(error)


def metadata(client: WireClient) -> Any:
    cls = request_class(ApiKey.METADATA)
    return client.request(ApiKey.METADATA, 12, cls(version=12, topics=[cls.MetadataRequestTopic(name=TOPIC)],
                                                   allow_auto_topic_creation=False))


def test_fail_offset_commit_once_then_commits_go_through(node: Node) -> None:
    answer = node.http.inject({"fault": "fail", "api": "OffsetCommit", "error": "REBALANCE_IN_PROGRESS",
                               "count": 1, "group": "g-fail"})
    (listed,) = node.http.faults()
    assert {**listed, "expires_in_ms": 0} == {**answer["result"], "expires_in_ms": 0}
    assert 0 < listed["expires_in_ms"] <= 60_000
    with node.wire() as client:
        assert commit(client, "g-other") == ErrorCode.NONE  # another group: not matched
        assert commit(client, "g-fail") == ErrorCode.REBALANCE_IN_PROGRESS
        assert commit(client, "g-fail") == ErrorCode.NONE
    assert node.http.faults() == []


def test_kafka_python_commit_fails_once(node: Node) -> None:
    node.http.inject({"fault": "fail", "api": "OffsetCommit", "error": "ILLEGAL_GENERATION", "count": 1,
                      "group": "g-kp"})
    consumer = KafkaConsumer(bootstrap_servers=node.server.bootstrap, group_id="g-kp", enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 1)
        consumer.assign([tp])
        with pytest.raises(Exception) as info:
            consumer.commit({tp: OffsetAndMetadata(7, "", -1)})
        assert "IllegalGeneration" in repr(info.value) or "CommitFailed" in repr(info.value)
        consumer.commit({tp: OffsetAndMetadata(7, "", -1)})
        assert consumer.committed(tp) == 7
    finally:
        consumer.close()


def test_delay_holds_the_request(node: Node) -> None:
    node.http.inject({"fault": "delay", "api": "OffsetCommit", "ms": 400, "group": "g-delay", "count": 1})
    with node.wire() as client:
        started = time.monotonic()
        assert commit(client, "g-delay") == ErrorCode.NONE
        assert time.monotonic() - started >= 0.4
    assert node.http.faults() == []


def test_fault_expires_by_its_duration(node: Node) -> None:
    node.http.inject({"fault": "fail", "api": "OffsetCommit", "error": "NOT_COORDINATOR", "count": 1000,
                      "group": "g-expire", "duration_ms": 300})
    with node.wire() as client:
        assert commit(client, "g-expire") == ErrorCode.NOT_COORDINATOR
        wait_for(lambda: node.http.faults() == [], 20, "the fault to expire")
        assert commit(client, "g-expire") == ErrorCode.NONE


def test_leader_unavailable_in_metadata_and_produce(node: Node) -> None:
    node.http.inject({"fault": "leader-unavailable", "topic": TOPIC, "partition": 1, "duration_ms": 60_000})
    with node.wire() as client:
        (topic,) = metadata(client).topics
        parts = {p.partition_index: (p.error_code, p.leader_id) for p in topic.partitions}
        assert parts[1] == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
        assert parts[0][0] == ErrorCode.NONE and parts[0][1] >= 0
        cls = request_class(ApiKey.PRODUCE)
        data = cls.TopicProduceData
        request = cls(version=9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            data(name=TOPIC, partition_data=[data.PartitionProduceData(index=1, records=None)])])
        response = client.request(ApiKey.PRODUCE, 9, request)
        assert [(p.index, p.error_code) for t in response.responses for p in t.partition_responses] == \
            [(1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        # Fetch v13+ names topics by id only.
        fetch_cls = request_class(ApiKey.FETCH)
        fetch_topic = fetch_cls.FetchTopic
        fetch = fetch_cls(version=16, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
            fetch_topic(topic_id=topic.topic_id, partitions=[
                fetch_topic.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])])
        response = client.request(ApiKey.FETCH, 16, fetch)
        assert [(t.topic_id, p.partition_index, p.error_code) for t in response.responses for p in t.partitions] == \
            [(topic.topic_id, 1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert node.http.call("DELETE", "/faults") == (200, {"cleared": 1})
    with node.wire() as client:
        (topic,) = metadata(client).topics
        assert all(p.error_code == ErrorCode.NONE for p in topic.partitions)


def _raw_connection(node: Node, client_id: str) -> socket.socket:
    """A connection whose requests carry ``client_id``, after one request answered."""
    sock = socket.create_connection((node.server.host, node.server.port), timeout=10)
    request = request_class(ApiKey.API_VERSIONS)(version=3, client_software_name="t", client_software_version="1")
    sock.sendall(encode_request(ApiKey.API_VERSIONS, 3, 1, request, client_id=client_id))
    size = int.from_bytes(sock.recv(4), "big")
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    decode_response(ApiKey.API_VERSIONS, 3, body)
    return sock


def test_drop_connections_by_client_id(node: Node) -> None:
    victim = _raw_connection(node, "victim")
    bystander = _raw_connection(node, "bystander")
    try:
        assert node.http.inject({"fault": "drop-connections", "client_id": "victim"}) == {"result": {"dropped": 1}}
        try:
            assert victim.recv(1) == b""
        except ConnectionResetError:
            pass  # an abort resets: as good as an end of file here, both mean the connection is gone
        request = request_class(ApiKey.API_VERSIONS)(version=3, client_software_name="t", client_software_version="1")
        bystander.sendall(encode_request(ApiKey.API_VERSIONS, 3, 2, request, client_id="bystander"))
        assert len(bystander.recv(4)) == 4
    finally:
        victim.close()
        bystander.close()


def describe_members(client: WireClient, group: str) -> int:
    cls = request_class(ApiKey.DESCRIBE_GROUPS)
    response = client.request(ApiKey.DESCRIBE_GROUPS, 5, cls(version=5, groups=[group],
                                                             include_authorized_operations=False))
    return len(response.groups[0].members)


def test_pause_heartbeats_expires_a_kafka_python_member(node: Node) -> None:
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=node.server.bootstrap, group_id="g-pause",
                             session_timeout_ms=1500, heartbeat_interval_ms=200, enable_auto_commit=False)
    try:
        # The topic's metadata before the first join: kafka-python 3.0 can otherwise join before it
        # knows the partitions and lose the rejoin's assignment (docs/testing.md, kafka-python).
        wait_for(lambda: consumer.partitions_for_topic(TOPIC), 20, "the topic's metadata")
        wait_for(lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment(), 20, "an assignment")
        with node.wire() as client:
            assert describe_members(client, "g-pause") == 1
            node.http.inject({"fault": "pause-heartbeats", "group": "g-pause", "duration_ms": 30_000})
            # Heartbeats held, the session runs out: the coordinator expires the member.
            wait_for(lambda: describe_members(client, "g-pause") == 0, 20, "the member to expire")
            assert node.http.faults()[0]["fault"] == "pause-heartbeats"
        node.http.call("DELETE", "/faults")
        # Released, the consumer learns it was expired and joins again.
        wait_for(lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment(), 20, "a new assignment")
    finally:
        consumer.close()


def test_bad_requests_change_nothing(node: Node) -> None:
    http = node.http
    status, answer = http.call("POST", "/faults", {"fault": "explode"})
    assert status == 400 and answer["error"].startswith("unknown fault 'explode': valid faults are rebalance, ")
    status, answer = http.call("POST", "/faults", {"fault": "fail", "api": "OffsetCommit", "error": 27, "grp": "g"})
    assert status == 400 and "unknown parameter 'grp'" in answer["error"]
    status, answer = http.call("POST", "/faults", {"fault": "rebalance", "group": "no-such-group"})
    assert (status, answer) == (404, {"error": "group 'no-such-group' does not exist"})
    status, answer = http.call("DELETE", "/faults/f999")
    assert (status, answer) == (404, {"error": "no active fault 'f999'"})
    assert http.faults() == []


def test_endpoint_on_a_node_without_faults(server_factory: Callable[..., ServerProcess]) -> None:
    http_port = free_port()
    server = server_factory({"http.listen": f"127.0.0.1:{http_port}"})
    http = Http(http_port)
    for method, path, body in [("GET", "/faults", None), ("POST", "/faults", {"fault": "crash-restart"}),
                               ("DELETE", "/faults", None), ("DELETE", "/faults/f1", None)]:
        assert http.call(method, path, body) == (404, {"error": FAULTS_OFF})
    assert server.alive() and "crash-restart requested" not in server.log_text()


def test_crash_restart_reexecs_on_the_same_port_with_the_offsets(
        server_factory: Callable[..., ServerProcess]) -> None:
    http_port = free_port()
    server = server_factory(settings(http_port))
    http = Http(http_port)
    create_topic(server)
    with WireClient(server.host, server.port) as client:
        assert commit(client, "g-crash", offset=42) == ErrorCode.NONE
    assert server.proc is not None
    pid = server.proc.pid
    assert http.inject({"fault": "crash-restart"}) == {"result": {"restarting": True}}
    wait_for(lambda: server.log_text().count("msg=listening") == 2, 20, "the node to listen again")
    assert server.alive() and server.proc.pid == pid
    assert "crash-restart requested (test.faults.enable)" in server.log_text()
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g-crash", enable_auto_commit=False)
    try:
        assert consumer.committed(TopicPartition(TOPIC, 0)) == 42
    finally:
        consumer.close()


def offset_fetch(client: WireClient, group: str) -> int:
    cls = request_class(ApiKey.OFFSET_FETCH)
    request = cls(version=7, group_id=group, topics=[cls.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
                  require_stable=False)
    response = client.request(ApiKey.OFFSET_FETCH, 7, request)
    return int(response.topics[0].partitions[0].committed_offset)


def joined(consumer: KafkaConsumer) -> Any:
    consumer.poll(timeout_ms=100)
    return consumer.assignment()


def test_rebalance_and_kick_member_of_a_kafka_python_group(node: Node) -> None:
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=node.server.bootstrap, group_id="g-rebalance",
                             session_timeout_ms=6000, heartbeat_interval_ms=200, enable_auto_commit=False)
    try:
        wait_for(lambda: consumer.partitions_for_topic(TOPIC), 20, "the topic's metadata")  # as above
        wait_for(lambda: joined(consumer), 20, "an assignment")
        generation = consumer._coordinator._generation.generation_id
        result = node.http.inject({"fault": "rebalance", "group": "g-rebalance"})["result"]
        assert result["group"] == "g-rebalance" and result["protocol"] == "classic"
        assert int(result["generation"]) >= generation and result["rebalanced"] is True
        # The member learns of the rebalance on its next heartbeat and joins the new generation.
        wait_for(lambda: joined(consumer) and consumer._coordinator._generation.generation_id > generation,
                 20, "the member to rejoin")
        member = consumer._coordinator._generation.member_id
        result = node.http.inject({"fault": "kick-member", "group": "g-rebalance"})["result"]
        assert (result["group"], result["member"]) == ("g-rebalance", member)
        # Removed as if its session expired: it joins again under a new member id.
        wait_for(lambda: joined(consumer) and consumer._coordinator._generation.member_id not in ("", member),
                 20, "the kicked member to join again")
        status, answer = node.http.call("POST", "/faults", {"fault": "kick-member", "group": "g-rebalance",
                                                            "member": "nobody"})
        assert status == 404 and "nobody" in answer["error"]
    finally:
        consumer.close()


def test_move_coordinator_keeps_the_offsets(node: Node) -> None:
    with node.wire() as client:
        assert commit(client, "g-move", offset=9) == ErrorCode.NONE
        started = time.monotonic()
        result = node.http.inject({"fault": "move-coordinator", "group": "g-move", "not_coordinator_ms": 200,
                                   "load_ms": 200})["result"]
        assert time.monotonic() - started >= 0.4
        assert result["group"] == "g-move" and result["partition"] == 0
        assert offset_fetch(client, "g-move") == 9
        assert commit(client, "g-move", offset=10) == ErrorCode.NONE
