"""RemoteOffsets over stand-in node connections: which partitions it asks, of whom, in how many
requests, what it keeps and for how long, and the StateView answering from it."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.cluster.view import ClusterView
from coordinator.cluster.znodes import BrokerRegistration, PartitionState, TopicAssignment
from coordinator.ops.remote_offsets import EARLIEST, LATEST, RemoteOffsets
from protocol.apis import ApiKey
from protocol.errors import ErrorCode


def _view() -> ClusterView:
    view = ClusterView()
    view.set_brokers({b: BrokerRegistration(b, "127.0.0.1", 9090 + b) for b in (1, 2, 3)})
    view.set_topic(TopicAssignment("t", uuid.uuid4(), {0: (1,), 1: (2,), 2: (3,), 3: (2,)}), "t")
    for p, leader in {0: 1, 1: 2, 2: 3, 3: 2}.items():
        view.set_state("t", p, PartitionState(leader=leader, leader_epoch=0, isr=(leader,), controller_epoch=1,
                                              zk_version=0))
    return view


class Leader:
    """A node answering ListOffsets from a table: (topic, partition) -> (start, end, offset by timestamp)."""

    def __init__(self, broker_id: int, table: dict[tuple[str, int], tuple[int, int, int]], log: list[Any]) -> None:
        self.broker_id = broker_id
        self.table = table
        self.log = log
        self.down = False

    async def call(self, api_key: int, version: int, request: Any) -> Any:
        assert api_key == ApiKey.LIST_OFFSETS and request.replica_id == -1 and request.isolation_level == 0
        self.log.append((self.broker_id, sorted((t.name, p.partition_index, p.timestamp)
                                                for t in request.topics for p in t.partitions)))
        if self.down:
            raise ConnectionRefusedError("down")
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                row = self.table.get((t.name, p.partition_index))
                if row is None:
                    parts.append(SimpleNamespace(partition_index=p.partition_index,
                                                 error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, offset=-1))
                    continue
                offset = {LATEST: row[1], EARLIEST: row[0]}.get(p.timestamp, row[2])
                parts.append(SimpleNamespace(partition_index=p.partition_index, error_code=0, offset=offset))
            topics.append(SimpleNamespace(name=t.name, partitions=parts))
        return SimpleNamespace(topics=topics)

    def close(self) -> None:
        pass


@pytest.mark.asyncio
async def test_asks_each_leader_for_the_partitions_it_leads_and_keeps_the_answers() -> None:
    view = _view()
    log: list[Any] = []
    leaders = {2: Leader(2, {("t", 1): (5, 50, 7), ("t", 3): (0, 30, -1)}, log),
               3: Leader(3, {("t", 2): (2, 20, 9)}, log)}
    now = [100.0]
    wanted = [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("gone", 0)]
    remote = RemoteOffsets(view, 1, lambda: wanted, lambda t, p: (t, p) == ("t", 0), interval_ms=1000,
                           connect=leaders.__getitem__, clock=lambda: now[0])
    await remote.poll()
    # Node 1 leads t-0 (read locally); gone-0 has no leader: neither is asked. Two requests per
    # leader (a partition may appear once per ListOffsets): the latest, then the earliest.
    assert sorted(log) == [(2, [("t", 1, EARLIEST), ("t", 3, EARLIEST)]), (2, [("t", 1, LATEST), ("t", 3, LATEST)]),
                           (3, [("t", 2, EARLIEST)]), (3, [("t", 2, LATEST)])]
    assert [(remote.earliest("t", p), remote.latest("t", p)) for p in range(4)] == [
        (None, None), (5, 50), (2, 20), (0, 30)]
    assert remote.ends("t", 1).leader == 2  # type: ignore[union-attr]
    # By timestamp, on demand: the found offset; none at or after it: the high watermark.
    assert await remote.offset_for_timestamp("t", 1, 1234) == 7
    assert await remote.offset_for_timestamp("t", 3, 1234) == 30
    # A leader that stops answering: its values stay a while (lag is not unknown for one missed
    # poll), then go (lag unknown rather than stale).
    leaders[3].down = True
    now[0] += 2.0
    await remote.poll()
    assert remote.latest("t", 2) == 20 and remote.latest("t", 1) == 50
    now[0] += remote.stale_after_s
    assert remote.latest("t", 2) is None
    assert remote.latest("t", 1) == 50  # refreshed at the last poll
    assert await remote.offset_for_timestamp("t", 2, 1234) is None
    await remote.stop()


@pytest.mark.asyncio
async def test_lookups_waiting_for_one_leader_share_a_request() -> None:
    view = _view()
    log: list[Any] = []
    leader = Leader(2, {("t", 1): (0, 10, 3), ("t", 3): (0, 10, 4)}, log)
    remote = RemoteOffsets(view, 1, lambda: [], lambda t, p: False, connect=lambda b: leader)
    found = await asyncio.gather(remote.offset_for_timestamp("t", 1, 99), remote.offset_for_timestamp("t", 3, 99))
    assert found == [3, 4]
    assert log == [(2, [("t", 1, 99), ("t", 3, 99)])]
    await remote.stop()


@pytest.mark.asyncio
async def test_state_view_answers_remote_partitions_from_it(tmp_path: Any) -> None:
    from coordinator.ops.state_view import StateView

    view = _view()
    log: list[Any] = []
    leader = Leader(2, {("t", 1): (5, 50, 7)}, log)
    remote = RemoteOffsets(view, 1, lambda: [("t", 1)], lambda t, p: False, connect=lambda b: leader)
    logs = SimpleNamespace(partitions=lambda: [], get=lambda t, p: None)
    state = StateView(runtime=SimpleNamespace(hosted=lambda: []), logs=logs, cluster=view, node_id=1)  # type: ignore[arg-type]
    assert state.partitions()[("t", 1)].log_end is None
    state.remote = remote
    await remote.poll()
    part = state.partitions()[("t", 1)]
    assert (part.log_start, part.log_end, part.local, part.leader) == (5, 50, False, 2)
    assert (state.earliest("t", 1), state.latest("t", 1)) == (5, 50)
    assert await state.offset_for_timestamp("t", 1, 1) == 7
    assert state.latest("t", 2) is None  # never asked
    await remote.stop()


@pytest.mark.asyncio
async def test_a_follower_answers_with_its_leaders_offsets() -> None:
    # Node 1 follows t-1 (led by 2): its own high watermark (40) trails the leader's (50).
    from coordinator.ops.state_view import StateView

    view = _view()
    leader = Leader(2, {("t", 1): (5, 50, 7)}, [])
    follower = SimpleNamespace(topic="t", partition=1, log_start_offset=0, high_watermark=40, last_stable_offset=40,
                               is_leader=False, replication=SimpleNamespace(leader_id=2, isr=[2, 1], replicas=[2, 1]))
    logs = SimpleNamespace(partitions=lambda: [follower], get=lambda t, p: follower if (t, p) == ("t", 1) else None)
    state = StateView(runtime=SimpleNamespace(hosted=lambda: []), logs=logs, cluster=view, node_id=1)  # type: ignore[arg-type]
    remote = RemoteOffsets(view, 1, lambda: [("t", 1)], state.is_led_here, connect=lambda b: leader)
    state.remote = remote
    # Until the leader answered: the follower's own.
    assert (state.earliest("t", 1), state.latest("t", 1), state.partitions()[("t", 1)].log_end) == (0, 40, 40)
    await remote.poll()
    part = state.partitions()[("t", 1)]
    assert (part.log_start, part.log_end, part.local, part.leader) == (5, 50, True, 2)
    assert (state.earliest("t", 1), state.latest("t", 1)) == (5, 50)
    await remote.stop()
