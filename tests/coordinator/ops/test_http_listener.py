"""The HTTP listener (coordinator/ops/http_listener.py) over stand-ins of the node's view: its
routes, the exposition's content type, readiness, and what it refuses — over raw sockets, so the
bytes on the wire are what is tested. tests/coordinator/ops/test_http_server.py runs it in a node."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from coordinator.ops.http_listener import start_http
from coordinator.ops.metrics import register_metrics

from .fakes import FakeReadiness, make_ctx


async def _exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


def _split(reply: bytes) -> tuple[dict[str, str], str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode().split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers, body.decode()


def test_routes_content_type_and_readiness() -> None:
    readiness = FakeReadiness(reasons=["__consumer_offsets-3 is loading"])
    ctx = make_ctx("http.request.max.bytes=2048", readiness=readiness)
    register_metrics(ctx)

    async def run() -> None:
        listener = await start_http(ctx, "127.0.0.1", 0)
        try:
            reply = await _exchange(listener.port, _get("/metrics"))
            assert _status(reply) == 200
            headers, body = _split(reply)
            assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
            names = {f.name for f in text_string_to_metric_families(body)}
            assert "kafka_server_group_coordinator_metrics_group_count" in names
            assert _status(await _exchange(listener.port, _get("/healthz"))) == 200
            reply = await _exchange(listener.port, _get("/readyz"))
            assert _status(reply) == 503
            assert "__consumer_offsets-3 is loading" in _split(reply)[1]
            readiness.reasons.clear()
            assert _status(await _exchange(listener.port, _get("/readyz"))) == 200
            assert _status(await _exchange(listener.port, _get("/nothing-here"))) == 404
        finally:
            await listener.stop()

    asyncio.run(run())


def test_oversized_and_malformed_requests_are_refused() -> None:
    ctx = make_ctx("http.request.max.bytes=2048")
    register_metrics(ctx)

    async def run() -> None:
        listener = await start_http(ctx, "127.0.0.1", 0)
        try:
            body = b"x" * 4096
            # A body over http.request.max.bytes: 413 on any route, before the handler runs.
            for method in (b"GET", b"POST"):
                reply = await _exchange(listener.port, method + b" /healthz HTTP/1.1\r\nHost: x\r\n"
                                        + f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                assert _status(reply) == 413, reply
            assert _status(await _exchange(listener.port, b"\x00\x01garbage\r\n\r\n")) == 400
            assert _status(await _exchange(listener.port, b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")) == 400
            # Still serving.
            assert _status(await _exchange(listener.port, _get("/healthz"))) == 200
        finally:
            await listener.stop()

    asyncio.run(run())
