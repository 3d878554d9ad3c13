"""The shared I/O thread's two steps: every job's first step of a wake-up runs before any job's
``then`` (a round's writes before the fsyncs), and the ``then`` steps run together."""

from __future__ import annotations

import asyncio
import threading

import pytest

from storage.io_worker import IoWorker

pytestmark = pytest.mark.asyncio


async def test_first_steps_of_jobs_taken_together_run_before_their_then_steps() -> None:
    worker = IoWorker("test-io")
    gate = threading.Event()
    order: list[str] = []
    # The first job holds the thread until the others are queued, so they are taken together.
    blocker = worker.run(gate.wait)
    jobs = [worker.run(order.append, f"write{i}", then=lambda i=i: order.append(f"sync{i}")) for i in range(3)]
    gate.set()
    await blocker
    assert await asyncio.gather(*jobs) == [None, None, None]
    # The then steps run concurrently (a pool): their order among themselves is not fixed.
    assert order[:3] == ["write0", "write1", "write2"] and sorted(order[3:]) == ["sync0", "sync1", "sync2"]


async def test_a_failed_first_step_skips_its_then_and_a_failed_then_fails_its_job() -> None:
    worker = IoWorker("test-io")
    ran: list[str] = []

    def boom() -> None:
        raise OSError("write failed")

    def sync_boom() -> None:
        raise OSError("fsync failed")

    failed_write = worker.run(boom, then=lambda: ran.append("then of the failed write"))
    failed_sync = worker.run(lambda: "written", then=sync_boom)
    ok = worker.run(lambda: "fine", then=lambda: ran.append("synced"))
    with pytest.raises(OSError, match="write failed"):
        await failed_write
    with pytest.raises(OSError, match="fsync failed"):
        await failed_sync
    assert await ok == "fine"
    assert ran == ["synced"]


async def test_then_steps_taken_together_run_concurrently() -> None:
    """Concurrent fsyncs share the disk's work: each then step here waits until all three have
    started, which only a concurrent run lets happen."""
    worker = IoWorker("test-io")
    gate = threading.Event()
    started = threading.Barrier(3, timeout=5)
    blocker = worker.run(gate.wait)
    jobs = [worker.run(lambda: None, then=started.wait) for _ in range(3)]
    gate.set()
    await blocker
    await asyncio.wait_for(asyncio.gather(*jobs), 10)
