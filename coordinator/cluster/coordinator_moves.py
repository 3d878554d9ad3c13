"""Moving a group's coordinator to another node for real: the ``move-coordinator`` fault of a
cluster node (docs/testing.md).

A group's coordinator is the leader of its ``__consumer_offsets`` partition, so moving the
coordinator is moving that leadership. We do it the way an operator moves a leader in Kafka: a
reassignment that keeps the same replicas but lists the new leader first (KIP-455,
``kafka-reassign-partitions.sh``; a reordering adds and removes no replica, so it completes at
once), then a preferred-leader election of that partition (KIP-183, ``kafka-leader-election.sh
--election-type preferred``) — both sent to the controller over the wire, as the tools do, so the
controller's own rules and fencing apply. The new leader is another live in-sync replica, a warm
one (whose standby finished replaying, ``warming.py``) first.

The move answers once it is complete as a client sees it: this node no longer leads the partition
(its coordinator resigned: requests here answer NOT_COORDINATOR) and the new leader's coordinator
answers an OffsetFetch of the group (it has loaded the partition; COORDINATOR_LOAD_IN_PROGRESS
until then).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.apis import ApiKey, request_class
from protocol.errors import ErrorCode

from .node_client import CONNECTION_ERRORS, NodeConnection
from .view import ClusterView

__all__ = ["CoordinatorMove", "CoordinatorMoves", "MoveRefused", "move_target"]

log = logging.getLogger("groupcoord.cluster.coordinator_moves")

#: How long a move may take in all: under the 30 s a fault handle waits for its answer, so that a
#: move that cannot finish answers with why.
MOVE_TIMEOUT_S = 20.0

#: Errors of a coordinator that does not serve the group (yet): the move is not finished.
_NOT_SERVING = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                          ErrorCode.COORDINATOR_NOT_AVAILABLE})


class MoveRefused(Exception):
    """The coordinator cannot move: no other replica can lead, the controller refused, or the
    move did not complete in time. The message says which."""


@dataclass(frozen=True, slots=True)
class CoordinatorMove:
    topic: str
    partition: int
    from_broker: int
    to_broker: int


def move_target(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, live: frozenset[int],
                warming: frozenset[int] = frozenset()) -> int | None:
    """The replica to hand the leadership to: the first other live in-sync replica in assignment
    order, warm ones before warming ones; None if there is none (pure)."""
    candidates = [r for r in replicas if r != leader and r in live and r in isr]
    candidates.sort(key=lambda r: r in warming)  # stable: assignment order otherwise
    return candidates[0] if candidates else None


class CoordinatorMoves:
    """Moves the leadership of coordinator partitions this node leads (``broker_id``).
    ``leads(topic, partition)``: whether this node's coordinator still leads it (the
    ``CoordinatorLeadership``'s coordinator epoch is set)."""

    def __init__(self, broker_id: int, view: ClusterView, leads: Callable[[str, int], bool], *,
                 timeout_s: float = MOVE_TIMEOUT_S) -> None:
        self.broker_id = broker_id
        self.view = view
        self.leads = leads
        self.timeout_s = timeout_s

    def _connection(self, broker_id: int) -> NodeConnection:
        def endpoint() -> tuple[str, int] | None:
            return self.view.inter_broker_endpoint(broker_id)
        return NodeConnection(broker_id, endpoint, f"groupcoord-faults-{self.broker_id}", self.timeout_s,
                              self.view.inter_broker_security)

    async def move_group_coordinator(self, topic: str, partition: int, group_id: str) -> CoordinatorMove:
        """Move the leadership of ``topic``-``partition`` (which this node leads) to another
        in-sync replica and wait until that node's coordinator serves ``group_id``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        name = f"{topic}-{partition}"
        state = self.view.state(topic, partition)
        assignment = self.view.topics.get(topic)
        if state is None or assignment is None or partition not in assignment.partitions \
                or state.leader != self.broker_id or not self.leads(topic, partition):
            raise MoveRefused(f"this node ({self.broker_id}) does not lead {name}")
        replicas = assignment.partitions[partition]
        warming = frozenset(b for b, t, p in self.view.warming if t == topic and p == partition)
        target = move_target(replicas, state.isr, state.leader, frozenset(self.view.brokers), warming)
        if target is None:
            raise MoveRefused(f"{name} has no other live in-sync replica to move to (replicas {list(replicas)}, "
                              f"in sync {list(state.isr)}, live {sorted(self.view.brokers)})")
        order = (target, *(r for r in replicas if r != target))
        log.info("moving a coordinator", extra={"partition": name, "group": group_id, "from": self.broker_id,
                                                "to": target, "replicas": list(order)})
        await self._at_controller(deadline, name, lambda c: self._reorder(c, topic, partition, order))
        await self._at_controller(deadline, name, lambda c: self._elect(c, topic, partition))
        await self._until(deadline, f"{name} led by node {target} and given up here",
                          lambda: self.view.leader(topic, partition) == target and not self.leads(topic, partition))
        connection = self._connection(target)
        try:
            while True:
                if await self._serves(connection, group_id):
                    break
                if loop.time() > deadline:
                    raise MoveRefused(f"node {target} did not start coordinating group '{group_id}' "
                                      f"within {self.timeout_s:.0f} s")
                await asyncio.sleep(0.05)
        finally:
            connection.close()
        log.info("coordinator moved", extra={"partition": name, "group": group_id, "from": self.broker_id,
                                             "to": target})
        return CoordinatorMove(topic, partition, self.broker_id, target)

    async def _until(self, deadline: float, what: str, condition: Callable[[], bool]) -> None:
        loop = asyncio.get_running_loop()
        while not condition():
            if loop.time() > deadline:
                raise MoveRefused(f"not within {self.timeout_s:.0f} s: {what}")
            await asyncio.sleep(0.02)

    async def _at_controller(self, deadline: float, name: str,
                             send: Callable[[NodeConnection], Awaitable[bool]]) -> None:
        """Run ``send`` against the current controller until it answers (True): another
        controller elected meanwhile (NOT_CONTROLLER, False) or a lost connection is retried."""
        loop = asyncio.get_running_loop()
        while True:
            controller = self.view.controller_id
            if controller >= 0:
                connection = self._connection(controller)
                try:
                    if await send(connection):
                        return
                except CONNECTION_ERRORS as exc:
                    log.info("controller unreachable; retrying", extra={"controller": controller, "error": repr(exc)})
                finally:
                    connection.close()
            if loop.time() > deadline:
                raise MoveRefused(f"no controller carried out the move of {name} within {self.timeout_s:.0f} s")
            await asyncio.sleep(0.1)

    async def _reorder(self, connection: NodeConnection, topic: str, partition: int, order: tuple[int, ...]) -> bool:
        req = request_class(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        request = req(version=0, timeout_ms=int(self.timeout_s * 1000), topics=[req.ReassignableTopic(
            name=topic, partitions=[req.ReassignableTopic.ReassignablePartition(partition_index=partition,
                                                                               replicas=list(order))])])
        response = await connection.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
        if response.error_code == ErrorCode.NOT_CONTROLLER:
            return False
        errors = [(p.error_code, p.error_message) for t in response.responses for p in t.partitions]
        if response.error_code != ErrorCode.NONE or not errors or errors[0][0] != ErrorCode.NONE:
            code, message = (response.error_code, response.error_message) if response.error_code else \
                errors[0] if errors else (ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition")
            raise MoveRefused(f"the controller refused to reorder the replicas of {topic}-{partition} to "
                              f"{list(order)}: {ErrorCode(code).name} {message or ''}".rstrip())
        return True

    async def _elect(self, connection: NodeConnection, topic: str, partition: int) -> bool:
        req = request_class(ApiKey.ELECT_LEADERS)
        request = req(version=1, election_type=0, timeout_ms=int(self.timeout_s * 1000),
                      topic_partitions=[req.TopicPartitions(topic=topic, partitions=[partition])])
        response = await connection.call(ApiKey.ELECT_LEADERS, 1, request)
        codes = [p.error_code for r in response.replica_election_results for p in r.partition_result]
        if response.error_code == ErrorCode.NOT_CONTROLLER or ErrorCode.NOT_CONTROLLER in codes:
            return False
        code = response.error_code or (codes[0] if codes else ErrorCode.UNKNOWN_SERVER_ERROR)
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            raise MoveRefused(f"the preferred leader election of {topic}-{partition} failed: {ErrorCode(code).name}")
        return True

    async def _serves(self, connection: NodeConnection, group_id: str) -> bool:
        """Whether the node at ``connection`` coordinates ``group_id`` now: its OffsetFetch of
        the group (every partition: topics null, v2+) answers without a coordinator error."""
        req = request_class(ApiKey.OFFSET_FETCH)
        try:
            response = await connection.call(ApiKey.OFFSET_FETCH, 7, req(version=7, group_id=group_id, topics=None,
                                                                          require_stable=False))
        except CONNECTION_ERRORS:
            connection.close()
            return False
        return response.error_code not in _NOT_SERVING
