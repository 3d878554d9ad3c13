"""Every request body decoder, for every api and version the server advertises.

Edge: the body of a request frame, after the header, as ``ServerConnection`` decodes it
(``protocol.request_codec.body_decoder``) and then checks for nulls the schema forbids
(``protocol.nullability``). The (api, version) pairs come from ``api_version_entries()``, the
very list an ApiVersions response carries, so an api is fuzzed the day it is advertised.

Input: byte 0 is the api key, byte 1 the version, the rest the body. A pair the server does not
advertise is mapped onto one it does (by its two bytes modulo the table), so every input
exercises some decoder while saved inputs of advertised pairs keep their meaning as the table
grows.

Properties: the decoder returns a message or raises ``MalformedRequest``; a message either passes
the null check or fails it with ``NullInNonNullableField``. Nothing else, and every input fast.
And what our decoder accepts, kafka-python's own ``decode`` (whose generated code ours reuses
with stricter reads) decodes to the same message: stricter, never different.
"""

from __future__ import annotations

from protocol.apis import request_class
from protocol.nullability import NullInNonNullableField, null_checker
from protocol.request_codec import MalformedRequest, body_decoder
from protocol.responses import api_version_entries
from tests.fuzz import golden
from tests.fuzz.harness import Finding, expect

NAME = "requests"
INSTRUMENT = ("protocol.request_codec", "protocol.nullability", "kafka.protocol.generated")

#: The decoders' own errors.
OURS = (MalformedRequest, NullInNonNullableField)

#: (api key, version) -> (decode, check nulls), for everything ApiVersions advertises. Built at
#: import, which also compiles the decoders (generated code) before run.py instruments them.
PLANS = {
    (entry.api_key, version): (body_decoder(request_class(entry.api_key), version),
                               null_checker(request_class(entry.api_key), version))
    for entry in api_version_entries()
    for version in range(entry.min_version, entry.max_version + 1)
}
_PAIRS = sorted(PLANS)


def _pair(data: bytes) -> tuple[int, int]:
    pair = (data[0], data[1])
    return pair if pair in PLANS else _PAIRS[(data[0] << 8 | data[1]) % len(_PAIRS)]


def seeds() -> list[bytes]:
    """Every recorded client body, and the codec's encoding of a default message of every
    advertised pair (so pairs no recorded client sent start from a valid body too)."""
    out = []
    for frame in golden.frames():
        api_key, version, body = golden.split(frame)
        if (api_key, version) in PLANS:
            out.append(bytes([api_key, version]) + body)
    for api_key, version in _PAIRS:
        out.append(bytes([api_key, version]) + request_class(api_key)(version=version).encode(version=version))
    return out


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    api_key, version = _pair(data)
    decode, check_nulls = PLANS[api_key, version]
    body = data[2:]
    with expect(*OURS):
        message = decode(memoryview(body))
        theirs = request_class(api_key).decode(body, version=version)
        if repr(theirs) != repr(message):
            raise Finding(f"api {api_key} v{version}: we decode {message!r}, kafka-python {theirs!r}")
        check_nulls(message)
