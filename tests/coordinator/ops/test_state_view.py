"""The node's live view against a real node in this process, with stock clients committing: a
classic group (kafka-python) while Stable and once Empty, a KIP-848 consumer group over the wire,
the hosted partitions, the first unconsumed record's timestamp on disk, and the offsets the
dashboard's reset looks up."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.structs import OffsetAndMetadata

from coordinator.app import App
from coordinator.config import load_config
from coordinator.ops.state_view import StateView
from coordinator.ops.timeline import group_timeline
from protocol.apis import ApiKey
from protocol.consumer_group_messages import ConsumerGroupHeartbeatRequest
from tests.conftest import free_port
from tests.wire_client import WireClient

#: Record timestamps of partition 0 of "orders": one a second from here.
T0 = 1_700_000_000_000
RETENTION_MS = 10080 * 60_000


async def start_node(data_dir: Path, settings: tuple[str, ...] = (), hold_loads: asyncio.Event | None = None
                     ) -> tuple[App, int, asyncio.Future[int]]:
    """A node running in this loop, once it accepts connections. ``hold_loads``: the coordinator
    partitions' loads replay their logs only once it is set."""
    port = free_port()
    app = App(load_config(data_dir=str(data_dir), listen=f"127.0.0.1:{port}",
                          overrides=["offsets.topic.num.partitions=2", *settings]))
    if hold_loads is not None:
        gate = hold_loads
        loader = app.runtime._loader
        replay_log = loader.replay_log

        async def held(part: Any, start: int) -> int:
            await gate.wait()
            return await replay_log(part, start)

        loader.replay_log = held  # type: ignore[method-assign]
    running = asyncio.ensure_future(app.run())
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if asyncio.get_running_loop().time() > deadline or running.done():
                raise
            await asyncio.sleep(0.01)
            continue
        writer.close()
        break
    return app, port, running


async def stop_node(app: App, running: asyncio.Future[int]) -> None:
    app._stop.set()
    assert await asyncio.wait_for(running, 20) == 0


def view_of(app: App) -> StateView:
    return StateView(runtime=app.runtime, txn_runtime=app.txn_runtime, logs=app.logs, node_id=app.data_dir.node_id,
                     endpoint=("127.0.0.1", 0))


async def wait_for(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def produce(port: int) -> None:
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        for i in range(10):
            producer.send("orders", f"r{i}".encode(), partition=0, timestamp_ms=T0 + i * 1000)
        for i in range(4):
            producer.send("orders", f"s{i}".encode(), partition=1, timestamp_ms=T0)
        producer.flush(20)
    finally:
        producer.close()


def join_and_commit(port: int) -> KafkaConsumer:
    """A kafka-python member of "classic-g", Stable, having committed 4 on partition 0."""
    consumer = KafkaConsumer("orders", bootstrap_servers=f"127.0.0.1:{port}", group_id="classic-g",
                             client_id="view-client", enable_auto_commit=False, auto_offset_reset="earliest")
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(200)
    assert consumer.assignment() == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(4, "m", -1)})
    return consumer


def consumer_group_member(port: int) -> str:
    """A KIP-848 member of "next-g" assigned both partitions, and a commit of 2 on partition 1."""
    member_id = str(uuid.uuid4())
    with WireClient("127.0.0.1", port) as c:
        # The first FindCoordinator creates __consumer_offsets, as a client's would.
        c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(version=3, key="next-g", key_type=0))
        deadline = time.monotonic() + 20
        while True:
            joined = c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, ConsumerGroupHeartbeatRequest[1](
                group_id="next-g", member_id=member_id, member_epoch=0, instance_id="i-1", rack_id=None,
                rebalance_timeout_ms=30000, subscribed_topic_names=["orders"], subscribed_topic_regex=None,
                server_assignor="uniform", topic_partitions=[]))
            if joined.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert joined.error_code == 0, joined
        T = OffsetCommitRequest[9].OffsetCommitRequestTopic
        commit = c.request(ApiKey.OFFSET_COMMIT, 9, OffsetCommitRequest[9](
            group_id="next-g", generation_id_or_member_epoch=joined.member_epoch, member_id=member_id,
            group_instance_id=None, topics=[T(name="orders", partitions=[T.OffsetCommitRequestPartition(
                partition_index=1, committed_offset=2, committed_leader_epoch=-1, committed_metadata="")])]))
        assert [p.error_code for t in commit.topics for p in t.partitions] == [0], commit
    return member_id


@pytest_asyncio.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[App, int]]:
    app, port, running = await start_node(tmp_path)
    try:
        app.topics.create("orders", 2, {})
        yield app, port
    finally:
        await stop_node(app, running)


@pytest.mark.asyncio
async def test_groups_offsets_and_partitions_as_the_node_holds_them(node: tuple[App, int]) -> None:
    app, port = node
    view = view_of(app)
    await asyncio.to_thread(produce, port)
    consumer = await asyncio.to_thread(join_and_commit, port)
    try:
        group = await wait_for(lambda: (g := view.group("classic-g")) is not None and g.state == "Stable" and g)
        assert (group.type, group.protocol_type, group.epoch) == ("classic", "consumer", 1)
        assert group.assignor in ("range", "roundrobin")
        [member] = group.members
        assert (member.client_id, member.host, member.instance_id) == ("view-client", "/127.0.0.1", None)
        assert sorted(member.assignment) == [("orders", 0), ("orders", 1)]
        committed = group.offsets[("orders", 0)]
        # Stable and subscribed to the topic: the offset does not expire (KIP-211).
        assert (committed.offset, committed.metadata, committed.expires_at_ms) == (4, "m", None)
        assert abs(committed.commit_timestamp_ms - time.time() * 1000) < 60_000
        assert [g.group_id for g in view.groups()] == ["classic-g"]
    finally:
        await asyncio.to_thread(consumer.close)
    empty = await wait_for(lambda: (g := view.group("classic-g")) is not None and g.state == "Empty" and g)
    shard = app.runtime.shard(empty.coordinator_partition)
    became_empty = shard.group_manager.groups["classic-g"].state_timestamp_ms
    # Empty: seven days (offsets.retention.minutes) after the group became Empty, as the expiry
    # operation itself computes it.
    assert empty.offsets[("orders", 0)].expires_at_ms == became_empty + RETENTION_MS
    records, _ = shard.offset_manager.expired_offset_tombstones(shard.group_manager.groups["classic-g"],
                                                                 became_empty + RETENTION_MS - 1)
    assert records == []
    records, _ = shard.offset_manager.expired_offset_tombstones(shard.group_manager.groups["classic-g"],
                                                                 became_empty + RETENTION_MS)
    assert len(records) == 1

    parts = view.partitions()
    p0 = parts[("orders", 0)]
    assert (p0.log_start, p0.log_end, p0.lso, p0.local, p0.leader) == (0, 10, 10, True, app.data_dir.node_id)
    # The record a consumer committed at 4 reads next, as stored; caught up: nothing.
    assert view.first_unconsumed_timestamp("orders", 0, 4) == T0 + 4000
    assert view.first_unconsumed_timestamp("orders", 0, 10) is None
    assert view.first_unconsumed_timestamp("elsewhere", 0, 0) is None
    assert (view.earliest("orders", 0), view.latest("orders", 0)) == (0, 10)
    assert await view.offset_for_timestamp("orders", 0, T0 + 2500) == 3
    assert await view.offset_for_timestamp("orders", 0, T0 + 60_000) == 10
    coordinators = view.coordinator_partitions()
    assert {(c.topic, c.partition, c.state) for c in coordinators if c.topic == "__consumer_offsets"} == {
        ("__consumer_offsets", 0, "active"), ("__consumer_offsets", 1, "active")}
    assert all(c.load_time_ms is not None for c in coordinators if c.state == "active")
    assert [n.node_id for n in view.nodes()] == [app.data_dir.node_id] and view.controller_id() == app.data_dir.node_id

    timeline = await group_timeline(view, "classic-g")
    assert [(e.kind, e.epoch, e.members) for e in timeline][-2:] == [("GroupMetadata", 1, 1), ("GroupMetadata", 2, 0)]
    assert timeline[-1].state_or_protocol == "Empty"


@pytest.mark.asyncio
async def test_a_consumer_group_with_its_member_and_commit(node: tuple[App, int]) -> None:
    app, port = node
    view = view_of(app)
    await asyncio.to_thread(produce, port)
    member_id = await asyncio.to_thread(consumer_group_member, port)
    group = view.group("next-g")
    assert group is not None
    assert (group.type, group.protocol_type, group.assignor) == ("consumer", "consumer", "uniform")
    assert group.state in ("Stable", "Reconciling") and group.epoch >= 1
    [member] = group.members
    assert (member.member_id, member.instance_id) == (member_id, "i-1")
    assert sorted(member.assignment) == [("orders", 0), ("orders", 1)]
    # Not Empty: a consumer group's offsets do not expire.
    assert (group.offsets[("orders", 1)].offset, group.offsets[("orders", 1)].expires_at_ms) == (2, None)
    assert view.first_unconsumed_timestamp("orders", 1, 2) == T0
    timeline = await group_timeline(view, "next-g")
    assert timeline and timeline[-1].kind == "ConsumerGroupMetadata" and timeline[-1].members == 1
