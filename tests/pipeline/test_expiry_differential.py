"""``expired_offsets``' "expiry due" against the coordinator itself: the log a group coordinator
shard wrote (every kind of group KIP-211 treats differently) is read by the pipeline at several
evaluation times, and at each the pipeline must name exactly the offsets the coordinator, loaded
from that log at that time, would expire (``OffsetManager.expired_offset_tombstones``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from coordinator.group.config import GroupConfig
from pipeline import transforms as T
from protocol.consumer_offsets import OffsetCommitKey, serialize
from protocol.records import build_batch
from storage.log import Log
from storage.options import offsets_topic_options
from tests.coordinator.group.group_test_context import GroupTestContext

HOUR = 3_600_000
RETENTION = 10 * HOUR


def _history() -> GroupTestContext:
    """Four hours of a coordinator's life; returns the context (its log and clock)."""
    ctx = GroupTestContext(GroupConfig(offsets_retention_ms=RETENTION, offsets_retention_check_interval_ms=100 * HOUR))
    ctx.commit_offsets("simple", {("foo", 0): 1})  # no members ever: ages from each commit
    ctx.sleep(HOUR)
    ctx.commit_offsets("simple", {("foo", 1): 2})
    ctx.commit_offsets("legacy", {("foo", 0): 3}, retention_time_ms=2 * HOUR, version=2)  # explicit expire time
    ids, gen = ctx.stable_group("emptied", 1, topics=("foo",))
    ctx.commit_offsets("emptied", {("foo", 0): 6}, generation_id=gen, member_id=ids[0])
    ctx.sleep(5_000)
    ctx.leave_group("emptied", [(ids[0], None)])  # Empty from now on: ages from here
    ctx.sleep(3 * HOUR)
    ctx.commit_offsets("simple", {("foo", 2): 7})
    # Stable at the end of the log (members only stay while they heartbeat): only the topic no
    # member subscribes to can expire.
    ids, gen = ctx.stable_group("stable", 2, topics=("foo",))
    ctx.commit_offsets("stable", {("foo", 0): 4, ("gone", 0): 5}, generation_id=gen, member_id=ids[0])
    return ctx


def _write(ctx: GroupTestContext, data: Path) -> None:
    async def go() -> None:
        log = Log.open(data, "__consumer_offsets", 0, offsets_topic_options())
        for key, value in ctx.log:
            await log.append(build_batch([serialize(key, value)], timestamp_ms=ctx.clock.now))
        await log.close()

    asyncio.run(go())


def _coordinator_would_expire(ctx: GroupTestContext, now_ms: int) -> set[tuple[str, str, int]]:
    loaded = GroupTestContext(ctx.config, log=list(ctx.log), now_ms=now_ms)
    manager = loaded.shard.offset_manager
    out = set()
    for group in loaded.groups.values():
        records, _ = manager.expired_offset_tombstones(group, now_ms)
        out |= {(k.group, k.topic, k.partition) for k, _v in records if isinstance(k, OffsetCommitKey)}
    return out


def test_expiry_due_is_what_the_coordinator_would_expire(spark: Any, tmp_path: Path) -> None:
    ctx = _history()
    _write(ctx, tmp_path)
    raw = spark.read.format("consumer_offsets").load(str(tmp_path)).cache()
    start = ctx.clock.now - 4 * HOUR  # about the first commit (joins add seconds)
    seen = []
    for hours in (1, 3.5, 10.5, 11.5, 13.5, 14.5, 100):
        now = int(start + hours * HOUR)
        expected = _coordinator_would_expire(ctx, now)
        got = {(r["group_id"], r["topic"], r["partition"])
               for r in T.expired_offsets(raw, now, RETENTION).where("kind = 'expiry due'").collect()}
        assert got == expected, (hours, got, expected)
        seen.append(len(expected))
    # The times cover nothing due, each kind falling due, and everything that ever will.
    assert seen == [0, 1, 2, 4, 4, 6, 6], seen
    assert ("stable", "foo", 0) not in _coordinator_would_expire(ctx, start + 100 * HOUR)
    assert ("stable", "gone", 0) in _coordinator_would_expire(ctx, start + 100 * HOUR)
    raw.unpersist()
