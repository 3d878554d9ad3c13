"""Coordinator types: the runtime hosts a coordinator as (topic, shard builder, record serde), so
a new coordinator is a new shard type on the same runtime; the group coordinator is one."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import CONSUMER_OFFSETS, OFFSETS_SERDE, group_coordinator_type
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.coordinator_types import CoordinatorType, CoordinatorTypes
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.topics.registry import CONSUMER_OFFSETS as TOPICS_CONSUMER_OFFSETS
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, deserialize
from tests.coordinator.runtime.test_runtime import CounterShard, ManualLog, OneLog
from tests.coordinator.stepping_clock import SteppingClock


def test_the_registry_maps_each_topic_to_one_coordinator_type() -> None:
    types = CoordinatorTypes()
    groups = group_coordinator_type(GroupConfig())
    types.register(groups)
    other = CoordinatorType("__transaction_state", CounterShard, OFFSETS_SERDE)
    types.register(other)
    assert types.get(CONSUMER_OFFSETS) is groups and types.get("__transaction_state") is other
    assert "__share_group_state" not in types and types.get("__share_group_state") is None
    assert list(types) == [groups, other]
    with pytest.raises(ValueError, match="already registered"):
        types.register(CoordinatorType(CONSUMER_OFFSETS, CounterShard, OFFSETS_SERDE))


def test_the_group_coordinator_type_is_consumer_offsets_and_its_records() -> None:
    groups = group_coordinator_type(GroupConfig())
    assert groups.topic == CONSUMER_OFFSETS == TOPICS_CONSUMER_OFFSETS
    clock = SteppingClock()
    assert isinstance(groups.build_shard(3, None, clock), GroupCoordinatorShard)  # type: ignore[arg-type]
    key, value = OffsetCommitKey("g", "t", 0), OffsetCommitValue(42)
    assert deserialize(*OFFSETS_SERDE.serialize(key, value)) == (key, value)
    assert OFFSETS_SERDE.serialize(key, None)[1] is None  # a tombstone


@pytest.mark.asyncio
async def test_a_second_coordinator_type_runs_on_its_own_topic_through_the_same_runtime() -> None:
    built: list[int] = []

    def build(partition: int, timer: object, clock: object) -> CounterShard:
        built.append(partition)
        return CounterShard(partition, timer, clock)

    plog = ManualLog()
    clock = SteppingClock()
    transactions = CoordinatorType("__transaction_state", build, OFFSETS_SERDE)
    runtime = CoordinatorRuntime(OneLog(plog), transactions, clock=clock, timers=clock.timers)  # type: ignore[arg-type]
    assert runtime.topic == "__transaction_state"
    await runtime.load(5)
    assert built == [5]
    answer = runtime.write(5, "commit-offset", lambda s: s.commit("g", 7))
    await asyncio.sleep(0)
    assert plog.batches == [(0, 1)]
    plog.make_durable()
    assert await answer == ("ok", None)
    assert runtime.shard(5).offsets == {("g", "t", 0): 7}
