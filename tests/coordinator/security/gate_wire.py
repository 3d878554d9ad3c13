"""A minimal server side for tests and the SASL fuzz harness: request frames through a
:class:`SaslGate` the way the server applies it (frame cap, verdict from the header before the body
is parsed, raw tokens after SaslHandshake v0), then to a handler. Not the product's server
(coordinator/server/, edge's): just enough to drive the gate and the SCRAM admin APIs over a socket."""

from __future__ import annotations

import asyncio
import inspect
import socket
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from coordinator.context import RequestContext
from coordinator.security.sasl import SaslGate, Verdict
from protocol.apis import SUPPORTED_VERSIONS, ApiKey, request_class
from protocol.connection import encode_response
from protocol.request_codec import MalformedRequest, body_decoder
from protocol.responses import unsupported_api_versions_response
from protocol.varints import VarintError, read_uvarint

Handlers = Mapping[int, Callable[[RequestContext, Any], Any]]
#: (api key, version) → body decoder: body_decoder compiles one each time it is called.
_DECODERS: dict[tuple[int, int], Callable[[memoryview], Any]] = {}


def handle_frame(gate: SaslGate, handlers: Handlers, frame: bytes) -> tuple[bytes, bool]:
    """One request frame (no size prefix) in; the bytes to send back and whether to close after."""
    if gate.expects_raw_token():
        reply = gate.raw_token(frame)
        out = b"" if reply.raw is None else struct.pack(">i", len(reply.raw)) + reply.raw
        return out, reply.close
    limit = gate.frame_limit()
    if (limit is not None and len(frame) > limit) or len(frame) < 10:
        return b"", True
    api_key, version, correlation_id, id_len = struct.unpack_from(">hhih", frame)
    verdict = gate.check(api_key, version)
    if verdict is Verdict.CLOSE:
        return b"", True
    if verdict is Verdict.SERVE:
        if api_key == ApiKey.API_VERSIONS and version > SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]:
            # KIP-511: the v0 answer, body unread.
            return encode_response(api_key, 0, correlation_id, unsupported_api_versions_response()), False
        if api_key not in handlers:
            return b"", True
        cls = request_class(api_key)
        if not cls.min_version <= version <= cls.max_version:  # what the handler's codec knows
            return b"", True
    pos = 10 + max(id_len, 0)
    cls = request_class(api_key)
    if cls.flexible_version_q(version):
        try:
            count, pos = read_uvarint(memoryview(frame), pos)
            for _ in range(count):
                _, pos = read_uvarint(memoryview(frame), pos)
                size, pos = read_uvarint(memoryview(frame), pos)
                pos += size
        except VarintError as e:
            raise MalformedRequest(str(e)) from None
    decoder = _DECODERS.get((api_key, version))
    if decoder is None:
        decoder = _DECODERS[(api_key, version)] = body_decoder(cls, version)
    request = decoder(memoryview(frame)[pos:])
    if verdict is Verdict.SASL:
        reply = gate.respond(api_key, version, request)
        out = b"" if reply.response is None else encode_response(api_key, version, correlation_id, reply.response)
        return out, reply.close
    ctx = RequestContext(api_key=api_key, api_version=version, correlation_id=correlation_id, client_id=None,
                         peer="test", principal=gate.principal, client_host="127.0.0.1")
    response = handlers[api_key](ctx, request)
    if inspect.iscoroutine(response):
        response = asyncio.run(response)
    return encode_response(api_key, version, correlation_id, response), False


@contextmanager
def serving(new_gate: Callable[[], SaslGate], handlers: Handlers) -> Iterator[int]:
    """A threaded loopback server (one connection at a time); yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # so the loop sees ``stop``
    stop = threading.Event()

    def recv(conn: socket.socket, n: int) -> bytes | None:
        data = bytearray()
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                gate = new_gate()
                while True:
                    head = recv(conn, 4)
                    if head is None:
                        break
                    frame = recv(conn, struct.unpack(">i", head)[0])
                    if frame is None:
                        break
                    out, close = handle_frame(gate, handlers, frame)
                    conn.sendall(out)
                    if close:
                        break

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)
