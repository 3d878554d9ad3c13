"""The dashboard's routes on an aiohttp test server over a small in-memory node: every page, the
escaping of user-chosen names, and each guard of the offset reset (admin switch, CSRF, HTTP Basic,
the group's state), with the reset's commits going through an OffsetCommit handler that records them."""

from __future__ import annotations

import base64
import re
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from coordinator.lag.burrow import GroupStatus, Status
from coordinator.ops.dashboard import add_routes, csrf
from coordinator.ops.lag_monitor import PartitionLag
from coordinator.ops.state_view import (
    CommittedView,
    CoordinatorPartitionView,
    GroupView,
    MemberView,
    NodeView,
    PartitionView,
)
from coordinator.ops.timeline import TimelineEntry
from coordinator.security.sasl.scram_formatter import make_credential
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.hot_responses import CommitPartition, CommitTopic, OffsetCommitAnswer

EVIL = '<script>alert("x")</script>&'


# --- a small node, in the shapes of ops/state_view.py and ops/lag_monitor.py ------------------------

def Committed(offset: int, expires_at_ms: int | None = None) -> CommittedView:
    return CommittedView(offset, -1, "", 0, expires_at_ms)


def Partition(log_start: int, log_end: int) -> PartitionView:
    return PartitionView(log_start, log_end, log_end, 0, (0,), (0,), True)


def Lag(group: str, topic: str, partition: int, committed: int, log_end: int, lag: int, seconds: float, status: Status,
        member: str | None, client: str | None, host: str | None, expires: int | None, expiring: bool) -> PartitionLag:
    return PartitionLag(group, topic, partition, committed, log_end, lag, seconds, status, member, client, host,
                        expires, expiring)


class View:
    def __init__(self) -> None:
        self._groups = {
            "orders-app": GroupView("orders-app", "classic", "consumer", "Stable", "range", 3, 7,
                                [MemberView("m-1", None, "orders-client", "/10.0.0.5", [("orders", 0), ("orders", 1)])],
                                {("orders", 0): Committed(40), ("orders", 1): Committed(90)}),
            "idle-app": GroupView("idle-app", "classic", "consumer", "Empty", "", 5, 2, [],
                              {("orders", 0): Committed(10, expires_at_ms=1_000_000 + 3_600_000)}),
            EVIL: GroupView(EVIL, "consumer", "consumer", "Empty", "uniform", 1, 3,
                        [], {("orders", 1): Committed(5)}),
        }
        self._partitions = {("orders", 0): Partition(0, 100), ("orders", 1): Partition(20, 100)}

    cluster = None

    def groups(self) -> list[GroupView]:
        return list(self._groups.values())

    def group(self, gid: str) -> GroupView | None:
        return self._groups.get(gid)

    def partitions(self) -> dict[tuple[str, int], PartitionView]:
        return self._partitions

    def coordinator_partitions(self) -> list[CoordinatorPartitionView]:
        return [CoordinatorPartitionView("__consumer_offsets", 7, "active", 12.0)]

    def nodes(self) -> list[NodeView]:
        return [NodeView(0, "127.0.0.1", 9092, None)]

    def controller_id(self) -> int:
        return 0

    def earliest(self, t: str, p: int) -> int | None:
        return self._partitions[(t, p)].log_start

    def latest(self, t: str, p: int) -> int | None:
        return self._partitions[(t, p)].log_end

    def offset_for_timestamp(self, t: str, p: int, ts: int) -> int | None:
        return 50


class LagMonitor:
    def __init__(self) -> None:
        self.rows = [Lag("orders-app", "orders", 0, 40, 100, 60, 12.5, Status.WARN, "m-1", "orders-client", "/10.0.0.5",
                         None, False),
                     Lag("orders-app", "orders", 1, 90, 100, 10, 2.0, Status.OK, "m-1", "orders-client", "/10.0.0.5",
                         None, False),
                     Lag("idle-app", "orders", 0, 10, 100, 90, 300.0, Status.STOP, None, None, None, 1_000_000 + 3_600_000,
                         True)]

    def lags(self) -> list[PartitionLag]:
        return self.rows

    def group_statuses(self) -> dict[str, Any]:
        return {"orders-app": GroupStatus(Status.WARN, 1.0, ("orders", 0), 70),
                "idle-app": GroupStatus(Status.ERR, 1.0, ("orders", 0), 90)}

    def history(self, group: str) -> list[tuple[int, int]]:
        return [(1_000_000, 120), (1_010_000, 90), (1_020_000, 70)] if group == "orders-app" else []


class OffsetCommit:
    """Stands for the node's OffsetCommit handler: records what it is asked, refuses users not allowed."""

    def __init__(self, view: View, allowed: set[str]) -> None:
        self.view, self.allowed, self.calls = view, allowed, []

    async def __call__(self, ctx: Any, request: Any) -> OffsetCommitAnswer:
        self.calls.append((ctx, request))
        ok = ctx.principal in self.allowed
        topics = []
        for t in request.topics:
            for p in t.partitions:
                if ok:
                    self.view._groups[request.group_id].offsets[(t.name, p.partition_index)] = Committed(p.committed_offset)
            code = ErrorCode.NONE if ok else ErrorCode.GROUP_AUTHORIZATION_FAILED
            topics.append(CommitTopic(t.name, [CommitPartition(p.partition_index, int(code)) for p in t.partitions]))
        return OffsetCommitAnswer(topics)


def timeline(_ctx: Any, group_id: str) -> list[Any]:
    return [TimelineEntry(1_000_000, 4, "GroupMetadata", 3, "range", 1)]


def make_ctx(*, admin: bool = True, plain_users: dict[str, str] | None = None, scram: Any = None,
             allowed: set[str] | None = None) -> SimpleNamespace:
    view = View()
    return SimpleNamespace(view=view, lag=LagMonitor(), admin_enabled=admin, plain_users=plain_users or {},
                           scram_store=scram, handlers={ApiKey.OFFSET_COMMIT: OffsetCommit(view, allowed or {"User:ANONYMOUS"})})


#: The node behind each test client.
CTX_OF: dict[TestClient, SimpleNamespace] = {}


async def client_for(ctx: SimpleNamespace) -> TestClient:
    app = web.Application()
    dashboard = add_routes(app, ctx)
    dashboard.timeline = timeline
    dashboard.clock = lambda: 1_000_000
    client = TestClient(TestServer(app))
    await client.start_server()
    CTX_OF[client] = ctx
    return client


@pytest_asyncio.fixture
async def client() -> Any:
    c = await client_for(make_ctx())
    yield c
    await c.close()
    CTX_OF.pop(c)


def path(gid: str, suffix: str = "") -> str:
    from urllib.parse import quote
    return f"/groups/{quote(gid, safe='')}{suffix}"


async def form_token(c: TestClient, gid: str) -> str:
    r = await c.get(path(gid, "/reset"))
    assert r.status == 200
    m = re.search(r'name="csrf_token" value="([0-9a-f]+)"', await r.text())
    assert m
    return m.group(1)


# --- pages ----------------------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_every_page_answers_with_the_groups(client: TestClient) -> None:
    for url in ["/", path("orders-app"), path("orders-app", "/reset"), "/topics", "/cluster",
                "/static/dashboard.css", "/static/dashboard.js", "/static/favicon.svg"]:
        r = await client.get(url)
        assert r.status == 200, url
    text = await (await client.get("/")).text()
    assert "orders-app" in text and "idle-app" in text and "Stable" in text and "WARN" in text
    assert ">70<" in text  # orders-app's lag: 60 + 10
    assert "12.5 s" in text  # its lag in time: the largest partition's


@pytest.mark.asyncio
async def test_group_page_shows_members_partitions_chart_and_timeline(client: TestClient) -> None:
    text = await (await client.get(path("orders-app"))).text()
    assert "orders-client" in text and "/10.0.0.5" in text and "orders:0,1" in text
    assert "<svg" in text and "<polyline" in text and "latest 70" in text
    assert "GroupMetadata" in text
    idle = await (await client.get(path("idle-app"))).text()
    assert 'class="expiring"' in idle and "in 1.0 h" in idle
    missing = await client.get(path("nope"))
    assert missing.status == 404 and "Consumer group &#x27;nope&#x27; does not exist." in await missing.text()


@pytest.mark.asyncio
async def test_user_chosen_names_are_escaped_everywhere(client: TestClient) -> None:
    for url in ["/", path(EVIL), path(EVIL, "/reset"), "/topics"]:
        text = await (await client.get(url)).text()
        assert "<script>alert" not in text, url
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in text, url
    r = await client.get("/")
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]


@pytest.mark.asyncio
async def test_json_api_has_the_same_rows(client: TestClient) -> None:
    groups = (await (await client.get("/api/groups")).json())["groups"]
    assert {g["group_id"] for g in groups} == {"orders-app", "idle-app", EVIL}
    orders = next(g for g in groups if g["group_id"] == "orders-app")
    assert orders["lag"] == 70 and orders["status"] == "WARN" and orders["members"] == 1
    detail = await (await client.get(path("orders-app").replace("/groups", "/api/groups"))).json()
    assert detail["history"][-1] == [1_020_000, 70]
    assert [p["lag"] for p in detail["partitions"]] == [60, 10]
    assert (await client.get("/api/groups/nope")).status == 404
    topics = (await (await client.get("/api/topics")).json())["topics"]
    assert topics[0]["topic"] == "orders" and topics[0]["partitions"] == 2
    cluster = await (await client.get("/api/cluster")).json()
    assert cluster["cluster_mode"] is False and cluster["coordinators"][0]["state"] == "active"


@pytest.mark.asyncio
async def test_cluster_page_says_single_node(client: TestClient) -> None:
    text = await (await client.get("/cluster")).text()
    assert "Single node" in text and "__consumer_offsets" in text


# --- the reset and its guards ---------------------------------------------------------------------

def reset_form(token: str, **fields: str) -> dict[str, str]:
    return {"csrf_token": token, "scope": "all-topics", "scenario": "to-earliest", "action": "preview", **fields}


async def executable(c: TestClient, gid: str, form: dict[str, str], headers: dict[str, str] | None = None
                     ) -> dict[str, str]:
    """``form`` previewed, ready to execute: with the mark the preview hands its Execute button."""
    r = await c.post(path(gid, "/reset"), data={**form, "action": "preview"}, headers=headers)
    m = re.search(r'name="previewed" value="([0-9a-f]+)"', await r.text())
    assert r.status == 200 and m, await r.text()
    return {**form, "previewed": m.group(1), "action": "execute"}


@pytest.mark.asyncio
async def test_preview_changes_nothing_and_execute_commits(client: TestClient) -> None:
    token = await form_token(client, "idle-app")
    r = await client.post(path("idle-app", "/reset"), data=reset_form(token, scenario="to-offset", value="500"))
    text = await r.text()
    assert r.status == 200, text
    assert "Preview (dry run: nothing changed)" in text and ">100<" in text
    assert "Value will be set to 100" in text  # clamped to the log end, with the tool's warning
    handler = CTX_OF[client].handlers[ApiKey.OFFSET_COMMIT]
    assert handler.calls == []
    assert CTX_OF[client].view.group("idle-app").offsets[("orders", 0)].offset == 10
    form = await executable(client, "idle-app", reset_form(token, scenario="shift-by", value="-4"))
    assert handler.calls == []
    r = await client.post(path("idle-app", "/reset"), data=form)
    text = await r.text()
    assert r.status == 200, text
    assert "Offsets committed" in text and ">NONE<" in text
    (rctx, request), = handler.calls
    assert rctx.principal == "User:ANONYMOUS" and request.group_id == "idle-app"
    assert request.generation_id_or_member_epoch == -1 and request.member_id == ""
    assert CTX_OF[client].view.group("idle-app").offsets[("orders", 0)].offset == 6


@pytest.mark.asyncio
async def test_reset_of_an_active_group_is_refused_with_the_tools_text(client: TestClient) -> None:
    token = await form_token(client, "orders-app")
    r = await client.post(path("orders-app", "/reset"), data=reset_form(token, action="execute"))
    assert r.status == 400
    assert ("Assignments can only be reset if the group &#x27;orders-app&#x27; is inactive, but the current state "
            "is Stable.") in await r.text()
    assert CTX_OF[client].handlers[ApiKey.OFFSET_COMMIT].calls == []


@pytest.mark.asyncio
async def test_post_without_a_valid_csrf_token_is_refused(client: TestClient) -> None:
    await form_token(client, "idle-app")  # the cookie is set
    for token in ["", "0" * 64]:
        r = await client.post(path("idle-app", "/reset"), data=reset_form(token, action="execute"))
        assert r.status == 403 and "CSRF" in await r.text()
    r = await client.post("/api/groups/idle-app/reset", json={"scope": "all-topics", "scenario": "to-earliest",
                                                               "execute": True})
    assert r.status == 403
    assert CTX_OF[client].handlers[ApiKey.OFFSET_COMMIT].calls == []


@pytest.mark.asyncio
async def test_reset_is_refused_while_admin_is_disabled() -> None:
    ctx = make_ctx(admin=False)
    c = await client_for(ctx)
    try:
        r = await c.get(path("idle-app", "/reset"))
        text = await r.text()
        assert "Offset reset is disabled on this node" in text
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', text).group(1)  # type: ignore[union-attr]
        r = await c.post(path("idle-app", "/reset"), data=reset_form(token, action="execute"))
        assert r.status == 403 and "disabled" in await r.text()
        assert ctx.handlers[ApiKey.OFFSET_COMMIT].calls == []
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_json_api_reset_with_the_header_token() -> None:
    ctx = make_ctx()
    c = await client_for(ctx)
    try:
        token = (await (await c.get("/api/csrf")).json())["token"]
        body = {"scope": "topics", "topics": "orders:0", "scenario": "to-latest", "execute": False}
        r = await c.post("/api/groups/idle-app/reset", json=body, headers={csrf.HEADER: token})
        plan = await r.json()
        assert r.status == 200 and plan["rows"][0]["new_offset"] == 100 and plan["executed"] is False
        r = await c.post("/api/groups/idle-app/reset", json={**body, "execute": True}, headers={csrf.HEADER: token})
        assert (await r.json())["rows"][0]["result"] == "NONE"
        assert ctx.view.group("idle-app").offsets[("orders", 0)].offset == 100
        r = await c.post("/api/groups/idle-app/reset", json={**body, "topics": "nope"}, headers={csrf.HEADER: token})
        assert r.status == 400 and "nope" in (await r.json())["error"]
    finally:
        await c.close()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


class Scram:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = {u: {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", p)} for u, p in users.items()}

    def get(self, user: str, mechanism: str) -> Any:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> Any:
        return self._users


@pytest.mark.asyncio
@pytest.mark.parametrize("users", ["plain", "scram"])
async def test_basic_auth_names_the_principal_and_the_acls_decide(users: str) -> None:
    creds = {"alice": "alice-secret", "bob": "bob-secret"}
    ctx = make_ctx(plain_users=creds if users == "plain" else None, scram=Scram(creds) if users == "scram" else None,
                   allowed={"User:alice"})
    c = await client_for(ctx)
    handler = ctx.handlers[ApiKey.OFFSET_COMMIT]
    try:
        token = await form_token(c, "idle-app")
        r = await c.post(path("idle-app", "/reset"), data=reset_form(token, action="execute"))
        assert r.status == 401 and r.headers["WWW-Authenticate"].startswith('Basic realm="groupcoord"')
        r = await c.post(path("idle-app", "/reset"), data=reset_form(token, action="execute"),
                         headers=basic("alice", "wrong"))
        assert r.status == 401 and handler.calls == []
        form = await executable(c, "idle-app", reset_form(token), basic("bob", "bob-secret"))
        r = await c.post(path("idle-app", "/reset"), data=form, headers=basic("bob", "bob-secret"))
        assert r.status == 200 and "GROUP_AUTHORIZATION_FAILED" in await r.text()
        assert handler.calls[-1][0].principal == "User:bob"
        assert ctx.view.group("idle-app").offsets[("orders", 0)].offset == 10
        r = await c.post(path("idle-app", "/reset"), data=form, headers=basic("alice", "alice-secret"))
        assert r.status == 200 and ">NONE<" in await r.text()
        assert handler.calls[-1][0].principal == "User:alice"
        assert ctx.view.group("idle-app").offsets[("orders", 0)].offset == 0
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_bad_reset_input_answers_one_line_and_changes_nothing(client: TestClient) -> None:
    token = await form_token(client, "idle-app")
    cases = {("topics", "orders:x", "to-earliest", ""): "Invalid partition &#x27;x&#x27; specified in topic arg",
             ("topics", "ghost", "to-earliest", ""): "Topic &#x27;ghost&#x27; does not exist",
             ("all-topics", "", "shift-by", ""): "requires an argument",
             ("all-topics", "", "to-offset", "ten"): "is not a number",
             ("all-topics", "", "to-datetime", "2024-01-31"): "It does not contain a &#x27;T&#x27; according to ISO8601",
             ("all-topics", "", "by-duration", "1 day"): "Text cannot be parsed to a Duration",
             ("", "", "to-earliest", ""): "One of the reset scopes should be defined"}
    for (scope, topics, scenario, value), message in cases.items():
        r = await client.post(path("idle-app", "/reset"), data=reset_form(
            token, scope=scope, topics=topics, scenario=scenario, value=value, action="execute"))
        assert r.status == 400 and message in await r.text(), (scope, topics, scenario)
    assert CTX_OF[client].handlers[ApiKey.OFFSET_COMMIT].calls == []


@pytest.mark.asyncio
async def test_datetime_and_duration_scenarios_use_the_offsets_by_timestamp(client: TestClient) -> None:
    token = await form_token(client, "idle-app")
    for scenario, value in [("to-datetime", "2024-01-31T12:00:00.000"), ("by-duration", "PT1H")]:
        r = await client.post(path("idle-app", "/reset"), data=reset_form(token, scenario=scenario, value=value))
        text = await r.text()
        assert r.status == 200 and "<td>10</td><td>50</td>" in text, text


@pytest.mark.asyncio
async def test_execute_commits_only_the_form_just_previewed(client: TestClient) -> None:
    token = await form_token(client, "idle-app")
    handler = CTX_OF[client].handlers[ApiKey.OFFSET_COMMIT]
    r = await client.post(path("idle-app", "/reset"), data=reset_form(token, action="execute"))
    text = await r.text()
    assert r.status == 200 and "Preview (dry run: nothing changed)" in text and handler.calls == []
    form = await executable(client, "idle-app", reset_form(token, scenario="to-offset", value="30"))
    r = await client.post(path("idle-app", "/reset"), data={**form, "value": "31"})
    text = await r.text()
    assert "The form differs from the plan previewed" in text and handler.calls == []
    assert ">31<" in text
    r = await client.post(path("idle-app", "/reset"), data=form)
    assert "Offsets committed" in await r.text() and len(handler.calls) == 1
