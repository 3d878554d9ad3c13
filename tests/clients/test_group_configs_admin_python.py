"""KIP-848 groups' config overrides (the GROUP config resource, type 32) through kafka-python 3's
``KafkaAdminClient``: IncrementalAlterConfigs sets and deletes a group's override, DescribeConfigs
shows it as DYNAMIC_GROUP_CONFIG beside the broker's defaults, and a value outside the broker's
bounds is refused with Kafka's message. (The Java Admin 3.9.1 has no GROUP resource type.)"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.clients, pytest.mark.timeout(60)]


def test_kafka_python_admin_sets_describes_and_deletes_group_configs(server) -> None:  # type: ignore[no-untyped-def]
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15000)
    try:
        def described(config_filter: str = "all") -> dict[str, tuple[str, str]]:
            result = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "orders")],
                                            config_filter=config_filter)
            return {k: (v["value"], v["config_source"]) for k, v in result["group"]["orders"].items()}

        assert described() == {"consumer.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
                               "consumer.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
                               "consumer.assignment.interval.ms": ("1000", "DEFAULT_CONFIG")}
        assert admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "orders", {
            "consumer.session.timeout.ms": "50000", "consumer.assignment.interval.ms": "0"})],
            incremental=True, raise_on_unknown=False) == {"group": {"orders": "OK"}}
        assert described("modified") == {"consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG"),
                                         "consumer.assignment.interval.ms": ("0", "DYNAMIC_GROUP_CONFIG")}
        refused = admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "orders", {
            "consumer.heartbeat.interval.ms": "60000"})], incremental=True, raise_on_unknown=False)
        assert "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive." in \
            refused["group"]["orders"], refused
        assert admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "orders", {
            "consumer.session.timeout.ms": (AlterConfigOp.DELETE, None)})],
            incremental=True, raise_on_unknown=False) == {"group": {"orders": "OK"}}
        assert described("modified") == {"consumer.assignment.interval.ms": ("0", "DYNAMIC_GROUP_CONFIG")}
    finally:
        admin.close()
