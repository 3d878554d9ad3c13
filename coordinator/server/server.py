"""The asyncio TCP server: the only code that touches sockets.

Each connection feeds a sans-IO :class:`protocol.connection.ServerConnection` and dispatches the
requests it yields to handlers looked up by api key.

Rules:

1. Responses leave strictly in request order per connection. Every request takes a slot in a
   queue when it arrives; a response fills its slot; the queue is flushed from the head only. A
   parked JoinGroup therefore holds back the responses of requests pipelined after it, as Kafka
   clients expect (correlation ids must come back in order).
2. A handler returns a response, an :class:`protocol.responses.EncodedResponse` (a frame it encoded itself, whose
   parts may be file ranges sent with ``sendfile``), ``None`` (no response, e.g. Produce with
   acks=0), :class:`protocol.responses.CloseConnection` (no response, and the connection closed once
   the answers before it are sent: a refused acks=0 Produce), or an awaitable of any of these. A handler that raises is a bug: it is logged with its traceback and the connection
   is closed, because we cannot know what the client would accept instead.
3. A connection with more than ``MAX_IN_FLIGHT`` requests awaiting their response stops being
   read until it drains, so one client cannot make us buffer without bound.
4. Protocol violations close only that connection, with one log line naming the peer and reason.
5. Several listeners (Kafka's ``listeners``) may be bound, each its own asyncio server with its
   name, its TLS context (SSL, SASL_SSL) and its SASL gate factory (SASL_*). Each request's
   context carries the listener's name, the peer's IP and the principal: the gate's on SASL
   listeners, else the TLS client certificate's mapped name, else ``User:ANONYMOUS``.
6. On a SASL listener every request header is shown to the connection's gate before its body is
   parsed (coordinator/server/gate.py); frames are capped by the gate's ``frame_limit()`` until
   authentication completes; a failed authentication is answered after the gate's delay, then
   the connection closes.
7. A TLS handshake must finish within ``tls_handshake_timeout_s``; a peer that stalls it is
   dropped and never counts against ``max.connections``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import cast

from protocol.apis import SUPPORTED_VERSIONS, ApiKey
from protocol.connection import RawFrame, ServerConnection, encode_response
from protocol.events import NEED_DATA, ProtocolViolation, RequestReceived, UnsupportedApiVersions
from protocol.fetch_response import RecordsRef
from protocol.responses import CloseConnection, EncodedResponse, FileRange, unsupported_api_versions_response

from ..context import Handler, RequestContext
from .close_log import CloseLog
from .gate import Gate, GateFactory, GateReplyLike, TlsPrincipal

__all__ = ["KafkaServer", "Handler", "MAX_IN_FLIGHT"]

log = logging.getLogger("groupcoord.server")

#: Requests one connection may have awaiting a response before we stop reading from it. Kafka
#: reads one request at a time per connection; we allow pipelining up to this depth for speed.
MAX_IN_FLIGHT = 256

#: How long a connection being closed may take to send what was queued before it is aborted.
CLOSE_GRACE_SECONDS = 5.0

#: How long a TLS client may take to finish its handshake (asyncio's default is 60 s; Kafka has
#: no own setting and leaves it to connections.max.idle.ms). Short, because a stalled handshake
#: holds a socket and memory while it lasts.
TLS_HANDSHAKE_TIMEOUT_S = 10.0

ANONYMOUS = "User:ANONYMOUS"
#: SaslHandshake's api key: the one request an expired SASL session may still send (KIP-368).
_SASL_HANDSHAKE = 17
_SIZE = struct.Struct(">i")


#: Whether the running loop's transports take ``loop.sendfile`` (asyncio's do; uvloop's raise
#: NotImplementedError): decided on the first file range sent.
_loop_sendfile: bool | None = None
#: Bytes read and written per step when the loop cannot sendfile: bounds the copy in memory.
_COPY_CHUNK = 1 << 20


async def _send_range(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, rng: FileRange) -> int:
    """Send a file range with the kernel's sendfile where the loop offers it, else by reading
    it (``pread``, from the page cache in practice) and writing it to the transport in chunks."""
    global _loop_sendfile
    if _loop_sendfile is not False:
        try:
            sent = await loop.sendfile(transport, rng.file, rng.position, rng.length)
            _loop_sendfile = True
            return sent
        except NotImplementedError:
            if _loop_sendfile:
                raise
            _loop_sendfile = False
    fd = rng.file.fileno()
    sent = 0
    while sent < rng.length:
        chunk = os.pread(fd, min(_COPY_CHUNK, rng.length - sent), rng.position + sent)
        if not chunk:
            break  # the file is shorter than the range: the caller reports the short send
        transport.write(chunk)
        sent += len(chunk)
    return sent


class _Slot:
    __slots__ = ("frame", "done", "api_key", "started")

    def __init__(self, api_key: int = -1) -> None:
        self.frame: bytes | list[bytes | RecordsRef] | None = None
        self.done = False
        #: What was asked (for the shutdown's account of what it still waits for).
        self.api_key = api_key
        #: ``perf_counter()`` when the request was dispatched, while a request observer is set.
        self.started = 0.0


class _Listener:
    """One bound listener: its name, and what its connections are given."""

    __slots__ = ("name", "tls_principal", "gate_factory")

    def __init__(self, name: str, tls_principal: TlsPrincipal | None, gate_factory: GateFactory | None) -> None:
        self.name = name
        self.tls_principal = tls_principal
        self.gate_factory = gate_factory


class _Connection(asyncio.Protocol):
    def __init__(self, server: KafkaServer, listener: _Listener | None = None) -> None:
        self.server = server
        self.conn = ServerConnection(server.max_request_size)
        if server.versions is not SUPPORTED_VERSIONS:
            self.conn.serve_versions(server.versions)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.listener = listener.name if listener is not None else "PLAINTEXT"
        self.client_host = ""
        self.principal = ANONYMOUS
        self._listener = listener
        self.gate: Gate | None = None
        #: The gate's verdict on the request being parsed (set by the admission hook).
        self._verdict = ""
        #: Authentication failed: its answer waits for the delay; nothing more is read.
        self.failing = False
        self.pending: deque[_Slot] = deque()
        self.tasks: set[asyncio.Task[None]] = set()
        self.paused = False
        self.closed = False
        self.sending_file = False
        #: A flush is scheduled for the end of this loop iteration: responses completed by one
        #: event (a group-commit round makes many durable at once) go out in one write.
        self.flush_scheduled = False
        self.last_activity = time.monotonic()
        #: The client id of the last request (a header field, per request): what
        #: ``KafkaServer.drop_connections`` picks connections by.
        self.client_id: str | None = None

    # --- asyncio callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's transports: asyncio.Transport's methods, whether asyncio's or uvloop's
        # (which are not its subclasses). Once per connection, so the cast costs nothing that counts.
        stream = self.transport = cast(asyncio.Transport, transport)
        info = transport.get_extra_info("peername")
        if isinstance(info, tuple) and len(info) >= 2:
            host, port = info[0], info[1]
            self.peer = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
            self.client_host = str(host)
        if len(self.server.connections) >= self.server.max_connections or self.server.stopping:
            reason = "server is shutting down" if self.server.stopping else \
                f"max.connections ({self.server.max_connections}) reached"
            log.warning("refusing connection", extra={"peer": self.peer, "reason": reason})
            self.closed = True
            stream.abort()
            return
        self.server.connections.add(self)
        log.debug("connection opened", extra={"peer": self.peer, "listener": self.listener})
        listener = self._listener
        if listener is not None:
            if listener.tls_principal is not None:
                sslobj = transport.get_extra_info("ssl_object")
                der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
                try:
                    self.principal = listener.tls_principal(der)
                except ValueError as exc:
                    self.close(f"TLS client refused: {exc}")
                    return
            if listener.gate_factory is not None:
                self.gate = listener.gate_factory()
                self.conn.admit = self._admit
                self.conn.frame_limit = self.gate.frame_limit()

    def eof_received(self) -> bool | None:
        if self.conn.buffered and not self.closed:
            self.close(f"peer closed the connection in the middle of a request "
                       f"({self.conn.buffered} bytes of an incomplete frame)")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for task in self.tasks:
            task.cancel()
        log.debug("connection closed", extra={"peer": self.peer})

    def data_received(self, data: bytes) -> None:
        if self.closed or self.failing:
            return
        self.last_activity = time.monotonic()
        self.conn.receive_data(data)
        gate = self.gate
        while not self.closed and not self.failing:
            if gate is not None:
                self.conn.frame_limit = gate.frame_limit()
                self.conn.raw_next = gate.expects_raw_token()
            event = self.conn.next_event()
            if event is NEED_DATA:
                break
            if isinstance(event, RequestReceived):
                if gate is not None and self._verdict == "SASL":
                    self._gate_request(gate, event)
                else:
                    self._dispatch(event)
            elif isinstance(event, RawFrame) and gate is not None:
                try:
                    reply = gate.raw_token(event.data)
                except Exception:
                    log.exception("SASL gate failed", extra={"peer": self.peer})
                    self.close("internal error in the SASL gate")
                    return
                self._answer_gate(-1, 0, 0, reply)
            elif isinstance(event, UnsupportedApiVersions):
                slot = _Slot()
                slot.frame = encode_response(ApiKey.API_VERSIONS, 0, event.correlation_id,
                                             unsupported_api_versions_response(self.conn.versions))
                slot.done = True
                self.pending.append(slot)
            elif isinstance(event, ProtocolViolation):
                # Requests before the bad frame were fine: answer them (those already done), as
                # Kafka, which handles one request at a time, would have before reading further.
                self._flush()
                self.close(event.reason)
                return
        self._flush()
        if len(self.pending) >= MAX_IN_FLIGHT and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    # --- SASL ---------------------------------------------------------------------------------

    def _admit(self, api_key: int, api_version: int) -> str | None:
        """The gate's verdict on a request header, before the body is parsed (Kafka's
        SaslServerAuthenticator reads only the header of a pre-authentication request)."""
        gate = self.gate
        assert gate is not None
        if api_key != _SASL_HANDSHAKE and gate.session_expired():
            return "SASL session expired (connections.max.reauth.ms); re-authentication required"
        verdict = gate.check(api_key, api_version)
        name = getattr(verdict, "name", str(verdict))
        if name == "CLOSE":
            return gate.reason or "request refused before SASL authentication"
        self._verdict = name
        return None

    def _gate_request(self, gate: Gate, event: RequestReceived) -> None:
        try:
            reply = gate.respond(event.api_key, event.api_version, event.request)
        except Exception:  # a bug, as a handler's: logged, and this connection closed
            log.exception("SASL gate failed", extra={"api": ApiKey(event.api_key).name, "peer": self.peer})
            self.close("internal error in the SASL gate")
            return
        self._answer_gate(event.api_key, event.api_version, event.correlation_id, reply)

    def _answer_gate(self, api_key: int, api_version: int, correlation_id: int, reply: GateReplyLike) -> None:
        slot = _Slot(api_key)
        self.pending.append(slot)
        if reply.raw is not None:
            slot.frame = _SIZE.pack(len(reply.raw)) + reply.raw
        elif reply.response is not None and api_key >= 0:  # a raw token is answered raw or not at all
            slot.frame = encode_response(api_key, api_version, correlation_id, reply.response)
        if not reply.close:
            slot.done = True
            return
        # A failed authentication: read nothing more; the answer leaves after the delay
        # (connection.failed.authentication.delay.ms), then the connection closes (Kafka's
        # Selector.DelayedAuthenticationFailureClose).
        reason = self.gate.reason if self.gate is not None and self.gate.reason else "SASL authentication failed"
        if self.transport is not None:
            self.transport.pause_reading()
        self.paused = True
        self.failing = True

        def send_and_close() -> None:
            if self.closed:
                return
            slot.done = True
            self._flush()
            self.close(reason)

        if reply.delay_s > 0:
            asyncio.get_running_loop().call_later(reply.delay_s, send_and_close)
        else:
            send_and_close()

    # --- requests -------------------------------------------------------------------------------

    def _dispatch(self, event: RequestReceived) -> None:
        slot = _Slot(event.api_key)
        self.client_id = event.client_id
        if self.server.request_observer is not None:
            slot.started = time.perf_counter()
        self.pending.append(slot)
        handler = self.server.handlers.get(event.api_key)
        ctx = RequestContext(event.api_key, event.api_version, event.correlation_id, event.client_id, self.peer,
                             self.gate.principal if self.gate is not None else self.principal, self.client_host,
                             self.listener)
        if handler is None:  # the api table and the handlers disagree: a bug, not the client's fault
            log.error("no handler for a supported api", extra={"api_key": event.api_key, "peer": self.peer})
            self.close("internal error: no handler")
            return
        try:
            result = handler(ctx, event.request)
        except Exception:
            log.exception("handler failed", extra={"api": ApiKey(event.api_key).name, "peer": self.peer})
            self.close("internal error in handler")
            return
        if isinstance(result, asyncio.Future):
            # The hot handlers (commits, fetches, heartbeats) answer with a future: no task.
            result.add_done_callback(lambda fut: self._on_future(ctx, slot, fut))
        elif inspect.isawaitable(result):
            task = asyncio.ensure_future(self._await(ctx, slot, result))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        else:
            self._fill(ctx, slot, result)

    async def _await(self, ctx: RequestContext, slot: _Slot, result: Awaitable[object]) -> None:
        try:
            response = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handler failed", extra={"api": ApiKey(ctx.api_key).name, "peer": self.peer})
            self.close("internal error in handler")
            return
        if not self.closed:
            self._fill(ctx, slot, response)
            self._schedule_flush()

    def _on_future(self, ctx: RequestContext, slot: _Slot, fut: asyncio.Future[object]) -> None:
        if self.closed or fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.error("handler failed", exc_info=exc, extra={"api": ApiKey(ctx.api_key).name, "peer": self.peer})
            self.close("internal error in handler")
            return
        self._fill(ctx, slot, fut.result())
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self.flush_scheduled = False
        self._flush()

    def _fill(self, ctx: RequestContext, slot: _Slot, response: object) -> None:
        observer = self.server.request_observer
        if observer is not None:
            observer(ctx.api_key, time.perf_counter() - slot.started)
        if isinstance(response, EncodedResponse):
            if all(isinstance(p, bytes) or isinstance(p.source, bytes) for p in response.parts):
                # Every source is bytes (checked just above); mypy cannot narrow through ``all``, and
                # a cast per part would cost the fetch path a call.
                slot.frame = b"".join(p if isinstance(p, bytes) else p.source  # type: ignore[misc]
                                      for p in response.parts)
            else:
                slot.frame = response.parts
        elif isinstance(response, CloseConnection):
            slot.done = True
            self._flush()
            self.close(response.reason)
            return
        elif response is not None:
            try:
                slot.frame = encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)
            except Exception:
                log.exception("response encoding failed", extra={"api": ApiKey(ctx.api_key).name, "peer": self.peer})
                self.close("internal error encoding the response")
                return
        slot.done = True

    def _flush(self) -> None:
        pending = self.pending
        transport = self.transport
        if transport is None or self.closed or self.sending_file:
            return
        frames: list[bytes] = []
        while pending and pending[0].done:
            frame = pending[0].frame
            if isinstance(frame, list):
                # File ranges go out with sendfile, which needs the transport to itself: write what
                # is queued before, send the parts in a task, and resume flushing after it.
                if frames:
                    transport.write(b"".join(frames))
                    frames = []
                pending.popleft()
                self.sending_file = True
                task = asyncio.ensure_future(self._send_parts(frame))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                return
            pending.popleft()
            if frame:
                frames.append(frame)
        if frames:
            transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
            self.last_activity = time.monotonic()
        if self.paused and len(pending) < MAX_IN_FLIGHT // 2 and not self.server.stopping:
            self.paused = False
            transport.resume_reading()

    async def _send_parts(self, parts: list[bytes | RecordsRef]) -> None:
        loop = asyncio.get_running_loop()
        transport = self.transport
        assert transport is not None
        try:
            for part in parts:
                if self.closed:
                    break
                if isinstance(part, bytes):
                    transport.write(part)
                elif isinstance(part.source, bytes):
                    transport.write(part.source)
                else:
                    rng = part.source
                    sent = await _send_range(loop, transport, rng)
                    if sent != rng.length:
                        raise OSError(f"sendfile sent {sent} of {rng.length} bytes")
        except (OSError, RuntimeError) as exc:
            if not self.closed:
                self.close(f"sending a file range failed: {exc}")
        finally:
            for part in parts:
                if isinstance(part, RecordsRef) and isinstance(part.source, FileRange) and part.source.release:
                    part.source.release()
            self.sending_file = False
        self.last_activity = time.monotonic()
        self._flush()

    def stop_reading(self) -> None:
        """Shutdown: answer the requests already read, read no more. A client that keeps a request
        in flight at all times (a producer stream) would otherwise hold the shutdown open until
        its grace ran out, and go on writing to the log after the snapshots were taken. A paused
        transport delivers no more data, so ``data_received`` needs no check of its own."""
        if not self.paused and not self.closed and self.transport is not None:
            self.transport.pause_reading()
        self.paused = True

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.server.close_log.closing(self.peer, reason)
        self.closed = True
        self.server.connections.discard(self)
        transport = self.transport
        if transport is not None:
            # close() sends what is already queued first; a peer that never reads cannot hold the
            # socket open for long, though: abort after a short grace.
            transport.close()
            asyncio.get_running_loop().call_later(CLOSE_GRACE_SECONDS, transport.abort)

    @property
    def idle(self) -> bool:
        return not self.pending and not self.sending_file


class KafkaServer:
    """Accepts connections and serves them with ``handlers`` until :meth:`shutdown`."""

    def __init__(self, handlers: dict[ApiKey, Handler], *, max_request_size: int, max_connections: int,
                 idle_timeout_ms: int, tls_handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S) -> None:
        self.handlers: dict[int, Handler] = {}
        self.set_handlers(handlers)
        #: The API versions this server admits (protocol/apis.py): ``ZOOKEEPER_MODE_VERSIONS`` on a cluster node.
        self.versions: dict[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS
        self.close_log = CloseLog(log)
        self.max_request_size = max_request_size
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout_ms / 1000.0
        self.connections: set[_Connection] = set()
        self.stopping = False
        self.tls_handshake_timeout_s = tls_handshake_timeout_s
        self._servers: list[asyncio.base_events.Server] = []
        self._reaper: asyncio.Task[None] | None = None
        #: Called once per answered request with its api key and the seconds from dispatch to
        #: the response being ready (the ops wing's histogram; app.py sets it, the server imports
        #: nothing of it). None: no timing at all.
        self.request_observer: Callable[[int, float], None] | None = None

    async def bind(self, host: str, port: int, *, listener: str = "PLAINTEXT", ssl: ssl.SSLContext | None = None,
                   tls_principal: TlsPrincipal | None = None, gate_factory: GateFactory | None = None,
                   ) -> tuple[str, int]:
        """Listen on ``host:port`` as listener ``listener`` (call once per listener): over TLS with
        ``ssl``, the client certificate mapped by ``tls_principal``, each connection behind a gate
        from ``gate_factory``. Returns the bound address (port 0 picks a free one)."""
        loop = asyncio.get_running_loop()
        spec = _Listener(listener, tls_principal if ssl is not None else None, gate_factory)
        server = await loop.create_server(lambda: _Connection(self, spec), host or None, port,
                                          reuse_address=True, start_serving=False, backlog=1024, ssl=ssl,
                                          ssl_handshake_timeout=self.tls_handshake_timeout_s if ssl else None)
        self._servers.append(server)
        sock = server.sockets[0].getsockname()
        return str(sock[0]), int(sock[1])

    async def start(self) -> None:
        assert self._servers, "bind() first"
        for server in self._servers:
            await server.start_serving()
        if self._reaper is None:
            self._reaper = asyncio.ensure_future(self._reap_idle())

    async def _reap_idle(self) -> None:
        # connections.max.idle.ms: a connection that has sent nothing and awaits nothing for that
        # long is closed. Checking ten times per timeout bounds the overshoot at 10%.
        interval = max(0.1, min(self.idle_timeout / 10, 30.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.idle and now - conn.last_activity > self.idle_timeout:
                    conn.close(f"idle for more than {int(self.idle_timeout * 1000)} ms (connections.max.idle.ms)")


    def set_handlers(self, handlers: dict[ApiKey, Handler]) -> None:
        """Serve with ``handlers`` from now on. Keyed by plain int: a request carries its api key
        as an int, looked up once per request."""
        self.handlers = {int(k): h for k, h in handlers.items()}

    def drop_connections(self, client_id: str | None = None) -> int:
        """Abort the client connections (all, or those whose last request carried ``client_id``):
        reset at once, nothing more sent, as a network failure would (the ``drop-connections``
        test fault, docs/testing.md). Returns how many were dropped."""
        dropped = 0
        for conn in list(self.connections):
            if client_id is not None and conn.client_id != client_id:
                continue
            self.close_log.closing(conn.peer, "dropped by a test fault (drop-connections)")
            conn.closed = True
            self.connections.discard(conn)
            if conn.transport is not None:
                conn.transport.abort()
            dropped += 1
        return dropped

    def stop_accepting(self) -> None:
        """Take no new connections and no new requests; those in flight are still answered."""
        self.stopping = True
        for server in self._servers:
            server.close()
        for conn in self.connections:
            conn.stop_reading()

    async def shutdown(self, grace: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish (up to ``grace`` seconds), close all."""
        self.stop_accepting()
        if self._reaper is not None:
            self._reaper.cancel()
        deadline = time.monotonic() + grace
        told: float | None = time.monotonic() + 1.0
        while any(not c.idle for c in self.connections) and time.monotonic() < deadline:
            if told is not None and time.monotonic() >= told:
                told = None  # once: name what a slow shutdown waits for
                busy = {c.peer: sorted({ApiKey(s.api_key).name for s in c.pending if not s.done and s.api_key >= 0})
                        for c in self.connections if not c.idle}
                log.info("shutdown waits for requests in flight", extra={"connections": busy})
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()
        self.connections.clear()
        for server in self._servers:
            await server.wait_closed()

    def abort(self) -> None:
        """Stop as a crash would: the listening sockets close, every connection is reset (its
        requests in flight get no answer), the idle reaper stops."""
        self.stop_accepting()
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self.connections):
            conn.closed = True
            if conn.transport is not None:
                conn.transport.abort()
        self.connections.clear()
