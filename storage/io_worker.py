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
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any, Callable

__all__ = ["IoWorker", "shared_worker"]


class IoWorker:
    def __init__(self, name: str = "groupcoord-io") -> None:
        self._jobs: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._cv = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on the worker thread; the future resolves on the calling loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._cv:
            self._jobs.append((loop, fut, fn, args))
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
            done: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
            for loop, fut, fn, args in jobs:
                try:
                    outcome = (fut, fn(*args), None)
                except BaseException as exc:  # handed to the awaiting coroutine, like an executor
                    outcome = (fut, None, exc)
                done.setdefault(loop, []).append(outcome)
            for loop, outcomes in done.items():
                try:
                    loop.call_soon_threadsafe(_deliver, outcomes)
                except RuntimeError:
                    pass  # that loop is closed: nobody waits for these any more


def _deliver(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
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
