"""The frame reader and request header: bytes from a socket into ``ServerConnection`` events.

Edge: what ``coordinator/server/server.py`` does with every ``data_received``: feed the bytes to
``protocol.connection.ServerConnection`` and call ``next_event`` until ``NEED_DATA``. That covers
the size prefix, api key and version, correlation id, client id, header tagged fields, and (via
the body decoders) the request itself.

Input: byte 0 picks the connection's ``max_request_size`` (so both refusal and acceptance of a
size prefix are reachable), byte 1 the chunk size the stream is delivered in; the rest is the
stream. Properties:

1. ``next_event`` never raises, and returns only its four kinds of result.
2. A violation caused by a malformed request names one of our own errors: the connection turns
   any exception into a violation, so without this check a decoder's IndexError or TypeError
   (a bug) would look like a clean refusal.
3. Any split of the stream gives the same events (the module's rule 1): the stream delivered in
   chunks yields exactly what it yields delivered whole.
4. After a violation the connection repeats that violation and ignores new bytes (rule 3).
5. Each request accounts for its frame: sizes add up to no more than the bytes delivered.
"""

from __future__ import annotations

import struct

from protocol.connection import ServerConnection
from protocol.events import NEED_DATA, ProtocolViolation, RequestReceived, UnsupportedApiVersions
from tests.fuzz import golden
from tests.fuzz.harness import Finding

NAME = "frames"
# The body decoders' generated code is fuzz_requests.py's to cover; instrumenting it here too would
# add ~7 s of start-up to every run of this harness for edges that harness already reaches.
INSTRUMENT = ("protocol.connection", "protocol.request_codec", "protocol.nullability")

#: Exception types a "malformed request" violation may name: the decoders' own errors.
OURS = ("MalformedRequest", "NullInNonNullableField")
_MALFORMED = "malformed request: "
#: max_request_size choices: small enough to refuse the fuzzer's frames, and the server's default.
_SIZES = (0, 16, 64, 256, 1024, 4096, 104857600)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def seeds() -> list[bytes]:
    """Each recorded frame alone, then runs of consecutive frames (pipelined requests), delivered
    whole and one byte at a time."""
    frames = [_frame(f) for f in golden.frames()]
    streams = frames + [b"".join(frames[i : i + 3]) for i in range(0, len(frames), 3)]
    return [bytes([6, chunk]) + s for s in streams for chunk in (0, 1)]


def _events(conn: ServerConnection, stream: bytes, chunk: int) -> list[object]:
    """Deliver ``stream`` in chunks of ``chunk`` bytes (0: whole) and collect every event, the
    way the server's protocol class does."""
    events: list[object] = []
    step = chunk or max(len(stream), 1)
    # Each call either consumes a whole frame (4+ bytes) or stops: a bound on the calls made.
    budget = len(stream) // 4 + 2 * (len(stream) // step + 2)
    for start in range(0, max(len(stream), 1), step):
        conn.receive_data(stream[start : start + step])
        while True:
            budget -= 1
            if budget < 0:
                raise Finding("next_event keeps returning events without consuming bytes")
            event = conn.next_event()
            if event is NEED_DATA:
                break
            events.append(event)
            if isinstance(event, ProtocolViolation):
                return events
    return events


def _describe(event: object) -> tuple[object, ...]:
    if isinstance(event, RequestReceived):
        return ("request", event.api_key, event.api_version, event.correlation_id, event.client_id,
                repr(event.request), event.size)
    if isinstance(event, UnsupportedApiVersions):
        return ("unsupported", event.api_version, event.correlation_id, event.client_id)
    if isinstance(event, ProtocolViolation):
        return ("violation", event.reason)
    raise Finding(f"next_event returned {event!r}")


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    max_size = _SIZES[data[0] % len(_SIZES)]
    chunk = data[1]
    stream = data[2:]
    whole = [_describe(e) for e in _events(ServerConnection(max_size), stream, 0)]
    conn = ServerConnection(max_size)
    split = [_describe(e) for e in _events(conn, stream, chunk)]
    if split != whole:
        raise Finding(f"delivered in chunks of {chunk} the stream gives {split}, whole it gives {whole}")
    total = 0
    for kind, *fields in whole:
        if kind == "request":
            total += 4 + fields[-1]
        elif kind == "violation":
            reason = fields[0]
            if reason.startswith(_MALFORMED) and reason[len(_MALFORMED):].split(":")[0] not in OURS:
                raise Finding(f"a decoder failed with an error not ours: {reason}")
            conn.receive_data(b"\x00\x00\x00\x00")
            again = conn.next_event()
            if not isinstance(again, ProtocolViolation) or again.reason != reason or conn.buffered:
                raise Finding(f"after the violation {reason!r} the connection gave {again!r}")
    if total > len(stream):
        raise Finding(f"requests account for {total} bytes of a {len(stream)}-byte stream")
