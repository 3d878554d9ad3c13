"""One shared thread for the group-commit writes of every log, with batched completions.

Why not ``loop.run_in_executor``: each call costs a concurrent future, a work item, a thread
wake-up, and a ``call_soon_threadsafe`` (a self-pipe write and an extra event-loop turn) for its
completion. A coordinator partition's write round usually carries one request, and fifty
partitions each run their own rounds, so that cost was paid per request (issue #6 profile). Here
the thread takes every job queued since it last looked, runs them in order, and hands all their
results back to the loop in one callback: under load, one wake-up covers many rounds of many
logs. Disk order per log is unchanged — a log has at most a few rounds in flight and the queue
is FIFO.

One thread is enough: the jobs are ``pwrite`` + ``fdatasync`` of small appends, which a single
thread issues back to back faster than the event loop produces them; large reads and the
cleaner keep using the default executor.

Two steps per wake-up: a job may come with a ``then`` step (the fsyncs of a write round). The
thread runs every job's first step, then all the ``then`` steps at once on a small pool of sync
threads, and waits for them. Concurrent fsyncs of different files overlap their writeback and
share journal commits (ext4's jbd2 commits once for every fsync waiting on a transaction), where
fsyncs in a row each wait for their own: on this project's 2-core VM, 16 files took 0.7–0.9 ms
fsynced together against 2–4 ms one after another on a quiet disk and 60 ms while other jobs
wrote to it (``bench/fsync_concurrency.py``, bench/RESULTS.md).
A single ``then`` runs on the I/O thread itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar, TypeVarTuple

__all__ = ["IoWorker", "shared_worker", "SYNC_THREADS"]

#: Most fsyncs in flight at once. Past a few dozen they only queue in the kernel.
SYNC_THREADS = 16

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


class IoWorker:
    def __init__(self, name: str = "groupcoord-io") -> None:
        # Jobs of every result type share the queue. Their functions and results are objects here,
        # but a Future[T] is invariant in T and Python's types have no "Future of some T": the
        # futures (and the [future, result, error] outcome lists holding them) are Future[Any].
        self._jobs: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., object], tuple[object, ...],
                                Callable[[], object] | None]] = deque()
        self._cv = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._sync_pool: ThreadPoolExecutor | None = None
        self._name = name
        self._thread.start()

    def run(self, fn: Callable[[*_Ts], _T], *args: *_Ts,
            then: Callable[[], object] | None = None) -> asyncio.Future[_T]:
        """Run ``fn(*args)`` on the worker thread, and ``then()`` after the first steps of every
        job taken with it (unless ``fn`` raised); the future resolves on the calling loop with
        what ``fn`` returned, or the exception of either step."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[_T] = loop.create_future()
        with self._cv:
            self._jobs.append((loop, fut, fn, args, then))
            if len(self._jobs) == 1:
                self._cv.notify()
        return fut

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                jobs = list(self._jobs)
                self._jobs.clear()
            done: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], object, BaseException | None]]] = {}
            outcomes_in_order: list[tuple[asyncio.AbstractEventLoop, Callable[[], object] | None, list[Any]]] = []
            for loop, fut, fn, args, then in jobs:
                try:
                    outcome: list[Any] = [fut, fn(*args), None]
                except BaseException as exc:  # handed to the awaiting coroutine, like an executor
                    outcome, then = [fut, None, exc], None
                outcomes_in_order.append((loop, then, outcome))
            steps = [(then, outcome) for _loop, then, outcome in outcomes_in_order if then is not None]
            if len(steps) == 1:
                self._then(*steps[0])
            elif steps:
                if self._sync_pool is None:
                    self._sync_pool = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix=f"{self._name}-sync")
                wait([self._sync_pool.submit(self._then, then, outcome) for then, outcome in steps])
            for loop, _then, outcome in outcomes_in_order:
                done.setdefault(loop, []).append((outcome[0], outcome[1], outcome[2]))
            for loop, outcomes in done.items():
                try:
                    loop.call_soon_threadsafe(_deliver, outcomes)
                except RuntimeError:
                    pass  # that loop is closed: nobody waits for these any more

    @staticmethod
    def _then(then: Callable[[], object], outcome: list[Any]) -> None:
        try:
            then()
        except BaseException as exc:
            outcome[1], outcome[2] = None, exc


def _deliver(outcomes: list[tuple[asyncio.Future[Any], object, BaseException | None]]) -> None:
    for fut, result, exc in outcomes:
        if fut.done():
            continue
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)


_shared: IoWorker | None = None
_shared_lock = threading.Lock()


def shared_worker() -> IoWorker:
    """The process's worker, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = IoWorker()
        return _shared
