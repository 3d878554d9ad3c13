"""Reconciliation invariants under random joins, leaves, heartbeats that do or do not revoke,
crashes (session timeouts), static leaves and rejoins, subscription changes and partition count
changes (hypothesis RuleBasedStateMachine).

After every step: no partition is owned (assigned or pending revocation) by two members; every
member epoch is at most the assignment epoch, which is at most the group epoch; and replaying
every record written so far into a fresh shard gives the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.group.config import GroupConfig
from protocol.errors import ErrorCode as E
from tests.coordinator.group.consumer.context import ConsumerGroupTestContext

CLIENTS = 4
TOPICS = ("a", "b")


@dataclass
class Client:
    """What a consumer knows: its id, epoch, and the partitions it holds (by topic name)."""

    member_id: str
    instance_id: str | None
    epoch: int = -1  # -1: not in the group
    owned: dict[str, list[int]] = field(default_factory=dict)
    topics: list[str] = field(default_factory=lambda: ["a"])


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx: ConsumerGroupTestContext | None = None
        self.clients: list[Client] = []
        self.generation = 0
        #: What each client reported before its last assignment (a client still revoking).
        self._previous: dict[int, dict[str, list[int]]] = {}

    @initialize(interval=st.sampled_from([0, 1_000]))
    def setup(self, interval: int) -> None:
        self.ctx = ConsumerGroupTestContext(GroupConfig(consumer_assignment_interval_ms=interval))
        self.ctx.topics.create("a", 3)
        self.ctx.topics.create("b", 2)
        self.clients = [Client(f"m{i}", "static" if i == 0 else None) for i in range(CLIENTS)]

    @property
    def c(self) -> ConsumerGroupTestContext:
        assert self.ctx is not None
        return self.ctx

    def _handle(self, client: Client, response: Any) -> None:
        if response.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, E.GROUP_ID_NOT_FOUND,
                                   E.UNRELEASED_INSTANCE_ID, E.FENCED_INSTANCE_ID):
            # The client drops everything and will join again (a new id, as a restarted client would).
            self.generation += 1
            client.member_id = f"{client.member_id.split('.')[0]}.{self.generation}"
            client.epoch, client.owned = -1, {}
            return
        assert response.error_code == 0, response
        client.epoch = response.member_epoch
        if response.assignment is not None:
            names = {t.topic_id: t.name for t in self.c.topics.all()}
            client.owned = {names[tp.topic_id]: sorted(tp.partitions) for tp in response.assignment.topic_partitions
                            if tp.topic_id in names}

    def _owned_ids(self, owned: dict[str, list[int]]) -> dict[str, list[int]]:
        return {t: p for t, p in owned.items() if self.c.topics.get(t) is not None}

    @rule(i=st.integers(0, CLIENTS - 1), topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def join(self, i: int, topics: set[str]) -> None:
        client = self.clients[i]
        if client.epoch != -1:
            return
        client.topics = sorted(topics)
        response = self.c.cg_heartbeat(member_id=client.member_id, instance_id=client.instance_id,
                                       topics=client.topics)
        self._handle(client, response)

    @rule(i=st.integers(0, CLIENTS - 1), revoke=st.booleans())
    def heartbeat(self, i: int, revoke: bool) -> None:
        """``revoke``: the client reports what its last assignment gave it (it revoked what it
        had to); otherwise it reports what it held before (still revoking)."""
        client = self.clients[i]
        if client.epoch <= 0:
            return
        owned = client.owned if revoke else self._previous.get(i, client.owned)
        response = self.c.cg_heartbeat(member_id=client.member_id, member_epoch=client.epoch,
                                       instance_id=client.instance_id, owned=self._owned_ids(owned))
        self._previous[i] = client.owned
        self._handle(client, response)

    @rule(i=st.integers(0, CLIENTS - 1))
    def leave(self, i: int) -> None:
        client = self.clients[i]
        if client.epoch <= 0:
            return
        epoch = -2 if client.instance_id is not None else -1
        response = self.c.cg_heartbeat(member_id=client.member_id, member_epoch=epoch,
                                       instance_id=client.instance_id)
        # A member whose session expired meanwhile is unknown: it has left anyway.
        assert response.error_code in (0, E.UNKNOWN_MEMBER_ID), response
        if epoch == -2:
            # A static member coming back uses a new member id with the same instance id.
            self.generation += 1
            client.member_id = f"m0.{self.generation}"
        client.epoch, client.owned = -1, {}

    @rule(i=st.integers(0, CLIENTS - 1))
    def crash(self, i: int) -> None:
        """The client dies silently: the group learns it when its session times out."""
        client = self.clients[i]
        self.generation += 1
        client.member_id = f"{client.member_id.split('.')[0]}.{self.generation}"
        client.epoch, client.owned = -1, {}

    @rule(ms=st.sampled_from([500, 1_000, 5_000, 31_000, 46_000]))
    def sleep(self, ms: int) -> None:
        self.c.sleep(ms)

    @rule(i=st.integers(0, CLIENTS - 1), topics=st.sets(st.sampled_from(TOPICS), min_size=1))
    def subscribe(self, i: int, topics: set[str]) -> None:
        client = self.clients[i]
        if client.epoch <= 0:
            return
        client.topics = sorted(topics)
        response = self.c.cg_heartbeat(member_id=client.member_id, member_epoch=client.epoch,
                                       instance_id=client.instance_id, topics=client.topics,
                                       owned=self._owned_ids(client.owned))
        self._handle(client, response)

    @rule(topic=st.sampled_from(TOPICS), more=st.integers(1, 3))
    def add_partitions(self, topic: str, more: int) -> None:
        old = self.c.topics.get(topic)
        assert old is not None
        if old.num_partitions + more <= 8:
            self.c.topics.create(topic, old.num_partitions + more, topic_id=old.topic_id)

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        if self.ctx is None:
            return
        for group in self.c.cgroups.values():
            seen: dict[tuple[Any, int], str] = {}
            for member in group.members.values():
                for source in (member.assigned_partitions, member.partitions_pending_revocation):
                    for topic_id, parts in source.items():
                        for p in parts:
                            owner = seen.setdefault((topic_id, p), member.member_id)
                            assert owner == member.member_id, (topic_id, p, owner, member.member_id)

    @invariant()
    def epochs_are_ordered(self) -> None:
        if self.ctx is None:
            return
        for group in self.c.cgroups.values():
            assert group.assignment_epoch <= group.group_epoch
            for member in group.members.values():
                assert member.member_epoch <= group.assignment_epoch <= group.group_epoch

    @invariant()
    def replay_rebuilds_the_same_state(self) -> None:
        if self.ctx is None:
            return
        assert self.c.reload().state() == self.c.state()


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestConsumerGroupInvariants = ConsumerGroupMachine.TestCase
