"""The fault handle: a test's side of fault injection (docs/testing.md).

A node started with ``test.faults.enable=true`` applies faults to itself on request: a forced
rebalance, a kicked member, a coordinator move, failed or delayed requests, dropped connections,
paused heartbeats, an unavailable partition leader, a crash-restart. ``FaultHandle`` names each
fault of that vocabulary as a method and sends it over a transport:

* ``LocalTransport(engine, loop)``: the node runs in this process (the in-process harness) on an
  event loop of its own thread; the handle calls its ``FaultEngine`` on that loop and waits.
* ``HttpTransport(base_url)``: the node's ``http.listen`` listener (``/faults``), for a
  subprocess, another machine, or ``groupcoord faults`` on the command line.

Keyword arguments carry the vocabulary's parameter names unchanged (``duration_ms``, ``load_ms``,
``client_id``...); an argument left at ``None`` is not sent, so the node's default applies.

Faults that last (``fail``, ``delay``, ``pause_heartbeats``, ``leader_unavailable``) return a
``Fault``: its ``.id``, ``.clear()``, and a context manager that clears it on exit::

    with server.faults.fail("OffsetCommit", "REBALANCE_IN_PROGRESS", count=3):
        consumer.commit()   # the next three OffsetCommit requests are refused

The others act at once and return the node's result (``{"group": ..., "generation": ...}``).
Whatever the node refuses (an unknown fault or parameter, a group it does not know, a node
without fault injection) raises ``FaultError`` with the node's message and nothing changes.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Protocol

from ..faults.spec import FaultError as EngineFaultError
from ..faults_cli import DEFAULT_TIMEOUT_S, FaultError, HttpTransport

__all__ = ["Fault", "FaultError", "FaultHandle", "HttpTransport", "LocalTransport", "Transport"]


class Transport(Protocol):
    """How a handle reaches a node. ``inject`` answers as ``POST /faults`` does:
    ``{"id": ... (lasting faults only), "result": {...}}``."""

    def inject(self, body: Mapping[str, object], timeout: float) -> dict[str, Any]: ...

    def list(self) -> list[dict[str, Any]]: ...

    def clear(self, fault_id: str | None = None) -> int: ...

    def crash_restart(self) -> None: ...


class LocalTransport:
    """Calls a ``FaultEngine`` running on ``loop`` (another thread's) from the caller's thread.

    The engine is single-threaded on its loop, so every call is scheduled there with
    ``asyncio.run_coroutine_threadsafe`` and waited for. Calling from the loop's own thread would
    wait on itself forever: that raises ``RuntimeError`` instead (await the engine there).
    """

    def __init__(self, engine: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.loop = loop

    def inject(self, body: Mapping[str, object], timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        answer: dict[str, Any] = self._run(self.engine.inject(dict(body)), timeout)
        return answer

    def list(self) -> list[dict[str, Any]]:
        async def listing() -> list[dict[str, Any]]:
            return list(self.engine.list())

        faults: list[dict[str, Any]] = self._run(listing(), DEFAULT_TIMEOUT_S)
        return faults

    def clear(self, fault_id: str | None = None) -> int:
        async def clearing() -> int:
            return int(self.engine.clear(fault_id))

        cleared: int = self._run(clearing(), DEFAULT_TIMEOUT_S)
        return cleared

    def crash_restart(self) -> None:
        """Asks the engine; the App's host restarts it (or the engine refuses: 409)."""
        self.inject({"fault": "crash-restart"})

    def _run(self, coro: Any, timeout: float) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("LocalTransport waits for the server's loop: call it from another thread "
                               "(on the loop itself, await the engine directly)")
        if self.loop.is_closed() or not self.loop.is_running():
            coro.close()
            raise FaultError("the in-process server is not running")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise FaultError(f"the in-process server did not answer within {timeout:g} s") from None
        except EngineFaultError as exc:
            # The engine's refusal, with the status /faults would answer; anything else raised
            # is a bug of the node and goes up as it is.
            raise FaultError(exc.message, exc.status) from exc


class Fault:
    """A lasting fault on a node: clear it early with ``.clear()`` or by leaving its ``with`` block
    (it also ends by itself, after its ``count`` or ``duration_ms``)."""

    def __init__(self, handle: FaultHandle, fault_id: str, fault: dict[str, object],
                 result: dict[str, Any] | None = None) -> None:
        self.handle = handle
        self.id = fault_id
        self.fault = fault
        self.result = result or {}

    def clear(self) -> bool:
        """Ends the fault; ``False`` when it had already ended by itself."""
        try:
            return self.handle.clear(self.id) > 0
        except FaultError as exc:
            if exc.status == 404:
                return False
            raise

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.clear()

    def __repr__(self) -> str:
        return f"Fault({self.id!r}, {self.fault!r})"


def _param(value: object) -> object:
    # ApiKey and ErrorCode are IntEnums: send their numbers, which the node accepts as it accepts
    # the names, and which JSON carries as plain ints.
    return int(value) if isinstance(value, enum.IntEnum) else value


class FaultHandle:
    """The fault vocabulary of docs/testing.md, one method each, on one node.

    ``restart``, when given (the harness's own restart of the node it hosts), is what
    ``crash_restart`` calls instead of asking the node over the transport.
    """

    def __init__(self, transport: Transport, *, restart: Callable[[], None] | None = None) -> None:
        self.transport = transport
        self.restart = restart

    # Immediate faults: they act at once and return the node's result.

    def rebalance(self, group: str) -> dict[str, Any]:
        """The group starts a rebalance: a classic group goes to PreparingRebalance (members rejoin
        into a new generation); a consumer (KIP-848) group's epoch is bumped. Returns
        ``{"group", "protocol", "generation" or "group_epoch"}``."""
        return self._immediate("rebalance", group=group)

    def kick_member(self, group: str, member: str | None = None) -> dict[str, Any]:
        """Removes a member (id or group.instance.id; default the first by member id) as if its
        session expired. Returns ``{"group", "member"}``."""
        return self._immediate("kick-member", group=group, member=member)

    def move_coordinator(self, group: str, load_ms: int = 0, not_coordinator_ms: int = 0) -> dict[str, Any]:
        """Moves the group's coordinator: NOT_COORDINATOR for ``not_coordinator_ms``, then
        COORDINATOR_LOAD_IN_PROGRESS for ``load_ms``, then reloaded from its log (on a cluster, a
        real leadership move). Returns ``{"group", "partition", "from", "to"}`` once active again."""
        wait_s = (load_ms + not_coordinator_ms) / 1000
        return self._immediate("move-coordinator", wait_s, group=group, load_ms=load_ms,
                               not_coordinator_ms=not_coordinator_ms)

    def drop_connections(self, client_id: str | None = None) -> dict[str, Any]:
        """Closes client connections (all, or those of ``client_id``). Returns ``{"dropped": n}``."""
        return self._immediate("drop-connections", client_id=client_id)

    def crash_restart(self) -> None:
        """The node stops with no shutdown step at all and starts again on the same data and
        ports; returns once it is ready again (over HTTP: ``/readyz`` answers 200)."""
        if self.restart is not None:
            self.restart()
        else:
            self.transport.crash_restart()

    # Lasting faults: they return a Fault to clear, or end by themselves.

    def fail(self, api: str | int, error: str | int, count: int | None = 1, group: str | None = None,
             topic: str | None = None, duration_ms: int | None = None) -> Fault:
        """The next ``count`` requests of ``api`` (of ``group``/``topic`` when given) are answered
        with ``error`` without reaching the handler; ends after ``duration_ms`` at the latest
        (the node's default 60 s)."""
        return self._lasting("fail", api=api, error=error, count=count, group=group, topic=topic,
                             duration_ms=duration_ms)

    def delay(self, api: str | int, ms: int, count: int | None = None, group: str | None = None,
              topic: str | None = None, duration_ms: int | None = None) -> Fault:
        """Matching requests wait ``ms`` before the handler sees them (each connection's order kept)."""
        return self._lasting("delay", api=api, ms=ms, count=count, group=group, topic=topic,
                             duration_ms=duration_ms)

    def pause_heartbeats(self, group: str | None = None, *, duration_ms: int) -> Fault:
        """Heartbeat and ConsumerGroupHeartbeat requests (of ``group``, or all) are held unanswered for
        ``duration_ms``; session timers keep running, so members may expire meanwhile."""
        return self._lasting("pause-heartbeats", group=group, duration_ms=duration_ms)

    def leader_unavailable(self, topic: str, partition: int, duration_ms: int) -> Fault:
        """The partition shows no leader in Metadata, and Produce, Fetch, ListOffsets and
        OffsetForLeaderEpoch naming it get NOT_LEADER_OR_FOLLOWER, for ``duration_ms``."""
        return self._lasting("leader-unavailable", topic=topic, partition=partition, duration_ms=duration_ms)

    # The node's lasting faults.

    def list(self) -> list[dict[str, Any]]:
        """The lasting faults in force: ``[{"id", "fault", <params>, "remaining", "expires_in_ms"}]``."""
        return self.transport.list()

    def clear(self, fault_id: str | None = None) -> int:
        """Ends one fault (``FaultError`` 404 when no such fault is in force) or all; returns how many."""
        return self.transport.clear(fault_id)

    def inject(self, body: Mapping[str, object], timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
        """Sends a fault as the JSON object of the vocabulary; returns ``{"id"?, "result"}``."""
        return self.transport.inject(body, timeout)

    def _body(self, name: str, params: dict[str, object]) -> dict[str, object]:
        body: dict[str, object] = {"fault": name}
        body.update((key, _param(value)) for key, value in params.items() if value is not None)
        return body

    def _immediate(self, name: str, wait_s: float = 0.0, **params: object) -> dict[str, Any]:
        answer = self.inject(self._body(name, params), DEFAULT_TIMEOUT_S + wait_s)
        result: dict[str, Any] = answer.get("result") or {}
        return result

    def _lasting(self, name: str, **params: object) -> Fault:
        body = self._body(name, params)
        answer = self.inject(body)
        fault_id = answer.get("id")
        if not isinstance(fault_id, str):
            raise FaultError(f"the node gave {name} no fault id: {answer!r}")
        return Fault(self, fault_id, body, answer.get("result"))


