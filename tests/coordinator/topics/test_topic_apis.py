"""CreateTopics, DeleteTopics and CreatePartitions: Kafka's checks, errors and persistence."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.wire_client import WireClient

CT = CreateTopicsRequest.CreatableTopic


def _topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
           assignments: list[tuple[int, list[int]]] | None = None) -> object:
    return CT(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CT.CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in assignments or []],
        configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def _create(c: WireClient, version: int, *topics: object, validate_only: bool = False) -> dict[str, tuple[int, object]]:
    req = CreateTopicsRequest(version=version, topics=list(topics), timeout_ms=5000, validate_only=validate_only)
    return {t.name: (t.error_code, t) for t in c.request(ApiKey.CREATE_TOPICS, version, req).topics}


def _partitions(c: WireClient, name: str) -> int | None:
    req = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False)
    (t,) = c.request(ApiKey.METADATA, 9, req).topics
    return len(t.partitions) if t.error_code == 0 else None


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_each_version(shared_server, version: int) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        name = f"ct-v{version}"
        got = _create(c, version, _topic(name, 4, configs={"cleanup.policy": "compact"}))
        error, result = got[name]
        assert error == 0
        if version >= 5:
            assert (result.num_partitions, result.replication_factor) == (4, 1)
            assert [(e.name, e.value) for e in result.configs] == [("cleanup.policy", "compact")]
        assert _partitions(c, name) == 4
        assert _create(c, version, _topic(name))[name][0] == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_rejections(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        got = _create(
            c, 7,
            _topic("bad name"), _topic("zero-parts", 0), _topic("rf3", 1, 3), _topic("rf0", 1, 0),
            _topic("bad-config", configs={"no.such.config": "1"}),
            _topic("bad-value", configs={"cleanup.policy": "shred"}),
            _topic("both-set", 2, 1, assignments=[(0, [1])]),
            _topic("wrong-broker", -1, -1, assignments=[(0, [7])]),
        )
        assert {n: e for n, (e, _) in got.items()} == {
            "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
            "zero-parts": ErrorCode.INVALID_PARTITIONS,
            "rf3": ErrorCode.INVALID_REPLICATION_FACTOR,
            "rf0": ErrorCode.INVALID_REPLICATION_FACTOR,
            "bad-config": ErrorCode.INVALID_CONFIG,
            "bad-value": ErrorCode.INVALID_CONFIG,
            "both-set": ErrorCode.INVALID_REQUEST,
            "wrong-broker": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        }
        for name in got:
            assert _partitions(c, name) is None


def test_create_topics_duplicates_collisions_defaults_and_validate_only(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        got = _create(c, 7, _topic("dup"), _topic("dup"))
        assert got["dup"][0] == ErrorCode.INVALID_REQUEST and _partitions(c, "dup") is None
        assert _create(c, 7, _topic("a.b"))["a.b"][0] == 0
        assert _create(c, 7, _topic("a_b"))["a_b"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert _create(c, 7, _topic("dflt", -1, -1))["dflt"][0] == 0 and _partitions(c, "dflt") == 1
        assert _create(c, 7, _topic("assigned", -1, -1, assignments=[(0, [1]), (1, [1])]))["assigned"][0] == 0
        assert _partitions(c, "assigned") == 2
        assert _create(c, 7, _topic("dry", 3), validate_only=True)["dry"][0] == 0
        assert _partitions(c, "dry") is None


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_each_version(shared_server, version: int) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        name = f"del-v{version}"
        assert _create(c, 7, _topic(name))[name][0] == 0
        if version >= 6:
            req = DeleteTopicsRequest(version=version, topics=[DeleteTopicsRequest.DeleteTopicState(name=name),
                                                               DeleteTopicsRequest.DeleteTopicState(name="never-was")],
                                      timeout_ms=5000)
        else:
            req = DeleteTopicsRequest(version=version, topic_names=[name, "never-was"], timeout_ms=5000)
        resp = c.request(ApiKey.DELETE_TOPICS, version, req)
        assert {r.name: r.error_code for r in resp.responses} == {
            name: 0, "never-was": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert _partitions(c, name) is None


def test_delete_disabled(server_factory) -> None:
    server = server_factory({"delete.topic.enable": "false"})
    with WireClient(server.host, server.port) as c:
        _create(c, 7, _topic("keep"))
        resp = c.request(ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(version=5, topic_names=["keep"], timeout_ms=1000))
        assert resp.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED
        assert _partitions(c, "keep") == 1


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions(shared_server, version: int) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        name = f"cp-v{version}"
        _create(c, 7, _topic(name, 2))
        P = CreatePartitionsRequest.CreatePartitionsTopic

        def grow(count: int, assignments: object = None, validate_only: bool = False) -> int:
            req = CreatePartitionsRequest(version=version, topics=[P(name=name, count=count, assignments=assignments)],
                                          timeout_ms=5000, validate_only=validate_only)
            return int(c.request(ApiKey.CREATE_PARTITIONS, version, req).results[0].error_code)

        assert grow(1) == ErrorCode.INVALID_PARTITIONS
        assert grow(2) == ErrorCode.INVALID_PARTITIONS
        assert grow(5, validate_only=True) == 0 and _partitions(c, name) == 2
        assert grow(4, assignments=[P.CreatePartitionsAssignment(broker_ids=[1])]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert grow(4, assignments=[P.CreatePartitionsAssignment(broker_ids=[1])] * 2) == 0
        assert _partitions(c, name) == 4
        req = CreatePartitionsRequest(version=version, topics=[P(name="nope", count=3)], timeout_ms=1, validate_only=False)
        assert c.request(ApiKey.CREATE_PARTITIONS, version, req).results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_topics_survive_restart(server) -> None:
    with WireClient(server.host, server.port) as c:
        _create(c, 7, _topic("durable", 3))
    server.restart()
    with WireClient(server.host, server.port) as c:
        assert _partitions(c, "durable") == 3
