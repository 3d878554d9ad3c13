"""Clock and timers of the runtime.

Every timer the runtime starts goes through one injected :class:`TimerFactory`: the shards' keyed
timers (session expiry, rebalance delays), the wait of an answer for the ISR
(``offsets.commit.timeout.ms``), the renewal of a snapshot, and the pauses of a hot standby and of a
load waiting for one (:func:`sleep_ms`). The default runs them on the asyncio
event loop; a test hands in a factory driven by a stepping clock, and so runs every timer without
sleeping (Kafka's coordinator-common tests do the same with ``MockTimer`` and ``MockTime``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from .contract import CoordinatorResult
from .errors import NotActiveError

__all__ = ["SystemClock", "TimerHandle", "TimerFactory", "asyncio_timers", "CoordinatorTimer", "sleep_ms", "wake"]

log = logging.getLogger("groupcoord.runtime")


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class TimerFactory(Protocol):
    """Runs ``callback`` once, ``delay_ms`` from now, unless the handle is cancelled first."""

    def __call__(self, delay_ms: float, callback: Callable[[], None]) -> TimerHandle: ...


def asyncio_timers(delay_ms: float, callback: Callable[[], None]) -> TimerHandle:
    """The default :class:`TimerFactory`: the running event loop's ``call_later``."""
    return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


#: Runs a timer's operation, named, as a write of the partition (records first, like any write);
#: raises what ``CoordinatorRuntime.write`` raises.
RunAsWrite = Callable[[str, Callable[[], CoordinatorResult[None]]], None]


class CoordinatorTimer:
    """The keyed timers of one partition (``contract.Timer``): an expiry runs its operation as a
    write. A partition that stopped serving drops its timers' expiries."""

    def __init__(self, partition: str, timers: TimerFactory, run: RunAsWrite) -> None:
        self._partition = partition
        self._timers = timers
        self._run = run
        self._handles: dict[str, TimerHandle] = {}

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult[None]], *,
                 name: str) -> None:
        old = self._handles.pop(key, None)
        if old is not None:
            old.cancel()
        self._handles[key] = self._timers(max(delay_ms, 0), lambda: self._fire(key, name, operation))

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, key: str, name: str, operation: Callable[[], CoordinatorResult[None]]) -> None:
        self._handles.pop(key, None)
        try:
            self._run(name, operation)
        except NotActiveError:
            return  # the partition was unloaded or failed; its timers die with it
        except Exception:
            log.exception("timer operation failed",
                          extra={"operation": name, "timer": key, "partition": self._partition})


async def sleep_ms(timers: TimerFactory, delay_ms: float) -> None:
    """``asyncio.sleep`` on the injected timers, so a stepping clock drives it too."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    handle = timers(delay_ms, lambda: wake(done))
    try:
        await done
    finally:
        handle.cancel()


def wake(fut: asyncio.Future[None]) -> None:
    """Resolve ``fut`` unless something else did first."""
    if not fut.done():
        fut.set_result(None)
