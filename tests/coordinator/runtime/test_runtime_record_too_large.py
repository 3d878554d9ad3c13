"""A write whose records exceed the partition's ``max.message.bytes`` is refused whole before its
records are replayed (Kafka's runtime: RecordTooLargeException, answered UNKNOWN_SERVER_ERROR by
the group coordinator; issue 31, "Bad input"): nothing written, the shard unchanged, the
partition still serving, and the writes batched around it unaffected."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.runtime.contract import non_atomic
from coordinator.runtime.errors import RecordTooLarge
from coordinator.runtime.runtime import CoordinatorState
from coordinator.runtime.writes import BATCH_OVERHEAD, RECORD_OVERHEAD
from protocol.consumer_offsets import OffsetCommitKey, OffsetCommitValue, serialize
from protocol.records import build_batch
from tests.coordinator.runtime.test_runtime import ManualLog, Result, _active_runtime, _rounds
from tests.coordinator.stepping_clock import SteppingClock


def _many(shard: Any, count: int, handle: Any = None) -> Any:
    """One operation committing ``count`` partitions of group "big"."""
    if handle is not None:
        handle.set_result("parked")
    return Result([(OffsetCommitKey("big", "t", i), OffsetCommitValue(i)) for i in range(count)], response="ok")


@pytest.mark.asyncio
async def test_a_write_over_max_message_bytes_is_refused_and_its_neighbours_are_written() -> None:
    plog = ManualLog()
    plog.config.max_message_bytes = 2_000
    runtime = await _active_runtime(plog)
    shard = runtime.shard(0)
    before = runtime.write(0, "commit-offset", lambda s: s.commit("a", 1))
    replayed = shard.replayed
    handle, parked = runtime.response_future(0)
    with pytest.raises(RecordTooLarge) as refused:
        runtime.write(0, "commit-offset", lambda s: _many(s, 200, handle))
    assert refused.value.error_code == -1 and refused.value.limit == 2_000, refused.value
    assert "exceed max.message.bytes 2000" in str(refused.value)
    # Records first: nothing of the refused operation was replayed.
    assert shard.replayed == replayed and not any(k[0] == "big" for k in shard.offsets)
    # The response it parked assumed its records: it fails with it.
    assert isinstance(parked.exception(), RecordTooLarge)
    after = runtime.write(0, "commit-offset", lambda s: s.commit("b", 2))
    await asyncio.sleep(0)
    assert plog.batches == [(0, 2)]  # the two small writes, one batch
    plog.make_durable()
    await asyncio.sleep(0)
    assert (before.result(), after.result()) == (("ok", None), ("ok", None))
    assert runtime.state(0) is CoordinatorState.ACTIVE
    assert shard.offsets == {("a", "t", 0): 1, ("b", "t", 0): 2}


@pytest.mark.asyncio
async def test_a_write_just_within_max_message_bytes_is_written_in_a_batch_within_it() -> None:
    plog = ManualLog()
    one = sum(map(len, serialize(OffsetCommitKey("big", "t", 0), OffsetCommitValue(0))))  # type: ignore[arg-type]
    plog.config.max_message_bytes = BATCH_OVERHEAD + 20 * (one + RECORD_OVERHEAD)
    runtime = await _active_runtime(plog)
    answer = runtime.write(0, "commit-offset", lambda s: _many(s, 20))
    await asyncio.sleep(0)
    assert plog.batches == [(0, 20)]
    plog.make_durable()
    await asyncio.sleep(0)
    assert answer.result() == "ok"


@pytest.mark.parametrize("count, value_bytes", [(1, 10), (1, 200_000), (300, 3_000), (70_000, 0)])
def test_the_size_estimate_bounds_the_batch(count: int, value_bytes: int) -> None:
    """The estimate the check uses is an upper bound of the batch the flush builds, so an
    accepted write never makes a batch over the limit."""
    items = [(f"key-{i}".encode(), b"v" * value_bytes) for i in range(count)]
    estimate = sum(len(k) + len(v) for k, v in items) + RECORD_OVERHEAD * count + BATCH_OVERHEAD
    assert len(build_batch(items, timestamp_ms=1_700_000_000_000)) <= estimate


def _sized(plog: ManualLog) -> list[int]:
    """The byte size of every batch the runtime gives ``plog``, in order."""
    sizes: list[int] = []
    append = plog.append_batch

    def counting(batch: bytearray, header: Any) -> Any:
        sizes.append(len(batch))
        return append(batch, header)

    plog.append_batch = counting  # type: ignore[method-assign]
    return sizes


@pytest.mark.asyncio
async def test_a_non_atomic_write_over_max_message_bytes_spans_batches_within_it() -> None:
    """Kafka's non-atomic results (its cleanups) are split over as many batches as they need,
    each within max.message.bytes, instead of being refused; a write already open goes first,
    in a batch of its own."""
    plog = ManualLog()
    plog.config.max_message_bytes = 2_000
    sizes = _sized(plog)
    runtime = await _active_runtime(plog)
    shard = runtime.shard(0)
    first = runtime.write(0, "commit-offset", lambda s: s.commit("a", 1))
    many = runtime.write(0, "cleanup", lambda s: non_atomic(_many(s, 200)))
    await asyncio.sleep(0)
    assert [count for _base, count in plog.batches][0] == 1 and sum(c for _b, c in plog.batches) == 201
    assert len(plog.batches) > 3 and max(sizes) <= 2_000, (plog.batches, sizes)
    assert len(shard.offsets) == 201
    plog.make_durable()
    await asyncio.sleep(0)
    assert (first.result(), many.result()) == (("ok", None), "ok")


@pytest.mark.asyncio
async def test_a_timer_write_over_max_message_bytes_is_written_not_refused() -> None:
    """A timer answers nobody; refusing its records would leave what it expires in place for
    good, so the runtime writes them over several batches."""
    plog = ManualLog()
    plog.config.max_message_bytes = 2_000
    sizes = _sized(plog)
    clock = SteppingClock()
    runtime = await _active_runtime(plog, clock)
    shard = runtime.shard(0)
    shard.timer.schedule("expire", 10, lambda: _many(shard, 200), name="cleanup-group-metadata")
    clock.advance(10)
    await _rounds()
    assert len(shard.offsets) == 200 and sum(c for _b, c in plog.batches) == 200
    assert max(sizes) <= 2_000, sizes
    assert runtime.state(0) is CoordinatorState.ACTIVE
