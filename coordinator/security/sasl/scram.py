"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 server (RFC 5802, RFC 7677), with Kafka's rules.

Written here rather than taken from ``scramp`` because Kafka's server differs from it on purpose
(reference/security.md §4.2, §4.5, §10), and clients are built against Kafka:

- no SASLprep: names and passwords are plain UTF-8 (``ScramFormatter``);
- the grammar of ``ScramMessages.java``: gs2 flag ``n`` only, an optional ``m=`` tolerated, unknown
  ``name=value`` extensions ignored; ``=2C``/``=3D`` in a saslname unescaped, any other ``=`` refused;
- a non-empty authzid must equal the user name;
- stored iterations outside 4096–16384 fail;
- the client-final nonce must *end with* the nonce of our server-first message. Kafka 3.7.2/3.8.1/3.9
  compare it that way (CVE-2024-56128 fix, apache/kafka commit 0a00456) because librdkafka up to
  2.6.0 sends the client nonce twice (librdkafka CHANGELOG 2.6.1, confluentinc/librdkafka#4895):
  strict equality would lock out every kcat and confluent-kafka built on it. The proof still covers
  the ``r=`` the client sent, so a foreign nonce cannot replay another exchange.

Unlike Kafka, an unknown user does not fail at client-first (which tells a prober the name exists
when a wrong password gets one step further): the exchange goes on with a fake credential whose
salt is an HMAC of a per-process secret and the name — the same salt on every try, as a random one
would give the game away on a repeat (Openfire OF-3258) — and fails at client-final, as a wrong
password does. Every failure is a :class:`SaslFailure`, so the client sees Kafka's one generic
message (error 58) for all of them. The fake credential has Kafka's default 4096 iterations, so a
user stored with another count still stands out by that number.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from .errors import AuthenticationFailed, SaslFailure
from .scram_formatter import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    hash_name,
    secure_random_string,
)

__all__ = ["ScramServer", "CredentialLookup", "unescape_saslname", "escape_saslname"]

#: (user name, mechanism) → the stored credential, or None.
CredentialLookup = Callable[[str, str], "ScramCredential | None"]

# ScramMessages.java's building blocks (Java character classes rewritten for Python's re).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")

_PROCESS_SECRET = secrets.token_bytes(32)


def unescape_saslname(saslname: str) -> str:
    return re.sub("=2C|=3D", lambda m: "," if m.group() == "=2C" else "=", saslname)


def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def fake_credential(mechanism: str, username: str, secret: bytes = _PROCESS_SECRET) -> ScramCredential:
    """What an unknown user gets: a salt shaped like the ones we generate (a base-36 130-bit string),
    stable per process and name, and keys nobody can match."""
    h = hash_name(mechanism)
    digest = hmac.digest(secret, f"{mechanism}\x00{username}".encode(), "sha256")
    salt_value = int.from_bytes(digest[:17], "big") >> 6  # 130 bits, as secure_random_string draws
    salt = _base36(salt_value).encode()
    keys = hmac.digest(secret, b"keys\x00" + digest, h)
    return ScramCredential(salt=salt, stored_key=keys, server_key=keys, iterations=DEFAULT_ITERATIONS)


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
        if not value:
            return out


class ScramServer:
    """One exchange: ``evaluate(client-first)`` → server-first, ``evaluate(client-final)`` → server-final."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, *, server_nonce: str | None = None,
                 fake_secret: bytes = _PROCESS_SECRET) -> None:
        self.mechanism = mechanism
        self._hash = hash_name(mechanism)
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._fake_secret = fake_secret
        self._step = 0
        self._known = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""
        self.complete = False
        #: The authenticated user name once ``complete``.
        self.username = ""

    def evaluate(self, response: bytes) -> bytes:
        try:
            if self._step == 0:
                return self._client_first(response)
            if self._step == 1:
                return self._client_final(response)
            raise SaslFailure(f"Unexpected challenge in SCRAM server state {self._step}")
        except SaslFailure:
            self._step = 3
            self._credential = None
            raise

    def _client_first(self, response: bytes) -> bytes:
        text = _decode(response)
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslFailure(f"Invalid SCRAM client first message format: {text!r}")
        username = unescape_saslname(m["saslname"])
        authzid = unescape_saslname(m["authzid"] or "")
        credential = self._lookup(username, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = fake_credential(self.mechanism, username, self._fake_secret)
        elif not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
            raise SaslFailure(f"Iterations {credential.iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS} "
                              f"for {self.mechanism}")
        if authzid and authzid != username:
            # Checked for known and unknown names alike, so it reveals nothing about existence.
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self._credential = credential
        self._gs2 = m["gs2"]
        self._client_first_bare = m["bare"]
        self._nonce = m["nonce"] + (self._server_nonce or secure_random_string())
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, response: bytes) -> bytes:
        text = _decode(response)
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslFailure("Invalid SCRAM client final message format")
        if not m["nonce"].endswith(self._nonce):
            raise SaslFailure("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(m["channel"], validate=True)
            proof = base64.b64decode(m["proof"], validate=True)
        except binascii.Error:
            raise SaslFailure("Invalid SCRAM client final message encoding") from None
        if channel != self._gs2.encode():
            raise SaslFailure("Invalid channel binding in the final client message")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(proof) != len(client_signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        computed = hashlib.new(self._hash, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key) or not self._known:
            raise SaslFailure("Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        self._credential = None
        self._step = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


def _decode(response: bytes) -> str:
    try:
        return response.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure("SCRAM message is not UTF-8") from None
