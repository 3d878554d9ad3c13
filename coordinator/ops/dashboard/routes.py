"""The dashboard's routes on the ops HTTP listener: pages, ``/api/...`` (JSON of the same rows),
the static assets, and the one mutation — an offset reset — behind its guards.

A POST to ``/groups/{id}/reset`` (or ``/api/groups/{id}/reset``) is served only when all hold, in
this order: ``http.admin.enabled=true`` (else 403), a valid CSRF token (else 403), HTTP Basic
credentials of one of the node's SASL users when it has any (else 401), and the group is Empty or
Dead (else the tool's error, nothing changed). The OffsetCommit handler then applies its ACLs to
that user.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.resources
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from . import csrf, pages
from .basic_auth import REALM, BasicAuth
from .reset import ResetError, execute_plan, make_plan, parse_form
from .rows import cluster_info, group_detail, group_rows, topic_rows, zk_era_errors

__all__ = ["Dashboard", "add_routes", "ASSETS"]

#: Static files shipped as package data (pyproject ``[tool.setuptools.package-data]``), by name.
ASSETS = {"dashboard.css": "text/css", "dashboard.js": "text/javascript", "favicon.svg": "image/svg+xml"}
#: No inline script or style anywhere; only this origin's assets.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _timeline(ctx: Any, group_id: str) -> list[Any]:
    from coordinator.ops.timeline import group_timeline

    return list(await group_timeline(ctx.view, group_id))


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple
        return {k: _jsonable(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.name  # Burrow's status
    return value


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(_jsonable(data)), status=status, content_type="application/json",
                        headers=SECURITY_HEADERS)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8",
                        headers=SECURITY_HEADERS)


class Dashboard:
    def __init__(self, ctx: Any, *, clock: Callable[[], int] = _now_ms,
                 timeline: Callable[[Any, str], Any] = _timeline) -> None:
        self.ctx = ctx
        self.clock = getattr(ctx, "clock_ms", None) or clock
        self.timeline = timeline
        self.csrf = csrf.CsrfTokens()
        self.auth = BasicAuth(getattr(ctx, "plain_users", None), getattr(ctx, "scram_store", None))
        files = importlib.resources.files(__package__) / "static"
        self.assets = {name: (files / name).read_bytes() for name in ASSETS}

    # --- reads -------------------------------------------------------------------------------

    async def groups(self, request: web.Request) -> web.Response:
        return _html(pages.groups_page(group_rows(self.ctx), zk_era_errors(self.ctx)))

    async def group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["id"]
        detail = group_detail(self.ctx, group_id)
        if detail is None:
            return _html(pages.not_found_page(f"Consumer group '{group_id}' does not exist."), 404)
        timeline = self.timeline(self.ctx, group_id)
        if inspect.isawaitable(timeline):
            timeline = await timeline
        return _html(pages.group_page(detail, list(timeline), now_ms=self.clock()))

    async def topics(self, request: web.Request) -> web.Response:
        return _html(pages.topics_page(topic_rows(self.ctx)))

    async def cluster(self, request: web.Request) -> web.Response:
        return _html(pages.cluster_page(cluster_info(self.ctx)))

    async def asset(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=self.assets[name], content_type=ASSETS[name],
                            headers={**SECURITY_HEADERS, "Cache-Control": "max-age=300"})

    async def api_groups(self, request: web.Request) -> web.Response:
        return _json({"groups": group_rows(self.ctx)})

    async def api_group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["id"]
        detail = group_detail(self.ctx, group_id)
        if detail is None:
            return _json({"error": f"Consumer group '{group_id}' does not exist."}, 404)
        timeline = self.timeline(self.ctx, group_id)
        if inspect.isawaitable(timeline):
            timeline = await timeline
        return _json({**_jsonable(detail), "timeline": list(timeline)})

    async def api_topics(self, request: web.Request) -> web.Response:
        return _json({"topics": topic_rows(self.ctx)})

    async def api_cluster(self, request: web.Request) -> web.Response:
        return _json(cluster_info(self.ctx))

    async def api_csrf(self, request: web.Request) -> web.Response:
        """A token for scripts using the JSON API's POST (sent back in the X-CSRF-Token header)."""
        nonce = request.cookies.get(csrf.COOKIE) or self.csrf.new_nonce()
        response = _json({"token": self.csrf.token_for(nonce), "header": csrf.HEADER,
                          "admin_enabled": bool(self.ctx.admin_enabled)})
        self._set_cookie(response, request, nonce)
        return response

    # --- the reset ---------------------------------------------------------------------------

    def _set_cookie(self, response: web.StreamResponse, request: web.Request, nonce: str) -> None:
        if request.cookies.get(csrf.COOKIE) != nonce:
            response.set_cookie(csrf.COOKIE, nonce, httponly=True, samesite="Strict", path="/",
                                secure=request.secure)

    def _state(self, group_id: str) -> str:
        group = self.ctx.view.group(group_id)
        return group.state if group is not None else "Dead"

    async def reset_form(self, request: web.Request) -> web.Response:
        group_id = request.match_info["id"]
        nonce = request.cookies.get(csrf.COOKIE) or self.csrf.new_nonce()
        response = _html(pages.reset_page(group_id, self._state(group_id), admin_enabled=bool(self.ctx.admin_enabled),
                                          token=self.csrf.token_for(nonce)))
        self._set_cookie(response, request, nonce)
        return response

    async def _guard(self, request: web.Request, token: str | None) -> tuple[str | None, web.Response | None]:
        """(principal, None) when the POST may proceed, else (None, the refusal)."""
        as_json = request.path.startswith("/api/")

        def refuse(status: int, text: str, headers: dict[str, str] | None = None) -> web.Response:
            response = _json({"error": text}, status) if as_json else _html(pages.message_page("Refused", text), status)
            response.headers.update(headers or {})
            return response

        if not self.ctx.admin_enabled:
            return None, refuse(403, "Offset reset is disabled on this node: set http.admin.enabled=true to enable it.")
        if not self.csrf.valid(request.cookies.get(csrf.COOKIE), token):
            return None, refuse(403, "Missing or invalid CSRF token: reload the form and submit it again.")
        principal = "User:ANONYMOUS"
        if self.auth.required():
            found = await self.auth.principal(request.headers.get("Authorization"))
            if found is None:
                return None, refuse(401, "Authentication required: the user name and password of a SASL user.",
                                    {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
            principal = found
        return principal, None

    async def _run(self, request: web.Request, group_id: str, raw: dict[str, str], principal: str, execute: bool
                   ) -> tuple[Any, Any, str | None]:
        try:
            form = parse_form(raw)
            plan = await make_plan(self.ctx.view, group_id, form, self.clock())
        except ResetError as exc:
            return None, None, str(exc)
        if execute:
            peer = request.remote or ""
            plan = await execute_plan(self.ctx.handlers, plan, principal=principal, client_host=peer, peer=peer)
        return form, plan, None

    def _preview_mark(self, group_id: str, raw: dict[str, str]) -> str:
        """What a preview hands to its Execute button: the form it planned, signed."""
        fields = json.dumps([group_id] + [raw.get(k, "") for k in ("scope", "topics", "scenario", "value")])
        return self.csrf.sign("preview", fields)

    async def reset_post(self, request: web.Request) -> web.Response:
        group_id = request.match_info["id"]
        posted = await request.post()
        raw = {k: v for k, v in posted.items() if isinstance(v, str)}
        principal, refusal = await self._guard(request, raw.get(csrf.FIELD))
        if refusal is not None:
            return refusal
        assert principal is not None
        mark = self._preview_mark(group_id, raw)
        execute = raw.get("action") == "execute"
        notice = None
        if execute and raw.get("previewed") != mark:
            # Execute commits only the plan just shown: a form changed after its preview (or
            # never previewed) gets a preview first.
            execute = False
            notice = "The form differs from the plan previewed: check this preview, then execute."
        form, plan, error = await self._run(request, group_id, raw, principal, execute)
        nonce = request.cookies.get(csrf.COOKIE) or ""
        return _html(pages.reset_page(group_id, self._state(group_id), admin_enabled=True,
                                      token=self.csrf.token_for(nonce), form=form, raw=raw, plan=plan,
                                      executed=execute and plan is not None, error=error, notice=notice,
                                      previewed=mark if plan is not None and not execute else None),
                     400 if error else 200)

    async def api_reset(self, request: web.Request) -> web.Response:
        group_id = request.match_info["id"]
        principal, refusal = await self._guard(request, request.headers.get(csrf.HEADER))
        if refusal is not None:
            return refusal
        assert principal is not None
        try:
            body = await request.json()
        except ValueError:
            return _json({"error": "The body must be a JSON object."}, 400)
        if not isinstance(body, dict):
            return _json({"error": "The body must be a JSON object."}, 400)
        raw = {k: str(v) for k, v in body.items() if k in ("scope", "topics", "scenario", "value")}
        execute = body.get("execute") is True
        _form, plan, error = await self._run(request, group_id, raw, principal, execute)
        if error:
            return _json({"error": error}, 400)
        return _json({"executed": execute, **_jsonable(plan)})


def add_routes(app: web.Application, ctx: Any) -> Dashboard:
    """Add the dashboard to ``app`` (the ops HTTP listener's application)."""
    d = Dashboard(ctx)
    r = app.router
    r.add_get("/", d.groups)
    r.add_get("/groups/{id}/reset", d.reset_form)
    r.add_post("/groups/{id}/reset", d.reset_post)
    r.add_get("/groups/{id}", d.group)
    r.add_get("/topics", d.topics)
    r.add_get("/cluster", d.cluster)
    r.add_get("/static/{name}", d.asset)
    r.add_get("/api/groups", d.api_groups)
    r.add_post("/api/groups/{id}/reset", d.api_reset)
    r.add_get("/api/groups/{id}", d.api_group)
    r.add_get("/api/topics", d.api_topics)
    r.add_get("/api/cluster", d.api_cluster)
    r.add_get("/api/csrf", d.api_csrf)
    return d
