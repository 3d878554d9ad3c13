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
