"""The fault handle (coordinator/testing/faults.py) over both transports, against a fake node.

``FakeNode`` keeps the contract of the engine and its ``/faults`` endpoint (docs/testing.md: the vocabulary's
names, ids f1, f2..., 400/404/409 refusals with a message) on an event loop of its own thread, as
the in-process server runs; the end-to-end tests against a real node are in
test_faults_handle_e2e.py. test_faults_cli.py uses the same fake.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from aiohttp import web

from coordinator.faults.engine import FaultEngine, FaultTargets
from coordinator.faults.spec import FaultError as EngineFaultError
from coordinator.testing.faults import Fault, FaultError, FaultHandle, HttpTransport, LocalTransport
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from tests.conftest import free_port

OFF = "fault injection is off on this node: start it with test.faults.enable=true"
NAMES = ("rebalance", "kick-member", "move-coordinator", "fail", "delay", "drop-connections", "pause-heartbeats",
         "leader-unavailable", "crash-restart")
LASTING = ("fail", "delay", "pause-heartbeats", "leader-unavailable")


def refusal(message: str, status: int) -> EngineFaultError:
    return EngineFaultError(status, message)


class FakeEngine:
    """The engine's surface: ``async inject``, ``list``, ``clear``; knows the groups it is given."""

    def __init__(self, groups: tuple[str, ...] = ("known",)) -> None:
        self.groups = set(groups)
        self.bodies: list[dict[str, object]] = []
        self.faults: dict[str, dict[str, object]] = {}
        self.next_id = 1
        self.crash_restart_hook: Any = None

    async def inject(self, body: Mapping[str, object]) -> dict[str, object]:
        body = dict(body)
        name = body.get("fault")
        if name not in NAMES:
            raise refusal(f"unknown fault {name!r}: valid faults are {', '.join(NAMES)}", 400)
        if name in ("rebalance", "kick-member", "move-coordinator") and body.get("group") not in self.groups:
            raise refusal(f"group {body.get('group')!r} does not exist", 404)
        if name == "crash-restart":
            if self.crash_restart_hook is None:
                raise refusal("crash-restart is not available here", 409)
            self.bodies.append(body)
            self.crash_restart_hook()
            return {"result": {}}
        self.bodies.append(body)
        if name in LASTING:
            fault_id = f"f{self.next_id}"
            self.next_id += 1
            self.faults[fault_id] = {"id": fault_id, **body, "remaining": body.get("count"), "expires_in_ms": 60000}
            return {"id": fault_id, "result": {}}
        if name == "rebalance":
            return {"result": {"group": body["group"], "protocol": "classic", "generation": 2}}
        if name == "drop-connections":
            return {"result": {"dropped": 0}}
        return {"result": {"group": body.get("group")}}

    def list(self) -> list[dict[str, object]]:
        return list(self.faults.values())

    def clear(self, fault_id: str | None = None) -> int:
        if fault_id is None:
            cleared = len(self.faults)
            self.faults.clear()
            return cleared
        if fault_id not in self.faults:
            raise refusal(f"no fault {fault_id!r}", 404)
        del self.faults[fault_id]
        return 1


class FakeNode:
    """A FakeEngine behind aiohttp routes shaped as the node's /faults, on a loop in a thread.

    ``enabled=False`` answers every /faults request as a node without test.faults.enable.
    ``crash_restart`` over HTTP closes the listener and its connections, then listens again.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.engine = FakeEngine()
        self.engine.crash_restart_hook = self._crash_soon
        self.restarts = 0
        #: How many /readyz requests answer 503 after a restart (a node loading its partitions).
        self.not_ready_answers = 0
        self.readyz_calls = 0
        self.loop = asyncio.new_event_loop()
        self.port = free_port()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def reset(self) -> None:
        def fresh() -> None:
            hook = self.engine.crash_restart_hook
            self.engine = FakeEngine()
            self.engine.crash_restart_hook = hook

        self.loop.call_soon_threadsafe(fresh)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), self.loop).result(10)

    async def _listen(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/faults", self._faults)
        app.router.add_route("*", "/faults/{id}", self._faults)
        app.router.add_get("/readyz", self._readyz)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def _close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def _crash_soon(self) -> None:
        async def crash() -> None:
            await asyncio.sleep(0.05)  # let the answer go out first, as a real node may
            await self._close()
            await asyncio.sleep(0.2)  # the new process starting
            self.restarts += 1
            self.readyz_calls = 0
            await self._listen()

        self.loop.create_task(crash())

    async def _readyz(self, request: web.Request) -> web.Response:
        self.readyz_calls += 1
        if self.readyz_calls <= self.not_ready_answers:
            return web.Response(status=503, text="coordinator partition __consumer_offsets-0 loading\n")
        return web.Response(text="ready\n")

    async def _faults(self, request: web.Request) -> web.Response:
        if not self.enabled:
            return web.json_response({"error": OFF}, status=404)
        fault_id = request.match_info.get("id")
        try:
            if request.method == "GET" and fault_id is None:
                return web.json_response({"faults": self.engine.list()})
            if request.method == "POST" and fault_id is None:
                try:
                    body = await request.json()
                except json.JSONDecodeError:
                    return web.json_response({"error": "the body is not JSON"}, status=400)
                return web.json_response(await self.engine.inject(body))
            if request.method == "DELETE":
                return web.json_response({"cleared": self.engine.clear(fault_id)})
        except EngineFaultError as exc:
            return web.json_response({"error": str(exc)}, status=exc.status)
        return web.json_response({"error": "method not allowed"}, status=405)


@pytest.fixture(scope="module")
def node() -> Iterator[FakeNode]:
    fake = FakeNode()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(params=["http", "local"])
def handle(request: pytest.FixtureRequest, node: FakeNode) -> Iterator[FaultHandle]:
    """A handle on the fake node over each transport, with a fresh engine."""
    node.reset()
    transport = HttpTransport(node.url) if request.param == "http" else LocalTransport(node.engine, node.loop)
    yield FaultHandle(transport)


def test_immediate_faults_return_the_nodes_result_and_send_the_vocabularys_names(
        handle: FaultHandle, node: FakeNode) -> None:
    assert handle.rebalance("known") == {"group": "known", "protocol": "classic", "generation": 2}
    assert handle.kick_member("known") == {"group": "known"}
    handle.kick_member("known", member="static-1")
    handle.move_coordinator("known", load_ms=20)
    assert handle.drop_connections(client_id="app") == {"dropped": 0}
    assert node.engine.bodies == [
        {"fault": "rebalance", "group": "known"},
        {"fault": "kick-member", "group": "known"},  # member=None is not sent: the node's default
        {"fault": "kick-member", "group": "known", "member": "static-1"},
        {"fault": "move-coordinator", "group": "known", "load_ms": 20, "not_coordinator_ms": 0},
        {"fault": "drop-connections", "client_id": "app"},
    ]


def test_lasting_faults_return_a_fault_that_its_with_block_clears(handle: FaultHandle, node: FakeNode) -> None:
    with handle.fail(ApiKey.OFFSET_COMMIT, ErrorCode.REBALANCE_IN_PROGRESS, count=3, group="g") as fault:
        assert isinstance(fault, Fault)
        assert fault.id == "f1"
        assert [f["id"] for f in handle.list()] == ["f1"]
        assert handle.list()[0]["remaining"] == 3
    assert handle.list() == []
    # IntEnum members go as their numbers; None parameters stay out.
    assert node.engine.bodies == [{"fault": "fail", "api": int(ApiKey.OFFSET_COMMIT),
                                   "error": int(ErrorCode.REBALANCE_IN_PROGRESS), "count": 3, "group": "g"}]


def test_every_lasting_fault_gets_an_id_and_clear_ends_one_or_all(handle: FaultHandle) -> None:
    delay = handle.delay("JoinGroup", ms=50, topic="t")
    pause = handle.pause_heartbeats("g", duration_ms=1000)
    leader = handle.leader_unavailable("t", 0, duration_ms=1000)
    assert [delay.id, pause.id, leader.id] == ["f1", "f2", "f3"]
    assert delay.fault == {"fault": "delay", "api": "JoinGroup", "ms": 50, "topic": "t"}
    assert pause.clear() is True
    assert [f["id"] for f in handle.list()] == ["f1", "f3"]
    assert handle.clear() == 2
    assert handle.list() == []


def test_a_fault_that_already_ended_clears_quietly_but_an_unknown_id_is_an_error(handle: FaultHandle) -> None:
    fault = handle.fail("Heartbeat", "UNKNOWN_MEMBER_ID")
    handle.clear()  # as if its count ran out
    assert fault.clear() is False
    with fault:
        pass  # leaving the block does not raise either
    with pytest.raises(FaultError) as caught:
        handle.clear("f99")
    assert caught.value.status == 404
    assert "f99" in str(caught.value)


def test_an_unknown_fault_raises_the_nodes_message_and_changes_nothing(handle: FaultHandle) -> None:
    with pytest.raises(FaultError) as caught:
        handle.inject({"fault": "explode"})
    assert caught.value.status == 400
    assert "unknown fault 'explode'" in caught.value.message
    assert "rebalance" in caught.value.message  # the valid ones are listed
    assert handle.list() == []


def test_a_group_the_node_does_not_know_raises_404(handle: FaultHandle, node: FakeNode) -> None:
    for action in (lambda: handle.rebalance("nope"), lambda: handle.kick_member("nope"),
                   lambda: handle.move_coordinator("nope")):
        with pytest.raises(FaultError, match="group 'nope' does not exist") as caught:
            action()
        assert caught.value.status == 404
    assert node.engine.bodies == []
    assert handle.list() == []


def test_crash_restart_calls_the_restart_the_server_gives_instead_of_the_wire(node: FakeNode) -> None:
    node.reset()
    calls: list[str] = []
    handle = FaultHandle(HttpTransport(node.url), restart=lambda: calls.append("restart"))
    handle.crash_restart()
    assert calls == ["restart"]
    assert node.engine.bodies == []


def test_crash_restart_over_http_waits_until_the_node_is_back_and_ready(node: FakeNode) -> None:
    node.reset()
    before = node.restarts
    node.not_ready_answers = 3
    try:
        FaultHandle(HttpTransport(node.url)).crash_restart()
    finally:
        node.not_ready_answers = 0
    # The wait saw the old listener go (its connection broke) before asking the new one, and
    # asked until it was ready.
    assert node.restarts == before + 1
    assert node.readyz_calls == 4
    assert FaultHandle(HttpTransport(node.url)).list() == []


def test_crash_restart_refused_by_the_node_raises_at_once(node: FakeNode) -> None:
    node.reset()
    node.loop.call_soon_threadsafe(setattr, node.engine, "crash_restart_hook", None)
    with pytest.raises(FaultError, match="crash-restart is not available here") as caught:
        FaultHandle(HttpTransport(node.url)).crash_restart()
    assert caught.value.status == 409
    with pytest.raises(FaultError, match="not available"):
        FaultHandle(LocalTransport(node.engine, node.loop)).crash_restart()


def test_a_node_without_fault_injection_says_how_to_turn_it_on() -> None:
    off = FakeNode(enabled=False)
    off.start()
    try:
        handle = FaultHandle(HttpTransport(off.url))
        for action in (handle.list, lambda: handle.rebalance("known"), lambda: handle.fail("Fetch", "NONE")):
            with pytest.raises(FaultError) as caught:
                action()
            assert caught.value.message == OFF
            assert caught.value.status == 404
    finally:
        off.stop()


def test_a_node_that_is_not_there_is_named_in_the_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(FaultError) as caught:
        FaultHandle(HttpTransport(url)).list()
    assert f"cannot reach {url}/faults" in caught.value.message
    assert "connection refused" in caught.value.message
    assert caught.value.status is None


def test_http_transport_takes_a_bare_host_and_port(node: FakeNode) -> None:
    node.reset()
    transport = HttpTransport(f"127.0.0.1:{node.port}/")
    assert transport.base_url == node.url
    assert transport.list() == []


def test_local_transport_refuses_to_wait_on_its_own_loop(node: FakeNode) -> None:
    transport = LocalTransport(node.engine, node.loop)

    async def from_the_loop() -> None:
        transport.list()

    future = asyncio.run_coroutine_threadsafe(from_the_loop(), node.loop)
    with pytest.raises(RuntimeError, match="another thread"):
        future.result(10)


def test_local_transport_on_a_stopped_loop_is_an_error_not_a_hang() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(FaultError, match="not running"):
            FaultHandle(LocalTransport(FakeEngine(), loop)).list()
    finally:
        loop.close()


def test_local_transport_lets_a_bug_of_the_engine_through() -> None:
    class Broken(FakeEngine):
        async def inject(self, body: Mapping[str, object]) -> dict[str, object]:
            raise KeyError("bug")

    node = FakeNode()
    node.engine = Broken()
    node.thread.start()
    try:
        with pytest.raises(KeyError):
            FaultHandle(LocalTransport(node.engine, node.loop)).rebalance("known")
    finally:
        node.loop.call_soon_threadsafe(node.loop.stop)
        node.thread.join(10)
        node.loop.close()


def test_local_transport_over_the_real_engine(node: FakeNode) -> None:
    """The engine of coordinator/faults/ (its targets faked): its answers and refusals come
    through the local transport as they come through /faults."""
    groups = {"known"}

    async def rebalance(group: str) -> dict[str, object]:
        if group not in groups:
            raise LookupError(f"group {group!r} does not exist")
        return {"group": group, "protocol": "consumer", "group_epoch": 7}

    async def unused(*args: object) -> dict[str, object]:
        raise AssertionError(args)

    targets = FaultTargets(rebalance=rebalance, kick_member=unused, move_coordinator=unused,
                           drop_connections=lambda client_id: 3)
    engine = FaultEngine(targets, max_duration_ms=10_000, clock_ms=lambda: 0)
    handle = FaultHandle(LocalTransport(engine, node.loop))
    assert handle.rebalance("known") == {"group": "known", "protocol": "consumer", "group_epoch": 7}
    assert handle.drop_connections() == {"dropped": 3}
    with handle.fail("OffsetCommit", "NOT_COORDINATOR", count=2, group="g") as fault:
        (listed,) = handle.list()
        assert (listed["id"], listed["fault"], listed["remaining"]) == (fault.id, "fail", 2)
    assert handle.list() == []
    for action, status, message in [
        (lambda: handle.rebalance("nope"), 404, "group 'nope' does not exist"),
        (lambda: handle.pause_heartbeats(duration_ms=60_000), 400, "test.faults.max.duration.ms"),
        (lambda: handle.inject({"fault": "explode"}), 400, "unknown fault 'explode'"),
        (handle.crash_restart, 409, "crash-restart is not available here"),
        (lambda: handle.clear("f9"), 404, "f9"),
    ]:
        with pytest.raises(FaultError) as caught:
            action()
        assert caught.value.status == status
        assert message in caught.value.message
    assert handle.list() == []
