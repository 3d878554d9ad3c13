"""The two ways a SASL exchange fails, as Kafka's ``SaslServerAuthenticator`` tells them apart
(reference/security.md §2): an :class:`AuthenticationFailed` message reaches the client verbatim
(PLAIN's "Invalid username or password"); any other :class:`SaslFailure` is replaced by one generic
text, because its details "may contain sensitive data like the existence of the user"
(``SaslServerAuthenticator.handleSaslToken``,
https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslServerAuthenticator.java).
"""

from __future__ import annotations

__all__ = ["SaslFailure", "AuthenticationFailed", "generic_failure_message"]


class SaslFailure(Exception):
    """Kafka's ``SaslException``: logged here, a generic message on the wire."""


class AuthenticationFailed(SaslFailure):
    """Kafka's ``SaslAuthenticationException``: its message goes to the client."""


def generic_failure_message(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
