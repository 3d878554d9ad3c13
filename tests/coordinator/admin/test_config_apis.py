"""DescribeConfigs for topics and the broker: values in force, sources, synonyms, errors."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.wire_client import WireClient

R = DescribeConfigsRequest.DescribeConfigsResource


def _describe(c: WireClient, version: int, *resources: object, synonyms: bool = False) -> list:  # type: ignore[type-arg]
    req = DescribeConfigsRequest(version=version, resources=list(resources), include_synonyms=synonyms,
                                 include_documentation=True)
    return list(c.request(ApiKey.DESCRIBE_CONFIGS, version, req).results)


@pytest.mark.parametrize("version", range(1, 5))
def test_topic_configs_report_override_broker_and_default_sources(server_factory, version: int) -> None:
    server = server_factory({"log.retention.ms": "1000000"})
    with WireClient(server.host, server.port) as c:
        CT = CreateTopicsRequest.CreatableTopic
        c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=1000, topics=[CT(
            name="cfg", num_partitions=1, replication_factor=1, assignments=[],
            configs=[CT.CreatableTopicConfig(name="cleanup.policy", value="compact")])]))
        (result,) = _describe(c, version, R(resource_type=2, resource_name="cfg", configuration_keys=None), synonyms=True)
        assert result.error_code == 0
        got = {e.name: (e.value, e.config_source) for e in result.configs}
        assert got["cleanup.policy"] == ("compact", 1)
        assert got["retention.ms"] == ("1000000", 4)
        assert got["segment.bytes"] == ("1073741824", 5)
        retention = next(e for e in result.configs if e.name == "retention.ms")
        assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
            ("log.retention.ms", "1000000", 4), ("log.retention.ms", "604800000", 5)]
        if version >= 3:
            assert retention.config_type == 5 and retention.documentation


def test_key_filter_unknown_topic_and_broker(shared_server) -> None:
    with WireClient(shared_server.host, shared_server.port) as c:
        missing, broker, wrong_broker = _describe(
            c, 4,
            R(resource_type=2, resource_name="nope", configuration_keys=None),
            R(resource_type=4, resource_name="1", configuration_keys=["num.partitions", "offsets.topic.num.partitions"]),
            R(resource_type=4, resource_name="9", configuration_keys=None),
        )
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert {e.name: e.value for e in broker.configs} == {"num.partitions": "1", "offsets.topic.num.partitions": "50"}
        assert wrong_broker.error_code == ErrorCode.INVALID_REQUEST


# --- IncrementalAlterConfigs (KIP-339) -----------------------------------------------------------

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _alter(c: WireClient, version: int, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
           validate_only: bool = False) -> list[tuple[int, str | None]]:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as Req

    Res = Req.AlterConfigsResource
    req = Req(version=version, validate_only=validate_only, resources=[
        Res(resource_type=t, resource_name=n, configs=[Res.AlterableConfig(name=k, config_operation=op, value=v)
                                                       for k, op, v in ops])
        for t, n, ops in resources])
    return [(r.error_code, r.error_message) for r in c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, req).responses]


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_changes_topic_overrides_live_and_persists_them(server_factory, version: int) -> None:
    server = server_factory({})
    with WireClient(server.host, server.port) as c:
        CT = CreateTopicsRequest.CreatableTopic
        c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=1000, topics=[CT(
            name="alt", num_partitions=1, replication_factor=1, assignments=[], configs=[])]))
        assert _alter(c, version, [(2, "alt", [("retention.ms", SET, "5000"), ("cleanup.policy", APPEND, "compact"),
                                               ("leader.replication.throttled.replicas", SET, "0:1")])]) == [(0, None)]
        assert _alter(c, version, [(2, "alt", [("cleanup.policy", SUBTRACT, "delete")])]) == [(0, None)]
        (result,) = _describe(c, 4, R(resource_type=2, resource_name="alt", configuration_keys=None))
        got = {e.name: (e.value, e.config_source) for e in result.configs}
        assert got["retention.ms"] == ("5000", 1) and got["cleanup.policy"] == ("compact", 1)
        assert got["leader.replication.throttled.replicas"] == ("0:1", 1)
        # In force at once in the open log: a batch above a new max.message.bytes is refused.
        # (With a key: the topic is compacted now.)
        from kafka import KafkaProducer
        from kafka.errors import MessageSizeTooLargeError

        producer = KafkaProducer(bootstrap_servers=f"{server.host}:{server.port}", retries=0)
        try:
            producer.send("alt", b"x" * 3000, key=b"k").get(timeout=10)
            assert _alter(c, version, [(2, "alt", [("max.message.bytes", SET, "1000")])]) == [(0, None)]
            with pytest.raises(MessageSizeTooLargeError):
                producer.send("alt", b"x" * 3000, key=b"k").get(timeout=10)
        finally:
            producer.close()
        # validate_only changes nothing; errors as Kafka answers them.
        assert _alter(c, version, [(2, "alt", [("retention.ms", DELETE, None)])], validate_only=True) == [(0, None)]
        errors = _alter(c, version, [
            (2, "alt", [("retention.ms", SET, "soon")]),
            (2, "alt", [("no.such.key", SET, "1")]),
            (2, "alt", [("retention.ms", APPEND, "1")]),
            (2, "alt", [("leader.replication.throttled.replicas", SET, "zero:one")]),
            (2, "missing", [("retention.ms", SET, "1")]),
            (4, "", [("log.retention.ms", SET, "1")]),
            (4, "7", [("leader.replication.throttled.rate", SET, "1")]),
            (4, "", [("leader.replication.throttled.rate", SET, "-3")]),
        ])
        assert [e[0] for e in errors] == [
            ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
            ErrorCode.INVALID_CONFIG], errors
        # The replication throttles are dynamic broker configs (kafka-reassign-partitions --throttle).
        assert _alter(c, version, [(4, "1", [("follower.replication.throttled.rate", SET, "1000")]),
                                   (4, "", [("leader.replication.throttled.rate", SET, "2000")])]) == [(0, None), (0, None)]
        (broker,) = _describe(c, 4, R(resource_type=4, resource_name="1", configuration_keys=[
            "follower.replication.throttled.rate", "leader.replication.throttled.rate", "log.retention.ms"]))
        assert {e.name: (e.value, e.config_source, e.read_only) for e in broker.configs} == {
            "follower.replication.throttled.rate": ("1000", 2, False),
            "leader.replication.throttled.rate": ("2000", 3, False),
            "log.retention.ms": ("604800000", 5, True)}
    # The topic overrides persist (topics.json) and are in force after a restart.
    server.restart()
    with WireClient(server.host, server.port) as c:
        (result,) = _describe(c, 4, R(resource_type=2, resource_name="alt", configuration_keys=["retention.ms"]))
        assert [(e.name, e.value) for e in result.configs] == [("retention.ms", "5000")]


# --- AlterConfigs (api key 33, the non-incremental form) -----------------------------------------


def _replace(c: WireClient, version: int, resources: list[tuple[int, str, list[tuple[str, str | None]]]],
             validate_only: bool = False) -> list[tuple[int, str | None]]:
    from kafka.protocol.admin import AlterConfigsRequest as Req

    Res = Req.AlterConfigsResource
    req = Req(version=version, validate_only=validate_only, resources=[
        Res(resource_type=t, resource_name=n, configs=[Res.AlterableConfig(name=k, value=v) for k, v in configs])
        for t, n, configs in resources])
    response = c.request(ApiKey.ALTER_CONFIGS, version, req)
    assert [(r.resource_type, r.resource_name) for r in response.responses] == [(t, n) for t, n, _ in resources]
    return [(r.error_code, r.error_message) for r in response.responses]


def _overrides(c: WireClient, topic: str) -> dict[str, str]:
    (result,) = _describe(c, 4, R(resource_type=2, resource_name=topic, configuration_keys=None))
    return {e.name: e.value for e in result.configs if e.config_source == 1}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_every_override_of_the_resource(server_factory, version: int) -> None:
    """The given set becomes the topic's overrides: keys left out are deleted (unlike
    IncrementalAlterConfigs); validate_only changes nothing; the same checks and error codes
    as the incremental form; a resource named twice is refused both times."""
    server = server_factory({})
    with WireClient(server.host, server.port) as c:
        CT = CreateTopicsRequest.CreatableTopic
        c.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(version=7, timeout_ms=1000, topics=[CT(
            name="rep", num_partitions=1, replication_factor=1, assignments=[],
            configs=[CT.CreatableTopicConfig(name="retention.ms", value="5000"),
                     CT.CreatableTopicConfig(name="cleanup.policy", value="compact")])]))
        assert _overrides(c, "rep") == {"retention.ms": "5000", "cleanup.policy": "compact"}
        assert _replace(c, version, [(2, "rep", [("segment.ms", "60000")])], validate_only=True) == [(0, None)]
        assert _overrides(c, "rep") == {"retention.ms": "5000", "cleanup.policy": "compact"}
        assert _replace(c, version, [(2, "rep", [("segment.ms", "60000"), ("retention.ms", "7000")])]) == [(0, None)]
        assert _overrides(c, "rep") == {"segment.ms": "60000", "retention.ms": "7000"}
        # A null value is left out, so deleted like any key not given.
        assert _replace(c, version, [(2, "rep", [("segment.ms", None), ("retention.ms", "7000")])]) == [(0, None)]
        assert _overrides(c, "rep") == {"retention.ms": "7000"}

        errors = [_replace(c, version, [resource])[0] for resource in [
            (2, "rep", [("retention.ms", "soon")]),
            (2, "rep", [("no.such.key", "1")]),
            (2, "missing", [("retention.ms", "1")]),
            (4, "", [("log.retention.ms", "1")]),
            (4, "7", [("leader.replication.throttled.rate", "1")]),
            (4, "", [("leader.replication.throttled.rate", "-3")]),
            (3, "group", []),
        ]]
        assert [e[0] for e in errors] == [
            ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_CONFIG,
            ErrorCode.INVALID_REQUEST], errors
        assert errors[1][1] == "Unknown topic config name: no.such.key"
        assert _overrides(c, "rep") == {"retention.ms": "7000"}
        assert _replace(c, version, [(2, "rep", []), (2, "rep", [("retention.ms", "1")])]) == [
            (ErrorCode.INVALID_REQUEST, "Duplicate resource.")] * 2
        assert _overrides(c, "rep") == {"retention.ms": "7000"}

        # Broker resources: the entity's dynamic configs become the given set.
        assert _replace(c, version, [(4, "1", [("follower.replication.throttled.rate", "1000"),
                                               ("leader.replication.throttled.rate", "2000")])]) == [(0, None)]
        assert _replace(c, version, [(4, "1", [("leader.replication.throttled.rate", "3000")])]) == [(0, None)]
        (broker,) = _describe(c, 4, R(resource_type=4, resource_name="1", configuration_keys=[
            "follower.replication.throttled.rate", "leader.replication.throttled.rate"]))
        assert {e.name: (e.value, e.config_source) for e in broker.configs} == {
            "follower.replication.throttled.rate": ("9223372036854775807", 5),
            "leader.replication.throttled.rate": ("3000", 2)}
        # An empty set deletes them all.
        assert _replace(c, version, [(2, "rep", [])]) == [(0, None)]
        assert _overrides(c, "rep") == {}
