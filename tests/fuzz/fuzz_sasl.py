"""The SASL edge: request frames of a connection on a SASL listener through the ``SaslGate``.

Edge: what a client can send before it is authenticated — ApiVersions, SaslHandshake v0/v1, the
PLAIN message and the SCRAM client-first/client-final messages (in SaslAuthenticate or as raw v0
tokens), and requests out of turn — taken as the server takes them (tests/coordinator/security/
gate_wire.py: frame cap, verdict from the header before the body is parsed, then the gate).

Input: byte 0 picks the connection's settings (re-authentication on or off, how far the clock moves
between frames); the rest is frames, each a 2-byte length and its bytes, until a close. The server
nonce is fixed so that the seeds' SCRAM exchanges succeed and mutations start from a real login.
Properties:

1. Nothing raises but the body decoders' own errors (a malformed request closes the connection).
2. No request other than ApiVersions reaches a handler before authentication, and every request
   that does runs as ``User:ANONYMOUS`` or as one of the configured users — never another name.
3. Until authenticated the frame cap holds, and an authenticated principal is a configured user.
4. After the gate says close, it never serves again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from coordinator.security.sasl.gate import GateState, SaslGate
from coordinator.security.sasl.plain import PlainServer
from coordinator.security.sasl.scram import ScramServer
from coordinator.security.sasl.scram_formatter import make_credential
from protocol.apis import ApiKey
from protocol.client import encode_request
from protocol.nullability import NullInNonNullableField
from protocol.request_codec import MalformedRequest
from tests.coordinator.security.gate_wire import handle_frame
from tests.fuzz.harness import Finding, expect, quiet

NAME = "sasl"
INSTRUMENT = ("coordinator.security.sasl.gate", "coordinator.security.sasl.scram",
              "coordinator.security.sasl.plain")

PLAIN_USERS = {"alice": "alice-secret", "a,b=c": "p"}
SCRAM_PASSWORD = "bob-secret"
SALT = b"fuzzsalt"
SCRAM_USERS = {(name, mech): make_credential(mech, SCRAM_PASSWORD, 4096, SALT)
               for name in ("bob", "x,y") for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
PRINCIPALS = {"User:ANONYMOUS"} | {f"User:{n}" for n in PLAIN_USERS} | {f"User:{n}" for n, _ in SCRAM_USERS}
S_NONCE = "fuzzservernonce"
C_NONCE = "fuzzclientnonce"
MAX_RECEIVE = 512


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _gate(reauth: bool, clock: _Clock) -> SaslGate:
    factories = {
        "PLAIN": lambda: PlainServer(PLAIN_USERS),
        "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", lambda u, m: SCRAM_USERS.get((u, m)),
                                             server_nonce=S_NONCE, fake_secret=b"fuzz"),
        "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", lambda u, m: SCRAM_USERS.get((u, m)),
                                             server_nonce=S_NONCE, fake_secret=b"fuzz"),
    }
    return SaslGate(factories, max_receive_size=MAX_RECEIVE, reauth_ms=1500 if reauth else 0, failed_delay_ms=0,
                    clock=clock)


def _handlers(calls: list[tuple[int, str]]) -> dict[int, object]:
    def api_versions(ctx, request):  # type: ignore[no-untyped-def]
        calls.append((ctx.api_key, ctx.principal))
        return ApiVersionsResponse(version=ctx.api_version, error_code=0, api_keys=[], throttle_time_ms=0)

    def metadata(ctx, request):  # type: ignore[no-untyped-def]
        calls.append((ctx.api_key, ctx.principal))
        return MetadataResponse(version=ctx.api_version, throttle_time_ms=0, brokers=[], cluster_id=None,
                                controller_id=-1, topics=[])

    return {ApiKey.API_VERSIONS: api_versions, ApiKey.METADATA: metadata}


# --- seeds -------------------------------------------------------------------------------------------------


def _req(key: int, version: int, request: object, correlation: int = 1) -> bytes:
    return encode_request(key, version, correlation, request)[4:]


def _handshake(mechanism: str, version: int = 1) -> bytes:
    return _req(ApiKey.SASL_HANDSHAKE, version, SaslHandshakeRequest(version=version, mechanism=mechanism))


def _auth(token: bytes, version: int = 2) -> bytes:
    return _req(ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(version=version, auth_bytes=token))


def _scram_tokens(mechanism: str, user: str, password: str) -> list[bytes]:
    h = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={C_NONCE}"
    server_first = f"r={C_NONCE}{S_NONCE},s={base64.b64encode(SALT).decode()},i=4096"
    without_proof = f"c=biws,r={C_NONCE}{S_NONCE}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac(h, password.encode(), SALT, 4096)
    client_key = hmac.digest(salted, b"Client Key", h)
    signature = hmac.digest(hashlib.new(h, client_key).digest(), auth, h)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    return [f"n,,{bare}".encode(), f"{without_proof},p={proof}".encode()]


def _input(settings: int, frames: list[bytes]) -> bytes:
    return bytes([settings]) + b"".join(struct.pack(">H", len(f)) + f for f in frames)


def seeds() -> list[bytes]:
    api_versions = _req(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(version=3, client_software_name="fuzz",
                                                                    client_software_version="1"))
    metadata = _req(ApiKey.METADATA, 12, MetadataRequest(version=12, topics=None,
                                                          allow_auto_topic_creation=False,
                                                          include_topic_authorized_operations=False))
    plain = b"\x00alice\x00alice-secret"
    out = [
        _input(0, [api_versions, _handshake("PLAIN"), _auth(plain), metadata]),
        _input(0, [_handshake("PLAIN", 0), plain, metadata]),
        _input(0, [_handshake("GSSAPI")]),
        _input(0, [metadata]),
        _input(0, [_handshake("PLAIN"), metadata]),
        _input(0, [_handshake("PLAIN"), _auth(b"\x00a,b=c\x00p", 0), _handshake("PLAIN"), _auth(plain)]),
        # Re-authentication: clock steps of 1 s, sessions of 1.5 s.
        _input(0b0101, [_handshake("PLAIN"), _auth(plain, 1), metadata, _handshake("PLAIN"), _auth(plain),
                        metadata, metadata]),
        _input(0, [api_versions, api_versions]),
    ]
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        first, final = _scram_tokens(mechanism, "x,y", SCRAM_PASSWORD)
        out.append(_input(0, [api_versions, _handshake(mechanism), _auth(first), _auth(final), metadata]))
        out.append(_input(0, [_handshake(mechanism, 0), first, final, metadata]))
        first, final = _scram_tokens(mechanism, "bob", "wrong")
        out.append(_input(0, [_handshake(mechanism), _auth(first), _auth(final)]))
    return out


# --- one input -----------------------------------------------------------------------------------------------


def _frames(data: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos + 2 <= len(data):
        (size,) = struct.unpack_from(">H", data, pos)
        frames.append(data[pos + 2 : pos + 2 + size])
        pos += 2 + size
    return frames


def one_input(data: bytes) -> None:
    if not data:
        return
    settings = data[0]
    clock = _Clock()
    gate = _gate(bool(settings & 1), clock)
    calls: list[tuple[int, str]] = []
    handlers = _handlers(calls)
    with quiet():
        for frame in _frames(data[1:]):
            clock.now += (settings >> 1 & 7) * 0.5
            before = gate.state
            limit = gate.frame_limit()
            served = len(calls)
            closed = True
            with expect(MalformedRequest, NullInNonNullableField):
                _, closed = handle_frame(gate, handlers, frame)  # type: ignore[arg-type]
            if len(calls) > served:
                key, principal = calls[-1]
                if principal not in PRINCIPALS:
                    raise Finding(f"a request ran as {principal}")
                if key != ApiKey.API_VERSIONS and principal == "User:ANONYMOUS":
                    raise Finding(f"api {key} was served before authentication (state {before})")
                if limit is not None and len(frame) > limit:
                    raise Finding(f"a {len(frame)}-byte frame passed the {limit}-byte cap")
            if gate.state is GateState.COMPLETE and gate.principal not in PRINCIPALS - {"User:ANONYMOUS"}:
                raise Finding(f"authenticated as {gate.principal}")
            if closed:
                break
