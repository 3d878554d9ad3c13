"""The seams between the pure group state machines and the runtime that drives them.

* :class:`Clock` gives the time; :class:`Timer` runs an operation later. A timer operation is run
  by the runtime exactly like a write request: its records are appended and replayed, its
  ``on_appended`` runs once they are durable.
* :class:`CoordinatorResult` is what every write handler returns: the records to append (hard
  state changes, applied later by ``replay``), the response, and an optional callback to run once
  the records are durable and replayed.
* :class:`ResponseFuture` is a parked response (JoinGroup and SyncGroup wait for the rebalance).
  The state machines only ever call ``set_result``; the runtime hands in its own object with that
  method (``CoordinatorRuntime.response_future``) and delivers the value once everything written
  up to the end of the operation that set it is durable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

__all__ = ["Clock", "Timer", "ResponseHandle", "ResponseFuture", "CoordinatorResult", "Record", "EMPTY_RESULT"]

#: A record: (key, value) from ``protocol.consumer_offsets``; value None is a tombstone.
Record = tuple[Any, Any]


class Clock(Protocol):
    def now_ms(self) -> int: ...


@dataclass(slots=True)
class CoordinatorResult:
    """What a write handler or a timer operation returns.

    ``records`` are appended to the partition log as one batch and replayed into the shard;
    ``response`` is sent once they are durable; ``on_appended`` runs after that append is durable
    and replayed (before the response is released), and may complete parked responses.
    """

    records: list[Record] = field(default_factory=list)
    response: Any = None
    on_appended: Callable[[], None] | None = None


#: A result with no records and no response (a timer that found nothing to do).
EMPTY_RESULT = CoordinatorResult()


class Timer(Protocol):
    """Keyed timers of one partition. ``schedule`` replaces any timer with the same key; when a
    timer fires, its key is no longer scheduled and the runtime runs ``operation()`` as a write."""

    def schedule(self, key: str, delay_ms: int, operation: Callable[[], CoordinatorResult]) -> None: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


class ResponseHandle(Protocol):
    """What the state machines need of a parked response: a second ``set_result`` is ignored."""

    def set_result(self, value: Any) -> None: ...


class ResponseFuture:
    """A minimal asyncio-free future: the test harness uses it, the runtime adapts its own."""

    __slots__ = ("_done", "_result", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._callbacks: list[Callable[[ResponseFuture], None]] = []

    def set_result(self, value: Any) -> None:
        if self._done:
            return
        self._done = True
        self._result = value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def add_done_callback(self, callback: Callable[[ResponseFuture], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        if not self._done:
            raise RuntimeError("response not set yet")
        return self._result
