"""SCRAM derivations (RFC 5802 §3) and Kafka's credential records (KIP-84).

Kafka normalizes passwords as plain UTF-8, without SASLprep (``ScramFormatter.normalize``,
https://github.com/apache/kafka/blob/3.9.0/clients/src/main/java/org/apache/kafka/common/security/scram/internals/ScramFormatter.java),
so a credential made by Kafka's tools verifies here and the other way round. Iteration bounds are
``ScramMechanism``'s (4096–16384); the string form is ``ScramCredentialUtils.credentialToString``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

__all__ = ["MECHANISMS", "MIN_ITERATIONS", "MAX_ITERATIONS", "DEFAULT_ITERATIONS", "ScramCredential",
           "hash_name", "salted_password", "credential_from_salted_password", "make_credential",
           "credential_to_string", "credential_from_string", "secure_random_string", "mechanism_id",
           "mechanism_name"]

#: Mechanism name → hashlib name.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: The wire ids of ``org.apache.kafka.clients.admin.ScramMechanism`` (Describe/AlterUserScramCredentials).
_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
#: ``kafka-configs.sh`` default when ``iterations=`` is not given (Kafka docs §7.4.3).
DEFAULT_ITERATIONS = 4096


def hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism]


def mechanism_id(mechanism: str) -> int:
    return _MECHANISM_IDS[mechanism]


def mechanism_name(wire_id: int) -> str | None:
    for name, value in _MECHANISM_IDS.items():
        if value == wire_id:
            return name
    return None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def secure_random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: a random 130-bit number in base 36; Kafka's
    server nonces and generated salts (as UTF-8 bytes) are such strings."""
    return _base36(secrets.randbits(130))


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
        if not value:
            return out


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) = PBKDF2-HMAC with the hash's output length (RFC 5802 §2.2)."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    h = hash_name(mechanism)
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(salt=salt, stored_key=hashlib.new(h, client_key).digest(),
                           server_key=hmac.digest(salted, b"Server Key", h), iterations=iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = secure_random_string().encode() if salt is None else salt
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                           salt, iterations)


def credential_to_string(credential: ScramCredential) -> str:
    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return (f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
            f"server_key={b64(credential.server_key)},iterations={credential.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """Parse ``salt=..,stored_key=..,server_key=..,iterations=..`` (``ScramCredentialUtils.credentialFromString``);
    ValueError when a field is missing or malformed."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"invalid SCRAM credential field {part!r}")
        fields[key] = value
    try:
        return ScramCredential(salt=base64.b64decode(fields["salt"], validate=True),
                               stored_key=base64.b64decode(fields["stored_key"], validate=True),
                               server_key=base64.b64decode(fields["server_key"], validate=True),
                               iterations=int(fields["iterations"]))
    except (KeyError, ValueError) as e:
        raise ValueError(f"invalid SCRAM credential: {e}") from None
