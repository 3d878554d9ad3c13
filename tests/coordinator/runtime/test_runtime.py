"""The coordinator runtime: write-then-respond, read-your-writes, loading by replay, timers, failure.

Ordering rules are checked with a partition log whose durability the test releases by hand (the
one fault we cannot cause on demand with a real disk); loading and restarts use real logs. Timers
run on a stepping clock (``stepping_clock.py``): no test sleeps for one.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.config import load_config
from coordinator.group.coordinator_type import OFFSETS_SERDE
from coordinator.runtime.contract import CoordinatorResult
from coordinator.runtime.coordinator_types import CoordinatorType
from coordinator.runtime.runtime import CoordinatorRuntime, CoordinatorState, NotActiveError
from coordinator.runtime.snapshot import SNAPSHOT_FILE, encode_snapshot, read_snapshot
from coordinator.runtime.timers import SystemClock
from coordinator.topics.log_manager import LogManager
from coordinator.topics.registry import TopicRegistry
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, deserialize, serialize
from protocol.records import build_batch
from storage.options import LogOptions
from storage.producer_state import ProducerStateManager
from tests.coordinator.stepping_clock import SteppingClock

TOPIC = "__consumer_offsets"


#: What the counter shard's operations return: the runtime's own result type.
Result = CoordinatorResult


class CounterShard:
    """Committed offsets per key; replay is the only mutator."""

    def __init__(self, partition: int, timer: Any, clock: Any) -> None:
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.timer = timer
        self.loaded = False
        self.replayed = 0
        #: producer id -> key -> (record offset, producer epoch, offset): transactional, unmarked.
        self.pending: dict[int, dict[tuple[str, str, int], tuple[int, int, int]]] = {}
        #: Every marker replayed: (producer id, epoch, commit).
        self.markers: list[tuple[int, int, bool]] = []

    def replay(self, key: bytes, value: bytes | None, written: Any = None) -> None:
        typed_key, typed_value = deserialize(key, value)
        assert isinstance(typed_key, OffsetCommitKey)
        self.replayed += 1
        k = (typed_key.group, typed_key.topic, typed_key.partition)
        if typed_value is None:
            self.offsets.pop(k, None)
        else:
            assert isinstance(typed_value, OffsetCommitValue)
            self.offsets[k] = typed_value.offset

    def replay_transactional(self, offset: int, producer_id: int, producer_epoch: int, key: bytes,
                             value: bytes | None, written: Any = None) -> None:
        """Pending for the producer until its marker (what a transactional batch means)."""
        typed_key, typed_value = deserialize(key, value)
        assert isinstance(typed_key, OffsetCommitKey) and isinstance(typed_value, OffsetCommitValue)
        self.replayed += 1
        self.pending.setdefault(producer_id, {})[(typed_key.group, typed_key.topic, typed_key.partition)] = (
            offset, producer_epoch, typed_value.offset)

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool) -> None:
        self.markers.append((producer_id, producer_epoch, commit))
        for k, (_offset, _epoch, value) in self.pending.pop(producer_id, {}).items():
            if commit:
                self.offsets[k] = value

    def snapshot_records(self) -> list[tuple[bytes, bytes]]:
        return [serialize(OffsetCommitKey(*k), OffsetCommitValue(offset)) for k, offset in self.offsets.items()]

    def snapshot_transactional_records(self) -> list[tuple[int, int, int, bytes, bytes | None]]:
        return sorted((offset, pid, epoch, *serialize(OffsetCommitKey(*k), OffsetCommitValue(value)))
                      for pid, by_key in self.pending.items() for k, (offset, epoch, value) in by_key.items())

    def on_loaded(self) -> None:
        self.loaded = True

    def commit(self, group: str, offset: int) -> Result:
        previous = self.offsets.get((group, "t", 0))
        return Result([(OffsetCommitKey(group, "t", 0), OffsetCommitValue(offset))], response=("ok", previous))


#: The counter shard as a coordinator type of the runtime, on the offsets topic and its records.
COUNTERS = CoordinatorType(TOPIC, CounterShard, OFFSETS_SERDE)


class ManualLog:
    """A partition log whose appends become durable only when the test says so."""

    leader_epoch = 0
    truncations = 0  # never truncated
    truncation_offsets: list[int] = []
    replication = None  # a single node
    is_leader = True

    def __init__(self) -> None:
        self.producers = ProducerStateManager()
        self.log_start_offset = 0
        self.high_watermark = 0
        self._next = 0
        self._pending: list[tuple[int, asyncio.Future[None]]] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.fail_next = False
        #: (base offset, records) of every batch appended.
        self.batches: list[tuple[int, int]] = []
        # Never read (the log stays empty until the test appends); a directory with no snapshot.
        self.log = SimpleNamespace(directory=Path(tempfile.mkdtemp(prefix="manual-log-")), options=LogOptions())
        #: The partition's topic configs the runtime reads (``PartitionLog.config``).
        self.config = SimpleNamespace(max_message_bytes=1048588)

    def append_batch(self, batch: bytearray, header: Any) -> tuple[int, asyncio.Future[None]]:
        base = self._next
        self._next += header.last_offset_delta + 1
        self.batches.append((base, header.last_offset_delta + 1))
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((self._next, fut))
        return base, fut

    def wait_durable(self, offset: int) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            fut.set_result(None)
        else:
            self._waiters.append((offset, fut))
        return fut

    @property
    def log_end_offset(self) -> int:
        return self.high_watermark  # a single node: the durable end is the high watermark

    @property
    def next_offset(self) -> int:
        return self._next

    def accepts_writes(self) -> bool:
        return True

    def wait_committed(self, offset: int) -> asyncio.Future[None]:
        return self.wait_durable(offset)

    def make_durable(self) -> None:
        for end, fut in self._pending:
            if self.fail_next:
                fut.set_exception(OSError("disk on fire"))
                continue
            self.high_watermark = end
            fut.set_result(None)
        self._pending.clear()
        for offset, fut in list(self._waiters):
            if self.high_watermark >= offset and not fut.done():
                fut.set_result(None)


class OneLog:
    def __init__(self, plog: Any) -> None:
        self.plog = plog

    def get(self, topic: str, partition: int) -> Any:
        return self.plog


async def _active_runtime(plog: ManualLog, clock: SteppingClock | None = None) -> CoordinatorRuntime:
    clock = clock or SteppingClock()
    runtime = CoordinatorRuntime(OneLog(plog), COUNTERS, clock=clock, timers=clock.timers)  # type: ignore[arg-type]
    await runtime.load(0)
    return runtime


async def _rounds(count: int = 3) -> None:
    """Let the event loop run ``count`` rounds (callbacks queued by the last ones included)."""
    for _ in range(count):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_writes_of_one_event_loop_round_share_one_batch() -> None:
    """Runtime rule 7: the records of every write run in one round go to the log as one batch at
    the end of the round; the next round opens a new one. Answers wait for their batch."""
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    first = [runtime.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i}", i)) for i in range(3)]
    read = runtime.read(0, "read-offsets", lambda s: dict(s.offsets))
    assert plog.batches == []  # nothing written before the round ends
    await asyncio.sleep(0)
    assert plog.batches == [(0, 3)]
    second = [runtime.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i}", 10 + i)) for i in range(2)]
    await asyncio.sleep(0)
    assert plog.batches == [(0, 3), (3, 2)]
    assert not any(f.done() for f in [*first, *second, read])
    plog.make_durable()
    await asyncio.sleep(0)
    assert [f.result()[0] for f in [*first, *second]] == ["ok"] * 5
    assert read.result() == {("g0", "t", 0): 0, ("g1", "t", 0): 1, ("g2", "t", 0): 2}
    # What was replayed is what the log holds: a reload from these batches gives the same state.
    assert runtime.shard(0).offsets == {("g0", "t", 0): 10, ("g1", "t", 0): 11, ("g2", "t", 0): 2}


@pytest.mark.asyncio
async def test_a_batch_is_flushed_early_at_its_size_cap_and_never_splits_an_operation(monkeypatch: Any) -> None:
    from coordinator.runtime import writes as writes_module

    plog = ManualLog()
    runtime = await _active_runtime(plog)
    one = sum(len(k) + len(v or b"") for k, v in [serialize(OffsetCommitKey("g0", "t", 0), OffsetCommitValue(0))])
    monkeypatch.setattr(writes_module, "APPEND_BATCH_MAX_BYTES", 2 * one)

    def two(shard: Any, i: int) -> Any:  # one operation, two records
        a, b = shard.commit(f"g{i}", i), shard.commit(f"h{i}", i)
        return type(a)(a.records + b.records, response="ok")

    answers = [runtime.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i}", i)) for i in range(3)]
    answers.append(runtime.write(0, "commit-two", lambda s: two(s, 7)))
    answers.append(runtime.write(0, "commit-offset", lambda s: s.commit("g9", 9)))
    await asyncio.sleep(0)
    assert plog.batches == [(0, 2), (2, 1), (3, 2), (5, 1)]
    plog.make_durable()
    await asyncio.gather(*answers)


@pytest.mark.asyncio
async def test_records_of_a_partition_unloaded_before_their_flush_are_never_written() -> None:
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    answer = runtime.write(0, "commit-offset", lambda s: s.commit("g", 1))
    runtime.unload(0)  # leadership moved on in the same round
    await asyncio.sleep(0)
    assert plog.batches == []
    with pytest.raises(NotActiveError):
        await answer


@pytest.mark.asyncio
async def test_a_batch_whose_leadership_went_before_its_flush_is_not_written() -> None:
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    answer = runtime.write(0, "commit-offset", lambda s: s.commit("g", 1))
    plog.replication = SimpleNamespace(is_leader=False)  # type: ignore[assignment]
    await asyncio.sleep(0)
    assert plog.batches == []
    assert runtime.state(0) is CoordinatorState.FAILED  # its shard holds a record the log lacks
    with pytest.raises(NotActiveError):
        await answer


@pytest.mark.asyncio
async def test_responses_wait_for_durability_but_state_moves_on_at_once() -> None:
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    first = runtime.write(0, "commit-offset", lambda s: s.commit("g", 5))
    second = runtime.write(0, "commit-offset", lambda s: s.commit("g", 7))
    read = runtime.read(0, "read-offsets", lambda s: s.offsets.get(("g", "t", 0)))
    await _rounds()
    assert not first.done() and not second.done() and not read.done()
    assert runtime.shard(0).offsets[("g", "t", 0)] == 7  # replayed when queued
    plog.make_durable()
    assert await first == ("ok", None)
    assert await second == ("ok", 5)  # saw the first commit before it was durable
    assert await read == 7


@pytest.mark.asyncio
async def test_on_appended_and_parked_responses_wait_for_the_completing_write() -> None:
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    handle, parked = runtime.response_future(0)
    calls = []

    def complete(s: CounterShard) -> Result:
        handle.set_result("parked answer")
        return Result([(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1))], "direct",
                      on_appended=lambda: calls.append("appended"))

    direct = runtime.write(0, "complete-parked", complete)
    await _rounds()
    assert not parked.done() and not direct.done() and calls == []
    plog.make_durable()
    assert await direct == "direct" and await parked == "parked answer" and calls == ["appended"]


@pytest.mark.asyncio
async def test_a_failed_append_fails_the_partition_and_its_waiting_answers() -> None:
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    answer = runtime.write(0, "commit-offset", lambda s: s.commit("g", 1))
    await asyncio.sleep(0)  # the batch goes to the log at the end of this round (runtime rule 7)
    plog.fail_next = True
    plog.make_durable()
    await _rounds()
    assert runtime.state(0) is CoordinatorState.FAILED
    with pytest.raises(NotActiveError):
        runtime.write(0, "commit-offset", lambda s: s.commit("g", 2))
    with pytest.raises(NotActiveError):
        await answer


@pytest.mark.asyncio
async def test_a_wait_for_the_isr_failing_after_its_answer_was_settled_is_still_retrieved() -> None:
    """Cluster mode, found by tests/coordinator/cluster/test_group_fault_schedule.py: a node that stops
    leading an offsets partition unloads it, which fails the answers still waiting for the ISR,
    and only then do those waits fail (NotLeader). Their exceptions must be retrieved all the
    same, or asyncio logs "Future exception was never retrieved" at level ERROR for each one."""
    plog = ManualLog()
    runtime = await _active_runtime(plog)
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        answer = runtime.write(0, "commit-offset", lambda s: s.commit("g", 1))
        [(_, wait)] = plog._waiters
        plog._waiters.clear()
        runtime.unload(0)
        with pytest.raises(NotActiveError):
            await answer
        wait.set_exception(RuntimeError("no longer the leader"))
        await asyncio.sleep(0)  # the wait's done callbacks run
        del wait
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(None)


@pytest.mark.asyncio
async def test_a_parked_join_answer_failed_by_an_unload_is_still_retrieved() -> None:
    """Found by tests/coordinator/cluster/test_group_fault_schedule.py (SIGKILLs only: a surviving leader's
    epoch bump unloads its partitions): a JoinGroup whose answer the shard completed at once (here
    MEMBER_ID_REQUIRED) waits with it for earlier records to reach the ISR; an unload fails both
    the write and the parked answer, and GroupService returned NOT_COORDINATOR without ever
    reading the parked answer's exception: asyncio logged it at level ERROR."""
    from kafka.protocol.consumer import JoinGroupRequest

    from coordinator.group.config import GroupConfig
    from coordinator.group.coordinator_type import group_coordinator_type
    from coordinator.group.service import GroupService

    plog = ManualLog()
    clock = SteppingClock()
    runtime = CoordinatorRuntime(OneLog(plog), group_coordinator_type(GroupConfig()),  # type: ignore[arg-type]
                                 clock=clock, timers=clock.timers)
    await runtime.load(0)
    service = GroupService(runtime, lambda: 1)
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:
        # A commit not yet in the ISR: every later answer of the partition waits for it (rule 2).
        commit = runtime.write(0, "commit-offset", lambda s: s.commit_offsets(_simple_commit("other"), 8))
        request = JoinGroupRequest(
            version=9, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id=None, protocol_type="consumer", reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
        ctx = SimpleNamespace(api_version=9, client_id="c", peer="127.0.0.1:1")
        join = asyncio.ensure_future(service.join_group(ctx, request))  # type: ignore[arg-type]
        await _rounds(5)
        assert not join.done()
        runtime.unload(0)
        assert (await join).error_code == 16  # NOT_COORDINATOR
        with pytest.raises(NotActiveError):
            await commit
        # Leadership gone: the waits for the ISR fail too (NotLeader), releasing what they held.
        for _, wait in plog._waiters:
            wait.set_exception(RuntimeError("no longer the leader"))
        plog._waiters.clear()
        await asyncio.sleep(0)
        del join, wait
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(None)


def _simple_commit(group: str) -> Any:
    from kafka.protocol.consumer import OffsetCommitRequest

    C = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[C(name="t", partitions=[
                                   C.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                  committed_leader_epoch=-1, committed_metadata="")])])


@pytest.mark.asyncio
async def test_timers_run_as_writes_and_replace_by_key() -> None:
    plog = ManualLog()
    clock = SteppingClock()
    runtime = await _active_runtime(plog, clock)
    shard = runtime.shard(0)
    shard.timer.schedule("k", 50, lambda: shard.commit("timer", 1), name="first")
    shard.timer.schedule("k", 10, lambda: shard.commit("timer", 2), name="second")
    shard.timer.schedule("other", 10, lambda: shard.commit("timer2", 3), name="third")
    shard.timer.cancel("other")
    clock.advance(9)
    assert shard.offsets == {} and shard.timer.is_scheduled("k")
    clock.advance(1)
    assert shard.offsets == {("timer", "t", 0): 2}  # replayed when the timer's write ran
    assert not shard.timer.is_scheduled("k")
    clock.advance(100)
    assert shard.offsets == {("timer", "t", 0): 2}  # the replaced and the cancelled never fire
    await _rounds()
    assert plog.batches == [(0, 1)]


@pytest.mark.asyncio
async def test_log_lines_name_the_operations(caplog: Any) -> None:
    """Each write names its operation (Kafka's runtime does): a failing timer's line names it,
    and so does the line of a batch that failed, for every operation with records in it."""
    plog = ManualLog()
    clock = SteppingClock()
    runtime = await _active_runtime(plog, clock)
    shard = runtime.shard(0)

    def broken() -> Result:
        raise RuntimeError("bug")

    shard.timer.schedule("session-g-m", 5, broken, name="expire-session")
    clock.advance(5)
    [line] = [r for r in caplog.records if r.getMessage() == "timer operation failed"]
    assert line.operation == "expire-session" and line.timer == "session-g-m"

    answers = [runtime.write(0, "commit-offset", lambda s: s.commit("g", 1)),
               runtime.write(0, "cleanup-group-metadata", lambda s: s.commit("h", 1)),
               runtime.write(0, "classic-group-heartbeat", lambda s: Result(response="no records"))]
    await asyncio.sleep(0)
    plog.fail_next = True
    plog.make_durable()
    await _rounds()
    assert all(isinstance(a, NotActiveError) for a in await asyncio.gather(*answers, return_exceptions=True))
    [line] = [r for r in caplog.records if r.getMessage().startswith("coordinator append failed")]
    assert line.operations == ["cleanup-group-metadata", "commit-offset"]


@pytest.mark.asyncio
async def test_loading_replays_a_real_log_and_refuses_work_meanwhile(tmp_path: Path) -> None:
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=2"])
    registry = TopicRegistry(tmp_path)
    logs = LogManager(tmp_path, registry, config)
    await logs.open_all()
    info = registry.create(TOPIC, 2, {"cleanup.policy": "compact"})
    logs.topic_created(info)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    for p in (0, 1):
        await runtime.load(p)
    answers = [runtime.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i % 50}", i)) for i in range(5000)]
    await asyncio.gather(*answers)
    # An unknown record type (a KIP-848 key, version 3) is skipped with a warning.
    plog = logs.get(TOPIC, 0)
    assert plog is not None
    unknown = bytearray(build_batch([(b"\x00\x03\x00\x01g", b"\x00\x00")], timestamp_ms=1))
    from protocol.records import read_batch_header
    _, durable = plog.append_batch(unknown, read_batch_header(unknown, 0))
    await durable
    await logs.close_all()

    logs = LogManager(tmp_path, TopicRegistry(tmp_path), config)
    await logs.open_all()
    runtime = CoordinatorRuntime(logs, COUNTERS)
    loading = asyncio.ensure_future(runtime.load(0))
    await asyncio.sleep(0)
    assert runtime.state(0) is CoordinatorState.LOADING
    with pytest.raises(NotActiveError):
        runtime.write(0, "commit-offset", lambda s: s.commit("x", 1))
    await loading
    shard = runtime.shard(0)
    assert shard.loaded and shard.replayed == 5000
    assert shard.offsets == {(f"g{g}", "t", 0): 4950 + g for g in range(50)}
    await logs.close_all()


# --- snapshots ---------------------------------------------------------------------------------


async def _open_logs(tmp_path: Path, **topic_configs: str) -> tuple[LogManager, Any]:
    config = load_config(data_dir=str(tmp_path), overrides=["offsets.topic.num.partitions=1"])
    registry = TopicRegistry(tmp_path)
    logs = LogManager(tmp_path, registry, config)
    await logs.open_all()
    if registry.get(TOPIC) is None:
        logs.topic_created(registry.create(TOPIC, 1, {"cleanup.policy": "compact", **topic_configs}))
    return logs, config


async def _snapshot_written(runtime: CoordinatorRuntime, partition: int = 0) -> None:
    """Wait for the partition's snapshot under way, if any (it runs in the background)."""
    snapshotting = runtime._partitions[partition].snapshots.snapshotting
    if snapshotting is not None:
        await snapshotting


async def _commits(runtime: CoordinatorRuntime, start: int, count: int, batch: int | None = None) -> None:
    """``count`` commits, all in one round of the event loop (one batch, runtime rule 7), or
    ``batch`` per round."""
    answers = []
    for i in range(start, start + count):
        answers.append(runtime.write(0, "commit-offset", lambda s, i=i: s.commit(f"g{i % 50}", i)))
        if batch is not None and len(answers) % batch == 0:
            await asyncio.sleep(0)
    await asyncio.gather(*answers)


@pytest.mark.asyncio
async def test_a_snapshot_and_the_log_tail_rebuild_the_state(tmp_path: Path) -> None:
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=1000)
    await runtime.load(0)
    await _commits(runtime, 0, 1500)  # passes 1,000: one snapshot, taken in the background
    await _snapshot_written(runtime)
    snapshot = read_snapshot(tmp_path / f"{TOPIC}-0")
    assert snapshot is not None and snapshot.records == 50 and 1000 <= snapshot.offset <= 1500
    await _commits(runtime, 1500, 30)  # the tail after it
    await logs.close_all()

    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS, snapshot_min_records=1000)
    await runtime.load(0)
    shard = runtime.shard(0)
    assert shard.replayed == 50 + 1530 - snapshot.offset  # the snapshot's records, then the tail only
    assert shard.offsets == {(f"g{i % 50}", "t", 0): i for i in range(1480, 1530)}
    await logs.close_all()


@pytest.mark.asyncio
async def test_shutdown_snapshots_so_a_restart_replays_no_log(tmp_path: Path) -> None:
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    await _commits(runtime, 0, 300)
    await runtime.snapshot_all()
    await logs.close_all()
    logs, _ = await _open_logs(tmp_path)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    assert runtime.shard(0).replayed == 50
    assert runtime.shard(0).offsets == {(f"g{i % 50}", "t", 0): i for i in range(250, 300)}
    await logs.close_all()


async def _reload_with_snapshot(tmp_path: Path, snapshot: bytes, caplog: Any, **topic_configs: str) -> CounterShard:
    """Commit 0..99 (offsets g0..g49 -> 50..99), plant ``snapshot``, reload."""
    logs, _ = await _open_logs(tmp_path, **topic_configs)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    await _commits(runtime, 0, 100)
    await logs.close_all()
    (tmp_path / f"{TOPIC}-0" / SNAPSHOT_FILE).write_bytes(snapshot)
    logs, _ = await _open_logs(tmp_path, **topic_configs)
    runtime = CoordinatorRuntime(logs, COUNTERS)
    await runtime.load(0)
    shard = runtime.shard(0)
    await logs.close_all()
    return shard


def _fake_snapshot(offset: int, captured_ms: int) -> bytes:
    # A state no log ever had: if it were trusted, g0 would read 123456.
    return encode_snapshot(offset, captured_ms, [serialize(OffsetCommitKey("g0", "t", 0), OffsetCommitValue(123456))])


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["past-log-end", "too-old", "corrupt"])
async def test_an_untrusted_snapshot_is_dropped_and_the_whole_log_replayed(
        tmp_path: Path, caplog: Any, case: str) -> None:
    now = SystemClock().now_ms()
    if case == "past-log-end":  # the log lost records the snapshot had seen
        data, extra = _fake_snapshot(101, now), {}
    elif case == "too-old":  # later tombstones may have been cleaned away
        data, extra = _fake_snapshot(100, now - 2_000), {"delete.retention.ms": "1000"}
    else:
        data, extra = bytearray(_fake_snapshot(100, now)), {}
        data[-3] ^= 0xFF
        data = bytes(data)
    shard = await _reload_with_snapshot(tmp_path, data, caplog, **extra)
    assert shard.replayed == 100
    assert shard.offsets == {(f"g{i % 50}", "t", 0): i for i in range(50, 100)}
    assert not (tmp_path / f"{TOPIC}-0" / SNAPSHOT_FILE).exists()
    assert "ignoring the snapshot" in caplog.text


@pytest.mark.asyncio
async def test_a_trusted_snapshot_stands_for_the_log_before_it(tmp_path: Path, caplog: Any) -> None:
    # The same planted snapshot, within the rules, is believed: proof the rules above decide.
    shard = await _reload_with_snapshot(tmp_path, _fake_snapshot(100, SystemClock().now_ms()), caplog)
    assert shard.replayed == 1 and shard.offsets == {("g0", "t", 0): 123456}


@pytest.mark.asyncio
async def test_an_idle_partition_renews_its_snapshot_before_it_stops_being_trusted(tmp_path: Path) -> None:
    # delete.retention.ms = 600: a snapshot is trusted for 600 ms and renewed after 300 ms.
    clock = SteppingClock(SystemClock().now_ms())
    logs, _ = await _open_logs(tmp_path, **{"delete.retention.ms": "600"})
    runtime = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    await _commits(runtime, 0, 100)
    await runtime.snapshot_all()
    first = read_snapshot(tmp_path / f"{TOPIC}-0")
    assert first is not None and first.captured_ms == clock.ms
    clock.advance(299)
    assert runtime._partitions[0].snapshots.snapshotting is None  # not due yet
    assert read_snapshot(tmp_path / f"{TOPIC}-0") == first
    clock.advance(51)  # past the half-life: the renewal timer fired at 300 ms
    await _snapshot_written(runtime)
    renewed = read_snapshot(tmp_path / f"{TOPIC}-0")
    assert renewed is not None and renewed.captured_ms == clock.ms
    assert (renewed.offset, renewed.records) == (first.offset, first.records)  # same state, newer time
    runtime.unload_all()
    await logs.close_all()

    # Loaded later, well past the first snapshot's trusted life but within the renewed one's:
    # the renewed snapshot is used and no log is replayed.
    clock.advance(400)
    logs, _ = await _open_logs(tmp_path, **{"delete.retention.ms": "600"})
    runtime = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    assert runtime.shard(0).replayed == 50
    assert runtime.shard(0).offsets == {(f"g{i % 50}", "t", 0): i for i in range(50, 100)}
    runtime.unload_all()
    await logs.close_all()


@pytest.mark.asyncio
async def test_a_snapshot_loaded_past_its_half_life_is_renewed_at_once(tmp_path: Path) -> None:
    clock = SteppingClock(SystemClock().now_ms())
    logs, _ = await _open_logs(tmp_path, **{"delete.retention.ms": "1000"})
    runtime = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    await _commits(runtime, 0, 100)
    runtime.unload_all()
    await logs.close_all()
    (tmp_path / f"{TOPIC}-0" / SNAPSHOT_FILE).write_bytes(_fake_snapshot(100, clock.ms - 700))
    logs, _ = await _open_logs(tmp_path, **{"delete.retention.ms": "1000"})
    runtime = CoordinatorRuntime(logs, COUNTERS, clock=clock, timers=clock.timers)
    await runtime.load(0)
    assert runtime.shard(0).offsets == {("g0", "t", 0): 123456}  # trusted: 700 ms old of 1,000
    clock.advance(0)  # the renewal is due at once
    await _snapshot_written(runtime)
    renewed = read_snapshot(tmp_path / f"{TOPIC}-0")
    assert renewed is not None and renewed.captured_ms == clock.ms and renewed.offset == 100
    runtime.unload_all()
    await logs.close_all()
