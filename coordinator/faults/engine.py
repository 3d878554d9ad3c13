"""The fault engine of one node (docs/testing.md): built by coordinator/app.py only when
``test.faults.enable`` is set. It runs on the server's event loop, single-threaded: the HTTP
endpoint calls it there directly; an in-process harness on another thread goes through
``asyncio.run_coroutine_threadsafe`` / ``loop.call_soon_threadsafe``.

Immediate faults (rebalance, kick-member, move-coordinator, drop-connections, crash-restart) act
through :class:`FaultTargets`, callables app.py fills from the node's parts, so this wing imports
none of the server or the face. Lasting faults are kept in a :class:`registry.Registry` and
applied by the handler wrapper (requests.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from protocol.apis import ApiKey

from ..context import Handler
from .error_responses import FAILABLE_APIS
from .registry import Registry
from .requests import wrap_handlers
from .spec import (
    CrashRestart,
    DropConnections,
    Fail,
    FaultError,
    KickMember,
    LastingSpec,
    MoveCoordinator,
    Rebalance,
    api_name,
    parse_fault,
)

__all__ = ["FaultEngine", "FaultTargets"]


@dataclass
class FaultTargets:
    """What the immediate faults act on. The group actions raise LookupError for a group (or
    member) this node does not know; ``crash_restart`` None: the host cannot restart the node."""

    rebalance: Callable[[str], Awaitable[dict[str, object]]]
    kick_member: Callable[[str, str | None], Awaitable[dict[str, object]]]
    move_coordinator: Callable[[str, int, int], Awaitable[dict[str, object]]]
    drop_connections: Callable[[str | None], int]
    crash_restart: Callable[[], None] | None = None
    #: A topic's name from its id: Fetch v13+ names topics by id only, the faults by name.
    topic_name: Callable[[uuid.UUID], str | None] | None = None


class FaultEngine:
    def __init__(self, targets: FaultTargets, max_duration_ms: int, clock_ms: Callable[[], int]) -> None:
        self.targets = targets
        self.max_duration_ms = max_duration_ms
        self.registry = Registry(clock_ms)

    async def inject(self, body: Mapping[str, object]) -> dict[str, object]:
        """Apply the fault ``body`` asks for: ``{"id": ..., "result": {...}}`` for a lasting one,
        ``{"result": {...}}`` for an immediate one. FaultError when refused (nothing changed)."""
        spec = parse_fault(body, self.max_duration_ms)
        if isinstance(spec, LastingSpec):
            if isinstance(spec, Fail) and spec.api not in FAILABLE_APIS:
                raise FaultError(400, f"fault 'fail' is not available for {api_name(spec.api)}: it can fail "
                                      f"{', '.join(sorted(api_name(k) for k in FAILABLE_APIS))}")
            fault = self.registry.add(spec)
            return {"id": fault.id, "result": fault.describe(self.registry.clock_ms())}
        targets = self.targets
        try:
            if isinstance(spec, Rebalance):
                return {"result": await targets.rebalance(spec.group)}
            if isinstance(spec, KickMember):
                return {"result": await targets.kick_member(spec.group, spec.member)}
            if isinstance(spec, MoveCoordinator):
                return {"result": await targets.move_coordinator(spec.group, spec.load_ms, spec.not_coordinator_ms)}
        except LookupError as exc:
            raise FaultError(404, str(exc.args[0]) if exc.args else str(exc)) from None
        if isinstance(spec, DropConnections):
            return {"result": {"dropped": targets.drop_connections(spec.client_id)}}
        assert isinstance(spec, CrashRestart)
        if targets.crash_restart is None:
            raise FaultError(409, "crash-restart is not available here")
        targets.crash_restart()
        return {"result": {"restarting": True}}

    def list(self) -> list[dict[str, object]]:
        now = self.registry.clock_ms()
        return [fault.describe(now) for fault in self.registry.current()]

    def clear(self, fault_id: str | None = None) -> int:
        """End every lasting fault, or the one with ``fault_id`` (FaultError 404 if none)."""
        return self.registry.clear(fault_id)

    def wrap(self, handlers: dict[ApiKey, Handler]) -> dict[ApiKey, Handler]:
        """``handlers``, each behind the lasting faults."""
        return wrap_handlers(self.registry, handlers, self.targets.topic_name)
