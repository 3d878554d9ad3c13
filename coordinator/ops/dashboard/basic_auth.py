"""Who is changing something through the dashboard: HTTP Basic (RFC 7617) checked against the
node's own SASL users, so the principal that reaches the OffsetCommit handler — and its ACLs — is
the one a Kafka client logging in with the same password would have.

PLAIN users are the ``user_<name>`` options of the JAAS config (coordinator/security/sasl/jaas.py),
compared in constant time as the PLAIN server does. A SCRAM user's password is checked the way the
SCRAM server checks a proof: recompute the stored key from the password with the credential's own
salt and iterations (RFC 5802 §3; coordinator/security/sasl/scram_formatter.py) and compare.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from collections.abc import Mapping
from typing import Any

from coordinator.security.sasl.scram_formatter import MECHANISMS, credential_from_salted_password, salted_password

__all__ = ["BasicAuth", "REALM", "parse_basic"]

REALM = "groupcoord"


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an ``Authorization: Basic ...`` header, None when absent or malformed."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    if not sep or not user:
        return None
    return user, password


class BasicAuth:
    """``plain_users``: name → password; ``scram_store``: anything with ``get(user, mechanism)`` and
    ``users()`` (coordinator/security/scram_credentials.py)."""

    def __init__(self, plain_users: Mapping[str, str] | None = None, scram_store: Any = None) -> None:
        self._plain = dict(plain_users or {})
        self._scram = scram_store

    def required(self) -> bool:
        """True when the node has SASL users: then a mutation needs one of them."""
        if self._plain:
            return True
        return bool(self._scram is not None and self._scram.users())

    def _check(self, user: str, password: str) -> bool:
        expected = self._plain.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        if self._scram is None:
            return False
        for mechanism in MECHANISMS:
            credential = self._scram.get(user, mechanism)
            if credential is None:
                continue
            salted = salted_password(mechanism, password, credential.salt, credential.iterations)
            computed = credential_from_salted_password(mechanism, salted, credential.salt, credential.iterations)
            if hmac.compare_digest(computed.stored_key, credential.stored_key):
                return True
        return False

    async def principal(self, header: str | None) -> str | None:
        """``User:<name>`` for valid credentials, else None. PBKDF2 runs in a worker thread: up to
        16384 iterations must not stall the event loop the Kafka listeners share."""
        parsed = parse_basic(header)
        if parsed is None:
            return None
        user, password = parsed
        ok = await asyncio.to_thread(self._check, user, password)
        return f"User:{user}" if ok else None
