"""An in-process KafkaServer on its own event loop thread, for TLS and SASL edge tests: requests
are answered by ApiVersions and a handler that records each request's context."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Coroutine
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from coordinator.context import RequestContext
from coordinator.server.server import KafkaServer
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.responses import api_version_entries
from tests.wire_client import WireClient

API_VERSIONS_V0 = ApiVersionsRequest(version=0)


class LoopServer:
    """A KafkaServer whose ApiVersions handler records the context of every request it serves."""

    def __init__(self, **server_options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.contexts: list[RequestContext] = []
        self.server = self.call(self._make(server_options))

    async def _make(self, options: dict[str, Any]) -> KafkaServer:
        def api_versions(ctx: RequestContext, _request: object) -> object:
            self.contexts.append(ctx)
            return ApiVersionsResponse(version=ctx.api_version, error_code=ErrorCode.NONE,
                                       api_keys=api_version_entries())

        options.setdefault("max_request_size", 1 << 20)
        options.setdefault("max_connections", 100)
        options.setdefault("idle_timeout_ms", 60000)
        return KafkaServer({ApiKey.API_VERSIONS: api_versions}, **options)

    def call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def bind(self, **options: Any) -> int:
        _host, port = self.call(self.server.bind("127.0.0.1", 0, **options))
        return int(port)

    def start(self) -> None:
        self.call(self.server.start())

    def stop(self) -> None:
        self.call(self.server.shutdown(grace=1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def tls_client(port: int, context: ssl.SSLContext) -> WireClient:
    """A WireClient speaking TLS to 127.0.0.1:``port``."""
    client = WireClient.__new__(WireClient)
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    client.sock = context.wrap_socket(raw, server_hostname="localhost")
    client._next_id = 1
    return client


def api_versions_ok(client: WireClient) -> bool:
    return client.request(ApiKey.API_VERSIONS, 0, API_VERSIONS_V0).error_code == ErrorCode.NONE
