"""A clock the test moves by hand, and the runtime's timer factory on it: every timer of the
runtime (``coordinator/runtime/timers.py``) fires when the test steps the clock past it, never on
its own, so runtime tests sleep for no timer (Kafka's coordinator-common tests use ``MockTime``
and ``MockTimer`` the same way)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class _Handle:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback: Callable[[], None] | None = callback

    def cancel(self) -> None:
        self.callback = None  # as asyncio's handles do: what it held can go now


class SteppingClock:
    """``now_ms()`` for the runtime's clock; ``timers`` for its ``TimerFactory``."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.ms = now_ms
        self._due: list[tuple[float, int, _Handle]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.ms

    def timers(self, delay_ms: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle(callback)
        heapq.heappush(self._due, (self.ms + max(delay_ms, 0), next(self._seq), handle))
        return handle

    def advance(self, ms: int) -> None:
        """Move the clock ``ms`` forward, firing every timer due by then, in time order (a timer
        started by a firing one fires too if it is due)."""
        target = self.ms + ms
        while self._due and self._due[0][0] <= target:
            due, _, handle = heapq.heappop(self._due)
            self.ms = max(self.ms, int(due))
            callback, handle.callback = handle.callback, None
            if callback is not None:
                callback()
        self.ms = target
