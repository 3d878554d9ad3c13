"""One loader process: ``connections`` connections to one server, each either keeping ``depth``
requests in flight (closed loop, pipelined; Kafka answers in order per connection) or fed on a
fixed schedule (open loop, ``rate`` requests/s for the process) to measure latency at a given rate.

The requests are pre-encoded frames; each send patches in a fresh correlation id, and each
response is matched to its request (correlation id checked) and checked for errors: an answer's
bytes (after the correlation id) are decoded with the schema codec the first time they are seen
and the error codes remembered, so every response is checked at the cost of a dict lookup.
Latency is send → response, with one clock reading per read/write batch.

Paced mode is open loop: requests go out on schedule whether or not earlier ones were answered,
so a server stall shows up in the latencies instead of slowing the loader down.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .messages import response_errors
from .stats import Result

_SIZE_CID = struct.Struct(">ii")
_CID = struct.Struct(">i")


@dataclass
class Spec:
    host: str
    port: int
    api: int
    version: int
    frames: list[bytes]  # distinct requests this process sends, spread over its connections
    items_per_request: int = 1
    connections: int = 8
    depth: int = 8  # closed loop: requests in flight per connection
    rate: float = 0.0  # open loop: requests/s for this process (0 = closed loop)
    start_at: float = 0.0  # wall clock (time.time()) at which the warm-up starts
    warmup: float = 1.0
    seconds: float = 5.0
    drain_timeout: float = 30.0
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Checker:
    """Per-process response check. Responses are keyed by their bytes after the correlation id:
    the first time a given answer is seen it is decoded with the schema codec and its error codes
    remembered, so every later identical answer costs one dict lookup (equal requests get equal
    answers: an OffsetCommit answer carries no group id, so one decode serves every group)."""

    LIMIT = 200_000

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.known: dict[bytes, list[int]] = {}

    def errors(self, key: bytes) -> list[int]:
        """Error codes of a response whose bytes after the correlation id are ``key``."""
        codes = response_errors(self.spec.api, self.spec.version, b"\x00\x00\x00\x00" + key)
        if len(self.known) < self.LIMIT:
            self.known[key] = codes
        return codes


class _Conn(asyncio.Protocol):
    def __init__(self, loader: _Loader, frames: list[tuple[int, bytes]]) -> None:
        self.loader = loader
        self.frames = frames  # (frame index, frame)
        self.next = 0
        self.cid = 0
        self.inflight: deque[tuple[float, int, int]] = deque()  # (send time, frame index, cid)
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self.sending = True
        self.drained = asyncio.get_running_loop().create_future()

    # -- sending

    def take(self, now: float) -> bytes:
        index, frame = self.frames[self.next]
        self.next += 1
        if self.next == len(self.frames):
            self.next = 0
        self.cid += 1
        self.inflight.append((now, index, self.cid))
        return frame[:8] + _CID.pack(self.cid) + frame[12:]

    def send(self, n: int) -> None:
        if n <= 0 or self.transport is None:
            return
        now = time.perf_counter()
        if n == 1:
            self.transport.write(self.take(now))
        else:
            self.transport.write(b"".join([self.take(now) for _ in range(n)]))
        self.loader.result.sent += n

    # -- protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        now = time.perf_counter()
        loader = self.loader
        result = loader.result
        known = loader.checker.known
        start, end = loader.start, loader.end
        lat = result.latencies_us
        pos = 0
        avail = len(buf)
        answered = 0
        while avail - pos >= 8:
            size, cid = _SIZE_CID.unpack_from(buf, pos)
            if avail - pos - 4 < size:
                break
            sent_at, index, want = self.inflight.popleft()
            key = bytes(buf[pos + 8:pos + 4 + size])
            pos += 4 + size
            answered += 1
            if cid != want:
                result.failures.append(f"correlation id {cid} answered, {want} expected")
                self.transport.close()  # type: ignore[union-attr]
                return
            codes = known.get(key)
            if codes is None:
                codes = loader.checker.errors(key)
            result.total_responses += 1
            if start <= sent_at < end:
                result.requests += 1
                lat.append(int((now - sent_at) * 1e6))
                if codes:
                    result.errors += len(codes)
                    result.error_responses += 1
                    for c in codes:
                        result.error_kinds[c] = result.error_kinds.get(c, 0) + 1
        if pos:
            del buf[:pos]
        if answered and self.sending and loader.closed_loop:
            if now < end:
                self.send(answered)
            else:
                self.sending = False
        if not self.sending and not self.inflight and not self.drained.done():
            self.drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.inflight and (self.sending or self.inflight):
            self.loader.result.failures.append(
                f"connection lost with {len(self.inflight)} requests in flight: {exc!r}")
        if not self.drained.done():
            self.drained.set_result(None)
        if not self.closed.done():
            self.closed.set_result(None)


class _Loader:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.result = Result()
        self.checker = _Checker(spec)
        self.closed_loop = spec.rate <= 0
        self.start = float("inf")
        self.end = float("inf")

    async def run(self) -> Result:
        spec = self.spec
        loop = asyncio.get_running_loop()
        indexed = list(enumerate(spec.frames))
        conns: list[_Conn] = []
        for c in range(spec.connections):
            share = indexed[c::spec.connections] or indexed[c % len(indexed):c % len(indexed) + 1]
            _t, conn = await loop.create_connection(lambda share=share: _Conn(self, share), spec.host, spec.port)
            conns.append(conn)
        # Shared wall-clock start across processes; perf_counter for all timing after it.
        delay = spec.start_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        t0 = time.perf_counter()
        self.start = t0 + spec.warmup
        self.end = self.start + spec.seconds
        cpu_start: float | None = None
        if self.closed_loop:
            for conn in conns:
                conn.send(spec.depth)
            await asyncio.sleep(max(0.0, self.start - time.perf_counter()))
            cpu_start = time.process_time()
            await asyncio.sleep(max(0.0, self.end - time.perf_counter()))
            cpu_end = time.process_time()
        else:
            issued = 0
            n = len(conns)
            late = 0.0
            while True:
                now = time.perf_counter()
                if cpu_start is None and now >= self.start:
                    cpu_start = time.process_time()
                if now >= self.end:
                    break
                due = int((now - t0) * spec.rate) - issued
                if due > 0:
                    late = max(late, now - (t0 + (issued + 1) / spec.rate)) if now >= self.start else late
                    counts = [0] * n
                    for k in range(due):
                        counts[(issued + k) % n] += 1
                    issued += due
                    for conn, k in zip(conns, counts, strict=True):
                        conn.send(k)
                # Sleep until the next request is due, at least 1 ms: uvloop's timers have 1 ms
                # resolution and a shorter sleep would spin.
                await asyncio.sleep(max(0.001, t0 + (issued + 1) / spec.rate - time.perf_counter()))
            cpu_end = time.process_time()
            self.result.late_ms = late * 1000
        for conn in conns:
            conn.sending = False
            if not conn.inflight and not conn.drained.done():
                conn.drained.set_result(None)
        try:
            await asyncio.wait_for(asyncio.gather(*[c.drained for c in conns]), spec.drain_timeout)
        except TimeoutError:
            left = sum(len(c.inflight) for c in conns)
            self.result.failures.append(f"{left} requests unanswered {spec.drain_timeout} s after the window")
        for conn in conns:
            if conn.transport is not None:
                conn.transport.close()
        self.result.loader_cpu_s = cpu_end - (cpu_start or cpu_end)
        self.result.window_s = spec.seconds
        self.result.items = self.result.requests * spec.items_per_request
        return self.result


def run_process(spec: Spec) -> Result:
    """Run one loader process's share (the body of each worker process)."""
    try:
        import uvloop  # type: ignore[import-not-found]
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(_Loader(spec).run())
