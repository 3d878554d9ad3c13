"""AlterConfigs (api key 33) through librdkafka: ``AdminClient.alter_configs``, the
non-incremental call librdkafka's test 0092 and older tools use. The configs given replace the
resource's dynamic configs; a key left out goes back to its default."""

from __future__ import annotations

import pytest

from tests.clients.records_io import create_topic
from tests.clients.tools import unique_topic

pytestmark = [pytest.mark.clients, pytest.mark.timeout(90)]


def _described(admin, resource) -> dict[str, tuple[str, bool]]:  # type: ignore[no-untyped-def]
    """key -> (value, is_default) of one resource, through DescribeConfigs."""
    entries = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
    return {name: (entry.value, entry.is_default) for name, entry in entries.items()}


def test_alter_configs_replaces_topic_and_broker_configs(server) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    topic = unique_topic("alter")
    create_topic(server.bootstrap, topic, 1, {"retention.ms": "5000"})
    admin = AdminClient({"bootstrap.servers": server.bootstrap, "socket.timeout.ms": 5000})

    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "60000"})
    admin.alter_configs([resource], request_timeout=10)[resource].result(timeout=15)
    got = _described(admin, ConfigResource(ResourceType.TOPIC, topic))
    assert got["segment.ms"] == ("60000", False)
    assert got["retention.ms"] == ("604800000", True)  # not given: deleted, back to the default

    # validate_only changes nothing
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "1000"})
    admin.alter_configs([resource], request_timeout=10, validate_only=True)[resource].result(timeout=15)
    assert _described(admin, ConfigResource(ResourceType.TOPIC, topic))["retention.ms"] == ("604800000", True)

    # Refusals reach the application with Kafka's codes.
    bad = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "soon"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([bad], request_timeout=10)[bad].result(timeout=15)
    assert refused.value.args[0].name() == "INVALID_CONFIG", refused.value
    missing = ConfigResource(ResourceType.TOPIC, unique_topic("missing"), set_config={"retention.ms": "1"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([missing], request_timeout=10)[missing].result(timeout=15)
    assert refused.value.args[0].name() == "UNKNOWN_TOPIC_OR_PART", refused.value

    # A dynamic broker config of this node (the replication throttle kafka-reassign-partitions sets).
    broker = ConfigResource(ResourceType.BROKER, "1", set_config={"leader.replication.throttled.rate": "2000"})
    admin.alter_configs([broker], request_timeout=10)[broker].result(timeout=15)
    assert _described(admin, ConfigResource(ResourceType.BROKER, "1"))["leader.replication.throttled.rate"] == (
        "2000", False)
    static = ConfigResource(ResourceType.BROKER, "1", set_config={"log.retention.ms": "1"})
    with pytest.raises(KafkaException) as refused:
        admin.alter_configs([static], request_timeout=10)[static].result(timeout=15)
    assert refused.value.args[0].name() == "INVALID_REQUEST", refused.value
