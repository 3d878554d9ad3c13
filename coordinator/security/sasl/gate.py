"""The SASL state of one connection on a ``SASL_PLAINTEXT`` or ``SASL_SSL`` listener (sans-I/O).

The server asks :meth:`SaslGate.check` for every request, from its header and before it parses the
body; a ``SASL`` verdict sends the request to :meth:`SaslGate.respond`, and after a SaslHandshake v0
the next frame is a raw token for :meth:`SaslGate.raw_token`. The states and rules are those of
Kafka's ``SaslServerAuthenticator`` and ``KafkaChannel`` (reference/security.md §2,
https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslServerAuthenticator.java;
the wire sequence: https://kafka.apache.org/protocol.html#sasl_handshake):

- ``INITIAL``: ApiVersions (once) or SaslHandshake; anything else closes without a response.
- ``HANDSHAKE``: after that ApiVersions, only SaslHandshake.
- ``AUTHENTICATE``: v1 handshake → SaslAuthenticate only (any other request gets its own error
  response with ILLEGAL_SASL_STATE, then the connection closes); v0 → raw tokens.
- ``COMPLETE``: normal requests. A SaslHandshake starts a KIP-368 re-authentication only when the
  session has an expiry and the last one began a second ago or more; otherwise it gets 34, as does
  a SaslAuthenticate (https://cwiki.apache.org/confluence/display/KAFKA/KIP-368%3A+Allow+SASL+Connections+to+Periodically+Re-Authenticate).
- ``FAILED``: the connection closes, after ``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, response_class
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaResponse

from .errors import AuthenticationFailed, SaslFailure, generic_failure_message
from .jaas import PLAIN_LOGIN_MODULE, JaasError, single_login_module
from .plain import PlainServer
from .scram import CredentialLookup, ScramServer
from .scram_formatter import MECHANISMS as SCRAM_MECHANISMS

__all__ = ["Verdict", "GateState", "GateReply", "SaslGate", "Authenticator", "gate_factory", "jaas_config_keys",
           "SUPPORTED_MECHANISMS", "DEFAULT_MAX_RECEIVE_SIZE", "DEFAULT_REAUTH_MS", "DEFAULT_FAILED_DELAY_MS"]

log = logging.getLogger("groupcoord.security.sasl")

ANONYMOUS = "User:ANONYMOUS"
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: Kafka's defaults (``BrokerSecurityConfigs``, ``SocketServerConfigs``; reference/security.md §2).
DEFAULT_MAX_RECEIVE_SIZE = 524288  # sasl.server.max.receive.size
DEFAULT_REAUTH_MS = 0  # connections.max.reauth.ms
DEFAULT_FAILED_DELAY_MS = 100  # connection.failed.authentication.delay.ms
#: KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: at most one re-authentication a second.
MIN_REAUTH_INTERVAL_S = 1.0
_HANDSHAKE_VERSIONS = (0, 1)
_AUTHENTICATE_VERSIONS = (0, 2)


class Verdict(Enum):
    SERVE = "serve"  # a normal request: parse it and hand it to its handler
    SASL = "sasl"  # parse it and give it to SaslGate.respond
    CLOSE = "close"  # close now, without a response; the reason is in SaslGate.reason


class GateState(Enum):
    INITIAL = "initial"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class GateReply:
    """What to send: ``response`` (a header-framed response) or ``raw`` (a bare size-prefixed token,
    possibly empty, after SaslHandshake v0), or neither; then close when ``close``, after
    ``delay_s`` seconds when authentication failed (``connection.failed.authentication.delay.ms``)."""

    response: KafkaResponse | None = None
    raw: bytes | None = None
    close: bool = False
    delay_s: float = 0.0


class Authenticator(Protocol):
    """One SASL server exchange (``PlainServer``, ``ScramServer``)."""

    mechanism: str
    complete: bool
    username: str

    def evaluate(self, response: bytes) -> bytes: ...


class SaslGate:
    def __init__(self, mechanisms: Mapping[str, Callable[[], Authenticator]], *,
                 max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE, reauth_ms: int = DEFAULT_REAUTH_MS,
                 failed_delay_ms: int = DEFAULT_FAILED_DELAY_MS,
                 clock: Callable[[], float] = time.monotonic,
                 versions: Mapping[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS) -> None:
        self._factories = mechanisms
        #: The versions the server admits (protocol/apis.py): ``ZOOKEEPER_MODE_VERSIONS`` on a cluster node,
        #: whose OffsetCommit v0 during the exchange gets its error response like any known version.
        self._versions = versions
        self._enabled = list(mechanisms)
        self._max_receive_size = max_receive_size
        self._reauth_ms = reauth_ms
        self._failed_delay_s = failed_delay_ms / 1000.0
        self._clock = clock
        self.state = GateState.INITIAL
        self.principal = ANONYMOUS
        #: Why the last CLOSE verdict or failure happened (for the log; never sent).
        self.reason = ""
        self._raw = False
        self._mechanism = ""  # of the exchange under way, then of the session
        self._authenticator: Authenticator | None = None
        self._auth_began: float | None = None
        self._expiry: float | None = None
        self._reauthenticating = False
        self._bad_reauth_mechanism = ""

    # --- what the server asks before parsing -------------------------------------------------------

    def frame_limit(self) -> int | None:
        """``sasl.server.max.receive.size`` until authenticated (and during a re-authentication)."""
        return None if self.state is GateState.COMPLETE else self._max_receive_size

    def expects_raw_token(self) -> bool:
        return self.state is GateState.AUTHENTICATE and self._raw

    def session_expired(self) -> bool:
        """KIP-368: the session's time is up; the server closes at the next request other than
        SaslHandshake (idle connections are left alone)."""
        return (self.state is GateState.COMPLETE and self._expiry is not None
                and self._clock() >= self._expiry)

    def check(self, api_key: int, api_version: int) -> Verdict:
        state = self.state
        if state is GateState.COMPLETE:
            if api_key == ApiKey.SASL_HANDSHAKE:
                return self._versioned(api_key, api_version, _HANDSHAKE_VERSIONS)
            if self.session_expired():
                return self._close("session expired (connections.max.reauth.ms); re-authentication required")
            if api_key == ApiKey.SASL_AUTHENTICATE:
                return self._versioned(api_key, api_version, _AUTHENTICATE_VERSIONS)
            return Verdict.SERVE
        if state is GateState.INITIAL and api_key == ApiKey.API_VERSIONS:
            low, high = self._versions[ApiKey.API_VERSIONS]
            if low <= api_version <= high:  # an unsupported one gets its v0 reply, state unchanged
                self.state = GateState.HANDSHAKE
            return Verdict.SERVE
        if state in (GateState.INITIAL, GateState.HANDSHAKE):
            if api_key == ApiKey.SASL_HANDSHAKE:
                return self._versioned(api_key, api_version, _HANDSHAKE_VERSIONS)
            return self._close(f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake.")
        if state is GateState.AUTHENTICATE and not self._raw:
            if api_key == ApiKey.SASL_AUTHENTICATE:
                return self._versioned(api_key, api_version, _AUTHENTICATE_VERSIONS)
            low, high = self._versions.get(api_key, (0, -1))  # type: ignore[call-overload]
            if low <= api_version <= high:
                return Verdict.SASL  # respond() answers it with ILLEGAL_SASL_STATE, then closes
            return self._close(f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication.")
        if state is GateState.AUTHENTICATE:
            return self._close("a raw SASL token was expected after SaslHandshake v0")
        return self._close("authentication failed")

    def _versioned(self, api_key: int, api_version: int, versions: tuple[int, int]) -> Verdict:
        if versions[0] <= api_version <= versions[1]:
            return Verdict.SASL
        # Kafka cannot build an error response for a version it does not know: it closes.
        return self._close(f"Version {api_version} is not supported for apiKey {_name(api_key)}")

    def _close(self, reason: str) -> Verdict:
        self.reason = reason
        if self.state is not GateState.COMPLETE:
            self.state = GateState.FAILED
        return Verdict.CLOSE

    # --- SASL requests -------------------------------------------------------------------------------

    def respond(self, api_key: int, api_version: int, request: object) -> GateReply:
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(api_version, str(getattr(request, "mechanism", "")))
        if api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(api_version, bytes(getattr(request, "auth_bytes", b"") or b""))
        # Any other request while a SaslAuthenticate is due: its own error response, then close.
        self.reason = f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
        return self._fail(_error_response(api_key, api_version, ErrorCode.ILLEGAL_SASL_STATE))

    def _handshake(self, version: int, mechanism: str) -> GateReply:
        now = self._clock()
        if self.state is GateState.COMPLETE:
            began = self._auth_began if self._auth_began is not None else now
            if self._expiry is None or now - began < MIN_REAUTH_INTERVAL_S:
                # Not a re-authentication: Kafka's request handler answers 34 and keeps the connection.
                return GateReply(SaslHandshakeResponse(version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                       mechanisms=[]))
            self._reauthenticating = True
        elif self.state not in (GateState.INITIAL, GateState.HANDSHAKE):
            self.reason = "SaslHandshake received during SASL authentication"
            return self._fail(SaslHandshakeResponse(version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                    mechanisms=[]))
        if mechanism not in self._factories:
            self.reason = f"Unsupported SASL mechanism {mechanism}"
            return self._fail(SaslHandshakeResponse(version=version,
                                                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                    mechanisms=list(self._enabled)))
        if self._reauthenticating and mechanism != self._mechanism:
            # Kafka answers the handshake, then fails the exchange that follows.
            self._bad_reauth_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported "
                                          f"for re-authentication of mechanism '{self._mechanism}'")
        else:
            self._mechanism = mechanism
        self._authenticator = self._factories[mechanism]()
        self._auth_began = now
        self._raw = version == 0
        self.state = GateState.AUTHENTICATE
        return GateReply(SaslHandshakeResponse(version=version, error_code=ErrorCode.NONE,
                                               mechanisms=list(self._enabled)))

    def _authenticate(self, version: int, token: bytes) -> GateReply:
        if self.state is GateState.COMPLETE:
            return GateReply(SaslAuthenticateResponse(
                version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received after successful authentication",
                auth_bytes=b"", session_lifetime_ms=0))
        if self.state is not GateState.AUTHENTICATE or self._raw:
            self.reason = "SaslAuthenticate received outside SASL authentication"
            return self._fail(SaslAuthenticateResponse(version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                       error_message=None, auth_bytes=b"", session_lifetime_ms=0))
        try:
            challenge = self._evaluate(token)
        except SaslFailure as e:
            message = str(e) if isinstance(e, AuthenticationFailed) else generic_failure_message(self._mechanism)
            return self._fail(SaslAuthenticateResponse(
                version=version, error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                auth_bytes=b"", session_lifetime_ms=0))
        lifetime = self._lifetime_ms() if self.state is GateState.COMPLETE else 0
        return GateReply(SaslAuthenticateResponse(version=version, error_code=ErrorCode.NONE, error_message=None,
                                                  auth_bytes=challenge, session_lifetime_ms=lifetime))

    def raw_token(self, token: bytes) -> GateReply:
        """A SaslHandshake v0 exchange: the token in, the challenge out as a bare frame; a failure
        is just a close (which is why KIP-152 added SaslAuthenticate)."""
        if not self.expects_raw_token():
            self.reason = "unexpected raw SASL token"
            return self._fail(None)
        try:
            challenge = self._evaluate(token)
        except SaslFailure:
            return self._fail(None)
        return GateReply(raw=challenge)

    def _evaluate(self, token: bytes) -> bytes:
        """Run one step; on completion switch to COMPLETE. Raises SaslFailure (state then FAILED by _fail)."""
        if self._bad_reauth_mechanism:
            self.reason = self._bad_reauth_mechanism
            raise AuthenticationFailed(self._bad_reauth_mechanism)
        authenticator = self._authenticator
        assert authenticator is not None
        try:
            challenge = authenticator.evaluate(token)
        except SaslFailure as e:
            self.reason = f"{self._mechanism}: {e}"
            raise
        if authenticator.complete:
            principal = f"User:{authenticator.username}"
            if self._reauthenticating and principal != self.principal:
                self.reason = f"Cannot change principals during re-authentication from {self.principal}: {principal}"
                raise AuthenticationFailed(self.reason)
            self.principal = principal
            self.state = GateState.COMPLETE
            self._authenticator = None
            self._raw = False
            self._reauthenticating = False
            self._expiry = None if self._reauth_ms <= 0 else self._clock() + self._reauth_ms / 1000.0
        return challenge

    def _lifetime_ms(self) -> int:
        """SessionLifetimeMs of the final SaslAuthenticate (v1+): the max-reauth value, else 0."""
        return max(self._reauth_ms, 0)

    def _fail(self, response: KafkaResponse | None) -> GateReply:
        self.state = GateState.FAILED
        self._authenticator = None
        log.info("SASL authentication failed", extra={"reason": self.reason, "mechanism": self._mechanism})
        return GateReply(response=response, close=True, delay_s=self._failed_delay_s)


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _error_response(api_key: int, api_version: int, error: int) -> KafkaResponse:
    """The request's own response type carrying ``error`` in its top-level error code (Kafka:
    ``AbstractRequest.getErrorResponse``); those without one go out empty before the close."""
    response = response_class(api_key)(version=api_version)
    if hasattr(response, "error_code"):
        response.error_code = error
    return response


def jaas_config_keys(listener_name: str, mechanism: str) -> tuple[str, str]:
    """Where Kafka looks for a mechanism's JAAS config on a listener, first match wins:
    ``listener.name.<listener lower case>.<mechanism lower case>.sasl.jaas.config``, then ``sasl.jaas.config``."""
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config", "sasl.jaas.config"


def gate_factory(enabled_mechanisms: Sequence[str] | str, jaas_configs: Mapping[str, str],
                 credentials: CredentialLookup | None, *, max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
                 reauth_ms: int = DEFAULT_REAUTH_MS, failed_delay_ms: int = DEFAULT_FAILED_DELAY_MS,
                 clock: Callable[[], float] = time.monotonic,
                 versions: Mapping[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS) -> Callable[[], SaslGate]:
    """Gates for one listener. ``enabled_mechanisms`` is ``sasl.enabled.mechanisms`` (a list or its
    comma-separated string); ``jaas_configs`` maps a mechanism to its JAAS config string (the first of
    :func:`jaas_config_keys` that is set); ``credentials`` finds SCRAM credentials (a store's ``get``);
    ``versions`` is the server's table of admitted versions.
    Raises ValueError for a configuration Kafka would refuse at start-up."""
    if isinstance(enabled_mechanisms, str):
        enabled_mechanisms = [m.strip() for m in enabled_mechanisms.split(",") if m.strip()]
    if not enabled_mechanisms:
        raise ValueError("sasl.enabled.mechanisms is empty on a SASL listener")
    factories: dict[str, Callable[[], Authenticator]] = {}
    for mechanism in enabled_mechanisms:
        if mechanism == "PLAIN":
            users = _plain_users(jaas_configs.get(mechanism))
            factories[mechanism] = lambda users=users: PlainServer(users)  # type: ignore[misc]
        elif mechanism in SCRAM_MECHANISMS:
            lookup = credentials if credentials is not None else _no_credentials
            factories[mechanism] = lambda m=mechanism, lookup=lookup: ScramServer(m, lookup)  # type: ignore[misc]
        else:
            raise ValueError(f"SASL mechanism {mechanism} is not supported (supported: "
                             f"{', '.join(SUPPORTED_MECHANISMS)})")

    def new_gate() -> SaslGate:
        return SaslGate(factories, max_receive_size=max_receive_size, reauth_ms=reauth_ms,
                        failed_delay_ms=failed_delay_ms, clock=clock, versions=versions)

    return new_gate


def _plain_users(jaas: str | None) -> dict[str, str]:
    if not jaas:
        raise ValueError("SASL mechanism PLAIN is enabled but no sasl.jaas.config names its users")
    try:
        module = single_login_module(jaas)
    except JaasError as e:
        raise ValueError(f"sasl.jaas.config: {e}") from None
    if module.name != PLAIN_LOGIN_MODULE:
        raise ValueError(f"sasl.jaas.config for PLAIN must use {PLAIN_LOGIN_MODULE}, not {module.name}")
    return {key[5:]: value for key, value in module.options.items() if key.startswith("user_")}


def _no_credentials(user: str, mechanism: str) -> None:
    return None
