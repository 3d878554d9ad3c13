"""Server TLS for SSL and SASL_SSL listeners, from Kafka's ``ssl.*`` settings (PEM stores only).

- Key store: ``ssl.keystore.location`` (a PEM file holding the certificate chain and the private
  key, the key encrypted with ``ssl.key.password`` or not), or the same inline in
  ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key`` (KIP-651).
- Trust store (client certificates): ``ssl.truststore.location`` or ``ssl.truststore.certificates``.
- ``ssl.client.auth``: none, requested (a certificate is asked for, verified if sent) or required.
  On SASL_SSL only the listener-prefixed value counts (Kafka's ``ChannelBuilders``): the SASL
  identity is the principal there.
- ``ssl.enabled.protocols``: TLSv1.2 and/or TLSv1.3; nothing older is ever accepted.
- Every setting may be given per listener, ``listener.name.<listener>.ssl.…``.

Certificate rotation without restart (Kafka does it through dynamic broker configs, KIP-226):
each new connection checks the files' modification times and sizes; when they changed, a new
context is built from them, and that connection and later ones present the new certificate.
Connections already open keep theirs. A file caught half-written fails to load: the old context
stays in use and the next connection tries again.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from ..config import Config, ConfigError

__all__ = ["TlsSettings", "ServerTls", "tls_settings"]

log = logging.getLogger("groupcoord.security.tls")

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, slots=True)
class TlsSettings:
    keystore_location: str = ""
    key_password: str = ""
    certificate_chain: str = ""
    private_key: str = ""
    truststore_location: str = ""
    truststore_certificates: str = ""
    client_auth: str = "none"
    enabled_protocols: str = "TLSv1.2,TLSv1.3"


def tls_settings(config: Config, listener: str, protocol: str) -> TlsSettings:
    """The TLS settings listener ``listener`` sees (prefixed ones first)."""

    def get(key: str) -> str:
        return str(config.for_listener(listener, key))

    client_auth = get("ssl.client.auth")
    if protocol == "SASL_SSL" and f"listener.name.{listener.lower()}.ssl.client.auth" not in config:
        client_auth = "none"
    return TlsSettings(get("ssl.keystore.location"), get("ssl.key.password"), get("ssl.keystore.certificate.chain"),
                       get("ssl.keystore.key"), get("ssl.truststore.location"), get("ssl.truststore.certificates"),
                       client_auth, get("ssl.enabled.protocols"))


def _file_state(path: str) -> tuple[int, int] | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class ServerTls:
    """The server contexts of one listener. :attr:`context` goes to the listening socket; its
    ``sni_callback`` (run by OpenSSL on every handshake, with or without SNI) hands each new
    connection the newest context."""

    def __init__(self, settings: TlsSettings, listener: str = "SSL") -> None:
        self.settings = settings
        self.listener = listener
        if not settings.keystore_location and not (settings.certificate_chain and settings.private_key):
            raise ConfigError(f"listener {listener}: TLS needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                              "and ssl.keystore.key (also as listener.name."
                              f"{listener.lower()}.ssl.…)")
        if settings.client_auth != "none" and not (settings.truststore_location or settings.truststore_certificates):
            raise ConfigError(f"listener {listener}: ssl.client.auth={settings.client_auth} needs a trust store "
                              "(ssl.truststore.location or ssl.truststore.certificates)")
        self._stamp = self._file_stamp()
        try:
            self.context = self._build()
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"listener {listener}: cannot load the TLS key store or trust store: {exc}") from None
        self.context.sni_callback = self._on_handshake
        self._current = self.context
        #: Times a changed file was loaded (tests and logs).
        self.reloads = 0

    def _file_stamp(self) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        return _file_state(self.settings.keystore_location), _file_state(self.settings.truststore_location)

    def current(self) -> ssl.SSLContext:
        """The context for a new connection, rebuilt first if a store file changed."""
        stamp = self._file_stamp()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._current = self._build()
                self.reloads += 1
                log.info("TLS certificates reloaded", extra={"listener": self.listener})
            except (OSError, ssl.SSLError, ValueError) as exc:
                self._stamp = None, None  # try again on the next connection
                log.warning("TLS certificate reload failed; the previous certificates stay in use",
                            extra={"listener": self.listener, "reason": str(exc)})
        return self._current

    def _on_handshake(self, sslobj: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None,
                      _ctx: ssl.SSLContext) -> None:
        current = self.current()
        if current is not self.context:
            sslobj.context = current

    def _build(self) -> ssl.SSLContext:
        s = self.settings
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        versions = sorted(_VERSIONS[v] for v in s.enabled_protocols.split(","))
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
        password: Callable[[], str] | None = (lambda: s.key_password) if s.key_password else None
        if s.keystore_location:
            ctx.load_cert_chain(s.keystore_location, password=password)
        else:
            _load_inline_chain(ctx, s.certificate_chain, s.private_key, password)
        if s.truststore_location:
            ctx.load_verify_locations(cafile=s.truststore_location)
        elif s.truststore_certificates:
            ctx.load_verify_locations(cadata=s.truststore_certificates)
        ctx.verify_mode = _CLIENT_AUTH[s.client_auth]
        return ctx


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: Callable[[], str] | None) -> None:
    """``load_cert_chain`` reads only files: write the inline PEM to a private temporary file (mode
    0600 in a 0700 directory), load it, remove it."""
    with tempfile.TemporaryDirectory(prefix="groupcoord-tls-") as tmp:
        path = os.path.join(tmp, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(chain.strip() + "\n" + key.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
