"""The server side of SASL listeners: the gate sees each header before the body is parsed, frames
are capped before authentication, v0 raw tokens, failed authentication answered after the delay
then closed, session expiry (KIP-368), and the principal handed to handlers."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from coordinator.security.sasl.gate import SaslGate, gate_factory
from protocol.apis import ApiKey
from protocol.client import encode_request
from protocol.errors import ErrorCode
from tests.coordinator.security.tls_fixtures import API_VERSIONS_V0, LoopServer, api_versions_ok
from tests.wire_client import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
DELAY_MS = 300


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


#: Every gate the listener made, newest last.
GATES: list[SaslGate] = []


@pytest.fixture(scope="module")
def sasl_port(clock: Clock) -> Iterator[tuple[LoopServer, int]]:
    server = LoopServer()
    gates = gate_factory(["PLAIN"], {"PLAIN": JAAS}, None, max_receive_size=4096, reauth_ms=60000,
                         failed_delay_ms=DELAY_MS, clock=clock)

    def recorded() -> SaslGate:
        GATES.append(gates())
        return GATES[-1]

    port = server.bind(listener="SASL_PLAINTEXT", gate_factory=recorded)
    server.start()
    yield server, port
    server.stop()


def _closed_without_answer(client: WireClient) -> bool:
    client.sock.settimeout(5)
    return client.sock.recv(1) == b""


def _authenticate(client: WireClient, password: str = "alice-secret") -> object:
    handshake = client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.NONE and handshake.mechanisms == ["PLAIN"]
    return client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
        version=2, auth_bytes=f"\0alice\0{password}".encode()))


def test_plain_v1_authenticates_and_handlers_see_the_principal(sasl_port: tuple[LoopServer, int]) -> None:
    server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        assert api_versions_ok(client)  # allowed once before the handshake
        assert server.contexts[-1].principal == "User:ANONYMOUS"
        assert _authenticate(client).error_code == ErrorCode.NONE
        assert api_versions_ok(client)
    ctx = server.contexts[-1]
    assert (ctx.principal, ctx.listener, ctx.client_host) == ("User:alice", "SASL_PLAINTEXT", "127.0.0.1")


def test_a_non_sasl_request_before_authentication_closes_without_a_response(
        sasl_port: tuple[LoopServer, int]) -> None:
    _server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        # A Metadata header with a body that does not parse: refused from the header alone.
        frame = encode_request(ApiKey.METADATA, 9, 7, MetadataRequest(version=9, topics=None))
        client.sock.sendall(frame[:4 + 14] + b"\xff" * (len(frame) - 18))
        assert _closed_without_answer(client)
    # The gate refused it: had the body been parsed first, it would have failed as malformed
    # before the gate was asked.
    assert GATES[-1].reason == "Unexpected Kafka request of type METADATA during SASL handshake."


def test_a_second_api_versions_before_the_handshake_closes(sasl_port: tuple[LoopServer, int]) -> None:
    _server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        assert api_versions_ok(client)
        client.send(ApiKey.API_VERSIONS, 0, API_VERSIONS_V0)
        assert _closed_without_answer(client)


def test_frames_above_the_receive_size_are_refused_before_authentication(
        sasl_port: tuple[LoopServer, int]) -> None:
    _server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        client.sock.sendall(struct.pack(">i", 4097) + b"\0" * 64)  # sasl.server.max.receive.size 4096 here
        assert _closed_without_answer(client)


def test_a_failed_authentication_is_answered_after_the_delay_then_closed(
        sasl_port: tuple[LoopServer, int]) -> None:
    _server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism="PLAIN"))
        started = time.monotonic()
        failed = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
            version=2, auth_bytes=b"\0alice\0wrong"))
        assert time.monotonic() - started >= DELAY_MS / 1000 * 0.9
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed_without_answer(client)


def test_v0_raw_tokens(sasl_port: tuple[LoopServer, int]) -> None:
    server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        handshake = client.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(version=0, mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.NONE
        token = b"\0bob\0bob-secret"
        client.sock.sendall(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's empty final server message, size-prefixed
        assert api_versions_ok(client)
    assert server.contexts[-1].principal == "User:bob"


def test_an_expired_session_is_closed_at_its_next_request(sasl_port: tuple[LoopServer, int], clock: Clock) -> None:
    _server, port = sasl_port
    with WireClient("127.0.0.1", port) as client:
        done = _authenticate(client)
        assert done.error_code == ErrorCode.NONE and done.session_lifetime_ms == 60000
        assert api_versions_ok(client)
        clock.now += 61
        client.send(ApiKey.API_VERSIONS, 0, API_VERSIONS_V0)
        assert _closed_without_answer(client)


def test_sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state() -> None:
    # The node's handlers for a listener without SASL (coordinator/app.py), as Kafka's KafkaApis.
    from coordinator.app import _sasl_authenticate_without_sasl, _sasl_handshake_without_sasl
    from coordinator.context import RequestContext

    ctx = RequestContext(ApiKey.SASL_HANDSHAKE, 1, 1, "c", "peer")
    assert _sasl_handshake_without_sasl(ctx, None).error_code == ErrorCode.ILLEGAL_SASL_STATE
    ctx = RequestContext(ApiKey.SASL_AUTHENTICATE, 2, 1, "c", "peer")
    assert _sasl_authenticate_without_sasl(ctx, None).error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_a_failing_gate_closes_only_its_connection(sasl_port: tuple[LoopServer, int]) -> None:
    server, _port = sasl_port
    real = gate_factory(["PLAIN"], {"PLAIN": JAAS}, None)

    def broken() -> SaslGate:
        gate = real()

        def respond(*_args: object) -> object:
            raise RuntimeError("bug in the gate")

        gate.respond = respond  # type: ignore[method-assign]
        return gate

    port = server.bind(listener="BROKEN", gate_factory=broken)
    server.start()
    with WireClient("127.0.0.1", port) as client:
        client.send(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism="PLAIN"))
        assert _closed_without_answer(client)
    with WireClient("127.0.0.1", sasl_port[1]) as client:  # the server goes on serving
        assert api_versions_ok(client)
