"""The hot standby (runtime rule 6, issue 14) on real logs: a follower's runtime replays the
replicated offsets log as it grows — committed records only, below the high watermark — snapshots
what it holds like a leader does, keeps its state across a truncation that stays above it, takes
over replaying only the tail, and after a restart starts from its own snapshot.

No test sleeps: the runtime's timers run on a stepping clock where a test needs them, and waiting
for the standby's background replay (and the file work it does in threads) yields to the event
loop until the condition holds."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import load_config
from coordinator.runtime.runtime import CoordinatorRuntime, CoordinatorState
from coordinator.runtime.snapshot import read_snapshot
from coordinator.runtime.timers import SystemClock
from coordinator.topics.log_manager import LogManager
from coordinator.topics.registry import TopicRegistry
from tests.coordinator.runtime.test_runtime import COUNTERS, TOPIC, _commits, _rounds
from tests.coordinator.stepping_clock import SteppingClock

pytestmark = pytest.mark.asyncio


async def _leader(tmp_path: Path) -> tuple[LogManager, CoordinatorRuntime, Any]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    config = load_config(data_dir=str(tmp_path / "a"), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path / "a")
    logs = LogManager(tmp_path / "a", registry, config)
    await logs.open_all()
    info = registry.create(TOPIC, 1, {"cleanup.policy": "compact"})
    logs.topic_created(info)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    return logs, runtime, info


async def _follower(tmp_path: Path, info: Any) -> tuple[LogManager, Any]:
    config = load_config(data_dir=str(tmp_path / "b"), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path / "b", persistent=False)
    registry.add(info)
    logs = LogManager(tmp_path / "b", registry, config)
    logs.broker_id = 2
    plog = await logs.open_partition(info, 0)
    assert plog.replication is not None
    plog.replication.become_follower(1, 0, (1, 2), (1, 2), 0)
    return logs, plog


async def _replicate(leader_logs: LogManager, plog: Any, high_watermark: int) -> None:
    """What the fetcher does: copy the leader's batches from the follower's log end, then take
    the leader's high watermark."""
    source = leader_logs.get(TOPIC, 0)
    assert source is not None
    while plog.log_end_offset < source.log_end_offset:
        await plog.append_replicated(bytes(source.log.read(plog.log_end_offset, 1 << 20)))
    plog.replication.set_follower_high_watermark(high_watermark)


def _shard(runtime: CoordinatorRuntime) -> Any:
    """The standby's shard (``shard()`` serves active partitions only)."""
    ctx = runtime._partitions.get(0)
    return None if ctx is None else ctx.shard


async def _until(condition: Any, what: str) -> None:
    """Yield to the event loop until ``condition()`` holds (5 s at most)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except AttributeError:  # the shard is not there yet
            pass
        await asyncio.sleep(0)
    raise AssertionError(f"not within 5 s: {what}")


async def test_a_standby_replays_committed_records_snapshots_and_takes_over_with_the_tail(tmp_path: Path,
                                                                                          caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="groupcoord")
    leader_logs, leader, info = await _leader(tmp_path)
    # One commit per batch: the high watermarks below fall between records (a standby replays
    # whole batches below it).
    await _commits(leader, 0, 1500, batch=1)
    logs, plog = await _follower(tmp_path, info)
    await _replicate(leader_logs, plog, 1200)
    clock = SteppingClock(SystemClock().now_ms())
    standby = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers, snapshot_min_records=1000)
    standby.standby(0)
    assert standby.state(0) is CoordinatorState.STANDBY
    await _until(lambda: _shard(standby).replayed == 1200, "the committed records replayed")
    # Records above the high watermark are not replayed: they could still be truncated.
    assert _shard(standby).offsets == {(f"g{i % 50}", "t", 0): i for i in range(1150, 1200)}
    # It snapshots like a leader, at what it replayed (all of it committed).
    await _until(lambda: read_snapshot(plog.log.directory) is not None, "a standby snapshot")
    snap = read_snapshot(plog.log.directory)
    assert snap is not None and snap.offset == 1200 and snap.records == 50

    # A truncation above what was replayed (a follower cutting an uncommitted tail) keeps the state.
    await _replicate(leader_logs, plog, 1500)
    await _until(lambda: _shard(standby).replayed == 1500, "the rest replayed")
    await _commits(leader, 1500, 20, batch=1)
    await _replicate(leader_logs, plog, 1500)
    caplog.clear()
    await plog.truncate_to(1510)
    clock.advance(1000)  # the standby's wait for the log to grow ends: it looks again
    await _until(lambda: standby._partitions[0].standby.truncations == plog.truncations, "the cut seen")
    assert _shard(standby).replayed == 1500
    assert not [r for r in caplog.records if "standby state rebuilt" in r.getMessage()]

    # Taking over replays only the tail from the high watermark to the log end.
    plog.replication.become_leader(1, (1, 2), (1, 2), 1)
    await standby.load(0)
    assert standby.state(0) is CoordinatorState.ACTIVE
    assert _shard(standby).replayed == 1510
    loaded = [r for r in caplog.records if r.getMessage() == "coordinator partition loaded"]
    assert loaded and loaded[-1].from_standby is True and loaded[-1].from_offset == 1500
    await logs.close_all()

    # Restarted as a follower, it starts from its own snapshot, not from the log start.
    logs, plog = await _follower(tmp_path, info)
    standby = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=1000)
    plog.replication.set_follower_high_watermark(1510)
    standby.standby(0)
    await _until(lambda: _shard(standby).offsets.get(("g9", "t", 0)) == 1509, "caught up after the restart")
    restarted = read_snapshot(plog.log.directory)
    assert restarted is not None
    assert _shard(standby).replayed == restarted.records + 1510 - restarted.offset
    await logs.close_all()
    await leader_logs.close_all()


async def test_a_standby_is_warming_until_it_first_reaches_the_high_watermark(tmp_path: Path) -> None:
    """What cluster/warming.py publishes for the controller: warming from the start of a standby
    until its replay first reaches the high watermark; not again when later records arrive (that
    is ordinary following); and a standby that goes while warming says so."""
    leader_logs, leader, info = await _leader(tmp_path)
    await _commits(leader, 0, 3000, batch=1)
    logs, plog = await _follower(tmp_path, info)
    await _replicate(leader_logs, plog, 2000)
    standby = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=100_000)
    heard: list[tuple[int, bool]] = []
    standby.standby_listeners.append(lambda p, warming: heard.append((p, warming)))
    standby.standby(0)
    assert heard == [(0, True)]  # at once: before the first record is replayed
    await _until(lambda: heard == [(0, True), (0, False)], "warm once caught up")
    assert _shard(standby).replayed == 2000

    await _replicate(leader_logs, plog, 3000)
    await _until(lambda: _shard(standby).replayed == 3000, "the rest replayed")
    assert heard == [(0, True), (0, False)]  # following, not warming again

    # Taken over: no event (it was warm); unloaded while warming: one.
    plog.replication.become_leader(1, (1, 2), (1, 2), 1)
    await standby.load(0)
    assert heard == [(0, True), (0, False)]
    plog.replication.become_follower(1, 2, (1, 2), (1, 2), 3000)
    standby.unload(0)
    heard.clear()
    plog.replication.set_follower_high_watermark(3000)
    standby.standby(0)
    assert heard == [(0, True)]
    standby.unload(0)  # before its replay caught up (it has not run yet)
    assert heard == [(0, True), (0, False)]
    await logs.close_all()
    await leader_logs.close_all()


async def test_a_standby_yields_between_slices_and_a_takeover_mid_batch_loses_and_repeats_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby replays a few hundred records between yields to the event loop (a node
    rebuilding a large one must go on fetching for the ISR); taken over between two slices of
    one batch, the new leader replays exactly the records the standby had not."""
    import coordinator.runtime.loader as loader_module

    monkeypatch.setattr(loader_module, "STANDBY_SLICE_RECORDS", 7)
    leader_logs, leader, info = await _leader(tmp_path)
    await _commits(leader, 0, 400)  # one batch of 400 records
    logs, plog = await _follower(tmp_path, info)
    await _replicate(leader_logs, plog, 400)
    standby = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=100_000)
    standby.standby(0)
    rounds = 0
    while getattr(_shard(standby), "replayed", 0) < 100:
        await asyncio.sleep(0)
        rounds += 1
    assert rounds >= 100 // 7  # it yielded every 7 records, inside the one batch
    assert _shard(standby).replayed < 400

    plog.replication.become_leader(1, (1, 2), (1, 2), 1)
    await standby.load(0)
    shard = standby.shard(0)
    assert shard.replayed == 400  # none twice, none missing
    assert shard.offsets == {(f"g{i % 50}", "t", 0): i for i in range(350, 400)}
    await logs.close_all()
    await leader_logs.close_all()


async def test_a_replica_reassigned_away_drops_its_standby_and_a_closed_log_ends_one_quietly(
        tmp_path: Path, caplog: Any) -> None:
    """CI found a standby still following a log its node had just deleted (the replica was
    reassigned away: ``resign(standby=False)`` kept a STANDBY partition), which logged an ERROR
    traceback. Now the standby goes with its replica; and one whose log closes before its
    unload arrives stops with an INFO line."""
    from coordinator.group.service import GroupService

    caplog.set_level(logging.INFO, logger="groupcoord")
    leader_logs, leader, info = await _leader(tmp_path)
    await _commits(leader, 0, 100)
    logs, plog = await _follower(tmp_path, info)
    await _replicate(leader_logs, plog, 100)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    service = GroupService(runtime, lambda: 1)
    service.resign(0, standby=True)
    assert runtime.state(0) is CoordinatorState.STANDBY
    service.resign(0, standby=True)  # a new epoch, still a follower: the same standby goes on
    assert runtime.state(0) is CoordinatorState.STANDBY
    service.resign(0, standby=False)  # reassigned away
    assert runtime.state(0) is None

    runtime.standby(0)  # a fresh standby: its replay starts after this round
    await logs.remove_partition(TOPIC, 0)  # deleted before any unload reached the runtime
    await _until(lambda: runtime.state(0) is None, "the standby gone")
    assert any(r.getMessage() == "standby stopped: its log was closed" for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    await logs.close_all()
    await leader_logs.close_all()


async def test_a_leader_reassigned_away_with_a_batch_not_yet_written_fails_it_quietly(
        tmp_path: Path, caplog: Any) -> None:
    """Found by the group fault schedule: the leader of an offsets partition reassigned off its
    node had just given a batch to its log when the replica went; the unload failed the answer
    (NOT_COORDINATOR), the log closed before the batch's write started, and the runtime logged an
    ERROR ("coordinator append failed; the partition stops serving") for a partition it no longer
    served. Such a batch now fails with an INFO line; its answer fails, nothing was acknowledged."""
    from coordinator.group.service import GroupService
    from coordinator.runtime.runtime import NotActiveError

    caplog.set_level(logging.INFO, logger="groupcoord")
    _leader_logs, _leader_runtime, info = await _leader(tmp_path)
    logs, plog = await _follower(tmp_path, info)
    # Broker 2 leads with broker 3 in the ISR, which never fetches: the batch stays below the HW.
    plog.replication.become_leader(1, (2, 3), (2, 3), 1)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    answer = runtime.write(0, "commit-offset", lambda s: s.commit("g", 1))
    await asyncio.sleep(0)  # the batch is given to the log; its write has not started
    assert not answer.done()

    GroupService(runtime, lambda: 1).resign(0, standby=False)  # reassigned away: unload first
    await logs.remove_partition(TOPIC, 0)  # then the replica's log goes
    with pytest.raises(NotActiveError):
        await answer
    await _rounds(10)  # the batch's write fails and its callbacks run
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    await logs.close_all()
    await _leader_logs.close_all()


async def test_a_timer_write_failed_by_an_unload_is_not_an_unretrieved_exception(
        tmp_path: Path, caplog: Any) -> None:
    """Found by the group fault schedule: a timer's write (a session expiry) waiting for the ISR
    when the partition's leadership moved was failed by the unload, and nobody read that outcome:
    asyncio logged "Future exception was never retrieved" at ERROR. The timer reads it now."""
    import gc
    import weakref

    caplog.set_level(logging.INFO)
    _leader_logs, _leader_runtime, info = await _leader(tmp_path)
    logs, plog = await _follower(tmp_path, info)
    plog.replication.become_leader(1, (2, 3), (2, 3), 1)  # broker 3 never fetches: the write waits
    clock = SteppingClock(SystemClock().now_ms())
    runtime = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    shard = _shard(runtime)
    shard.timer.schedule("expire", 0, lambda: shard.commit("g", 1), name="expire-session")
    clock.advance(0)
    await _rounds()
    waiting = runtime._partitions[0].writes.waiting
    assert len(waiting) == 1  # the timer's write waits for broker 3
    written = weakref.ref(next(iter(waiting)))
    del waiting

    runtime.unload(0)  # leadership moved: the write fails (NOT_COORDINATOR for a client)
    plog.replication.become_follower(3, 2, (2, 3), (2, 3), 2)  # its wait for the ISR fails too
    await _rounds(10)
    gc.collect()
    assert written() is None  # gone, and with it any complaint about its outcome
    await logs.close_all()
    await _leader_logs.close_all()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_stopping_node_snapshots_its_standbys_so_a_restart_replays_a_short_tail(tmp_path: Path) -> None:
    """A standby's snapshots are amortized (the next after as many records as the last one
    held), so it can hold half its state beyond its last snapshot: the group failover bench's
    1 M-offset standbys restarted from a snapshot at 536 k and replayed 470 k records from the log.
    ``snapshot_all`` (shutdown) now snapshots a standby that replayed ``snapshot_min_records``
    since its last snapshot."""
    leader_logs, leader, info = await _leader(tmp_path)
    logs, plog = await _follower(tmp_path, info)
    standby = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=100)
    standby.standby(0)

    async def commit_distinct(start: int, count: int) -> None:  # one key each: the state grows
        await asyncio.gather(*(leader.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i}", i)) for i in range(start, start + count)))
        await _replicate(leader_logs, plog, start + count)
        await _until(lambda: _shard(standby).replayed == start + count, f"{start + count} replayed")
        await _rounds()  # the replay's last slice ends, and a snapshot due starts
        await _until(lambda: standby._partitions[0].snapshots.snapshotting is None, "its snapshot written")

    await commit_distinct(0, 1000)
    amortized = read_snapshot(plog.log.directory)
    assert amortized is not None and amortized.records == amortized.offset  # one record per key
    await commit_distinct(1000, amortized.records // 2)  # fewer than the last snapshot held: none
    end = 1000 + amortized.records // 2
    assert read_snapshot(plog.log.directory).offset == amortized.offset

    await standby.snapshot_all()  # the node stops
    fresh = read_snapshot(plog.log.directory)
    assert fresh is not None and (fresh.offset, fresh.records) == (end, end)
    await logs.close_all()

    # Restarted, it starts from that snapshot: nothing left to replay from the log.
    logs, plog = await _follower(tmp_path, info)
    plog.replication.set_follower_high_watermark(end)
    restarted = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=100)
    restarted.standby(0)
    await _until(lambda: restarted._partitions[0].standby.replayed_to == end, "caught up after the restart")
    assert _shard(restarted).replayed == end  # the snapshot's records, no log record
    await logs.close_all()
    await leader_logs.close_all()
