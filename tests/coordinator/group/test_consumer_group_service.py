"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) on the wire side of the group wing
(coordinator/group/service.py): routing by group id, the checks of a heartbeat (the shard's, and
the service's only for a heartbeat no shard takes), the refusals of partitions that are loading or not ours,
and a describe split by partition and merged back in request order.

The shard's KIP-848 methods are another part's (coordinator/group/consumer/); here a stand-in
runtime (routing, refusals) or a stand-in method on the real shard class (a write through the real
runtime) answers in their place, so these tests check the routing alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.consumer import HeartbeatRequest, LeaveGroupRequest, OffsetCommitRequest

from coordinator.group.config import GroupConfig
from coordinator.group.coordinator_type import group_coordinator_type
from coordinator.group.service import GroupService
from coordinator.group.shard import GroupCoordinatorShard
from coordinator.runtime.contract import CoordinatorResult
from coordinator.runtime.errors import CoordinatorState, NotActiveError, NotEnoughReplicas, RecordTooLarge
from coordinator.runtime.runtime import CoordinatorRuntime
from protocol.apis import ApiKey
from protocol.consumer_group_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.hashing import partition_for
from tests.coordinator.runtime.test_runtime import ManualLog, OneLog
from tests.coordinator.stepping_clock import SteppingClock

PARTITIONS = 4
NONE, NOT_COORDINATOR, LOADING, UNAVAILABLE = 0, 16, 14, 15
INVALID_REQUEST, INVALID_GROUP_ID, UNSUPPORTED_ASSIGNOR = 42, 24, 112


def ctx(version: int = 1) -> Any:
    return SimpleNamespace(api_version=version, client_id="cli", peer="10.0.0.7:5555")


def joining(group: str = "g", version: int = 1, **fields: Any) -> Any:
    values: dict[str, Any] = {"group_id": group, "member_id": "m-1", "member_epoch": 0, "instance_id": None,
                              "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"],
                              "server_assignor": None, "topic_partitions": []}
    if version >= 1:
        values["subscribed_topic_regex"] = None
    values.update(fields)
    return ConsumerGroupHeartbeatRequest[version](**values)


def groups_on_distinct_partitions(count: int) -> list[str]:
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        found.setdefault(partition_for(f"group-{i}", PARTITIONS), f"group-{i}")
        i += 1
    return list(found.values())


class StandInShard:
    """Answers as the real shard will (its contract in the KIP-848 design), recording its calls."""

    def __init__(self) -> None:
        self.heartbeats: list[tuple[Any, int, str, str]] = []
        self.describes: list[list[str]] = []

    def consumer_group_heartbeat(self, request: Any, api_version: int, client_id: str,
                                 client_host: str) -> CoordinatorResult[Any]:
        self.heartbeats.append((request, api_version, client_id, client_host))
        return CoordinatorResult(response=ConsumerGroupHeartbeatResponse(
            version=api_version, member_id=request.member_id, member_epoch=1, heartbeat_interval_ms=5000))

    def consumer_group_describe(self, group_ids: list[str], api_version: int,
                                include_authorized_operations: bool) -> list[Any]:
        self.describes.append(list(group_ids))
        return [ConsumerGroupDescribeResponse.DescribedGroup(group_id=g, group_state="Stable", group_epoch=3,
                                                             assignor_name="uniform", members=[])
                for g in group_ids]


class StandInRuntime:
    """A runtime whose partitions' states a test sets, running operations on one stand-in shard."""

    def __init__(self, states: dict[int, CoordinatorState]) -> None:
        self.states = states
        self.shard = StandInShard()
        self.refuse: dict[int, NotActiveError] = {}
        self.names: list[str] = []

    def state(self, partition: int) -> CoordinatorState | None:
        return self.states.get(partition)

    serving_error = CoordinatorRuntime.serving_error  # the real rule, over the states set here

    def _run(self, partition: int, name: str, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        self.names.append(name)
        if partition in self.refuse:
            raise self.refuse[partition]
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(op(self.shard))
        return fut

    def write(self, partition: int, name: str, op: Callable[[Any], CoordinatorResult[Any]]) -> asyncio.Future[Any]:
        return self._run(partition, name, lambda shard: op(shard).response)

    def read(self, partition: int, name: str, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        return self._run(partition, name, op)


def service_with(states: dict[int, CoordinatorState]) -> tuple[GroupService, StandInRuntime]:
    runtime = StandInRuntime(states)
    return GroupService(runtime, lambda: PARTITIONS), runtime  # type: ignore[arg-type]


async def answer(result: Any) -> Any:
    return await result if isinstance(result, asyncio.Future) else result


ALL_ACTIVE = {p: CoordinatorState.ACTIVE for p in range(PARTITIONS)}


def test_both_apis_have_handlers() -> None:
    handlers = service_with(ALL_ACTIVE)[0].handlers()
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT in handlers and ApiKey.CONSUMER_GROUP_DESCRIBE in handlers


@pytest.mark.asyncio
async def test_a_heartbeat_runs_as_the_write_consumer_group_heartbeat_with_client_id_and_host() -> None:
    service, runtime = service_with(ALL_ACTIVE)
    response = await answer(service.consumer_group_heartbeat(ctx(1), joining()))
    assert (response.error_code, response.member_id, response.member_epoch) == (NONE, "m-1", 1)
    assert runtime.names == ["consumer-group-heartbeat"]
    request, version, client_id, host = runtime.shard.heartbeats[0]
    assert (request.group_id, version, client_id, host) == ("g", 1, "cli", "/10.0.0.7")


@pytest.mark.asyncio
@pytest.mark.parametrize("state, error", [(CoordinatorState.LOADING, LOADING), (CoordinatorState.FAILED, NOT_COORDINATOR),
                                          (CoordinatorState.STANDBY, NOT_COORDINATOR), (None, NOT_COORDINATOR)])
async def test_a_heartbeat_for_a_partition_not_serving_is_refused_with_no_member(
        state: CoordinatorState | None, error: int) -> None:
    states = {p: state for p in range(PARTITIONS) if state is not None}
    service, runtime = service_with(states)
    response = await answer(service.consumer_group_heartbeat(ctx(), joining()))
    assert (response.error_code, response.member_id, response.member_epoch, response.assignment) == (error, None, 0, None)
    assert runtime.shard.heartbeats == []


@pytest.mark.asyncio
async def test_a_write_the_isr_refuses_is_coordinator_not_available() -> None:
    service, runtime = service_with(ALL_ACTIVE)
    p = partition_for("g", PARTITIONS)
    runtime.refuse[p] = NotEnoughReplicas(p, CoordinatorState.ACTIVE)
    assert (await answer(service.consumer_group_heartbeat(ctx(), joining()))).error_code == UNAVAILABLE
    runtime.refuse[p] = NotActiveError(p, None)
    assert (await answer(service.consumer_group_heartbeat(ctx(), joining()))).error_code == NOT_COORDINATOR


@pytest.mark.asyncio
async def test_no_offsets_topic_yet_is_not_coordinator() -> None:
    runtime = StandInRuntime(ALL_ACTIVE)
    service = GroupService(runtime, lambda: None)  # type: ignore[arg-type]
    assert (await answer(service.consumer_group_heartbeat(ctx(), joining()))).error_code == NOT_COORDINATOR
    described = await service.consumer_group_describe(ctx(), ConsumerGroupDescribeRequest[0](
        group_ids=["g"], include_authorized_operations=False))
    assert described.groups[0].error_code == NOT_COORDINATOR


#: Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` rules, each broken by an otherwise
#: valid join: the shard's checks (``coordinator/group/consumer/validation.py``).
INVALID_HEARTBEATS: list[tuple[int, dict[str, Any], int, str]] = [
    (1, {"member_id": ""}, INVALID_REQUEST, "MemberId can't be empty."),
    (0, {"member_id": "", "member_epoch": 3}, INVALID_REQUEST, "MemberId can't be empty."),
    (0, {"member_id": "", "member_epoch": -1}, INVALID_REQUEST, "MemberId can't be empty."),
    # Kafka's throwIfEmptyString trims, and checks the member id first.
    (1, {"member_id": " ", "group_id": ""}, INVALID_REQUEST, "MemberId can't be empty."),
    (1, {"group_id": ""}, INVALID_REQUEST, "GroupId can't be empty."),
    (1, {"group_id": "  "}, INVALID_REQUEST, "GroupId can't be empty."),
    (1, {"instance_id": ""}, INVALID_REQUEST, "InstanceId can't be empty."),
    (1, {"rack_id": ""}, INVALID_REQUEST, "RackId can't be empty."),
    (1, {"rebalance_timeout_ms": -1}, INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
    (1, {"topic_partitions": None}, INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (1, {"topic_partitions": [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id="00000000-0000-0000-0000-000000000001",
                                                                             partitions=[0])]},
     INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (1, {"subscribed_topic_names": None}, INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (1, {"member_epoch": -2}, INVALID_REQUEST, "InstanceId can't be null."),
    (1, {"member_epoch": -3}, INVALID_REQUEST, "MemberEpoch is invalid."),
    (1, {"server_assignor": "sticky"}, UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
]
#: Heartbeats that pass those checks.
VALID_HEARTBEATS: list[tuple[int, dict[str, Any]]] = [
    (0, {"member_id": ""}),  # v0: the coordinator gives a joining member its id
    (1, {"subscribed_topic_names": [], "server_assignor": "range"}),  # subscribed to nothing, a known assignor
    (1, {"subscribed_topic_names": None, "subscribed_topic_regex": "t.*"}),
    (1, {"member_epoch": 4, "topic_partitions": None, "subscribed_topic_names": None, "rebalance_timeout_ms": -1}),
    (1, {"member_epoch": -2, "instance_id": "i-1"}),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("version, fields, error, message", INVALID_HEARTBEATS)
async def test_the_service_leaves_the_checks_to_the_shard(version: int, fields: dict[str, Any], error: int,
                                                          message: str) -> None:
    """A heartbeat of a served partition reaches its shard unchecked: the shard checks it once."""
    service, runtime = service_with(ALL_ACTIVE)
    response = await answer(service.consumer_group_heartbeat(ctx(version), joining(version=version, **fields)))
    assert response.error_code == NONE
    assert runtime.names == ["consumer-group-heartbeat"]


@pytest.mark.asyncio
@pytest.mark.parametrize("version, fields, error, message", INVALID_HEARTBEATS)
@pytest.mark.parametrize("state", [CoordinatorState.LOADING, None])
async def test_a_bad_heartbeat_no_shard_takes_gets_its_reason(state: CoordinatorState | None, version: int,
                                                              fields: dict[str, Any], error: int, message: str) -> None:
    """Kafka checks a heartbeat before it routes it: the reason, not the partition's refusal."""
    service, runtime = service_with({p: state for p in range(PARTITIONS) if state is not None})
    response = service.consumer_group_heartbeat(ctx(version), joining(version=version, **fields))
    assert not isinstance(response, asyncio.Future)
    assert (response.error_code, response.error_message, response.member_id) == (error, message, None)
    assert runtime.names == []


@pytest.mark.asyncio
@pytest.mark.parametrize("version, fields, error, message", INVALID_HEARTBEATS)
async def test_a_bad_heartbeat_a_write_refuses_gets_its_reason(version: int, fields: dict[str, Any], error: int,
                                                               message: str) -> None:
    service, runtime = service_with(ALL_ACTIVE)
    for p in range(PARTITIONS):
        runtime.refuse[p] = NotEnoughReplicas(p, CoordinatorState.ACTIVE)
    response = await answer(service.consumer_group_heartbeat(ctx(version), joining(version=version, **fields)))
    assert (response.error_code, response.error_message, response.member_id) == (error, message, None)


@pytest.mark.parametrize("version, fields", VALID_HEARTBEATS)
def test_what_passes_the_checks_gets_the_partitions_refusal(version: int, fields: dict[str, Any]) -> None:
    service, runtime = service_with({p: CoordinatorState.LOADING for p in range(PARTITIONS)})
    response = service.consumer_group_heartbeat(ctx(version), joining(version=version, **fields))
    assert not isinstance(response, asyncio.Future)
    assert (response.error_code, response.error_message) == (LOADING, None)


def test_the_assignors_checked_are_the_configured_ones() -> None:
    runtime = StandInRuntime({})
    service = GroupService(runtime, lambda: PARTITIONS, ("range",))  # type: ignore[arg-type]
    response = service.consumer_group_heartbeat(ctx(), joining(server_assignor="range"))
    assert not isinstance(response, asyncio.Future)
    assert response.error_code == NOT_COORDINATOR
    response = service.consumer_group_heartbeat(ctx(), joining(server_assignor="uniform"))
    assert not isinstance(response, asyncio.Future)
    assert (response.error_code, response.error_message) == (
        UNSUPPORTED_ASSIGNOR, "ServerAssignor uniform is not supported. Supported assignors: range.")


@pytest.mark.asyncio
async def test_the_real_shard_gives_the_same_reasons() -> None:
    """Through the real runtime and shard (the partition is served, so the shard checks): every
    bad heartbeat answered as the table says, nothing written."""
    clock = SteppingClock()
    log = ManualLog()
    runtime = CoordinatorRuntime(OneLog(log), group_coordinator_type(GroupConfig()),  # type: ignore[arg-type]
                                 clock=clock, timers=clock.timers)
    await runtime.load(0)
    service = GroupService(runtime, lambda: 1)
    for version, fields, error, message in INVALID_HEARTBEATS:
        response = await answer(service.consumer_group_heartbeat(ctx(version), joining(version=version, **fields)))
        assert (response.error_code, response.error_message, response.member_id) == (error, message, None), fields
    assert log.batches == []
    runtime.unload(0)


@pytest.mark.asyncio
async def test_describe_is_split_by_partition_and_merged_in_request_order() -> None:
    a, b, c, d = groups_on_distinct_partitions(4)
    p = {g: partition_for(g, PARTITIONS) for g in (a, b, c, d)}
    states = dict(ALL_ACTIVE)
    states[p[c]] = CoordinatorState.LOADING
    del states[p[d]]
    service, runtime = service_with(states)
    runtime.refuse[p[b]] = NotEnoughReplicas(p[b], CoordinatorState.ACTIVE)
    request = ConsumerGroupDescribeRequest[1](group_ids=[d, a, "", c, b, a], include_authorized_operations=True)
    response = await service.consumer_group_describe(ctx(), request)
    assert [(g.group_id, g.error_code) for g in response.groups] == [
        (d, NOT_COORDINATOR), (a, NONE), ("", INVALID_GROUP_ID), (c, LOADING), (b, UNAVAILABLE), (a, NONE)]
    assert response.groups[1].group_state == "Stable"
    assert response.groups[2].authorized_operations == -(2**31)
    assert runtime.names == ["consumer-group-describe"] * 2  # a's partition, and b's refused
    assert runtime.shard.describes == [[a, a]]


@pytest.mark.asyncio
async def test_through_the_real_runtime_and_shard_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heartbeat is a write of the partition's shard: its answer comes back once durable."""
    stand_in = StandInShard()
    monkeypatch.setattr(GroupCoordinatorShard, "consumer_group_heartbeat",
                        lambda self, *args: stand_in.consumer_group_heartbeat(*args), raising=False)
    monkeypatch.setattr(GroupCoordinatorShard, "consumer_group_describe",
                        lambda self, *args: stand_in.consumer_group_describe(*args), raising=False)
    clock = SteppingClock()
    runtime = CoordinatorRuntime(OneLog(ManualLog()), group_coordinator_type(GroupConfig()),  # type: ignore[arg-type]
                                 clock=clock, timers=clock.timers)
    await runtime.load(0)
    service = GroupService(runtime, lambda: 1)
    response = await answer(service.consumer_group_heartbeat(ctx(0), joining(version=0)))
    assert (response.error_code, response.member_epoch) == (NONE, 1)
    described = await service.consumer_group_describe(ctx(0), ConsumerGroupDescribeRequest[0](
        group_ids=["g"], include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g", NONE)]
    runtime.unload(0)
    assert (await answer(service.consumer_group_heartbeat(ctx(0), joining(version=0)))).error_code == NOT_COORDINATOR


@pytest.mark.asyncio
async def test_records_over_max_message_bytes_are_unknown_server_error_and_change_nothing() -> None:
    """Kafka's runtime refuses a write whose records exceed the partition's max.message.bytes
    (RecordTooLargeException) and GroupCoordinatorService answers it UNKNOWN_SERVER_ERROR, to a
    ConsumerGroupHeartbeat and to an OffsetCommit alike (``handleOperationException``); nothing
    is written, and the writes around it are answered as usual."""
    plog = ManualLog()
    plog.config.max_message_bytes = 4_000
    clock = SteppingClock()
    runtime = CoordinatorRuntime(OneLog(plog), group_coordinator_type(GroupConfig()),  # type: ignore[arg-type]
                                 clock=clock, timers=clock.timers)
    await runtime.load(0)
    service = GroupService(runtime, lambda: 1)

    async def settled(result: Any) -> Any:
        await asyncio.sleep(0)  # the round's batch is flushed
        plog.make_durable()
        return await answer(result)

    big = joining("big", subscribed_topic_names=[f"topic-{i:04d}" for i in range(1_000)])
    assert (await settled(service.consumer_group_heartbeat(ctx(), big))).error_code == -1  # UNKNOWN_SERVER_ERROR
    small = service.consumer_group_heartbeat(ctx(), joining("small"))
    assert (await settled(small)).error_code == NONE
    described = await service.consumer_group_describe(ctx(0), ConsumerGroupDescribeRequest[0](
        group_ids=["big", "small"], include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("big", 69), ("small", NONE)]  # 69: GROUP_ID_NOT_FOUND

    def commit(partitions: int) -> Any:
        return OffsetCommitRequest[8](group_id="simple", generation_id_or_member_epoch=-1, member_id="",
                                      group_instance_id=None, topics=[OffsetCommitRequest[8].OffsetCommitRequestTopic(
                                          name="t", partitions=[
                                              OffsetCommitRequest[8].OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                                  partition_index=i, committed_offset=i, committed_leader_epoch=-1,
                                                  committed_metadata="") for i in range(partitions)])])

    refused = await settled(service.offset_commit(ctx(8), commit(200)))
    assert {p.error_code for t in refused.topics for p in t.partitions} == {-1}
    assert runtime.shard(0).offset_manager.committed("simple") == {}
    accepted = await settled(service.offset_commit(ctx(8), commit(2)))
    assert {p.error_code for t in accepted.topics for p in t.partitions} == {NONE}
    assert runtime.state(0) is CoordinatorState.ACTIVE


@pytest.mark.asyncio
async def test_a_write_refused_for_its_size_is_unknown_server_error_for_every_api() -> None:
    """Kafka's handleOperationException answers MESSAGE_TOO_LARGE as UNKNOWN_SERVER_ERROR: the
    KIP-848 heartbeat, OffsetCommit, and the classic APIs alike (not NOT_COORDINATOR: no other
    coordinator would take the records either)."""
    service, runtime = service_with(ALL_ACTIVE)
    p = partition_for("g", PARTITIONS)
    runtime.refuse[p] = RecordTooLarge(p, CoordinatorState.ACTIVE, "op", 2_000_000, 1_048_588)
    assert (await answer(service.consumer_group_heartbeat(ctx(), joining()))).error_code == -1
    leave = LeaveGroupRequest[3](group_id="g", members=[LeaveGroupRequest[3].MemberIdentity(
        member_id="m", group_instance_id=None)])
    assert (await service.leave_group(ctx(3), leave)).error_code == -1
    beat = HeartbeatRequest[3](group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert (await answer(service.heartbeat(ctx(3), beat))).error_code == -1
