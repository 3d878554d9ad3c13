"""KIP-848 groups' config overrides, Kafka's GROUP config resource (type 32): Kafka's rules and
messages (GroupConfig), the broker's bounds, the effective values DescribeConfigs answers with
their source, IncrementalAlterConfigs SET/DELETE (APPEND/SUBTRACT refused), validate_only,
durability across a restart, and what the group coordinator reads (clamped integers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from coordinator.admin.group_configs import FileGroupConfigs, GroupConfigError, GroupConfigs
from coordinator.config import ConfigError, load_config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.coordinator.admin.test_config_apis import APPEND, DELETE, SET, SUBTRACT, _alter, _describe
from tests.wire_client import WireClient

R = DescribeConfigsRequest.DescribeConfigsResource
GROUP = 32
SESSION, HEARTBEAT, ASSIGNMENT = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                                  "consumer.assignment.interval.ms")
#: A test server's bounds: session 6..60 s, heartbeat 1..15 s.
LOW_BOUNDS = {"group.consumer.min.session.timeout.ms": "6000", "group.consumer.min.heartbeat.interval.ms": "1000"}


def rules(tmp_path: Path, *overrides: str) -> GroupConfigs:
    return GroupConfigs(load_config(data_dir=str(tmp_path), overrides=list(overrides)), FileGroupConfigs(tmp_path))


@pytest.mark.parametrize("configs, message", [
    ({"consumer.rebalance.timeout.ms": "1"}, "Unknown group config name: consumer.rebalance.timeout.ms"),
    ({SESSION: "soon"}, "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ({SESSION: "2147483648"}, "Not a number of type INT"),
    ({HEARTBEAT: "0"}, "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1"),
    ({ASSIGNMENT: "-1"}, "Invalid value -1 for configuration consumer.assignment.interval.ms: Value must be at least 0"),
    ({SESSION: "44999"}, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({SESSION: "60001"}, "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ({HEARTBEAT: "4999"}, "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ({ASSIGNMENT: "15001"}, "consumer.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
])
def test_refused_with_kafkas_messages(tmp_path: Path, configs: dict[str, str], message: str) -> None:
    with pytest.raises(GroupConfigError) as caught:
        rules(tmp_path).validate(configs)
    assert message in str(caught.value)


def test_session_must_stay_above_the_heartbeat_with_the_broker_value_for_the_other(tmp_path: Path) -> None:
    group = rules(tmp_path, *(f"{k}={v}" for k, v in LOW_BOUNDS.items()))
    group.validate({SESSION: "6000", HEARTBEAT: "5000"})
    with pytest.raises(GroupConfigError, match="consumer.session.timeout.ms must be greater than "
                                               "consumer.heartbeat.interval.ms"):
        group.validate({SESSION: "6000", HEARTBEAT: "6000"})
    with pytest.raises(GroupConfigError, match="must be greater than"):
        group.validate({SESSION: "6000", HEARTBEAT: "7000"})
    group.validate({HEARTBEAT: "15000"})  # the broker's 45 s session stays above it
    group.validate({ASSIGNMENT: "0"})


@pytest.mark.asyncio
async def test_the_coordinator_reads_integers_clamped_to_the_bounds_in_force(tmp_path: Path) -> None:
    loose = rules(tmp_path, *(f"{k}={v}" for k, v in LOW_BOUNDS.items()))
    await loose.store.alter_group("g", {SESSION: "6000", HEARTBEAT: "1000", ASSIGNMENT: "0"})
    assert loose.overrides("g") == {SESSION: 6000, HEARTBEAT: 1000, ASSIGNMENT: 0}
    assert loose.overrides("other") == {}
    # Restarted with Kafka's default bounds: the stored values are read clamped into them.
    strict = rules(tmp_path)
    assert strict.overrides("g") == {SESSION: 45000, HEARTBEAT: 5000, ASSIGNMENT: 0}
    await strict.store.alter_group("g", {})
    assert json.loads((tmp_path / "group_configs.json").read_text()) == {"version": 1, "groups": {}}


def test_an_unreadable_file_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "group_configs.json").write_text("{")
    with pytest.raises(ConfigError, match="unreadable group configs"):
        FileGroupConfigs(tmp_path)


def _group(c: WireClient, name: str, keys: list[str] | None = None, synonyms: bool = False) -> object:
    (result,) = _describe(c, 4, R(resource_type=GROUP, resource_name=name, configuration_keys=keys), synonyms=synonyms)
    return result


def test_describe_alter_and_restart_over_the_wire(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = server_factory({**LOW_BOUNDS, "group.consumer.heartbeat.interval.ms": "3000"})
    with WireClient(server.host, server.port) as c:
        result = _group(c, "g", synonyms=True)
        assert result.error_code == 0 and result.resource_type == GROUP
        got = {e.name: (e.value, e.config_source, e.config_type, e.read_only) for e in result.configs}
        assert got == {SESSION: ("45000", 5, 3, False), HEARTBEAT: ("3000", 4, 3, False),
                       ASSIGNMENT: ("1000", 5, 3, False)}
        heartbeat = next(e for e in result.configs if e.name == HEARTBEAT)
        assert [(s.name, s.value, s.source) for s in heartbeat.synonyms] == [
            ("group.consumer.heartbeat.interval.ms", "3000", 4), ("group.consumer.heartbeat.interval.ms", "5000", 5)]

        for version in (0, 1):
            assert _alter(c, version, [(GROUP, "g", [(SESSION, SET, "6000"), (HEARTBEAT, SET, "1000")])],
                          validate_only=True) == [(0, None)]
        assert {e.name: e.config_source for e in _group(c, "g").configs}[SESSION] == 5  # validate_only: unchanged
        assert _alter(c, 1, [(GROUP, "g", [(SESSION, SET, "6000"), (HEARTBEAT, SET, "1000")]),
                             (GROUP, "h", [(ASSIGNMENT, SET, "0")])]) == [(0, None), (0, None)]
        result = _group(c, "g", synonyms=True)
        got = {e.name: (e.value, e.config_source) for e in result.configs}
        assert got == {SESSION: ("6000", 8), HEARTBEAT: ("1000", 8), ASSIGNMENT: ("1000", 5)}
        session = next(e for e in result.configs if e.name == SESSION)
        assert [(s.name, s.value, s.source) for s in session.synonyms] == [
            (SESSION, "6000", 8), ("group.consumer.session.timeout.ms", "45000", 5)]
        assert [(e.name, e.value) for e in _group(c, "h", [ASSIGNMENT]).configs] == [(ASSIGNMENT, "0")]

        errors = _alter(c, 1, [
            (GROUP, "g", [(HEARTBEAT, SET, "7000")]),  # not below the session timeout any more
            (GROUP, "g", [(SESSION, SET, "61000")]),
            (GROUP, "g", [("no.such.key", SET, "1")]),
            (GROUP, "g", [("no.such.key", DELETE, None)]),
            (GROUP, "g", [(SESSION, APPEND, "1")]),
            (GROUP, "g", [(SESSION, SUBTRACT, "1")]),
            (GROUP, "", [(SESSION, SET, "50000")]),
        ])
        assert errors == [
            (ErrorCode.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
            (ErrorCode.INVALID_CONFIG, "consumer.session.timeout.ms must be in the range 6000 to 60000 inclusive."),
            (ErrorCode.INVALID_CONFIG, "Unknown group config name: no.such.key"),
            (ErrorCode.INVALID_CONFIG, "Unknown group config name: no.such.key"),
            (ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: consumer.session.timeout.ms"),
            (ErrorCode.INVALID_CONFIG,
             "Config value subtract is not allowed for config key: consumer.session.timeout.ms"),
            (ErrorCode.INVALID_REQUEST, "Group name must not be empty"),
        ]
        assert _group(c, "").error_code == ErrorCode.INVALID_REQUEST
        assert _alter(c, 1, [(GROUP, "g", [(HEARTBEAT, DELETE, None)])]) == [(0, None)]
    # Durable: still in force after a restart.
    server.restart()
    with WireClient(server.host, server.port) as c:
        got = {e.name: (e.value, e.config_source) for e in _group(c, "g").configs}
        assert got == {SESSION: ("6000", 8), HEARTBEAT: ("3000", 4), ASSIGNMENT: ("1000", 5)}
        assert c.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(version=4, resources=[
            R(resource_type=GROUP, resource_name="h", configuration_keys=None)], include_synonyms=False,
            include_documentation=True)).results[0].configs[0].documentation


@pytest.mark.asyncio
async def test_overrides_are_parsed_once_per_change(tmp_path: Path) -> None:
    """Read several times per consumer heartbeat: the same parse until the group's overrides change."""
    group = rules(tmp_path)
    assert group.overrides("g") == {} and group.overrides("g") is group.overrides("other")
    await group.store.alter_group("g", {SESSION: "50000"})
    first = group.overrides("g")
    assert first == {SESSION: 50000} and group.overrides("g") is first
    await group.store.alter_group("g", {SESSION: "55000"})
    assert group.overrides("g") == {SESSION: 55000}
