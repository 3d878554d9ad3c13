"""CSRF tokens for the dashboard's POST forms: a signed double-submit cookie.

A page with a form sets a random nonce in a cookie (``HttpOnly``, ``SameSite=Strict``) and writes
HMAC(process secret, nonce) in the form's hidden field; a POST is accepted only when the field is
the HMAC of the cookie it came with. Another site can make the browser send the cookie but can
neither read it nor compute the HMAC without the secret, which is made at start and never leaves
the process (OWASP's "Signed Double-Submit Cookie",
https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["COOKIE", "FIELD", "HEADER", "CsrfTokens"]

COOKIE = "groupcoord_csrf"
#: The form field, and the header a script sends instead (the JSON API).
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"


class CsrfTokens:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def token_for(self, nonce: str) -> str:
        return self.sign("csrf", nonce)

    def sign(self, purpose: str, text: str) -> str:
        """HMAC of ``text`` for one ``purpose`` under the process secret (hex)."""
        return hmac.new(self._secret, f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()

    def valid(self, nonce: str | None, token: str | None) -> bool:
        if not nonce or not token:
            return False
        return hmac.compare_digest(self.token_for(nonce), token)
