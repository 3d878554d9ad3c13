"""The group shard driven by the real coordinator runtime over a real partition log: the seams
(shard factory, timers, parked response handles, on_appended) fit, and a restart reloads it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

from coordinator.config import load_config
from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.topics.log_manager import LogManager
from coordinator.topics.registry import TopicRegistry
from tests.coordinator.stepping_clock import SteppingClock

from .group_test_context import protocols

TOPIC = "__consumer_offsets"
CONFIG = GroupConfig(initial_rebalance_delay_ms=0)


GROUPS = group_coordinator_type(CONFIG)


def join_request(member_id: str) -> Any:
    return JoinGroupRequest(
        version=9, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols("foo")])


async def join(runtime: CoordinatorRuntime, member_id: str) -> asyncio.Future[Any]:
    handle, future = runtime.response_future(0)
    await runtime.write(0, "classic-group-join", lambda shard: shard.join_group(join_request(member_id), 9, "cli", "/h", handle))
    return future


@pytest.mark.asyncio
async def test_join_sync_commit_and_reload_through_the_runtime(tmp_path: Path) -> None:
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path)
    logs = LogManager(tmp_path, registry, config)
    await logs.open_all()
    logs.topic_created(registry.create(TOPIC, 1, {"cleanup.policy": "compact"}))
    clock = SteppingClock()
    runtime = CoordinatorRuntime(logs, GROUPS, clock=clock, timers=clock.timers)
    await runtime.load(0)

    first = await (await join(runtime, ""))
    assert first.error_code == 79
    parked = await join(runtime, first.member_id)
    assert not parked.done()  # waiting for the rebalance delay, a timer
    clock.advance(0)  # initial.rebalance.delay.ms = 0: the join completes at once
    joined = await asyncio.wait_for(parked, 5)
    assert joined.error_code == 0 and joined.leader == first.member_id

    handle, sync_future = runtime.response_future(0)
    sync = SyncGroupRequest(version=5, group_id="g", generation_id=joined.generation_id, member_id=joined.member_id,
                            group_instance_id=None, protocol_type="consumer", protocol_name="range",
                            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                                     assignment=b"A")])
    await runtime.write(0, "classic-group-sync", lambda shard: shard.sync_group(sync, 5, handle))
    assert (await asyncio.wait_for(sync_future, 5)).assignment == b"A"

    commit = OffsetCommitRequest(
        version=8, group_id="g", generation_id_or_member_epoch=joined.generation_id, member_id=joined.member_id,
        group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="foo", partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m")])])
    response = await runtime.write(0, "commit-offset", lambda shard: shard.commit_offsets(commit, 8))
    assert response.topics[0].partitions[0].error_code == 0
    # Acknowledged means fsynced on a single node: the recovery point (moved only by an fsync)
    # covers everything the commit wrote.
    plog = logs.get(TOPIC, 0)
    assert plog.log.options.flush_policy == "fsync"
    assert plog.log.recovery_point == plog.log_end_offset > 0
    before = runtime.shard(0).hard_state()
    runtime.unload_all()
    await logs.close_all()

    logs = LogManager(tmp_path, TopicRegistry(tmp_path), config)
    await logs.open_all()
    runtime = CoordinatorRuntime(logs, GROUPS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    shard = runtime.shard(0)
    assert shard.hard_state() == before
    assert shard.group_manager.groups["g"].state.value == "Stable"
    runtime.unload_all()
    await logs.close_all()


@pytest.mark.asyncio
async def test_offsets_log_flush_policy_single_node_fsync_cluster_topic_configs(tmp_path: Path) -> None:
    """A single node fsyncs ``__consumer_offsets`` before acknowledging (it has no replica); a
    cluster node follows the topic's flush settings (Kafka's default: none — the ISR holds the
    commit), like any other topic. A hosted topic follows its configs on a single node too."""
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])
    for broker_id, expected in ((None, "fsync"), (1, "none")):
        directory = tmp_path / f"node-{broker_id}"
        directory.mkdir()
        registry = TopicRegistry(directory)
        logs = LogManager(directory, registry, config)
        logs.broker_id = broker_id
        offsets = registry.create(TOPIC, 1, {"cleanup.policy": "compact"})
        hosted = registry.create("payments", 1, {})
        for info, policy in ((offsets, expected), (hosted, "none")):
            plog = logs._open(info, 0)
            plog.log.abort()
            assert plog.log.options.flush_policy == policy, (info.name, broker_id)
