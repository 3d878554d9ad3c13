"""The group state machines of ``test_stateful.py`` (classic groups) and
``consumer/test_stateful.py`` (KIP-848 groups) with the injected faults of issue 35 among their
steps: forced rebalances and kicked members interleaved with joins, syncs, heartbeats, leaves,
commits, timeouts and crashes keep every invariant of those machines (a generation or an epoch
only grows, one generation at a time, acknowledged commits stay, no partition with two owners,
and replaying the records written rebuilds the same state)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from protocol.errors import ErrorCode as E

from .consumer.test_stateful import CLIENTS as CONSUMER_CLIENTS
from .consumer.test_stateful import ConsumerGroupMachine
from .test_stateful import GROUPS, CoordinatorMachine


class ClassicFaultsMachine(CoordinatorMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rebalances: dict[str, int] = {}

    @rule(group=st.sampled_from(GROUPS))
    def force_rebalance(self, group: str) -> None:
        try:
            result = self.ctx._apply(self.ctx.shard.fault_rebalance(group))
        except LookupError:
            live = self.ctx.groups.get(group)
            assert live is None or live.state.value == "Dead"
            return
        answer = result.response
        assert answer is not None
        live = self.ctx.groups[group]
        assert answer["generation"] == live.generation_id
        assert answer["rebalanced"] is (live.state.value == "PreparingRebalance")
        assert answer["rebalanced"] or live.state.value == "Empty"
        self._after()

    @rule(group=st.sampled_from(GROUPS), pick=st.one_of(st.none(), st.integers(0, 3)))
    def kick_member(self, group: str, pick: int | None) -> None:
        """``pick``: None kicks the first member; else a client's member id (its instance id
        for the static client 3)."""
        member: str | None = None
        if pick is not None:
            client = self.clients[(group, pick)]
            member = client.instance_id or client.member_id
            if not member:
                return
        live = self.ctx.groups.get(group)
        before = set(live.members) if live is not None else set()
        try:
            result = self.ctx._apply(self.ctx.shard.fault_kick_member(group, member))
        except LookupError:
            if pick is None:
                assert not before
            elif live is not None and live.state.value != "Dead":
                assert member not in before and member not in live.static_members
            return
        answer = result.response
        assert answer is not None and answer["member"] in before
        assert answer["member"] not in self.ctx.groups[group].members
        self._after()

    @invariant()
    def a_kicked_client_is_told_so(self) -> None:
        for client in self.clients.values():
            group = self.ctx.groups.get(client.group)
            if client.member_id and client.join is None and group is not None \
                    and client.member_id not in group.members and not group.is_pending(client.member_id):
                response = self.ctx.heartbeat(client.group, client.member_id, client.generation,
                                              group_instance_id=client.instance_id)
                assert response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID), response
                client.member_id = ""


ClassicFaultsMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_classic_groups_with_faults = ClassicFaultsMachine.TestCase


class ConsumerFaultsMachine(ConsumerGroupMachine):
    @rule()
    def force_rebalance(self) -> None:
        group = self.c.cgroups.get("g")
        if group is None:
            return
        before = group.group_epoch
        answer = self.c._apply(self.c.shard.fault_rebalance("g")).response
        assert answer is not None
        if group.members:
            assert answer["group_epoch"] == before + 1 == group.group_epoch
        else:
            assert answer["rebalanced"] is False and group.group_epoch == before

    @rule(i=st.one_of(st.none(), st.integers(0, CONSUMER_CLIENTS - 1)))
    def kick_member(self, i: int | None) -> None:
        group = self.c.cgroups.get("g")
        if group is None:
            return
        member = None if i is None else (self.clients[i].instance_id or self.clients[i].member_id)
        try:
            answer = self.c._apply(self.c.shard.fault_kick_member("g", member)).response
        except LookupError:
            assert (not group.members) if member is None else \
                (member not in group.members and group.static_member(member) is None)
            return
        assert answer is not None and answer["member"] not in self.c.cgroups["g"].members


ConsumerFaultsMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestConsumerGroupsWithFaults = ConsumerFaultsMachine.TestCase
