"""Offsets of partitions led by other nodes (cluster mode), asked of their leaders.

A group's lag is measured against its partitions' high watermarks, and in a cluster the group's
coordinator is often not the leader of those partitions. Every ``lag.sample.interval.ms`` this
node asks each leader, over the inter-broker connection (``cluster/node_client.py``, with the
listener's TLS and SASL: ``security/node_client.py``), for the latest and earliest offsets of the
partitions this node's groups have committed offsets on — one ListOffsets per leader and kind, as
kafka-consumer-groups and kafka-lag-exporter ask the leaders
(https://kafka.apache.org/documentation/#basic_ops_consumer_lag).

Which partitions: every one this node does not lead, followers included. A follower's high
watermark trails the leader's (it learns it from its next fetch answer), while a consumer reads
up to the leader's and commits what it read: measured against the follower's, a caught-up group
could show a negative lag. The leader's answer is the one the tool gives.

The answers are kept with when they came; one older than ``stale_after_ms`` is dropped (its
leader has not answered for several intervals: lag is then unknown rather than stale). Nothing
here blocks the loop: requests go out on their own tasks, one request at a time per node
(``NodeQueues``, which also merges what waits for the same node into one request).

``offset_for_timestamp`` asks the leader at once (the dashboard's reset by date or duration), and
``refresh`` fetches the latest and earliest offsets of given partitions at once (the reset plans
against current values, as Kafka's tool does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode

from ..cluster.node_client import CONNECTION_ERRORS, NodeConnection, NodeQueues
from ..cluster.view import ClusterView

__all__ = ["RemoteOffsets", "RemoteEnds", "LATEST", "EARLIEST", "LIST_OFFSETS_VERSION"]

log = logging.getLogger("groupcoord.ops")

TopicPartition = tuple[str, int]

#: ListOffsets' special timestamps (Kafka's ListOffsetsRequest.LATEST_TIMESTAMP, EARLIEST_TIMESTAMP).
LATEST, EARLIEST = -1, -2
#: v7: what the groups tool sends too (coordinator/tools/group_admin.py).
LIST_OFFSETS_VERSION = 7


@dataclass(frozen=True, slots=True)
class RemoteEnds:
    """A partition's offsets as its leader gave them (None: not known yet)."""

    log_start: int | None
    log_end: int | None
    #: The leader that answered, and when (time.monotonic(), seconds).
    leader: int
    at: float


@dataclass(slots=True)
class _Ask:
    topic: str
    partition: int
    #: LATEST, EARLIEST or a timestamp (ms).
    timestamp: int
    answer: asyncio.Future[int | None]


class RemoteOffsets:
    """``wanted()``: the partitions to keep polled (``StateView.committed_partitions``);
    ``is_led_here(topic, partition)``: whether this node leads it with its log open (those are read
    locally). ``connect(broker_id)`` makes the connection to a node (tests hand in stand-ins)."""

    def __init__(self, view: ClusterView, node_id: int, wanted: Callable[[], Iterable[TopicPartition]],
                 is_led_here: Callable[[str, int], bool], *, interval_ms: int = 10_000, timeout_s: float = 10.0,
                 stale_after_ms: int | None = None,
                 connect: Callable[[int], NodeConnection] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.view = view
        self.node_id = node_id
        self.wanted = wanted
        self.is_led_here = is_led_here
        self.interval_ms = interval_ms
        self.timeout_s = timeout_s
        # Three intervals, and never shorter than a request may take.
        self.stale_after_s = (stale_after_ms / 1000 if stale_after_ms is not None
                              else max(3 * interval_ms / 1000, 2 * timeout_s))
        self.clock = clock
        self._connect = connect or self._connection
        self._ends: dict[TopicPartition, RemoteEnds] = {}
        self._queues: NodeQueues[_Ask] | None = None
        self._task: asyncio.Task[None] | None = None

    # --- reading (the StateView) -------------------------------------------------------------

    def ends(self, topic: str, partition: int) -> RemoteEnds | None:
        found = self._ends.get((topic, partition))
        if found is None:
            return None
        if self.clock() - found.at > self.stale_after_s:
            del self._ends[(topic, partition)]
            return None
        return found

    def latest(self, topic: str, partition: int) -> int | None:
        found = self.ends(topic, partition)
        return None if found is None else found.log_end

    def earliest(self, topic: str, partition: int) -> int | None:
        found = self.ends(topic, partition)
        return None if found is None else found.log_start

    # --- asking ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="remote-offsets")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._queues is not None:
            await self._queues.close()
            self._queues = None

    async def _run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:
                log.exception("remote offsets poll failed")
            await asyncio.sleep(self.interval_ms / 1000)

    async def poll(self) -> None:
        """Ask the leaders for the latest and earliest offsets of ``wanted()`` not led here."""
        await self.refresh(self.wanted())

    async def refresh(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch the latest and earliest offsets of ``partitions`` (those not led here) now."""
        by_tp: dict[TopicPartition, tuple[int, asyncio.Future[int | None], asyncio.Future[int | None]]] = {}
        for topic, partition in partitions:
            if (topic, partition) in by_tp or self.is_led_here(topic, partition):
                continue
            leader = self.view.leader(topic, partition)
            if leader < 0 or leader == self.node_id:
                continue
            by_tp[(topic, partition)] = (leader, self._ask(leader, topic, partition, LATEST),
                                         self._ask(leader, topic, partition, EARLIEST))
        if not by_tp:
            return
        # Answers are kept as each leader gives them; a slow leader delays only its own.
        await asyncio.gather(*(self._keep(tp, leader, latest, earliest)
                               for tp, (leader, latest, earliest) in by_tp.items()))

    async def _keep(self, tp: TopicPartition, leader: int, latest: asyncio.Future[int | None],
                    earliest: asyncio.Future[int | None]) -> None:
        end, start = await latest, await earliest
        if end is not None:
            self._ends[tp] = RemoteEnds(start, end, leader, self.clock())

    async def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """The first offset at or after ``timestamp_ms`` on the leader; its high watermark when no
        record is (the StateView's rule); None: no leader answered."""
        leader = self.view.leader(topic, partition)
        if leader < 0:
            return None
        found = await self._ask(leader, topic, partition, timestamp_ms)
        if found is None:
            return None
        if found >= 0:
            return found
        end = self.latest(topic, partition)
        if end is None:
            end = await self._ask(leader, topic, partition, LATEST)
        return end

    def _ask(self, leader: int, topic: str, partition: int, timestamp: int) -> asyncio.Future[int | None]:
        loop = asyncio.get_running_loop()
        ask = _Ask(topic, partition, timestamp, loop.create_future())
        if self._queues is None:
            self._queues = NodeQueues(self._connect, self._send, _fail, _distinct)
        self._queues.put(leader, ask)
        return ask.answer

    def _connection(self, broker_id: int) -> NodeConnection:
        def endpoint() -> tuple[str, int] | None:
            return self.view.inter_broker_endpoint(broker_id)
        return NodeConnection(broker_id, endpoint, f"groupcoord-lag-{self.node_id}", self.timeout_s,
                              self.view.inter_broker_security)

    async def _send(self, connection: NodeConnection, batch: list[_Ask]) -> None:
        cls = request_class(ApiKey.LIST_OFFSETS)
        Topic = cls.ListOffsetsTopic
        by_topic: dict[str, list[_Ask]] = {}
        for ask in batch:
            by_topic.setdefault(ask.topic, []).append(ask)
        # replica_id -1 and read_uncommitted: a consumer's view, the high watermark for LATEST.
        request = cls(version=LIST_OFFSETS_VERSION, replica_id=-1, isolation_level=0, topics=[
            Topic(name=t, partitions=[Topic.ListOffsetsPartition(partition_index=a.partition, current_leader_epoch=-1,
                                                                 timestamp=a.timestamp) for a in asks])
            for t, asks in by_topic.items()])
        try:
            response = await connection.call(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request)
        except CONNECTION_ERRORS as exc:
            log.info("ListOffsets not answered", extra={"broker": connection.broker_id, "error": repr(exc)})
            _fail(batch)
            return
        got: dict[TopicPartition, int | None] = {}
        for t in response.topics:
            for p in t.partitions:
                # -1 with no error: no record at or after a timestamp (kept, the caller decides).
                got[(t.name, p.partition_index)] = p.offset if p.error_code == ErrorCode.NONE else None
        for ask in batch:
            if not ask.answer.done():
                ask.answer.set_result(got.get((ask.topic, ask.partition)))


def _distinct(ask: _Ask) -> Hashable:
    # ListOffsets refuses a partition twice in one request (INVALID_REQUEST).
    return (ask.topic, ask.partition)


def _fail(asks: list[_Ask]) -> None:
    for ask in asks:
        if not ask.answer.done():
            ask.answer.set_result(None)
