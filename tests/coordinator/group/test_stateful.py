"""A hypothesis state machine: several clients in several groups join, sync, heartbeat, leave,
commit and fetch while time passes and the partition crashes and reloads.

Invariants checked after every step:

* a group's generation only grows (within one incarnation of the shard; across reloads the
  persisted generation only grows);
* one generation at a time: every successful JoinGroup answer for a generation names the same
  leader and protocol;
* a Stable group's assignments are the ones its leader sent for the current generation;
* an acknowledged commit is returned by OffsetFetch until a later commit, an OffsetDelete, a group
  deletion or an expiry tombstones it;
* replaying every record written so far into a fresh shard rebuilds identical hard state.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.group.config import GroupConfig
from coordinator.group.group_state import GroupState
from coordinator.runtime.contract import ResponseFuture
from protocol.consumer_offsets import GroupMetadataKey, OffsetCommitKey, serialize
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, protocols

GROUPS = ("g1", "g2")
CLIENTS = 4  # per group; client 3 is static
TOPIC = "t"


@dataclass
class Client:
    group: str
    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    leader_members: list[str] | None = None
    join: ResponseFuture | None = None
    sync: ResponseFuture | None = None
    assignment: bytes = b""


@dataclass
class Model:
    #: (group, partition) -> offset acknowledged and not yet tombstoned.
    committed: dict[tuple[str, int], int] = field(default_factory=dict)


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.config = GroupConfig(initial_rebalance_delay_ms=1_000, offsets_retention_ms=120_000,
                                  offsets_retention_check_interval_ms=30_000, max_size=3)
        self.ctx = GroupTestContext(self.config)
        self.incarnation = 0
        self.clients = {(g, i): Client(g, f"{g}-static" if i == 3 else None) for g in GROUPS for i in range(CLIENTS)}
        self.model = Model()
        self.seen_log = 0
        #: (incarnation, group, generation) -> (leader, protocol) from successful JoinGroup answers.
        self.generations: dict[tuple[int, str, int], tuple[str, str]] = {}
        self.live_generation: dict[str, int] = {}
        self.persisted_generation: dict[str, int] = {}
        #: (group, generation) -> the leader of the first record with members for it (the sync).
        self.assigned_by: dict[tuple[str, int], str] = {}

    # --- client behaviour ----------------------------------------------------------------------

    def _poll(self) -> None:
        """Deliver completed responses to their clients, as a client library would."""
        for client in self.clients.values():
            if client.join is not None and client.join.done():
                self._on_join(client, client.join.result())
                client.join = None
            if client.sync is not None and client.sync.done():
                response = client.sync.result()
                client.sync = None
                if response.error_code == E.NONE:
                    client.assignment = response.assignment
                elif response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                    client.member_id = ""

    def _on_join(self, client: Client, response: Any) -> None:
        if response.error_code == E.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            client.leader_members = [m.member_id for m in response.members] \
                if response.leader == response.member_id and not response.skip_assignment else None
            key = (self.incarnation, client.group, response.generation_id)
            # The leader shown may differ inside one generation only through a static member's
            # replacement (KIP-345/814), so the check is on the protocol.
            seen = self.generations.setdefault(key, (response.leader, response.protocol_name))
            assert seen[1] == response.protocol_name, (key, seen, response)
        elif response.error_code == E.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
        elif response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID, E.GROUP_MAX_SIZE_REACHED):
            client.member_id = ""

    def _consume_log(self) -> None:
        for key, value in self.ctx.log[self.seen_log:]:
            if isinstance(key, OffsetCommitKey) and value is None:
                self.model.committed.pop((key.group, key.partition), None)
            if isinstance(key, GroupMetadataKey):
                if value is None:
                    self.persisted_generation.pop(key.group, None)
                    for k in [k for k in self.assigned_by if k[0] == key.group]:
                        del self.assigned_by[k]
                else:
                    if value.members:
                        self.assigned_by.setdefault((key.group, value.generation), value.leader or "")
                    assert value.generation >= self.persisted_generation.get(key.group, 0)
                    self.persisted_generation[key.group] = value.generation
        self.seen_log = len(self.ctx.log)

    def _after(self) -> None:
        self._poll()
        self._consume_log()

    clients_st = st.tuples(st.sampled_from(GROUPS), st.integers(0, CLIENTS - 1))

    @rule(who=clients_st, version=st.sampled_from([3, 4, 5, 8, 9]), topics=st.sampled_from([("t",), ("t", "u")]))
    def join(self, who: tuple[str, int], version: int, topics: tuple[str, ...]) -> None:
        client = self.clients[who]
        if client.join is not None:
            return
        if client.instance_id is not None:
            version = max(version, 5)
        client.join = self.ctx.join_group(client.group, client.member_id, protocols=protocols(*topics),
                                          group_instance_id=client.instance_id, version=version,
                                          client_id=f"c{who[1]}", session_timeout_ms=6_000,
                                          rebalance_timeout_ms=8_000)
        self._after()

    @rule(who=clients_st)
    def sync(self, who: tuple[str, int]) -> None:
        client = self.clients[who]
        if client.sync is not None or not client.member_id:
            return
        assignments = None
        if client.leader_members is not None:
            assignments = {m: f"g{client.generation}-by-{client.member_id}".encode()
                           for m in client.leader_members}
        client.sync = self.ctx.sync_group(client.group, client.member_id, client.generation,
                                          assignments=assignments, group_instance_id=client.instance_id)
        self._after()

    @rule(who=clients_st)
    def heartbeat(self, who: tuple[str, int]) -> None:
        client = self.clients[who]
        if client.member_id:
            response = self.ctx.heartbeat(client.group, client.member_id, client.generation,
                                          group_instance_id=client.instance_id)
            if response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
                client.member_id = ""
        self._after()

    @rule(who=clients_st)
    def leave(self, who: tuple[str, int]) -> None:
        client = self.clients[who]
        if client.member_id or client.instance_id:
            self.ctx.leave_group(client.group, [(client.member_id, client.instance_id)])
            client.member_id = ""
        self._after()

    @rule(who=clients_st, partition=st.integers(0, 2), offset=st.integers(0, 1000), as_member=st.booleans())
    def commit(self, who: tuple[str, int], partition: int, offset: int, as_member: bool) -> None:
        client = self.clients[who]
        kwargs: dict[str, Any] = {}
        if as_member and client.member_id:
            kwargs = dict(generation_id=client.generation, member_id=client.member_id,
                          group_instance_id=client.instance_id)
        response = self.ctx.commit_offsets(client.group, {(TOPIC, partition): offset}, **kwargs)
        self._consume_log()
        if response.topics[0].partitions[0].error_code == E.NONE:
            self.model.committed[(client.group, partition)] = offset
        self._after()

    @rule(group=st.sampled_from(GROUPS), partition=st.integers(0, 2))
    def delete_offset(self, group: str, partition: int) -> None:
        self.ctx.delete_offsets(group, {TOPIC: [partition]})
        self._after()

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group: str) -> None:
        self.ctx.delete_groups(group)
        self._after()

    @rule(ms=st.sampled_from([0, 500, 1_000, 3_000, 7_000, 30_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)
        self._after()

    @rule()
    def take_snapshot(self) -> None:
        """What the runtime writes: the state as records, at the current end of the log."""
        self.snapshot = (len(self.ctx.log), list(self.ctx.shard.snapshot_records()))

    @rule()
    def crash_and_reload(self) -> None:
        self._after()
        self.ctx = self.ctx.reload()
        self.seen_log = len(self.ctx.log)
        self.incarnation += 1
        self.live_generation.clear()
        for client in self.clients.values():
            client.join = client.sync = None  # their connections died with the broker

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def generations_only_grow(self) -> None:
        for group_id, group in self.ctx.groups.items():
            assert group.generation_id >= self.live_generation.get(group_id, 0)
            self.live_generation[group_id] = group.generation_id
        for group_id in list(self.live_generation):
            if group_id not in self.ctx.groups:
                del self.live_generation[group_id]

    @invariant()
    def stable_assignments_come_from_this_generations_leader(self) -> None:
        for group in self.ctx.groups.values():
            if group.state is not GroupState.STABLE:
                continue
            for member in group.members.values():
                if member.assignment:
                    prefix, leader = member.assignment.decode().split("-by-")
                    assert prefix == f"g{group.generation_id}", (group.group_id, member.assignment)
                    assert leader == self.assigned_by[(group.group_id, group.generation_id)]
            persisted = self.ctx.shard.group_manager.group_records.get(group.group_id)
            assert persisted is not None and persisted.generation == group.generation_id

    @invariant()
    def acknowledged_commits_are_fetched(self) -> None:
        for (group, partition), offset in self.model.committed.items():
            assert self.ctx.committed(group, TOPIC, partition) == offset, (group, partition)

    @invariant()
    def live_groups_are_consistent(self) -> None:
        for group in self.ctx.groups.values():
            support: Counter[str] = Counter(name for m in group.members.values() for name, _ in m.supported_protocols)
            assert support == group.protocol_support
            assert group.awaiting_join <= set(group.members) and group.pending_sync <= set(group.members)
            assert set(group.static_members.values()) <= set(group.members)
            assert (group.leader_id is None) == (not group.members)
            assert not group.members or group.leader_id in group.members

    @invariant()
    def replay_rebuilds_hard_state(self) -> None:
        rebuilt = GroupTestContext(self.config, log=list(self.ctx.log))
        assert rebuilt.shard.hard_state() == self.ctx.shard.hard_state()

    @invariant()
    def a_snapshot_and_the_log_after_it_rebuild_hard_state(self) -> None:
        snapshot = getattr(self, "snapshot", None)
        if snapshot is None or snapshot[0] > len(self.ctx.log):
            return  # none yet, or taken before a crash in a later incarnation's shorter log
        at, records = snapshot
        rebuilt = GroupTestContext(self.config)
        for key, value in records:
            rebuilt.shard.replay(key, value)
        for key, value in self.ctx.log[at:]:
            rebuilt.shard.replay(*serialize(key, value))
        assert rebuilt.shard.hard_state() == self.ctx.shard.hard_state()


CoordinatorMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_coordinator_state_machine = CoordinatorMachine.TestCase
