"""The KIP-848 server settings (group.consumer.*): Kafka's names, defaults and bounds, and the
relations GroupCoordinatorConfig requires between them, each refused with a message naming it."""

from __future__ import annotations

import pytest

from coordinator.app import App
from coordinator.config import ConfigError, load_config


def test_defaults_are_kafkas() -> None:
    config = load_config()
    assert config["group.consumer.session.timeout.ms"] == 45000
    assert config["group.consumer.min.session.timeout.ms"] == 45000
    assert config["group.consumer.max.session.timeout.ms"] == 60000
    assert config["group.consumer.heartbeat.interval.ms"] == 5000
    assert config["group.consumer.min.heartbeat.interval.ms"] == 5000
    assert config["group.consumer.max.heartbeat.interval.ms"] == 15000
    assert config["group.consumer.max.size"] == 2**31 - 1
    assert config["group.consumer.assignors"] == "uniform,range"
    assert config["group.consumer.migration.policy"] == "bidirectional"
    assert config["group.consumer.regex.refresh.interval.ms"] == 600000
    assert config["group.consumer.assignment.interval.ms"] == 1000


def test_a_test_server_may_shorten_the_session() -> None:
    config = load_config(overrides=["group.consumer.min.session.timeout.ms=1000",
                                    "group.consumer.session.timeout.ms=6000",
                                    "group.consumer.min.heartbeat.interval.ms=500",
                                    "group.consumer.heartbeat.interval.ms=1000"])
    assert config["group.consumer.session.timeout.ms"] == 6000
    assert config["group.consumer.heartbeat.interval.ms"] == 1000


@pytest.mark.parametrize("overrides, message", [
    (["group.consumer.session.timeout.ms=6000"],
     "group.consumer.session.timeout.ms (6000) must be greater than or equal to group.consumer.min.session.timeout.ms"),
    (["group.consumer.session.timeout.ms=70000"],
     "group.consumer.session.timeout.ms (70000) must be less than or equal to group.consumer.max.session.timeout.ms"),
    (["group.consumer.max.session.timeout.ms=40000"],
     "group.consumer.max.session.timeout.ms (40000) must be greater than or equal to group.consumer.min.session.timeout.ms"),
    (["group.consumer.heartbeat.interval.ms=1000"],
     "group.consumer.heartbeat.interval.ms (1000) must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    (["group.consumer.heartbeat.interval.ms=20000"],
     "group.consumer.heartbeat.interval.ms (20000) must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    (["group.consumer.min.heartbeat.interval.ms=20000"],
     "group.consumer.max.heartbeat.interval.ms (15000) must be greater than or equal to "
     "group.consumer.min.heartbeat.interval.ms (20000)"),
    (["group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=5000"],
     "group.consumer.heartbeat.interval.ms (5000) must be less than group.consumer.session.timeout.ms (5000)"),
])
def test_relations_between_the_settings(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides=overrides)
    assert message in str(caught.value)


@pytest.mark.parametrize("key, value", [
    ("group.consumer.session.timeout.ms", "0"),
    ("group.consumer.heartbeat.interval.ms", "-1"),
    ("group.consumer.max.size", "0"),
    ("group.consumer.assignors", "sticky"),
    ("group.consumer.assignors", "uniform,uniform"),
    ("group.consumer.assignors", ""),
    ("group.consumer.migration.policy", "sideways"),
    ("group.consumer.regex.refresh.interval.ms", "9999"),
    ("group.consumer.assignment.interval.ms", "15001"),
    ("group.consumer.assignment.interval.ms", "-1"),
])
def test_bad_values_name_the_setting(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides=[f"{key}={value}"])
    assert f"invalid value {value!r} for {key}" in str(caught.value)


def test_assignors_by_name_or_kafka_class_and_policy_in_any_case() -> None:
    config = load_config(overrides=[
        "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
        "group.consumer.migration.policy=UPGRADE", "group.consumer.assignment.interval.ms=0"])
    assert config["group.consumer.assignors"] == "range,uniform"
    assert config["group.consumer.migration.policy"] == "upgrade"
    assert config["group.consumer.assignment.interval.ms"] == 0


def test_the_node_hands_them_to_the_group_coordinator(tmp_path: object) -> None:
    config = load_config(data_dir=str(tmp_path), overrides=[
        "group.consumer.min.session.timeout.ms=1000", "group.consumer.session.timeout.ms=6000",
        "group.consumer.max.session.timeout.ms=7000", "group.consumer.min.heartbeat.interval.ms=500",
        "group.consumer.heartbeat.interval.ms=1000", "group.consumer.max.heartbeat.interval.ms=2000",
        "group.consumer.max.size=7", "group.consumer.assignors=range", "group.consumer.migration.policy=disabled",
        "group.consumer.regex.refresh.interval.ms=10000", "group.consumer.assignment.interval.ms=0"])
    app = App(config)
    try:
        shard = app.runtime.coordinator.build_shard(0, None, None)  # type: ignore[arg-type]  # the shard only keeps them
        group = shard.config
        assert (group.consumer_min_session_timeout_ms, group.consumer_session_timeout_ms,
                group.consumer_max_session_timeout_ms) == (1000, 6000, 7000)
        assert (group.consumer_min_heartbeat_interval_ms, group.consumer_heartbeat_interval_ms,
                group.consumer_max_heartbeat_interval_ms) == (500, 1000, 2000)
        assert group.consumer_max_size == 7 and group.consumer_assignors == ("range",)
        assert group.consumer_migration_policy == "disabled"
        assert group.consumer_regex_refresh_interval_ms == 10000 and group.consumer_assignment_interval_ms == 0
    finally:
        app.close()


@pytest.mark.asyncio
async def test_the_node_hands_the_shard_its_topics_and_group_overrides(tmp_path: object,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The shard gets the topic registry as its topics image and a reader of the groups'
    overrides (the shard's parameters are another part's: a stand-in records what it is given)."""
    import coordinator.group.coordinator_type as coordinator_type

    given: dict[str, object] = {}

    class StandInShard:
        def __init__(self, *args: object, **kwargs: object) -> None:
            given.update(kwargs)

    monkeypatch.setattr(coordinator_type, "GroupCoordinatorShard", StandInShard)
    config = load_config(data_dir=str(tmp_path), overrides=[
        "group.consumer.min.session.timeout.ms=1000", "group.consumer.min.heartbeat.interval.ms=500"])
    app = App(config)
    try:
        app.runtime.coordinator.build_shard(0, None, None)  # type: ignore[arg-type]
        assert given["topics"] is app.registry
        read = given["group_configs"]
        assert callable(read) and read("g") == {}
        await app.group_configs.store.alter_group("g", {"consumer.session.timeout.ms": "6000",
                                                        "consumer.heartbeat.interval.ms": "1000"})
        assert read("g") == {"consumer.session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 1000}
    finally:
        app.close()
