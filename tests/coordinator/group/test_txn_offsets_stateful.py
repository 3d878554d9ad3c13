"""Plain and transactional offset commits, tombstones and COMMIT/ABORT markers in any order, against
a model of Kafka's rule (``OffsetMetadataManager``: a COMMIT stores a pending offset only if its
record's log offset is greater than the stored offset's, so the last log position wins), and the
same state rebuilt from the log and from a snapshot taken at any point followed by the log tail."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group.coordinator_type import serialize_record as serialize
from coordinator.group.shard import GroupCoordinatorShard
from protocol.errors import ErrorCode as E

from .group_test_context import GroupTestContext, MockTimer

PARTITIONS = 3
PIDS = (1, 2, 3)

Key = int  # a partition of topic foo, group g

ops = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.integers(0, PARTITIONS - 1), st.integers(0, 99)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.integers(0, PARTITIONS - 1), st.integers(0, 99)),
    st.tuples(st.just("marker"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, PARTITIONS - 1)),
    st.tuples(st.just("snapshot"),),
), max_size=40)


class Model:
    """Kafka's replay, with record offsets kept for every value."""

    def __init__(self) -> None:
        self.committed: dict[Key, tuple[int, int]] = {}  # partition -> (record offset, offset)
        self.pending: dict[int, dict[Key, tuple[int, int]]] = {}

    def commit(self, position: int, partition: int, offset: int) -> None:
        self.committed[partition] = (position, offset)

    def txn(self, position: int, pid: int, partition: int, offset: int) -> None:
        self.pending.setdefault(pid, {})[partition] = (position, offset)

    def delete(self, partition: int) -> None:
        self.committed.pop(partition, None)
        for by_partition in self.pending.values():
            by_partition.pop(partition, None)

    def marker(self, pid: int, commit: bool) -> None:
        for partition, (position, offset) in self.pending.pop(pid, {}).items():
            if commit and (partition not in self.committed or self.committed[partition][0] < position):
                self.committed[partition] = (position, offset)

    def unstable(self) -> set[int]:
        return {p for by_partition in self.pending.values() for p in by_partition}


def observed(ctx_shard: GroupCoordinatorShard, ctx: GroupTestContext) -> tuple[dict[int, int], set[int]]:
    """(committed offset per partition, partitions answering UNSTABLE_OFFSET_COMMIT)."""
    saved = ctx.shard
    ctx.shard = ctx_shard
    try:
        parts = ctx.fetch_offsets("g", {"foo": list(range(PARTITIONS))}).topics[0].partitions
        stable = ctx.fetch_offsets("g", {"foo": list(range(PARTITIONS))}, require_stable=True).topics[0].partitions
    finally:
        ctx.shard = saved
    return ({p.partition_index: p.committed_offset for p in parts if p.committed_offset >= 0},
            {p.partition_index for p in stable if p.error_code == E.UNSTABLE_OFFSET_COMMIT})


def from_snapshot(ctx: GroupTestContext, snapshot: tuple[int, list[Any], list[Any]]) -> GroupCoordinatorShard:
    """A shard loaded as the runtime loads one: the snapshot's plain records, its records of open
    transactions (each with its producer and offset), then the log after the snapshot."""
    position, records, transactional = snapshot
    shard = GroupCoordinatorShard(ctx.config, ctx.clock, MockTimer(ctx.clock), ctx.partition_exists)
    for key, value in records:
        shard.replay(key, value)
    for offset, pid, epoch, key, value in transactional:
        if pid < 0:
            shard.replay(key, value)
        else:
            shard.replay_transactional(offset, pid, epoch, key, value)
    for offset, entry in enumerate(ctx.entries[position:], start=position):
        if entry[0] == "marker":
            shard.replay_end_transaction(entry[1], entry[2], entry[3])
        elif entry[1] < 0:
            shard.replay(*serialize(entry[3], entry[4]))
        else:
            shard.replay_transactional(offset, entry[1], entry[2], *serialize(entry[3], entry[4]))
    shard.on_loaded()
    return shard


@settings(max_examples=150, deadline=None)
@given(ops)
def test_plain_and_transactional_commits_with_markers_match_kafkas_rule_and_survive_reloads(steps: list[Any]) -> None:
    ctx = GroupTestContext()
    model = Model()
    snapshots: list[tuple[int, list[Any], list[Any]]] = []
    for step in steps:
        position = len(ctx.entries)
        if step[0] == "commit":
            ctx.commit_offsets("g", {("foo", step[1]): step[2]})
            model.commit(position, step[1], step[2])
        elif step[0] == "txn":
            ctx.txn_commit_offsets("g", {("foo", step[2]): step[3]}, producer_id=step[1])
            model.txn(position, step[1], step[2], step[3])
        elif step[0] == "marker":
            ctx.end_transaction(step[1], step[2])
            model.marker(step[1], step[2])
        elif step[0] == "delete":
            if "g" in ctx.groups:
                ctx.delete_offsets("g", {"foo": [step[1]]})
                if step[1] in model.committed or step[1] in model.unstable():  # what OffsetDelete tombstones
                    model.delete(step[1])
        else:
            snapshots.append((position, list(ctx.shard.snapshot_records()),
                              list(ctx.shard.snapshot_transactional_records())))
        assert observed(ctx.shard, ctx) == ({p: o for p, (_pos, o) in model.committed.items()}, model.unstable())
    expected = (ctx.shard.hard_state(), ctx.shard.pending_state())
    reloaded = ctx.reload().shard
    assert (reloaded.hard_state(), reloaded.pending_state()) == expected
    for snapshot in snapshots:
        shard = from_snapshot(ctx, snapshot)
        assert (shard.hard_state(), shard.pending_state()) == expected
        assert observed(shard, ctx) == observed(ctx.shard, ctx)
