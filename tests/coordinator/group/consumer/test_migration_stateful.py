"""Online migration under random steps (hypothesis RuleBasedStateMachine): one group used by
classic clients (eager or cooperative, speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and
consumer clients (ConsumerGroupHeartbeat), so it is upgraded when a consumer client joins it and
downgraded when the last one leaves, again and again, with crashes and timeouts in between.

After every step:
* no partition is held by two clients that are members of the group. A consumer client holds its
  last assignment; a classic client holds what its last SyncGroup answered until it rejoins (an
  eager client gives everything up before rejoining, a cooperative one only what its next
  SyncGroup leaves out). While the group is classic the leader (this test) assigns, and every
  client behaves eagerly;
* the consumer group's own books have no partition owned twice and ordered epochs;
* replaying every record written so far into a fresh shard gives the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.group.config import GroupConfig
from coordinator.runtime.contract import ResponseFuture
from protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext
from tests.coordinator.group.consumer.test_migration import subscription_v1

TOPICS = ("a", "b")
SESSION = 10_000
REBALANCE = 20_000
RESET = (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID, E.FENCED_MEMBER_EPOCH,
         E.GROUP_ID_NOT_FOUND)


@dataclass
class ClassicClient:
    cooperative: bool
    member_id: str = ""
    generation: int = -1
    held: dict[str, list[int]] = field(default_factory=dict)
    join: ResponseFuture | None = None
    sync: ResponseFuture | None = None
    topics: tuple[str, ...] = ("a",)


@dataclass
class ConsumerClient:
    member_id: str
    epoch: int = -1
    held: dict[str, list[int]] = field(default_factory=dict)


class MigrationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx: ConsumerGroupTestContext | None = None
        self.classic: list[ClassicClient] = []
        self.consumers: list[ConsumerClient] = []
        self.restarts = 0

    @initialize(cooperative=st.lists(st.booleans(), min_size=3, max_size=3))
    def setup(self, cooperative: list[bool]) -> None:
        self.ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=0,
                                                        initial_rebalance_delay_ms=0))
        self.ctx.topics.create("a", 4)
        self.ctx.topics.create("b", 2)
        self.classic = [ClassicClient(c) for c in cooperative]
        self.consumers = [ConsumerClient(f"c{i}") for i in range(2)]
        # Start from a Stable classic group of the three, each client holding its assignment.
        for client in self.classic:
            self._send_join(client)
        self.ctx.sleep(1)
        for i in range(3):
            self.classic_poll(i)
        for i in range(3):
            self.classic_poll(i)
        assert all(c.held for c in self.classic)

    @property
    def c(self) -> ConsumerGroupTestContext:
        assert self.ctx is not None
        return self.ctx

    def _is_consumer_group(self) -> bool:
        return "g" in self.c.cgroups

    def _members(self) -> set[str]:
        if self._is_consumer_group():
            return set(self.c.cgroups["g"].members)
        group = self.c.groups.get("g")
        return set() if group is None else set(group.members)

    # --- classic clients -----------------------------------------------------------------------

    def _reset(self, client: ClassicClient) -> None:
        client.member_id, client.generation, client.held, client.join, client.sync = "", -1, {}, None, None

    def _send_join(self, client: ClassicClient) -> None:
        if client.member_id and client.member_id not in self._members():
            # Its session expired meanwhile: the partitions are lost (the group may have given
            # them to others), and a consumer group takes the old id as a new member.
            client.held = {}
        if not client.cooperative or not self._is_consumer_group():
            client.held = {}  # eager: everything is revoked before rejoining
        metadata = subscription_v1(client.topics, {t: p for t, p in client.held.items() if p})
        if not client.member_id:
            first = self.c.join_group("g", protocols=[("range", metadata)], session_timeout_ms=SESSION,
                                      rebalance_timeout_ms=REBALANCE).result()
            if first.error_code != E.MEMBER_ID_REQUIRED:
                return
            client.member_id = first.member_id
        client.join = self.c.join_group("g", client.member_id, protocols=[("range", metadata)],
                                        session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE)

    @rule(i=st.integers(0, 2), topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def classic_join(self, i: int, topics: set[str]) -> None:
        client = self.classic[i]
        if client.join is not None or client.sync is not None:
            return
        client.topics = tuple(sorted(topics))
        self._send_join(client)

    @rule(i=st.integers(0, 2))
    def classic_poll(self, i: int) -> None:
        """The client acts on one answer that arrived (a JoinGroup answer: it sends SyncGroup;
        a SyncGroup answer: it takes the assignment), so other clients can act in between."""
        client = self.classic[i]
        if client.join is not None and client.join.done():
            r, client.join = client.join.result(), None
            if r.error_code in RESET:
                self._reset(client)
            elif r.error_code == 0:
                client.generation = r.generation_id
                plan = self._leader_plan(r) if r.leader == client.member_id else {}
                client.sync = self.c.sync_group("g", client.member_id, r.generation_id, assignments=plan)
        elif client.sync is not None and client.sync.done():
            r, client.sync = client.sync.result(), None
            if r.error_code in RESET:
                self._reset(client)
            elif r.error_code == 0:
                decoded = decode_assignment(r.assignment)
                client.held = {t: sorted(p) for t, p in decoded.assigned_partitions}

    def _leader_plan(self, response: Any) -> dict[str, bytes]:
        """The classic leader's assignment: each topic's partitions dealt round-robin to its
        subscribers in member-id order."""
        subs = {m.member_id: decode_subscription(m.metadata).topics for m in response.members}
        plan: dict[str, dict[str, list[int]]] = {m: {} for m in subs}
        for topic in TOPICS:
            described = self.c.topics.get(topic)
            assert described is not None
            who = sorted(m for m, t in subs.items() if topic in t)
            for p in range(described.num_partitions):
                if who:
                    plan[who[p % len(who)]].setdefault(topic, []).append(p)
        return {m: encode_assignment(ConsumerProtocolAssignment(1, tuple((t, tuple(p)) for t, p in a.items())))
                for m, a in plan.items()}

    @rule(i=st.integers(0, 2))
    def classic_heartbeat(self, i: int) -> None:
        client = self.classic[i]
        if not client.member_id or client.generation < 0 or client.join is not None or client.sync is not None:
            return
        error = self.c.heartbeat("g", client.member_id, client.generation).error_code
        if error in RESET:
            self._reset(client)
        elif error == E.REBALANCE_IN_PROGRESS:
            self._send_join(client)

    @rule(i=st.integers(0, 2))
    def classic_leave(self, i: int) -> None:
        client = self.classic[i]
        if client.member_id and client.join is None and client.sync is None:
            self.c.leave_group("g", [(client.member_id, None)])
            self._reset(client)

    # --- consumer clients ----------------------------------------------------------------------

    def _handle(self, client: ConsumerClient, response: Any) -> None:
        if response.error_code in RESET or response.error_code == E.UNRELEASED_INSTANCE_ID:
            self._restart(client)
            return
        assert response.error_code == 0, response
        client.epoch = response.member_epoch
        if response.assignment is not None:
            names = {t.topic_id: t.name for t in self.c.topics.all()}
            client.held = {names[tp.topic_id]: sorted(tp.partitions) for tp in response.assignment.topic_partitions}

    def _restart(self, client: ConsumerClient) -> None:
        self.restarts += 1
        client.member_id = f"{client.member_id.split('.')[0]}.{self.restarts}"
        client.epoch, client.held = -1, {}

    @rule(i=st.integers(0, 1), topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def consumer_join(self, i: int, topics: set[str]) -> None:
        client = self.consumers[i]
        if client.epoch == -1:
            self._handle(client, self.c.cg_heartbeat(member_id=client.member_id, topics=sorted(topics)))

    @rule(i=st.integers(0, 1))
    def consumer_heartbeat(self, i: int) -> None:
        client = self.consumers[i]
        if client.epoch > 0:
            self._handle(client, self.c.cg_heartbeat(member_id=client.member_id, member_epoch=client.epoch,
                                                     owned=client.held))

    @rule(i=st.integers(0, 1))
    def consumer_leave(self, i: int) -> None:
        client = self.consumers[i]
        if client.epoch > 0:
            r = self.c.cg_heartbeat(member_id=client.member_id, member_epoch=-1)
            assert r.error_code in (0, E.UNKNOWN_MEMBER_ID, E.GROUP_ID_NOT_FOUND), r
            self._restart(client)

    @rule(i=st.integers(0, 1))
    def consumer_crash(self, i: int) -> None:
        self._restart(self.consumers[i])

    @rule(ms=st.sampled_from([1_000, 6_000, 11_000, 21_000, 46_000]))
    def sleep(self, ms: int) -> None:
        self.c.sleep(ms)

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def no_partition_held_twice(self) -> None:
        if self.ctx is None:
            return
        members = self._members()
        seen: dict[tuple[str, int], str] = {}
        holders = [(c.member_id, c.held) for c in self.classic] + [(c.member_id, c.held) for c in self.consumers]
        for member_id, held in holders:
            if member_id not in members:
                continue
            for topic, parts in held.items():
                for p in parts:
                    owner = seen.setdefault((topic, p), member_id)
                    assert owner == member_id, (topic, p, owner, member_id)

    @invariant()
    def consumer_group_books(self) -> None:
        if self.ctx is None or not self._is_consumer_group():
            return
        group = self.c.cgroups["g"]
        seen: dict[tuple[Any, int], str] = {}
        for member in group.members.values():
            assert member.member_epoch <= group.assignment_epoch <= group.group_epoch
            for source in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic_id, parts in source.items():
                    for p in parts:
                        assert seen.setdefault((topic_id, p), member.member_id) == member.member_id

    @invariant()
    def replay_rebuilds_the_same_state(self) -> None:
        if self.ctx is None:
            return
        assert self.c.reload().state() == self.c.state()


MigrationMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestMigrationInvariants = MigrationMachine.TestCase
