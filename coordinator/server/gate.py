"""What the server needs of a connection's SASL gate (the gate itself lives in
coordinator/security/sasl/gate.py; app.py hands its factory in, so the server imports no wing).

The server asks the gate, for each request header and before the body is parsed, whether to
serve it with the handlers (``SERVE``), answer it from the gate (``SASL``: SaslHandshake and
SaslAuthenticate), or close the connection without an answer (``CLOSE``). Kafka's
``SaslServerAuthenticator`` and docs/protocol.html "SASL Authentication Sequence" define the order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Gate", "GateReplyLike", "GateFactory", "TlsPrincipal"]


class GateReplyLike(Protocol):
    @property
    def response(self) -> Any:
        """A response to the request (encoded by the server for the request's version), or None."""

    @property
    def raw(self) -> bytes | None:
        """Token bytes to send size-prefixed without a header (SASL v0; ``b""`` is an empty frame)."""

    @property
    def close(self) -> bool:
        """Close the connection after sending the answer (failed authentication)."""

    @property
    def delay_s(self) -> float:
        """Seconds to hold the answer before sending it and closing
        (``connection.failed.authentication.delay.ms``)."""


class Gate(Protocol):
    principal: str
    reason: str

    def frame_limit(self) -> int | None: ...

    def expects_raw_token(self) -> bool: ...

    def check(self, api_key: int, api_version: int) -> Any: ...  # an Enum whose name is SERVE, SASL or CLOSE

    def respond(self, api_key: int, api_version: int, request: Any) -> GateReplyLike: ...

    def raw_token(self, token: bytes) -> GateReplyLike: ...

    def session_expired(self) -> bool: ...


#: Makes the gate of one new connection.
GateFactory = Callable[[], Gate]

#: The principal of a TLS peer from its certificate (DER, None without one); raises ValueError
#: when no mapping rule applies, and the connection is refused.
TlsPrincipal = Callable[[bytes | None], str]
