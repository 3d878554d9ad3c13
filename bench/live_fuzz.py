"""Live-server fuzzer (issue 22, deliverable 2).

Kept in one file (~1300 lines): a benchmark is one command, and its workloads share one harness
(servers, load, result table) that no other module uses.

A real ``groupcoord serve`` process on a free loopback port takes fuzzed frames on N connections
while stock clients (confluent-kafka) keep producing with acks=all, consuming in a two-member
group and committing. Three kinds of fuzzed frames are mixed:

a. a real client frame (``tests/protocol/golden/client_request_frames.jsonl``) mutated: bit flips,
   byte inserts and deletes, splices with another frame, truncation; the size prefix is fixed up
   so the server reads the frame whole;
b. a valid size prefix and a valid request header (an advertised api key and version, a real
   client id) with a fuzzed body: a body generated at random from the API's schema (random values,
   nulls, odd lengths), random bytes, or another frame's body;
c. a valid body (a recorded frame) whose length fields are fuzzed: inner string, bytes and array
   lengths found by walking the body with the API's schema, and the size prefix itself.

Each connection keeps at most ``WINDOW`` frames unanswered; when the server closes it, it
reconnects; one that has had no answer for ``STALL_S`` (a parked JoinGroup, a produce with acks=0)
is dropped by us and reopened. Whatever the server answers is read and discarded.

Meanwhile a probe opens a fresh connection every second and sends ApiVersions, which must be
answered within a bound, and the server's RSS is sampled. At the end the run checks (and prints):
the server is alive and answered every probe; RSS bounded; every acknowledged record reads back
with the same value at the same offset; every acknowledged commit is fetched back; the clients'
error counts; the server log has no "handler failed"/Traceback/ERROR line, and its
"closing connection" lines are rate-limited (5 a second per host, then a summary line).

    .venv/bin/python bench/live_fuzz.py --frames 1000000 --connections 16 [--seed S] [--data-dir D]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import multiprocessing as mp
import os
import random
import re
import selectors
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from protocol.varints import encode_uvarint, read_uvarint  # noqa: E402  (after the path set-up above)

GOLDEN = REPO / "tests" / "protocol" / "golden" / "client_request_frames.jsonl"

#: Frames a fuzzing connection may have unanswered at once. 1: each frame is sent when the one
#: before was answered, so every frame counted was read by the server (frames pipelined behind
#: one that makes the server close the connection would never be read).
WINDOW = 1
#: A connection with unanswered frames and nothing received for this long is dropped by us.
STALL_S = 1.0
#: RSS growth allowed after warm-up (see ``check``): the server keeps no per-frame state; what
#: it may grow by is per-connection buffers (≤ 16 connections × 4 small frames), groups and
#: topics the fuzzed frames create (names from the fuzzer: a few thousand small objects), and
#: the clients' own data (~100 bytes a record in the index and page cache is not RSS). 200 MB is
#: more than ten times what that accounts for and far below what a leak per frame would reach
#: over a million frames (200 bytes a frame).
RSS_GROWTH_BOUND = 200 * 1024 * 1024

# ---------------------------------------------------------------------------------------------
# Wire helpers
# ---------------------------------------------------------------------------------------------


def uvarint(n: int) -> bytes:
    """``n`` as an unsigned varint, cut to 32 bits as Kafka's readers take them."""
    return encode_uvarint(n & 0xFFFFFFFF)


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    if client_id is None:
        cid = struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        cid = struct.pack(">h", len(raw)) + raw
    return struct.pack(">hhi", api_key, version, correlation_id) + cid + (b"\x00" if flexible else b"")


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


# ---------------------------------------------------------------------------------------------
# The recorded frames and a walk of their bodies by schema
# ---------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    api_key: int
    version: int
    client_id: str
    payload: bytes  # header + body, no size prefix
    body_pos: int  # where the body starts in payload
    #: (position in payload, kind, value) of every length field in the body: kind is "i16",
    #: "i32" or "uvarint" (a compact length, n+1; 0 is null)
    lengths: list[tuple[int, str, int]] = field(default_factory=list)


_FIXED = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8, "uuid": 16}


class _Walker:
    """Walks a request body by the kafka-python schema, noting where each length field is."""

    def __init__(self, data: bytes, version: int, flexible: bool) -> None:
        self.data = data
        self.version = version
        self.flexible = flexible
        self.lengths: list[tuple[int, str, int]] = []

    def _length(self, pos: int, wide: bool) -> tuple[int, int]:
        """A string/bytes/array length at ``pos``: (count, -1 for null; new position)."""
        if self.flexible:
            n, end = read_uvarint(self.data, pos)
            self.lengths.append((pos, "uvarint", n))
            return n - 1, end
        fmt, kind = (">i", "i32") if wide else (">h", "i16")
        (n,) = struct.unpack_from(fmt, self.data, pos)
        self.lengths.append((pos, kind, n))
        return n, pos + struct.calcsize(fmt)

    def _tagged(self, pos: int) -> int:
        count, pos = read_uvarint(self.data, pos)
        for _ in range(count):
            _, pos = read_uvarint(self.data, pos)
            size_pos = pos
            size, pos = read_uvarint(self.data, pos)
            self.lengths.append((size_pos, "uvarint-raw", size))
            pos += size
        return pos

    def struct(self, fields: list[Any], pos: int) -> int:
        for f in fields:
            pos = self.field(f, pos)
        if self.flexible:
            pos = self._tagged(pos)
        if pos > len(self.data):
            raise ValueError("ran past the end")
        return pos

    def field(self, f: Any, pos: int) -> int:
        v = self.version
        if f.is_struct_array():
            n, pos = self._length(pos, True)
            for _ in range(max(n, 0)):
                pos = self.struct(f.untagged_fields(v), pos)
            return pos
        if f.is_struct():
            if f.nullable_for_version_q(v):
                pos += 1
                if self.data[pos - 1] == 0xFF:
                    return pos
            return self.struct(f.untagged_fields(v), pos)
        if f.is_array():
            n, pos = self._length(pos, True)
            for _ in range(max(n, 0)):
                pos = self.field(f.array_of, pos)
            return pos
        t = f.type_str
        if t in _FIXED:
            return pos + _FIXED[t]
        if t == "string":
            n, pos = self._length(pos, False)
            return pos + max(n, 0)
        if t in ("bytes", "records"):
            n, pos = self._length(pos, True)
            return pos + max(n, 0)
        raise ValueError(f"unknown type {t}")


def load_corpus(path: Path = GOLDEN) -> list[Recorded]:
    from protocol.apis import is_flexible, request_class

    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        payload = bytes.fromhex(d["frame_hex"])
        api_key, version = d["api_key"], d["api_version"]
        try:
            flexible = is_flexible(api_key, version)
        except ValueError:  # an api we do not speak (GetTelemetrySubscriptions): used for (a) only
            flexible = None
        (cid_len,) = struct.unpack_from(">h", payload, 8)
        pos = 10 + max(cid_len, 0)
        if flexible:
            count, pos = read_uvarint(payload, pos)
            for _ in range(count):
                _, pos = read_uvarint(payload, pos)
                size, pos = read_uvarint(payload, pos)
                pos += size
        rec = Recorded(api_key, version, d.get("client_id") or "", payload, pos)
        if flexible is None:
            out.append(rec)
            continue
        walker = _Walker(payload, version, flexible)
        try:
            cls = request_class(api_key)
            end = walker.struct(cls._struct.untagged_fields(version), pos)
            if end == len(payload):
                rec.lengths = walker.lengths
        except Exception:  # noqa: BLE001 - a body the walker cannot follow is still used for (a)/(b)
            pass
        out.append(rec)
    return out


# ---------------------------------------------------------------------------------------------
# Frame generation
# ---------------------------------------------------------------------------------------------

_INTERESTING_32 = [0, 1, -1, -2, 2, 7, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF,
                   -0x80000000, 1 << 20, 100_000_000]
_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


class FrameGen:
    def __init__(self, rng: random.Random, corpus: list[Recorded]) -> None:
        from protocol.apis import SUPPORTED_VERSIONS, is_flexible, request_class

        self.rng = rng
        self.corpus = corpus
        self.with_lengths = [r for r in corpus if r.lengths]
        self.apis = sorted((int(k), lo, hi) for k, (lo, hi) in SUPPORTED_VERSIONS.items())
        self.client_ids = sorted({r.client_id for r in corpus}) + ["", "x" * 300, "ü-client"]
        self.by_api: dict[int, list[Recorded]] = collections.defaultdict(list)
        for r in corpus:
            self.by_api[r.api_key].append(r)
        self._is_flexible = is_flexible
        self._request_class = request_class
        # Not "__consumer_offsets": deleting it (or adding partitions to it) is allowed by Kafka's
        # brokers as by ours (only kafka-topics.sh refuses) and legitimately loses every commit.
        self.names = ["mixed-df58305a", "topic", "g", ""]
        self.correlation = 0

    # --- helpers ----------------------------------------------------------------------------

    def _int(self, bits: int) -> int:
        rng = self.rng
        r = rng.random()
        lim = 1 << (bits - 1)
        if r < 0.5:
            return rng.randint(-1, 8)
        if r < 0.8:
            v = rng.choice(_INTERESTING_32)
        else:
            v = rng.randint(-lim, lim - 1)
        return ((v + lim) % (1 << bits)) - lim

    def _string(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            return rng.choice(self.names).encode()
        if r < 0.2:
            return bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))  # often bad utf-8
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 12))).encode()

    def _len_prefix(self, n: int | None, wide: bool, flexible: bool) -> bytes:
        if flexible:
            return uvarint(0 if n is None else n + 1)
        if n is None:
            n = -1
        return struct.pack(">i" if wide else ">h", n)

    # --- kind (b): a random body from the schema ------------------------------------------

    def _gen_struct(self, fields: list[Any], version: int, flexible: bool, depth: int) -> bytes:
        out = [self._gen_field(f, version, flexible, depth) for f in fields]
        if flexible:
            if self.rng.random() < 0.1:
                tag_data = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(0, 8)))
                out.append(uvarint(1) + uvarint(self.rng.randint(0, 12)) + uvarint(len(tag_data)) + tag_data)
            else:
                out.append(b"\x00")
        return b"".join(out)

    def _gen_field(self, f: Any, version: int, flexible: bool, depth: int) -> bytes:
        rng = self.rng
        null = rng.random() < 0.04
        if f.is_struct_array() or f.is_array():
            if null:
                return self._len_prefix(None, True, flexible)
            n = 0 if depth > 3 else rng.choice((0, 1, 1, 1, 2, 3))
            if f.is_struct_array():
                items = [self._gen_struct(f.untagged_fields(version), version, flexible, depth + 1) for _ in range(n)]
            else:
                items = [self._gen_field(f.array_of, version, flexible, depth + 1) for _ in range(n)]
            return self._len_prefix(n, True, flexible) + b"".join(items)
        if f.is_struct():
            prefix = b""
            if f.nullable_for_version_q(version):
                if null:
                    return b"\xff"
                prefix = b"\x01"
            return prefix + self._gen_struct(f.untagged_fields(version), version, flexible, depth + 1)
        t = f.type_str
        if t in ("bool", "int8"):
            return struct.pack(">b", self._int(8))
        if t == "int16":
            return struct.pack(">h", self._int(16))
        if t == "uint16":
            return struct.pack(">H", self._int(16) & 0xFFFF)
        if t == "int32":
            return struct.pack(">i", self._int(32))
        if t == "int64":
            return struct.pack(">q", self._int(32) if rng.random() < 0.9 else rng.randint(-(1 << 63), (1 << 63) - 1))
        if t == "float64":
            return struct.pack(">d", rng.choice((0.0, 1.0, -1.0, float("nan"), float("inf"), rng.random())))
        if t == "uuid":
            return rng.choice((bytes(16), uuid.UUID(int=rng.getrandbits(128)).bytes))
        if t == "string":
            if null:
                return self._len_prefix(None, False, flexible)
            s = self._string()
            return self._len_prefix(len(s), False, flexible) + s
        if t in ("bytes", "records"):
            if null:
                return self._len_prefix(None, True, flexible)
            if t == "records" and rng.random() < 0.5:
                donors = self.by_api.get(0) or self.corpus
                b = self._mutate(rng.choice(donors).payload[-rng.randint(1, 120):])
            else:
                b = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
            return self._len_prefix(len(b), True, flexible) + b
        raise ValueError(t)

    def kind_b(self) -> bytes:
        rng = self.rng
        api_key, lo, hi = rng.choice(self.apis)
        version = rng.randint(lo, hi)
        flexible = self._is_flexible(api_key, version)
        self.correlation += 1
        header = request_header(api_key, version, self.correlation, rng.choice(self.client_ids), flexible)
        r = rng.random()
        if r < 0.5:
            cls = self._request_class(api_key)
            body = self._gen_struct(cls._struct.untagged_fields(version), version, flexible, 0)
            if rng.random() < 0.2:
                body = self._mutate(body)
        elif r < 0.75:
            body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        else:
            donor = rng.choice(self.by_api.get(api_key) or self.corpus)
            body = donor.payload[donor.body_pos:]
        return framed(header + body)

    # --- kind (a): a mutated recorded frame --------------------------------------------------

    def _mutate(self, data: bytes) -> bytes:
        rng = self.rng
        buf = bytearray(data)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
            op = rng.randrange(7)
            if op == 0 and buf:  # bit flip
                i = rng.randrange(len(buf))
                buf[i] ^= 1 << rng.randrange(8)
            elif op == 1 and buf:  # random byte
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            elif op == 2:  # insert bytes
                i = rng.randint(0, len(buf))
                buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            elif op == 3 and buf:  # delete bytes
                i = rng.randrange(len(buf))
                del buf[i:i + rng.randint(1, 8)]
            elif op == 4:  # splice with another frame
                other = rng.choice(self.corpus).payload
                i, j = rng.randint(0, len(buf)), rng.randint(0, len(other))
                buf = buf[:i] + other[j:] if rng.random() < 0.5 else bytearray(other[:j]) + buf[i:]
            elif op == 5 and buf:  # truncate
                del buf[rng.randrange(len(buf)):]
            elif op == 6 and len(buf) >= 2:  # an interesting int16/int32 somewhere
                i = rng.randrange(len(buf) - 1)
                if i + 4 <= len(buf) and rng.random() < 0.5:
                    struct.pack_into(">i", buf, i, rng.choice(_INTERESTING_32))
                else:
                    struct.pack_into(">h", buf, i, rng.choice((0, -1, 1, 0x7FFF, -0x8000, 255)))
        return bytes(buf)

    def kind_a(self) -> bytes:
        rec = self.rng.choice(self.corpus)
        return framed(self._mutate(rec.payload))

    # --- kind (c): a valid body with fuzzed length fields --------------------------------------

    def kind_c(self) -> bytes:
        rng = self.rng
        rec = rng.choice(self.with_lengths)
        payload = bytearray(rec.payload)
        size: int | None = None
        r = rng.random()
        if r < 0.8 or not rec.lengths:
            # replace from the end so earlier positions stay valid when a varint changes width
            chosen = sorted(rng.sample(rec.lengths, min(len(rec.lengths), rng.choice((1, 1, 2)))), reverse=True)
            for pos, kind, value in chosen:
                _, end = read_uvarint(bytes(payload), pos) if kind.startswith("uvarint") else (0, 0)
                old = bytes(payload[pos:end]) if end else None
                while True:  # a value whose encoding differs from the recorded one
                    new = rng.choice((-1, -2, 0, 1, value - 1, value + 1, value * 2, value + 100, 0x7FFF,
                                      0x7FFFFFFF, rng.randint(-5, 1 << 16)))
                    if kind == "i16":
                        encoded = struct.pack(">h", ((new + 0x8000) & 0xFFFF) - 0x8000)
                        if encoded != payload[pos:pos + 2]:
                            payload[pos:pos + 2] = encoded
                            break
                    elif kind == "i32":
                        encoded = struct.pack(">i", ((new + 0x80000000) & 0xFFFFFFFF) - 0x80000000)
                        if encoded != payload[pos:pos + 4]:
                            payload[pos:pos + 4] = encoded
                            break
                    else:
                        encoded = uvarint(max(new, 0))
                        if encoded != old:
                            payload[pos:end] = encoded
                            break
        if r >= 0.65:  # the size prefix (also alone)
            size = rng.choice((len(payload) - rng.randint(1, 8), len(payload) + rng.randint(1, 8), 0, -1,
                               -0x80000000, 0x7FFFFFFF, 104857601, rng.randint(0, 4 * len(payload))))
            if size == len(payload):
                size += 1
        if size is None:
            return framed(bytes(payload))
        if len(payload) < size <= 1 << 16:
            # more than the frame holds: filled up to the size claimed (read whole, the body's own
            # lengths no longer match its end), so the server does not wait for bytes never sent
            payload += bytes(rng.randrange(256) for _ in range(size - len(payload)))
        return struct.pack(">i", size) + bytes(payload)

    def next(self) -> tuple[bytes, int]:
        """A frame and its kind (0, 1, 2 for a, b, c)."""
        r = self.rng.random()
        if r < 0.4:
            return self.kind_a(), 0
        if r < 0.7 and self.with_lengths:
            return self.kind_c(), 2
        return self.kind_b(), 1


# ---------------------------------------------------------------------------------------------
# The fuzzing worker (a separate process: its own core, no GIL shared with the clients)
# ---------------------------------------------------------------------------------------------

C_SENT, C_SENT_A, C_SENT_B, C_SENT_C, C_RESPONSES, C_SERVER_CLOSED, C_STALLED, C_CONNECT_ERRORS, \
    C_CONNECTIONS, C_BYTES, C_DONE, C_SENDING_MS, C_CLOSED_AFTER_ANSWER = range(13)
N_COUNTERS = 13


class _FuzzConn:
    __slots__ = ("sock", "outbox", "outstanding", "need", "hdr", "last_progress", "port", "last_frame")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.outbox = bytearray()
        self.outstanding = 0
        self.need = 0  # bytes of the current response still to skip
        self.hdr = bytearray()  # a size prefix being read
        self.last_progress = time.monotonic()
        self.port = sock.getsockname()[1]
        self.last_frame = b""


def _connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=5.0)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    return sock


def fuzz_worker(host: str, port: int, frames: int, connections: int, seed: int, counters: Any,
                stop: Any, closings_path: str | None = None) -> None:
    """Sends ``frames`` fuzzed frames over ``connections`` connections. With ``closings_path``, the
    last frame of every connection the server closed is kept (by local port, the last few per
    port, with the wall-clock time) and written there as JSON lines at the end: the server's log
    names the peer of a failing handler, and this finds the frame that made it fail."""
    rng = random.Random(seed)
    closings: dict[int, collections.deque[tuple[float, str]]] = {}
    gen = FrameGen(rng, load_corpus())
    sel = selectors.DefaultSelector()
    local = [0] * N_COUNTERS
    conns: list[_FuzzConn | None] = [None] * connections

    def publish() -> None:
        for i, v in enumerate(local):
            counters[i] = v

    def open_conn(i: int) -> None:
        while not stop.is_set():
            try:
                sock = _connect(host, port)
            except OSError:
                local[C_CONNECT_ERRORS] += 1
                time.sleep(0.05)
                continue
            c = _FuzzConn(sock)
            conns[i] = c
            sel.register(sock, selectors.EVENT_READ, i)
            local[C_CONNECTIONS] += 1
            return

    def drop(i: int, by_server: bool) -> None:
        c = conns[i]
        assert c is not None
        sel.unregister(c.sock)
        try:
            if not by_server:  # an abortive close: we do not wait for anything more
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
        except OSError:
            pass
        conns[i] = None
        if not by_server:
            local[C_STALLED] += 1
        elif c.outstanding:
            local[C_SERVER_CLOSED] += 1
        else:  # its frame was answered, and then it was closed (the bytes after a short size prefix)
            local[C_CLOSED_AFTER_ANSWER] += 1
        if by_server and closings_path is not None:
            ring = closings.get(c.port)
            if ring is None:
                ring = closings[c.port] = collections.deque(maxlen=8)
            ring.append((time.time(), c.last_frame.hex()))

    def on_readable(i: int) -> None:
        c = conns[i]
        if c is None:
            return
        try:
            data = c.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            drop(i, True)
            return
        if not data:
            drop(i, True)
            return
        c.last_progress = time.monotonic()
        pos, n = 0, len(data)
        while pos < n:
            if c.need:
                take = min(c.need, n - pos)
                c.need -= take
                pos += take
                if c.need == 0:
                    c.outstanding = max(0, c.outstanding - 1)
                    local[C_RESPONSES] += 1
                continue
            take = min(4 - len(c.hdr), n - pos)
            c.hdr += data[pos:pos + take]
            pos += take
            if len(c.hdr) == 4:
                (c.need,) = struct.unpack(">i", c.hdr)
                c.hdr.clear()
                if c.need <= 0:
                    c.need = 0
                    c.outstanding = max(0, c.outstanding - 1)
                    local[C_RESPONSES] += 1

    sent = 0
    t_begin = last_publish = time.monotonic()
    for i in range(connections):
        open_conn(i)
    while sent < frames and not stop.is_set():
        now = time.monotonic()
        for i in range(connections):
            c = conns[i]
            if c is None:
                open_conn(i)
                c = conns[i]
                if c is None:
                    break
            while c.outstanding < WINDOW and sent < frames and len(c.outbox) < 65536:
                data, kind = gen.next()
                c.outbox += data
                c.last_frame = data
                c.outstanding += 1
                sent += 1
                local[C_SENT] += 1
                local[C_SENT_A + kind] += 1
                if c.outstanding == 1:
                    c.last_progress = now
            if c.outbox:
                try:
                    n = c.sock.send(c.outbox)
                    del c.outbox[:n]
                    local[C_BYTES] += n
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    drop(i, True)
                    continue
            if c.outstanding and now - c.last_progress > STALL_S:
                drop(i, False)
        for key, _ in sel.select(0.01):
            on_readable(key.data)
        if now - last_publish > 0.25:
            publish()
            last_publish = now
    local[C_SENDING_MS] = int((time.monotonic() - t_begin) * 1000)
    # the last frames: give the server a moment to answer them, then close
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(c is not None and c.outstanding for c in conns):
        for key, _ in sel.select(0.05):
            on_readable(key.data)
    for c in conns:
        if c is not None:
            sel.unregister(c.sock)
            c.sock.close()
    if closings_path is not None:
        with open(closings_path, "w") as out:
            for local_port, ring in closings.items():
                for when, frame_hex in ring:
                    out.write(json.dumps({"port": local_port, "time": when, "frame_hex": frame_hex}) + "\n")
    local[C_DONE] = 1
    publish()


# ---------------------------------------------------------------------------------------------
# Probe and RSS
# ---------------------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def probe_once(host: str, port: int, correlation_id: int, bound: float) -> float:
    """ApiVersions v0 on a fresh connection; the seconds it took. Raises on failure."""
    t0 = time.monotonic()
    with socket.create_connection((host, port), timeout=bound) as sock:
        sock.settimeout(bound)
        sock.sendall(framed(request_header(18, 0, correlation_id, "live-fuzz-probe", False)))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        body = _recv_exact(sock, size)
    elapsed = time.monotonic() - t0
    got_id, error = struct.unpack_from(">ih", body, 0)
    if got_id != correlation_id or error != 0:
        raise RuntimeError(f"bad ApiVersions answer: correlation {got_id}, error {error}")
    if elapsed > bound:
        raise TimeoutError(f"answered after {elapsed:.2f}s")
    return elapsed


# ---------------------------------------------------------------------------------------------
# Stock clients
# ---------------------------------------------------------------------------------------------


class Clients:
    """A producer (acks=all, idempotent) and a two-member consumer group, confluent-kafka."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: int = 3) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.partitions = partitions
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[tuple[int, int, bytes]] = []
        self.produced = 0
        self.errors: collections.Counter[str] = collections.Counter()
        #: commits acknowledged: partition -> highest offset acked
        self.committed: dict[int, int] = {}
        self.commits_acked = 0
        self.commit_errors: collections.Counter[str] = collections.Counter()
        self.consumed = 0
        self.assignments = 0
        self.threads: list[threading.Thread] = []
        #: group events: (monotonic time, member, what, partitions)
        self.events: list[tuple[float, int, str, list[int]]] = []

    def _error_cb(self, who: str) -> Any:
        def cb(err: Any) -> None:
            with self.lock:
                self.errors[f"{who}:{err.name()}"] += 1
                self.last_error = f"{who}: {err}"
        return cb

    def create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fs = admin.create_topics([NewTopic(self.topic, self.partitions, 1)], operation_timeout=30)
        for f in fs.values():
            f.result(timeout=60)

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._produce, name="producer", daemon=True)]
        self.threads += [threading.Thread(target=self._consume, args=(i,), name=f"member-{i}", daemon=True)
                         for i in range(2)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 120000, "client.id": "live-fuzz-producer",
                      "error_cb": self._error_cb("producer")})

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is not None:
                    self.errors[f"producer-delivery:{err.name()}"] += 1
                else:
                    self.acked.append((msg.partition(), msg.offset(), msg.value()))

        i = 0
        run = uuid.uuid4().hex[:8]
        next_batch = time.monotonic()
        while not self.stop.is_set():
            for _ in range(10):  # 200 records a second
                p.produce(self.topic, key=str(i).encode(), value=f"{run}-{i}".encode(), on_delivery=delivered)
                i += 1
            self.produced = i
            next_batch += 0.05
            while not self.stop.is_set() and time.monotonic() < next_batch:
                p.poll(max(0.0, next_batch - time.monotonic()))
        remaining = p.flush(120)
        if remaining:
            with self.lock:
                self.errors["producer:unflushed"] += remaining

    def _consume(self, idx: int) -> None:
        from confluent_kafka import Consumer, KafkaException

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "client.id": f"live-fuzz-member-{idx}", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 45000,
                      "heartbeat.interval.ms": 1000, "error_cb": self._error_cb(f"member-{idx}")})

        def on_assign(consumer: Any, partitions: Any) -> None:
            with self.lock:
                self.assignments += 1
                self.events.append((time.monotonic(), idx, "assigned", [tp.partition for tp in partitions]))

        def on_revoke(consumer: Any, partitions: Any) -> None:
            with self.lock:
                self.events.append((time.monotonic(), idx, "revoked", [tp.partition for tp in partitions]))

        c.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        dirty = False
        last_commit = time.monotonic()
        try:
            while not self.stop.is_set():
                msg = c.poll(0.2)
                if msg is not None:
                    if msg.error():
                        with self.lock:
                            self.errors[f"member-{idx}-msg:{msg.error().name()}"] += 1
                    else:
                        dirty = True
                        with self.lock:
                            self.consumed += 1
                if dirty and time.monotonic() - last_commit > 0.5:
                    last_commit = time.monotonic()
                    dirty = False
                    try:
                        result = c.commit(asynchronous=False)
                    except KafkaException as exc:
                        name = exc.args[0].name()
                        if name != "_NO_OFFSET":
                            with self.lock:
                                self.commit_errors[name] += 1
                        continue
                    with self.lock:
                        self.commits_acked += 1
                        for tp in result or []:
                            if tp.error is None and tp.offset >= 0:
                                self.committed[tp.partition] = max(self.committed.get(tp.partition, -1), tp.offset)
                            elif tp.error is not None:
                                self.commit_errors[tp.error.name()] += 1
        finally:
            t0 = time.monotonic()
            c.close()
            with self.lock:
                self.events.append((time.monotonic(), idx, f"closed in {time.monotonic() - t0:.1f}s", []))

    def wait_ready(self, timeout: float) -> None:
        """Until both members have an assignment and a commit was acknowledged."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.assignments >= 2 and self.commits_acked >= 1 and self.acked:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"clients not ready in {timeout}s: assignments {self.assignments}, "
                           f"commits {self.commits_acked}, acked {len(self.acked)}, errors {dict(self.errors)}")

    def finish(self, timeout: float = 150.0) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
            if t.is_alive():
                raise RuntimeError(f"client thread {t.name} did not finish")

    def read_back(self, timeout: float = 120.0) -> dict[tuple[int, int], bytes]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.group}-verify",
                      "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            high = {p: c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1]
                    for p in range(self.partitions)}
            c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            got: dict[tuple[int, int], bytes] = {}
            pos = {p: 0 for p in range(self.partitions)}
            deadline = time.monotonic() + timeout
            while any(pos[p] < high[p] for p in pos) and time.monotonic() < deadline:
                for msg in c.consume(1000, 0.5):
                    if msg.error():
                        raise RuntimeError(f"read-back error: {msg.error()}")
                    got[(msg.partition(), msg.offset())] = msg.value()
                    pos[msg.partition()] = msg.offset() + 1
            return got
        finally:
            c.close()

    def committed_offsets(self) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False})
        try:
            tps = c.committed([TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=30)
            return {tp.partition: tp.offset for tp in tps}
        finally:
            c.close()


# ---------------------------------------------------------------------------------------------
# The server log
# ---------------------------------------------------------------------------------------------

_TS = re.compile(r"^ts=(\S+)")


def _ts(line: str) -> float | None:
    m = _TS.match(line)
    if not m:
        return None
    try:
        return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return None


@dataclass
class LogFigures:
    bad_lines: list[str]
    closing_lines: int
    summary_lines: int
    summarized_closings: int
    max_closing_per_window: int
    reasons: collections.Counter[str]


def analyze_log(text: str) -> LogFigures:
    bad, closing_ts, reasons = [], [], collections.Counter()
    summary_lines = summarized = 0
    for line in text.splitlines():
        if "handler failed" in line or "Traceback" in line or "level=ERROR" in line or "level=CRITICAL" in line:
            bad.append(line)
        if "msg=\"closing connection\"" in line:
            t = _ts(line)
            if t is not None:
                closing_ts.append(t)
            m = re.search(r'reason=("(?:[^"\\]|\\.)*"|\S+)', line)
            if m:
                reason = re.sub(r"\d+", "N", m.group(1).strip('"'))[:70]
                reasons[reason] += 1
        elif "more connections closed" in line:
            summary_lines += 1
            m = re.search(r"closed=(\d+)", line)
            if m:
                summarized += int(m.group(1))
    # the most closing lines within any one second (a window is one second from its first line;
    # two windows can touch one second's span, so 2 × 5 is the most a correct limiter allows)
    closing_ts.sort()
    most = 0
    j = 0
    for i, t in enumerate(closing_ts):
        while closing_ts[j] < t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    return LogFigures(bad, len(closing_ts), summary_lines, summarized, most, reasons)


def match_findings(bad_lines: list[str], closings_path: Path) -> list[dict[str, Any]]:
    """For each bad log line naming a peer on loopback, the fuzzer's last frame on that local
    port closest in time to the line."""
    if not bad_lines:
        return []
    by_port: dict[int, list[tuple[float, str]]] = collections.defaultdict(list)
    try:
        for line in closings_path.read_text().splitlines():
            d = json.loads(line)
            by_port[d["port"]].append((d["time"], d["frame_hex"]))
    except FileNotFoundError:
        pass
    out = []
    for line in bad_lines:
        m = re.search(r"peer=\S+:(\d+)", line)
        t = _ts(line)
        frame_hex = None
        if m and t is not None and by_port.get(int(m.group(1))):
            when, frame_hex = min(by_port[int(m.group(1))], key=lambda e: abs(e[0] - t))
            if abs(when - t) > 5:
                frame_hex = None
        out.append({"line": line[:4000], "frame_hex": frame_hex})
    return out


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    frames: int
    connections: int
    seed: int
    seconds: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)
    probes: int = 0
    probe_failures: list[str] = field(default_factory=list)
    probe_max_s: float = 0.0
    rss_start: int = 0
    rss_warm: int = 0
    rss_peak: int = 0
    rss_end: int = 0
    fds_start: int = 0
    fds_peak: int = 0
    fds_end: int = 0
    server_alive: bool = False
    acked_records: int = 0
    records_missing: list[Any] = field(default_factory=list)
    records_changed: list[Any] = field(default_factory=list)
    commits_acked: int = 0
    acked_commit_offsets: dict[int, int] = field(default_factory=dict)
    fetched_commit_offsets: dict[int, int] = field(default_factory=dict)
    client_errors: dict[str, int] = field(default_factory=dict)
    commit_errors: dict[str, int] = field(default_factory=dict)
    consumed: int = 0
    assignments: int = 0
    group_events: list[str] = field(default_factory=list)
    #: bad log lines with the frame that caused each (when found): {"line", "frame_hex"}
    findings: list[dict[str, Any]] = field(default_factory=list)
    log: LogFigures | None = None
    failures: list[str] = field(default_factory=list)
    log_path: str = ""
    fuzz_window_s: float = 0.0

    @property
    def sending_s(self) -> float:
        return self.counters.get("sending_ms", 0) / 1000 or self.fuzz_window_s

    def summary(self) -> str:
        c = self.counters
        mb = 1024 * 1024
        lg = self.log
        return (
            f"Live fuzz (bench/live_fuzz.py, {os.cpu_count()} cores, `python bench/live_fuzz.py --frames "
            f"{self.frames} --connections {self.connections} --seed {self.seed}`): {c.get('sent', 0):,} frames "
            f"(a mutated recorded frames {c.get('sent_a', 0):,}, b valid header + fuzzed body "
            f"{c.get('sent_b', 0):,}, c fuzzed lengths {c.get('sent_c', 0):,}) in {self.fuzz_window_s:.1f} s of "
            f"fuzzing ({c.get('sent', 0) / max(self.sending_s, 1e-9):,.0f} frames/s while sending), {c.get('responses', 0):,} "
            f"responses; the server closed {c.get('server_closed', 0) + c.get('closed_after_answer', 0):,} connections "
            f"({lg.closing_lines if lg else '?'} 'closing connection' lines + "
            f"{lg.summarized_closings if lg else '?'} counted in {lg.summary_lines if lg else '?'} summary lines), "
            f"we dropped {c.get('stalled', 0):,} stalled ones. Server alive: {self.server_alive}; probes "
            f"{self.probes} answered {self.probes - len(self.probe_failures)} (slowest {self.probe_max_s:.2f} s). "
            f"RSS start {self.rss_start / mb:.0f} MB, after warm-up {self.rss_warm / mb:.0f} MB, peak "
            f"{self.rss_peak / mb:.0f} MB, end {self.rss_end / mb:.0f} MB; open files start {self.fds_start}, peak "
            f"{self.fds_peak}, end {self.fds_end}. Clients: {self.acked_records:,} records "
            f"acknowledged (acks=all), all read back unchanged: {not self.records_missing and not self.records_changed}; "
            f"{self.commits_acked:,} commits acknowledged, every partition's fetched offset ≥ its last acked: "
            f"{all(self.fetched_commit_offsets.get(p, -1) >= o for p, o in self.acked_commit_offsets.items())}; "
            f"{self.consumed:,} records consumed by the group; client errors {sum(self.client_errors.values())}"
            f"{' ' + str(self.client_errors) if self.client_errors else ''}, commit errors "
            f"{sum(self.commit_errors.values())}{' ' + str(self.commit_errors) if self.commit_errors else ''}. "
            f"Server log: {len(lg.bad_lines) if lg else '?'} handler-failed/Traceback/ERROR lines. "
            f"{'PASS' if not self.failures else 'FAIL: ' + '; '.join(self.failures)}"
        )


_COUNTER_NAMES = ["sent", "sent_a", "sent_b", "sent_c", "responses", "server_closed", "stalled",
                  "connect_errors", "connections", "bytes", "done", "sending_ms", "closed_after_answer"]


def run(frames: int, connections: int, seed: int | None = None, data_dir: Path | None = None,
        probe_bound: float = 5.0, timeout: float = 3600.0, progress: bool = True,
        settings: dict[str, str] | None = None) -> Result:
    from tests.conftest import ServerProcess

    seed = random.randrange(1 << 31) if seed is None else seed
    result = Result(frames=frames, connections=connections, seed=seed)
    own_dir = data_dir is None
    base = Path(tempfile.mkdtemp(prefix="live-fuzz-")) if own_dir else Path(data_dir)  # type: ignore[arg-type]
    base.mkdir(parents=True, exist_ok=True)
    server = ServerProcess(base / "data", {"group.initial.rebalance.delay.ms": "500", **(settings or {})})
    result.log_path = str(server.log_path)
    t_start = time.monotonic()

    def say(text: str) -> None:
        if progress:
            print(f"[{time.monotonic() - t_start:7.1f}s] {text}", flush=True)

    server.start(timeout=60)
    assert server.proc is not None
    pid = server.proc.pid
    say(f"server pid {pid} on {server.bootstrap}, log {server.log_path}, seed {seed}")
    result.rss_start = rss_bytes(pid)
    result.fds_start = result.fds_peak = fd_count(pid)
    tag = uuid.uuid4().hex[:10]
    clients = Clients(server.bootstrap, f"live-fuzz-{tag}", f"live-fuzz-group-{tag}")
    clients.create_topic()
    clients.start()
    clients.wait_ready(120)
    say(f"clients ready: {len(clients.acked)} records acked, {clients.commits_acked} commits")

    ctx = mp.get_context("spawn")
    counters = ctx.Array("q", N_COUNTERS, lock=False)
    stop = ctx.Event()
    closings_path = base / "closings.jsonl"
    worker = ctx.Process(target=fuzz_worker, args=(server.host, server.port, frames, connections, seed,
                                                    counters, stop, str(closings_path)), daemon=True)
    probe_stop = threading.Event()
    samples: list[tuple[float, int, int]] = []  # (seconds since fuzz start, frames sent, rss)

    def probe_loop() -> None:
        i = 0
        while not probe_stop.is_set():
            i += 1
            try:
                elapsed = probe_once(server.host, server.port, 1_000_000 + i, probe_bound)
                result.probe_max_s = max(result.probe_max_s, elapsed)
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                result.probe_failures.append(f"probe {i} at {time.monotonic() - t_fuzz:.1f}s: {exc!r}")
            result.probes = i
            try:
                samples.append((time.monotonic() - t_fuzz, counters[C_SENT], rss_bytes(pid)))
                result.fds_peak = max(result.fds_peak, fd_count(pid))
            except (OSError, RuntimeError):
                pass
            probe_stop.wait(1.0)

    t_fuzz = time.monotonic()
    worker.start()
    prober = threading.Thread(target=probe_loop, name="probe", daemon=True)
    prober.start()
    deadline = t_fuzz + timeout
    last_report = 0.0
    while worker.is_alive() and time.monotonic() < deadline:
        worker.join(0.5)
        now = time.monotonic()
        if now - last_report >= 10:
            last_report = now
            sent = counters[C_SENT]
            say(f"{sent:,} frames ({sent / (now - t_fuzz):,.0f}/s), {counters[C_RESPONSES]:,} responses, "
                f"{counters[C_SERVER_CLOSED]:,} closed by the server, {counters[C_STALLED]:,} stalled; "
                f"rss {rss_bytes(pid) / 2**20:.0f} MB; clients {len(clients.acked):,} acked, "
                f"{clients.commits_acked:,} commits, errors {sum(clients.errors.values())}")
    if worker.is_alive():
        stop.set()
        worker.join(30)
        result.failures.append(f"fuzzing did not finish within {timeout}s")
        if worker.is_alive():
            worker.kill()
    elif worker.exitcode != 0:
        result.failures.append(f"fuzz worker exited with {worker.exitcode}")
    result.fuzz_window_s = time.monotonic() - t_fuzz
    result.counters = {name: int(counters[i]) for i, name in enumerate(_COUNTER_NAMES)}
    say(f"fuzzing done: {result.counters}")
    # Clients go on a little after the fuzzing; the close-log's last summary is flushed meanwhile.
    time.sleep(2.0)
    probe_stop.set()
    prober.join(probe_bound + 5)
    clients.finish()
    result.server_alive = server.alive()
    samples.append((time.monotonic() - t_fuzz, counters[C_SENT], rss_bytes(pid) if result.server_alive else 0))
    result.rss_end = samples[-1][2]
    if result.server_alive:
        result.fds_end = fd_count(pid)
    result.rss_peak = max(s[2] for s in samples)
    warm = [s for s in samples if s[1] >= frames * 0.1 and s[0] >= 3.0]
    result.rss_warm = warm[0][2] if warm else samples[0][2]

    # every acknowledged record, read back
    result.acked_records = len(clients.acked)
    if result.server_alive:
        got = clients.read_back()
        for p, o, v in clients.acked:
            if (p, o) not in got:
                result.records_missing.append((p, o))
            elif got[(p, o)] != v:
                result.records_changed.append((p, o, v, got[(p, o)]))
        result.fetched_commit_offsets = clients.committed_offsets()
    result.commits_acked = clients.commits_acked
    result.acked_commit_offsets = dict(clients.committed)
    result.client_errors = dict(clients.errors)
    result.commit_errors = dict(clients.commit_errors)
    result.consumed = clients.consumed
    result.assignments = clients.assignments
    result.group_events = [f"{t - t_fuzz:+.1f}s member-{m} {what} {parts}" for t, m, what, parts in clients.events]
    if server.alive():
        code = server.stop(timeout=180)  # closing thousands of fuzz-made partitions takes a while
        if code != 0:
            result.failures.append(f"server exited with {code} on SIGTERM")
    result.log = analyze_log(server.log_text())
    result.findings = match_findings(result.log.bad_lines, closings_path)
    if result.findings:
        with open(base / "findings.jsonl", "w") as out:
            for finding in result.findings:
                out.write(json.dumps(finding) + "\n")
    result.seconds = time.monotonic() - t_start
    check(result)
    if own_dir and not result.failures:
        shutil.rmtree(base, ignore_errors=True)
    return result


def check(r: Result) -> None:
    f = r.failures
    c = r.counters
    if not r.server_alive:
        f.append("the server died")
    if c.get("sent", 0) < r.frames:
        f.append(f"only {c.get('sent', 0)} of {r.frames} frames sent")
    # each frame counted was answered, made the server close the connection, or went unanswered
    # until we dropped the connection; at most one a connection may still be in flight at the end
    accounted = c.get("responses", 0) + c.get("server_closed", 0) + c.get("stalled", 0)
    if WINDOW == 1 and not c.get("sent", 0) - r.connections <= accounted <= c.get("sent", 0):
        f.append(f"frames sent {c.get('sent', 0)} but answered + closed + dropped = {accounted}")
    if r.probe_failures:
        f.append(f"{len(r.probe_failures)} of {r.probes} probes failed: {r.probe_failures[:3]}")
    # one a second, each taking up to the bound: a probe that stopped (or never ran) shows here
    if r.probes < max(1, int(r.fuzz_window_s / (1.0 + max(r.probe_max_s, 0.1))) - 2):
        f.append(f"only {r.probes} probes in {r.fuzz_window_s:.0f}s")
    if r.rss_peak - r.rss_warm >= RSS_GROWTH_BOUND:
        f.append(f"RSS grew {(r.rss_peak - r.rss_warm) / 2**20:.0f} MB after warm-up (bound "
                 f"{RSS_GROWTH_BOUND / 2**20:.0f} MB)")
    if r.records_missing:
        f.append(f"{len(r.records_missing)} acknowledged records missing, e.g. {r.records_missing[:5]}")
    if r.records_changed:
        f.append(f"{len(r.records_changed)} acknowledged records changed, e.g. {r.records_changed[:3]}")
    if r.acked_records == 0:
        f.append("no record was acknowledged")
    if r.commits_acked == 0:
        f.append("no commit was acknowledged")
    for p, o in r.acked_commit_offsets.items():
        if r.fetched_commit_offsets.get(p, -1) < o:
            f.append(f"partition {p}: committed offset fetched back {r.fetched_commit_offsets.get(p)} < acked {o}")
    if r.client_errors:
        f.append(f"client errors: {r.client_errors}")
    # commits refused while the group rebalances are the protocol working, not errors; the group
    # forms once (two members), so more than a few means it was disturbed
    unexpected = {k: v for k, v in r.commit_errors.items()
                  if k not in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")}
    if unexpected:
        f.append(f"commit errors: {r.commit_errors}")
    if r.assignments > 6:
        f.append(f"the group rebalanced {r.assignments} times (assignments)")
    lg = r.log
    if lg is not None:
        if lg.bad_lines:
            f.append(f"{len(lg.bad_lines)} handler failed/Traceback/ERROR lines in the server log, first: "
                     f"{lg.bad_lines[0][:600]}")
        if lg.max_closing_per_window > 10:
            f.append(f"{lg.max_closing_per_window} 'closing connection' lines within one second (limit 5 a "
                     f"second per host)")
        if lg.closing_lines > 5 * (r.seconds + 2):
            f.append(f"{lg.closing_lines} 'closing connection' lines in {r.seconds:.0f}s")
        if lg.summary_lines > r.seconds + 2:
            f.append(f"{lg.summary_lines} summary lines in {r.seconds:.0f}s")
        logged = lg.closing_lines + lg.summarized_closings
        closed = c.get("server_closed", 0) + c.get("closed_after_answer", 0)
        dropped = c.get("stalled", 0)
        # every connection the server closed is accounted for (a line or a summary count); ours
        # that it saw as "peer closed mid-request" add to it, nothing else does. The slack is
        # for closings racing the end of the run.
        if not closed - 20 <= logged <= closed + dropped + 20:
            f.append(f"closings logged {logged} (lines {lg.closing_lines} + summarized "
                     f"{lg.summarized_closings}) vs. {closed} closed by the server and {dropped} dropped by us")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--probe-bound", type=float, default=5.0, help="seconds an ApiVersions probe may take")
    ap.add_argument("--timeout", type=float, default=3600.0)
    args = ap.parse_args(argv)
    r = run(args.frames, args.connections, args.seed, args.data_dir, args.probe_bound, args.timeout)
    lg = r.log
    print()
    print(f"frames sent {r.counters}")
    print(f"probes {r.probes}, failed {len(r.probe_failures)}, slowest {r.probe_max_s:.3f}s")
    mb = 2**20
    print(f"RSS start {r.rss_start / mb:.1f} MB, warm {r.rss_warm / mb:.1f} MB, peak {r.rss_peak / mb:.1f} MB, "
          f"end {r.rss_end / mb:.1f} MB")
    print(f"open files start {r.fds_start}, peak {r.fds_peak}, end {r.fds_end}")
    print(f"acked records {r.acked_records}, missing {len(r.records_missing)}, changed {len(r.records_changed)}")
    print(f"commits acked {r.commits_acked}; acked {r.acked_commit_offsets}; fetched {r.fetched_commit_offsets}")
    print(f"client errors {r.client_errors}; commit errors {r.commit_errors}; consumed {r.consumed}; "
          f"assignments {r.assignments}")
    print("group events (seconds from the start of the fuzzing):", "; ".join(r.group_events))
    if lg:
        print(f"log: bad lines {len(lg.bad_lines)}, closing lines {lg.closing_lines}, summaries "
              f"{lg.summary_lines} ({lg.summarized_closings} closings), most in a second "
              f"{lg.max_closing_per_window}")
        for reason, n in lg.reasons.most_common(12):
            print(f"  {n:6d}  {reason}")
        for finding in r.findings[:10]:
            print("  BAD:", finding["line"][:2000].replace("\\n", "\n"))
            print("  FRAME:", finding["frame_hex"])
    print(f"server log: {r.log_path}")
    print()
    print(r.summary())
    return 0 if not r.failures else 1


if __name__ == "__main__":
    sys.exit(main())
