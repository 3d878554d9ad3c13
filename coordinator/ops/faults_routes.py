"""``/faults`` on the HTTP listener: inject, list and clear test faults (docs/testing.md).

``GET /faults`` → ``{"faults": [...]}``; ``POST /faults`` with a fault's JSON → ``{"id"?, "result"}``;
``DELETE /faults`` → ``{"cleared": n}``; ``DELETE /faults/{id}`` the same for one. Errors are
``{"error": message}`` with the status the engine gives (400, 404, 409). On a node without
``test.faults.enable`` every /faults request answers 404 and says how to turn it on. The engine
lives on this loop, so it is called directly.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ..faults.spec import FAULTS_OFF, FaultError
from .context import OpsContext

__all__ = ["add_fault_routes", "FAULTS_OFF"]

_CTX_KEY: web.AppKey[OpsContext] = web.AppKey("faults_ops_context", OpsContext)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _engine(request: web.Request) -> Any:
    return request.app[_CTX_KEY].faults


async def _list(request: web.Request) -> web.Response:
    engine = _engine(request)
    if engine is None:
        return _error(404, FAULTS_OFF)
    return web.json_response({"faults": engine.list()})


async def _inject(request: web.Request) -> web.Response:
    engine = _engine(request)
    if engine is None:
        return _error(404, FAULTS_OFF)
    try:
        body = json.loads(await request.read() or b"null")
    except ValueError as exc:
        return _error(400, f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _error(400, 'a fault is a JSON object {"fault": NAME, ...}')
    try:
        return web.json_response(await engine.inject(body))
    except FaultError as exc:
        return _error(exc.status, exc.message)


async def _clear(request: web.Request) -> web.Response:
    engine = _engine(request)
    if engine is None:
        return _error(404, FAULTS_OFF)
    try:
        return web.json_response({"cleared": engine.clear(request.match_info.get("fault_id"))})
    except FaultError as exc:
        return _error(exc.status, exc.message)


async def _off(request: web.Request) -> web.Response:
    """Any other method or path under /faults."""
    if _engine(request) is None:
        return _error(404, FAULTS_OFF)
    return _error(405, f"{request.method} {request.path}: use GET/POST/DELETE /faults or DELETE /faults/{{id}}")


def add_fault_routes(app: web.Application, ctx: OpsContext) -> None:
    app[_CTX_KEY] = ctx
    app.router.add_get("/faults", _list)
    app.router.add_post("/faults", _inject)
    app.router.add_delete("/faults", _clear)
    app.router.add_delete("/faults/{fault_id}", _clear)
    app.router.add_route("*", "/faults/{tail:.*}", _off)
