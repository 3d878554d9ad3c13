"""The client half of SCRAM (RFC 5802 §3, §5), sans-IO: what this node sends to its peers on an
inter-broker SASL listener, and what the ``groupcoord`` admin commands send to a secured
listener. Kafka's rules as its own client follows them: no SASLprep (the password's UTF-8 bytes),
the user name escaped as §5.1 asks, gs2 header ``n,,``; the server's nonce must extend ours, the
iterations must be within Kafka's bounds (so a hostile server cannot make us spin), and the server's
signature is checked before the exchange counts as done."""

from __future__ import annotations

import base64
import hashlib
import hmac

from .scram import escape_saslname
from .scram_formatter import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, salted_password, secure_random_string

__all__ = ["ScramClient", "ScramClientError"]


class ScramClientError(Exception):
    """The server's side of the exchange is not what RFC 5802 allows."""


class ScramClient:
    """``client_first()``, then ``client_final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism, self.password = mechanism, password
        self._hash = MECHANISMS[mechanism]
        self._nonce = nonce or secure_random_string()
        self._first_bare = f"n={escape_saslname(username)},r={self._nonce}"
        self._expected_final = ""

    def client_first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def client_final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        try:
            fields = dict(part.split("=", 1) for part in text.split(","))
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"], validate=True), int(fields["i"])
        except (KeyError, ValueError) as exc:
            raise ScramClientError(f"malformed SCRAM server-first message: {exc}") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramClientError("the server's SCRAM nonce does not extend ours")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramClientError(f"the server asks for {iterations} SCRAM iterations "
                                   f"(Kafka allows {MIN_ITERATIONS}..{MAX_ITERATIONS})")
        h = self._hash
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", h)
        signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        server_signature = hmac.digest(hmac.digest(salted, b"Server Key", h), auth_message, h)
        self._expected_final = "v=" + base64.b64encode(server_signature).decode()
        return f"{without_proof},p={proof}".encode()

    def verify(self, server_final: bytes) -> None:
        if not self._expected_final or not hmac.compare_digest(server_final, self._expected_final.encode()):
            raise ScramClientError("the server's SCRAM signature does not verify")
