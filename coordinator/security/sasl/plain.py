"""SASL/PLAIN server (RFC 4616): one client message ``[authzid] NUL authcid NUL passwd``.

Kafka's checks, in its order, with its messages (``PlainSaslServer.evaluateResponse``,
https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/security/plain/internals/PlainSaslServer.java);
passwords are compared in constant time as ``PlainServerCallbackHandler`` does since apache/kafka#10978.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from .errors import AuthenticationFailed, SaslFailure

__all__ = ["PlainServer"]

MECHANISM = "PLAIN"


class PlainServer:
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        #: The authenticated user name once ``complete``.
        self.username = ""

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Authentication exchange has completed")
        # Kafka decodes as UTF-8 replacing bad bytes; a bad byte cannot match a configured user anyway.
        tokens = response.decode("utf-8", errors="replace").split("\x00", 3)
        if len(tokens) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare against something of the same kind for unknown users too, so timing does not tell.
        ok = hmac.compare_digest((expected if expected is not None else "\x00" + password).encode(),
                                 password.encode())
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""
