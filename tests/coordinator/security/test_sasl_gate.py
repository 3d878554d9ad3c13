"""The per-connection SASL gate: which requests each state admits, handshake v0 and v1, Kafka's
errors 33/34/58 and texts, the receive-size cap, the failure delay and KIP-368 re-authentication."""

from __future__ import annotations

import pytest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from coordinator.security.sasl import GateState, SaslGate, Verdict, gate_factory, jaas_config_keys
from coordinator.security.sasl.scram_formatter import make_credential
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_USERS = {("bob", "SCRAM-SHA-512"): make_credential("SCRAM-SHA-512", "bob-secret", 4096)}
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism "

HS, AUTH, AV = ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def new_gate(clock: Clock | None = None, reauth_ms: int = 0, mechanisms: str = "PLAIN,SCRAM-SHA-512") -> SaslGate:
    factory = gate_factory(mechanisms, {"PLAIN": JAAS}, lambda u, m: SCRAM_USERS.get((u, m)),
                           reauth_ms=reauth_ms, failed_delay_ms=100, clock=clock or Clock())
    return factory()


def handshake(gate: SaslGate, mechanism: str, version: int = 1):
    assert gate.check(HS, version) is Verdict.SASL
    return gate.respond(HS, version, SaslHandshakeRequest(version=version, mechanism=mechanism))


def authenticate(gate: SaslGate, token: bytes, version: int = 2):
    assert gate.check(AUTH, version) is Verdict.SASL
    return gate.respond(AUTH, version, SaslAuthenticateRequest(version=version, auth_bytes=token))


def plain_login(gate: SaslGate, user: str = "alice", password: str = "alice-secret", version: int = 2):
    reply = handshake(gate, "PLAIN")
    assert reply.response.error_code == 0 and not reply.close
    return authenticate(gate, f"\x00{user}\x00{password}".encode(), version)


def test_plain_v1_success() -> None:
    gate = new_gate()
    assert gate.principal == "User:ANONYMOUS"
    assert gate.frame_limit() == 524288
    assert gate.check(AV, 3) is Verdict.SERVE
    reply = handshake(gate, "PLAIN")
    assert reply.response.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert not gate.expects_raw_token()
    reply = authenticate(gate, b"\x00alice\x00alice-secret")
    assert (reply.response.error_code, reply.response.auth_bytes, reply.close) == (0, b"", False)
    assert reply.response.session_lifetime_ms == 0
    assert gate.state is GateState.COMPLETE and gate.principal == "User:alice"
    assert gate.frame_limit() is None
    assert gate.check(ApiKey.METADATA, 12) is Verdict.SERVE
    assert gate.check(AV, 3) is Verdict.SERVE


def test_plain_bad_password_is_58_with_kafkas_text_and_delay() -> None:
    gate = new_gate()
    reply = plain_login(gate, password="nope")
    assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert reply.response.error_message == "Authentication failed: Invalid username or password"
    assert reply.close and reply.delay_s == pytest.approx(0.1)
    assert gate.state is GateState.FAILED and gate.principal == "User:ANONYMOUS"
    assert gate.check(ApiKey.METADATA, 1) is Verdict.CLOSE


def test_unsupported_mechanism_is_33_with_the_enabled_list() -> None:
    gate = new_gate()
    reply = handshake(gate, "GSSAPI")
    assert reply.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert reply.response.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert reply.close and reply.delay_s > 0


@pytest.mark.parametrize("key", [ApiKey.METADATA, ApiKey.JOIN_GROUP, AUTH, 9999])
def test_only_api_versions_and_handshake_before_handshake(key: int) -> None:
    gate = new_gate()
    assert gate.check(key, 0) is Verdict.CLOSE
    assert "during SASL handshake" in gate.reason


def test_second_api_versions_is_fatal_but_unsupported_version_keeps_state() -> None:
    gate = new_gate()
    assert gate.check(AV, 99) is Verdict.SERVE  # answered with the v0 UNSUPPORTED_VERSION reply
    assert gate.state is GateState.INITIAL
    assert gate.check(AV, 3) is Verdict.SERVE
    assert gate.check(AV, 3) is Verdict.CLOSE


@pytest.mark.parametrize("key, version", [(HS, 2), (AUTH, 3)])
def test_unknown_sasl_versions_close(key: int, version: int) -> None:
    gate = new_gate()
    if key == AUTH:
        handshake(gate, "PLAIN")
    assert gate.check(key, version) is Verdict.CLOSE


def test_other_request_while_authenticating_gets_its_error_response_34() -> None:
    gate = new_gate()
    handshake(gate, "PLAIN")
    assert gate.check(ApiKey.METADATA, 12) is Verdict.SASL
    reply = gate.respond(ApiKey.METADATA, 12, object())
    assert type(reply.response).__name__ == "MetadataResponse"
    assert reply.close and reply.delay_s > 0
    gate = new_gate()
    handshake(gate, "PLAIN")
    reply = gate.respond(ApiKey.JOIN_GROUP, 9, object())
    assert reply.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and reply.close


def test_handshake_and_authenticate_after_success_get_34_and_stay_open() -> None:
    gate = new_gate()
    plain_login(gate)
    reply = handshake(gate, "PLAIN")
    assert reply.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and not reply.close
    reply = authenticate(gate, b"\x00alice\x00alice-secret")
    assert reply.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and not reply.close
    assert reply.response.error_message == "SaslAuthenticate request received after successful authentication"
    assert gate.principal == "User:alice" and gate.state is GateState.COMPLETE


def test_handshake_v0_raw_tokens() -> None:
    gate = new_gate()
    reply = handshake(gate, "PLAIN", version=0)
    assert reply.response.error_code == 0
    assert gate.expects_raw_token()
    reply = gate.raw_token(b"\x00alice\x00alice-secret")
    assert reply.raw == b"" and not reply.close  # an empty frame still goes out
    assert gate.principal == "User:alice" and not gate.expects_raw_token()


def test_handshake_v0_failure_is_just_a_close() -> None:
    gate = new_gate()
    handshake(gate, "PLAIN", version=0)
    reply = gate.raw_token(b"\x00alice\x00bad")
    assert reply.response is None and reply.raw is None and reply.close and reply.delay_s > 0


def scram_login(gate: SaslGate, user: str, password: str, version: int = 2):
    handshake(gate, "SCRAM-SHA-512")
    client = ScramClient(["SCRAM-SHA-512"], user, password)
    first = authenticate(gate, client.get_client_first().encode(), version)
    assert first.response.error_code == 0, first.response.error_message
    client.set_server_first(first.response.auth_bytes.decode())
    reply = authenticate(gate, client.get_client_final().encode(), version)
    if reply.response.error_code == 0:
        client.set_server_final(reply.response.auth_bytes.decode())
    return reply


def test_scram_v1_success_and_failures_are_generic() -> None:
    gate = new_gate()
    assert scram_login(gate, "bob", "bob-secret").response.error_code == 0
    assert gate.principal == "User:bob"
    for user, password in (("bob", "wrong"), ("nobody", "bob-secret")):
        gate = new_gate()
        reply = scram_login(gate, user, password)
        assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert reply.response.error_message == GENERIC + "SCRAM-SHA-512"
        assert reply.close


def test_scram_raw_v0() -> None:
    gate = new_gate()
    handshake(gate, "SCRAM-SHA-512", version=0)
    client = ScramClient(["SCRAM-SHA-512"], "bob", "bob-secret")
    client.set_server_first(gate.raw_token(client.get_client_first().encode()).raw.decode())
    client.set_server_final(gate.raw_token(client.get_client_final().encode()).raw.decode())
    assert gate.principal == "User:bob"


def test_session_lifetime_and_expiry() -> None:
    clock = Clock()
    gate = new_gate(clock, reauth_ms=60_000)
    reply = plain_login(gate, version=1)
    assert reply.response.session_lifetime_ms == 60_000
    clock.now += 59.9
    assert not gate.session_expired() and gate.check(ApiKey.METADATA, 1) is Verdict.SERVE
    clock.now += 0.2
    assert gate.session_expired()
    assert gate.check(ApiKey.METADATA, 1) is Verdict.CLOSE
    assert gate.check(HS, 1) is Verdict.SASL  # a re-authentication may still start


def test_reauthentication_same_principal() -> None:
    clock = Clock()
    gate = new_gate(clock, reauth_ms=10_000)
    plain_login(gate)
    clock.now += 0.5
    assert handshake(gate, "PLAIN").response.error_code == ErrorCode.ILLEGAL_SASL_STATE  # within 1 s
    clock.now += 9
    reply = plain_login(gate)
    assert reply.response.error_code == 0 and reply.response.session_lifetime_ms == 10_000
    assert gate.principal == "User:alice" and not gate.session_expired()
    clock.now += 9.5
    assert not gate.session_expired()  # the new session runs from the re-authentication


def test_reauthentication_refuses_another_principal_or_mechanism() -> None:
    clock = Clock()
    gate = new_gate(clock, reauth_ms=10_000)
    plain_login(gate)
    clock.now += 2
    reply = plain_login(gate, user="admin", password="admin-secret")
    assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and reply.close
    assert reply.response.error_message == \
        "Cannot change principals during re-authentication from User:alice: User:admin"
    gate = new_gate(clock, reauth_ms=10_000)
    plain_login(gate)
    clock.now += 2
    assert handshake(gate, "SCRAM-SHA-512").response.error_code == 0  # Kafka fails the exchange, not this
    reply = authenticate(gate, b"n,,n=bob,r=abc")
    assert reply.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and reply.close
    assert "not supported for re-authentication of mechanism 'PLAIN'" in reply.response.error_message


def test_reauth_handshake_without_expiry_is_34() -> None:
    clock = Clock()
    gate = new_gate(clock)
    plain_login(gate)
    clock.now += 100
    reply = handshake(gate, "PLAIN")
    assert reply.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and not reply.close


def test_factory_checks_configuration() -> None:
    with pytest.raises(ValueError, match="not supported"):
        gate_factory("PLAIN,GSSAPI", {"PLAIN": JAAS}, None)
    with pytest.raises(ValueError, match="no sasl.jaas.config"):
        gate_factory(["PLAIN"], {}, None)
    with pytest.raises(ValueError, match="PlainLoginModule"):
        gate_factory(["PLAIN"], {"PLAIN": "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
                     None)
    with pytest.raises(ValueError, match="empty"):
        gate_factory("", {}, None)
    # SCRAM without a store: every login fails, nothing crashes.
    gate = gate_factory("SCRAM-SHA-256", {}, None)()
    handshake(gate, "SCRAM-SHA-256")
    assert authenticate(gate, b"n,,n=bob,r=abc").response.error_code == 0


def test_jaas_config_keys() -> None:
    assert jaas_config_keys("SASL_SSL", "SCRAM-SHA-512") == (
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config", "sasl.jaas.config")
