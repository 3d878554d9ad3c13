"""The node's HTTP listener: ``/metrics`` (Prometheus), ``/healthz``, ``/readyz``, ``/faults``
(test faults, ops/faults_routes.py), and the dashboard's routes when ``coordinator.ops.dashboard`` provides them.

It runs on the server's own event loop (aiohttp's ``AppRunner`` + ``TCPSite``): every handler
reads the node's state between two Kafka requests, so nothing is locked and nothing is copied
across threads. aiohttp's parser refuses what is not HTTP (400) and bodies over
``http.request.max.bytes`` (413, ``client_max_size``); a bad HTTP request never reaches the Kafka
listeners.

Health follows the Kubernetes conventions (docs/metrics.md): ``/healthz`` answers 200 while the
process serves (liveness: a hung loop answers nothing); ``/readyz`` answers 200 once every
coordinator partition this node leads is loaded (and, in a cluster, the ZooKeeper session is
connected), 503 with the reasons one per line before.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from .context import OpsContext
from .faults_routes import add_fault_routes
from .metrics import NamedFamilies

__all__ = ["HttpListener", "HttpListenError", "start_http", "build_app", "METRICS_CONTENT_TYPE"]

log = logging.getLogger("groupcoord.http")

#: Prometheus' text format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats),
#: what every Prometheus version scrapes; prometheus-client's own default is now 1.0.0.
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

CTX_KEY: web.AppKey[OpsContext] = web.AppKey("ops_context", OpsContext)


class HttpListenError(OSError):
    """``http.listen`` could not be bound; ``listen_address`` names it for the CLI's message."""

    def __init__(self, errno: int | None, strerror: str | None, listen_address: str) -> None:
        super().__init__(errno, strerror)
        self.listen_address = listen_address


class HttpListener:
    """A started listener: ``port`` is the bound one (``http.listen`` may ask for port 0)."""

    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self._runner = runner
        self.host = host
        self.port = port

    async def stop(self) -> None:
        await self._runner.cleanup()


async def _metrics(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CTX_KEY]
    # ``name[]`` (repeatable) keeps only the named families: the filter of prometheus-client's
    # own exposition, and kafka-lag-exporter's README health check
    # (``/metrics?name[]=kafka_consumergroup_poll_time_ms``, https://github.com/seglo/kafka-lag-exporter).
    names = request.query.getall("name[]", None)
    if ctx.metrics is not None:
        parts = await ctx.metrics.render_parts(frozenset(names) if names is not None else None)
    elif names is not None:
        parts = [generate_latest(NamedFamilies(ctx.registry, frozenset(names)))]
    else:
        parts = [generate_latest(ctx.registry)]
    # aiohttp's ``content_type`` takes no parameters; the header is set whole. The parts are
    # written in turn with the whole length declared: joining them first would copy the lag text
    # (tens of MB with many groups) once more per scrape.
    response = web.StreamResponse(headers={"Content-Type": METRICS_CONTENT_TYPE})
    response.content_length = sum(len(part) for part in parts)
    await response.prepare(request)
    for part in parts:
        # In slices of a memoryview, each written once the socket took the one before: a single
        # write of the whole part would copy what the socket cannot take at once into the
        # transport's buffer.
        view = memoryview(part)
        for start in range(0, len(view), _WRITE_SLICE):
            await response.write(view[start:start + _WRITE_SLICE])
    await response.write_eof()
    return response


#: How much of /metrics' body is handed to the transport at once.
_WRITE_SLICE = 1 << 20


async def _healthz(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    if not ctx.readiness.live():
        return web.Response(status=503, text="not live\n")
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    ctx = request.app[CTX_KEY]
    ready, reasons = ctx.readiness.ready()
    if ready:
        return web.Response(text="ready\n")
    return web.Response(status=503, text="".join(f"{reason}\n" for reason in reasons) or "not ready\n")


def _refuse_oversized(limit: int) -> Any:
    """aiohttp enforces ``client_max_size`` only when a handler reads the body; this refuses a
    declared ``Content-Length`` over the limit on every route, before any handler runs (a chunked
    body is still cut at the limit by aiohttp when read)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        length = request.content_length
        if length is not None and length > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=length)
        response: web.StreamResponse = await handler(request)
        return response

    return middleware


def build_app(ctx: OpsContext) -> web.Application:
    """The aiohttp application: the ops routes, then the dashboard's if its package has them."""
    limit = int(ctx.config["http.request.max.bytes"])
    app = web.Application(client_max_size=limit, middlewares=[_refuse_oversized(limit)])
    app[CTX_KEY] = ctx
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    add_fault_routes(app, ctx)
    try:
        dashboard = importlib.import_module("coordinator.ops.dashboard")
    except ModuleNotFoundError as exc:
        if exc.name != "coordinator.ops.dashboard":
            raise  # the dashboard is there but broken: say so rather than serve without it
        dashboard = None
    add_routes = getattr(dashboard, "add_routes", None)
    if add_routes is not None:
        add_routes(app, ctx)
    return app


async def start_http(ctx: OpsContext, host: str, port: int) -> HttpListener:
    """Serve ``ctx`` on ``host:port`` in the running loop; returns once bound."""
    runner = web.AppRunner(build_app(ctx), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host or None, port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise HttpListenError(exc.errno, exc.strerror or str(exc), f"{host}:{port} (http.listen)") from exc
    except BaseException:
        await runner.cleanup()
        raise
    # Port 0 binds a free port: the runner knows which.
    bound_port = int(runner.addresses[0][1]) if runner.addresses else port
    log.info("http listening", extra={"http_listen": f"{host}:{bound_port}"})
    return HttpListener(runner, host, bound_port)
