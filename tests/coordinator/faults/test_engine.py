"""FaultEngine with fake targets and fake handlers: immediate faults reach their targets (a group
this node does not know → 404, nothing changed), lasting faults match, count down, expire by the
clock and by the loop timer, and the wrapper leaves requests alone when none is in force."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from coordinator.context import RequestContext
from coordinator.faults.engine import FaultEngine, FaultTargets
from coordinator.faults.spec import FaultError
from protocol.apis import ApiKey, request_class

pytestmark = pytest.mark.asyncio


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Groups:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def rebalance(self, group: str) -> dict[str, object]:
        if group != "known":
            raise LookupError(f"group '{group}' does not exist")
        self.calls.append(("rebalance", group))
        return {"group": group, "protocol": "classic", "generation": 2}

    async def kick(self, group: str, member: str | None) -> dict[str, object]:
        if member == "ghost":
            raise LookupError(f"group '{group}' has no member 'ghost'")
        self.calls.append(("kick", group, member))
        return {"group": group, "member": member or "m-1"}

    async def move(self, group: str, load_ms: int, not_coordinator_ms: int) -> dict[str, object]:
        self.calls.append(("move", group, load_ms, not_coordinator_ms))
        return {"group": group, "partition": 0, "from": 1, "to": 1}


def make_engine(crash: Any = None, max_duration_ms: int = 300_000) -> tuple[FaultEngine, Groups, Clock, list[Any]]:
    groups, clock, dropped = Groups(), Clock(), []

    def drop(client_id: str | None) -> int:
        dropped.append(client_id)
        return 3

    targets = FaultTargets(rebalance=groups.rebalance, kick_member=groups.kick, move_coordinator=groups.move,
                           drop_connections=drop, crash_restart=crash)
    return FaultEngine(targets, max_duration_ms, clock), groups, clock, dropped


def ctx(api: ApiKey, version: int) -> RequestContext:
    return RequestContext(int(api), version, 1, "client", "127.0.0.1:1")


def commit_request(group: str = "g") -> Any:
    cls = request_class(ApiKey.OFFSET_COMMIT)
    topic = cls.OffsetCommitRequestTopic
    return cls(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        topic(name="t", partitions=[topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])


def heartbeat_request(group: str = "g") -> Any:
    return request_class(ApiKey.HEARTBEAT)(version=4, group_id=group, generation_id=1, member_id="m")


def real_handlers(seen: list[str]) -> dict[ApiKey, Any]:
    def handler(name: str) -> Any:
        def handle(_ctx: RequestContext, _request: Any) -> str:
            seen.append(name)
            return f"answer of {name}"
        return handle
    return {ApiKey.OFFSET_COMMIT: handler("commit"), ApiKey.HEARTBEAT: handler("heartbeat")}


def errors_of_commit(response: Any) -> list[int]:
    return [p.error_code for t in response.topics for p in t.partitions]


async def test_immediate_faults_reach_their_targets() -> None:
    engine, groups, _clock, dropped = make_engine()
    assert await engine.inject({"fault": "rebalance", "group": "known"}) == \
        {"result": {"group": "known", "protocol": "classic", "generation": 2}}
    assert (await engine.inject({"fault": "kick-member", "group": "known"}))["result"] == \
        {"group": "known", "member": "m-1"}
    await engine.inject({"fault": "move-coordinator", "group": "known", "load_ms": 5})
    assert await engine.inject({"fault": "drop-connections", "client_id": "c"}) == {"result": {"dropped": 3}}
    assert groups.calls == [("rebalance", "known"), ("kick", "known", None), ("move", "known", 5, 0)]
    assert dropped == ["c"]
    assert engine.list() == []


async def test_unknown_group_is_404_and_changes_nothing() -> None:
    engine, groups, _clock, _dropped = make_engine()
    with pytest.raises(FaultError) as info:
        await engine.inject({"fault": "rebalance", "group": "nope"})
    assert (info.value.status, info.value.message) == (404, "group 'nope' does not exist")
    with pytest.raises(FaultError) as info:
        await engine.inject({"fault": "kick-member", "group": "known", "member": "ghost"})
    assert (info.value.status, info.value.message) == (404, "group 'known' has no member 'ghost'")
    assert groups.calls == [] and engine.list() == []


async def test_crash_restart_needs_a_host_hook() -> None:
    engine, *_ = make_engine()
    with pytest.raises(FaultError) as info:
        await engine.inject({"fault": "crash-restart"})
    assert (info.value.status, info.value.message) == (409, "crash-restart is not available here")
    restarts: list[int] = []
    engine, *_ = make_engine(crash=lambda: restarts.append(1))
    assert await engine.inject({"fault": "crash-restart"}) == {"result": {"restarting": True}}
    assert restarts == [1]


async def test_fail_refused_for_an_api_it_cannot_answer() -> None:
    engine, *_ = make_engine()
    with pytest.raises(FaultError) as info:
        await engine.inject({"fault": "fail", "api": "CreateTopics", "error": "POLICY_VIOLATION"})
    assert info.value.status == 400
    assert info.value.message.startswith("fault 'fail' is not available for CreateTopics: it can fail ")
    assert "OffsetCommit" in info.value.message and engine.list() == []


async def test_fail_counts_down_and_filters_by_group() -> None:
    engine, _groups, clock, _dropped = make_engine()
    seen: list[str] = []
    handlers = engine.wrap(real_handlers(seen))
    injected = await engine.inject({"fault": "fail", "api": "OffsetCommit", "error": "REBALANCE_IN_PROGRESS",
                                    "count": 2, "group": "g"})
    assert injected["id"] == "f1"
    assert engine.list() == [{"id": "f1", "fault": "fail", "api": "OffsetCommit", "error": "REBALANCE_IN_PROGRESS",
                              "count": 2, "group": "g", "duration_ms": 60_000, "remaining": 2,
                              "expires_in_ms": 60_000}]
    commit = handlers[ApiKey.OFFSET_COMMIT]
    assert commit(ctx(ApiKey.OFFSET_COMMIT, 8), commit_request("other")) == "answer of commit"
    assert errors_of_commit(commit(ctx(ApiKey.OFFSET_COMMIT, 8), commit_request())) == [27]
    clock.now += 1000
    assert engine.list()[0]["remaining"] == 1 and engine.list()[0]["expires_in_ms"] == 59_000
    assert handlers[ApiKey.HEARTBEAT](ctx(ApiKey.HEARTBEAT, 4), heartbeat_request()) == "answer of heartbeat"
    assert errors_of_commit(commit(ctx(ApiKey.OFFSET_COMMIT, 8), commit_request())) == [27]
    assert commit(ctx(ApiKey.OFFSET_COMMIT, 8), commit_request()) == "answer of commit"
    assert engine.list() == [] and seen == ["commit", "heartbeat", "commit"]


async def test_faults_expire_by_the_clock_and_clear() -> None:
    engine, _groups, clock, _dropped = make_engine()
    handlers = engine.wrap(real_handlers([]))
    await engine.inject({"fault": "fail", "api": 8, "error": 16, "count": 100, "duration_ms": 500})
    await engine.inject({"fault": "delay", "api": 12, "ms": 1, "duration_ms": 50_000})
    clock.now += 500
    assert [f["id"] for f in engine.list()] == ["f2"]
    assert handlers[ApiKey.OFFSET_COMMIT](ctx(ApiKey.OFFSET_COMMIT, 8), commit_request()) == "answer of commit"
    with pytest.raises(FaultError) as info:
        engine.clear("f1")
    assert (info.value.status, info.value.message) == (404, "no active fault 'f1'")
    assert engine.clear("f2") == 1 and engine.clear() == 0


async def test_delay_and_pause_heartbeats() -> None:
    engine, *_ = make_engine()
    seen: list[str] = []
    handlers = engine.wrap(real_handlers(seen))
    await engine.inject({"fault": "delay", "api": "Heartbeat", "ms": 30, "count": 1})
    loop = asyncio.get_running_loop()
    started = loop.time()
    delayed = handlers[ApiKey.HEARTBEAT](ctx(ApiKey.HEARTBEAT, 4), heartbeat_request())
    assert seen == []
    assert await delayed == "answer of heartbeat"
    assert loop.time() - started >= 0.03
    # A pause holds heartbeats until it is cleared (or ends), then they reach the handler.
    injected = await engine.inject({"fault": "pause-heartbeats", "group": "g", "duration_ms": 60_000})
    held = asyncio.ensure_future(handlers[ApiKey.HEARTBEAT](ctx(ApiKey.HEARTBEAT, 4), heartbeat_request()))
    other = handlers[ApiKey.HEARTBEAT](ctx(ApiKey.HEARTBEAT, 4), heartbeat_request("h"))
    assert other == "answer of heartbeat"
    await asyncio.sleep(0.01)
    assert not held.done()
    engine.clear(str(injected["id"]))
    assert await held == "answer of heartbeat"
    # The loop timer ends a pause on time without any request to notice it.
    await engine.inject({"fault": "pause-heartbeats", "duration_ms": 50})
    held = asyncio.ensure_future(handlers[ApiKey.HEARTBEAT](ctx(ApiKey.HEARTBEAT, 4), heartbeat_request()))
    assert await asyncio.wait_for(held, 10) == "answer of heartbeat"
    assert engine.list() == []
