"""The lasting faults in force on a node (``fail``, ``delay``, ``pause-heartbeats``,
``leader-unavailable``), each with its id and its bounds: an expiry (``duration_ms``, never later
than ``test.faults.max.duration.ms``) and, for fail/delay, a count of requests left."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict

from .spec import Delay, Fail, FaultError, LastingSpec, api_name, fault_name

__all__ = ["ActiveFault", "Registry"]


class ActiveFault:
    """One lasting fault: its spec, when it ends, how many matches it has left."""

    __slots__ = ("id", "spec", "expires_at_ms", "remaining", "released", "timer")

    def __init__(self, fault_id: str, spec: LastingSpec, expires_at_ms: int) -> None:
        self.id = fault_id
        self.spec = spec
        self.expires_at_ms = expires_at_ms
        self.remaining: int | None = spec.count if isinstance(spec, (Fail, Delay)) else None
        #: Set when the fault ends (expired, used up or cleared): held heartbeats go on then.
        self.released = asyncio.Event()
        self.timer: asyncio.TimerHandle | None = None

    def describe(self, now_ms: int) -> dict[str, object]:
        params = {key: value for key, value in asdict(self.spec).items() if value is not None}
        if "api" in params:
            params["api"] = api_name(self.spec.api)  # type: ignore[union-attr]
        if "error" in params:
            params["error"] = self.spec.error.name  # type: ignore[union-attr]
        return {"id": self.id, "fault": fault_name(self.spec), **params, "remaining": self.remaining,
                "expires_in_ms": max(0, self.expires_at_ms - now_ms)}


class Registry:
    """The active lasting faults, in the order they were injected. ``active`` is the one thing
    the request path reads when no fault is in force."""

    def __init__(self, clock_ms: Callable[[], int]) -> None:
        self.clock_ms = clock_ms
        self.faults: dict[str, ActiveFault] = {}
        self.active = False
        self._next_id = 1

    def add(self, spec: LastingSpec) -> ActiveFault:
        fault = ActiveFault(f"f{self._next_id}", spec, self.clock_ms() + spec.duration_ms)
        self._next_id += 1
        self.faults[fault.id] = fault
        self.active = True
        try:
            # A loop timer as well as the clock check: a pause must end (and release what it
            # holds) even when no request comes to notice it.
            fault.timer = asyncio.get_running_loop().call_later(spec.duration_ms / 1000.0, self.remove, fault.id)
        except RuntimeError:  # no running loop (a unit test driving the clock): the clock alone ends it
            pass
        return fault

    def remove(self, fault_id: str) -> bool:
        fault = self.faults.pop(fault_id, None)
        if fault is None:
            return False
        if fault.timer is not None:
            fault.timer.cancel()
        fault.released.set()
        self.active = bool(self.faults)
        return True

    def clear(self, fault_id: str | None = None) -> int:
        if fault_id is None:
            ids = list(self.faults)
            for each in ids:
                self.remove(each)
            return len(ids)
        if not self.remove(fault_id):
            raise FaultError(404, f"no active fault {fault_id!r}")
        return 1

    def current(self) -> list[ActiveFault]:
        """The faults still in force (those past their expiry are dropped here)."""
        now = self.clock_ms()
        for fault in [f for f in self.faults.values() if f.expires_at_ms <= now]:
            self.remove(fault.id)
        return list(self.faults.values())

    def use(self, fault: ActiveFault) -> None:
        """One request matched ``fault``: count it, and end the fault when its count is used up."""
        if fault.remaining is not None:
            fault.remaining -= 1
            if fault.remaining <= 0:
                self.remove(fault.id)
