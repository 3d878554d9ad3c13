"""The group faults of issue 35 through ``GroupService`` and the real runtime over a real log,
on a stepping clock: the writes go through the runtime (records first), and
``move_coordinator`` unloads the group's partition (NOT_COORDINATOR), counts it as loading
(COORDINATOR_LOAD_IN_PROGRESS), then loads it again from its log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_asyncio
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

from coordinator.config import load_config
from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.group.service import GroupService
from coordinator.runtime.errors import CoordinatorState
from coordinator.runtime.runtime import CoordinatorRuntime
from coordinator.topics.log_manager import LogManager
from coordinator.topics.registry import TopicRegistry
from tests.coordinator.stepping_clock import SteppingClock

from .group_test_context import protocols

TOPIC = "__consumer_offsets"
NONE, NOT_COORDINATOR, LOADING, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 0, 16, 14, 27, 25


class Node:
    def __init__(self, service: GroupService, runtime: CoordinatorRuntime[Any], clock: SteppingClock) -> None:
        self.service, self.runtime, self.clock = service, runtime, clock

    def ctx(self, version: int) -> Any:
        return SimpleNamespace(api_version=version, client_id="cli", peer="127.0.0.1:1")

    def join(self, member_id: str = "") -> asyncio.Task[Any]:
        request = JoinGroupRequest(
            version=9, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member_id,
            group_instance_id=None, protocol_type="consumer", reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols("foo")])
        return asyncio.ensure_future(self.service.join_group(self.ctx(9), request))

    async def sync(self, member_id: str, generation: int, assignment: bytes | None) -> Any:
        request = SyncGroupRequest(
            version=5, group_id="g", generation_id=generation, member_id=member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range",
            assignments=[] if assignment is None else [
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)])
        return await self.service.sync_group(self.ctx(5), request)

    async def heartbeat(self, member_id: str, generation: int) -> int:
        request = HeartbeatRequest(version=4, group_id="g", generation_id=generation, member_id=member_id,
                                   group_instance_id=None)
        answer = self.service.heartbeat(self.ctx(4), request)
        if isinstance(answer, asyncio.Future):
            answer = await answer
        return int(answer.error_code)

    async def commit(self, offset: int) -> int:
        """A commit of the offsets-only group "c" (on the same partition as "g")."""
        request = OffsetCommitRequest(
            version=8, group_id="c", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="foo", partitions=[
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])
        answer = self.service.offset_commit(self.ctx(8), request)
        if not hasattr(answer, "topics"):
            answer = await answer  # type: ignore[misc]
        return int(answer.topics[0].partitions[0].error_code)

    async def stable_member(self) -> tuple[str, int]:
        first = await self.join()
        assert first.error_code == 79
        parked = self.join(first.member_id)
        await asyncio.sleep(0)
        self.clock.advance(0)  # the initial rebalance delay (0) ends the join
        joined = await asyncio.wait_for(parked, 5)
        assert joined.error_code == NONE
        assert (await self.sync(joined.member_id, joined.generation_id, b"A")).error_code == NONE
        return joined.member_id, joined.generation_id


@pytest_asyncio.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path)
    logs = LogManager(tmp_path, registry, config)
    await logs.open_all()
    logs.topic_created(registry.create(TOPIC, 1, {"cleanup.policy": "compact"}))
    clock = SteppingClock()
    runtime = CoordinatorRuntime(logs, group_coordinator_type(GroupConfig(initial_rebalance_delay_ms=0)),
                                 clock=clock, timers=clock.timers)
    service = GroupService(runtime, lambda: 1, node_id=7)
    await runtime.load(0)
    yield Node(service, runtime, clock)
    service.shutdown()
    await logs.close_all()


async def settle() -> None:
    """A few rounds of the event loop: what was scheduled (the reload's first step, which arms
    its timer on the stepping clock) has run."""
    for _ in range(10):
        await asyncio.sleep(0)


async def until(condition: Any) -> None:
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


@pytest.mark.asyncio
async def test_rebalance_and_kick_through_the_runtime(node: Node) -> None:
    member, generation = await node.stable_member()
    answer = await node.service.force_rebalance("g")
    assert answer["generation"] == generation and answer["state"] == "PreparingRebalance"
    assert await node.heartbeat(member, generation) == REBALANCE_IN_PROGRESS
    rejoined = await asyncio.wait_for(node.join(member), 5)
    assert rejoined.generation_id == generation + 1
    assert (await node.sync(member, rejoined.generation_id, b"B")).error_code == NONE

    assert await node.service.kick_member("g", member) == {"group": "g", "member": member, "protocol": "classic"}
    assert await node.heartbeat(member, rejoined.generation_id) == UNKNOWN_MEMBER_ID
    assert node.runtime.shard(0).group_manager.groups["g"].state.value == "Empty"
    with pytest.raises(LookupError, match="group 'g' has no member 'x'"):
        await node.service.kick_member("g", "x")
    with pytest.raises(LookupError, match="group 'other' does not exist"):
        await node.service.force_rebalance("other")
    with pytest.raises(LookupError, match="group 'other' does not exist"):
        await node.service.move_coordinator("other", 0, 0)


@pytest.mark.asyncio
async def test_move_coordinator_answers_not_coordinator_then_loading_then_serves_the_reloaded_group(
        node: Node) -> None:
    member, generation = await node.stable_member()
    assert await node.commit(5) == NONE
    before = node.runtime.shard(0).hard_state()
    # A second member's JoinGroup parked in the rebalance it starts: the move answers it.
    first = await node.join()
    parked = node.join(first.member_id)
    await until(lambda: node.runtime.shard(0).group_manager.groups["g"].state.value == "PreparingRebalance")

    move = asyncio.ensure_future(node.service.move_coordinator("g", 300, 200))
    await until(lambda: node.runtime.state(0) is not CoordinatorState.ACTIVE)
    await settle()
    assert (await asyncio.wait_for(parked, 5)).error_code == NOT_COORDINATOR
    assert await node.commit(6) == NOT_COORDINATOR
    assert node.runtime.serving_error(0) == NOT_COORDINATOR
    node.clock.advance(199)
    await asyncio.sleep(0)
    assert node.runtime.serving_error(0) == NOT_COORDINATOR
    node.clock.advance(1)
    await until(lambda: node.runtime.serving_error(0) == LOADING)
    assert await node.commit(6) == LOADING
    assert await node.heartbeat(member, generation) == NONE  # loading: a heartbeat keeps its session
    node.clock.advance(299)
    await asyncio.sleep(0)
    assert node.runtime.serving_error(0) == LOADING and not move.done()
    node.clock.advance(1)
    answer = await asyncio.wait_for(move, 5)
    assert answer == {"group": "g", "partition": 0, "from": 7, "to": 7}
    assert node.runtime.state(0) is CoordinatorState.ACTIVE
    assert node.runtime.shard(0).hard_state() == before
    assert await node.commit(6) == NONE
    # A later election of this node (cluster mode) finds it coordinating already; a resignation
    # still unloads it.
    node.service.become_coordinator(0, 3)
    assert node.runtime.state(0) is CoordinatorState.ACTIVE
    node.service.resign(0, standby=False)
    assert node.runtime.state(0) is None
    node.service.become_coordinator(0, 4)
    await until(lambda: node.runtime.state(0) is CoordinatorState.ACTIVE)
    assert node.runtime.shard(0).offset_manager.committed("c")[("foo", 0)].offset == 6


@pytest.mark.asyncio
async def test_a_move_of_a_partition_not_served_here_is_refused(node: Node) -> None:
    await node.stable_member()
    move = asyncio.ensure_future(node.service.move_coordinator("g", 0, 1000))
    await until(lambda: node.runtime.state(0) is not CoordinatorState.ACTIVE)
    await settle()
    with pytest.raises(LookupError, match="group 'g' does not exist"):
        await node.service.move_coordinator("g", 0, 0)
    with pytest.raises(LookupError, match="group 'g' does not exist"):
        await node.service.force_rebalance("g")
    node.clock.advance(1000)
    await asyncio.wait_for(move, 5)
    assert (await node.service.force_rebalance("g"))["rebalanced"] is True
