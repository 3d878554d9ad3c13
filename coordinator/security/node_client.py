"""This node as a client of the other nodes, on the inter-broker listener: TLS (SSL, SASL_SSL) and
SASL (SASL_PLAINTEXT, SASL_SSL) as Kafka's inter-broker clients speak them.

- TLS: the peers' certificates are checked against ``ssl.truststore.*`` and their host names
  (Kafka's ``ssl.endpoint.identification.algorithm`` default, https); ``ssl.keystore.*`` is
  presented when a peer asks for a client certificate.
- SASL: mechanism ``sasl.mechanism.inter.broker.protocol``; the node's own credentials are the
  ``username`` and ``password`` options of that mechanism's JAAS config on the inter-broker
  listener (docs/security.html §7.4: "username and password ... are used by the broker to
  initiate connections to other brokers"). PLAIN (RFC 4616) or SCRAM-SHA-256/512 (RFC 5802), over
  SaslHandshake v1 and SaslAuthenticate v1.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from protocol.apis import ApiKey
from protocol.kafka_types import KafkaRequest, KafkaResponse

from ..config import Config, ConfigError
from .listeners import Listeners
from .sasl.jaas import JaasError, single_login_module
from .sasl.scram_client import ScramClient, ScramClientError
from .sasl.scram_formatter import MECHANISMS as SCRAM_MECHANISMS
from .tls import _load_inline_chain, tls_settings

__all__ = ["NodeClientSecurity", "node_client_security", "SaslClientError"]

#: Sends one request on the connection being set up and returns its answer.
Call = Callable[[int, int, KafkaRequest], Awaitable[KafkaResponse]]


class SaslClientError(ConnectionError):
    """The peer refused this node's SASL authentication."""


@dataclass(frozen=True)
class NodeClientSecurity:
    ssl: ssl.SSLContext | None = None
    mechanism: str = ""
    username: str = ""
    password: str = ""

    async def authenticate(self, call: Call) -> None:
        """The SASL exchange on a new connection (nothing without SASL)."""
        if not self.mechanism:
            return
        handshake = await call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism=self.mechanism))
        if handshake.error_code:
            raise SaslClientError(f"SaslHandshake {self.mechanism}: error {handshake.error_code}")

        async def exchange(token: bytes) -> bytes:
            reply = await call(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(version=1, auth_bytes=token))
            if reply.error_code:
                raise SaslClientError(f"SaslAuthenticate: error {reply.error_code}: {reply.error_message}")
            return bytes(reply.auth_bytes)

        if self.mechanism == "PLAIN":
            await exchange(f"\0{self.username}\0{self.password}".encode())
            return
        await _scram(self.mechanism, self.username, self.password, exchange)


async def _scram(mechanism: str, username: str, password: str, exchange: Callable[[bytes], Awaitable[bytes]]) -> None:
    client = ScramClient(mechanism, username, password)
    try:
        client.verify(await exchange(client.client_final(await exchange(client.client_first()))))
    except ScramClientError as exc:
        raise SaslClientError(str(exc)) from None


def node_client_security(config: Config, listeners: Listeners) -> NodeClientSecurity | None:
    """How this node connects to the others, from the inter-broker listener's settings; None for
    PLAINTEXT. :class:`ConfigError` naming the setting when something is missing."""
    name = listeners.inter_broker
    protocol = listeners.protocol_map()[name]
    if protocol == "PLAINTEXT":
        return None
    context: ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        settings = tls_settings(config, name, protocol)
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if settings.truststore_location:
            context.load_verify_locations(cafile=settings.truststore_location)
        elif settings.truststore_certificates:
            context.load_verify_locations(cadata=settings.truststore_certificates)
        key_password = (lambda: settings.key_password) if settings.key_password else None
        if settings.keystore_location:
            context.load_cert_chain(settings.keystore_location, password=key_password)
        elif settings.certificate_chain and settings.private_key:
            # The inline PEM key store too: a peer requiring client certificates
            # (ssl.client.auth=required) refuses a node that presents none.
            _load_inline_chain(context, settings.certificate_chain, settings.private_key, key_password)
    if protocol in ("SSL", "PLAINTEXT"):
        return NodeClientSecurity(context)
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).strip().upper()
    if mechanism != "PLAIN" and mechanism not in SCRAM_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol: {mechanism} is not supported between nodes "
                          "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    jaas = str(config.for_listener(name, "sasl.jaas.config", mechanism))
    try:
        options = single_login_module(jaas).options if jaas else {}
    except JaasError as exc:
        raise ConfigError(f"sasl.jaas.config of listener {name}: {exc}") from None
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ConfigError(f"listener {name}: the {mechanism} sasl.jaas.config needs username and password options "
                          f"(the node's own credentials for connecting to the others)")
    return NodeClientSecurity(context, mechanism, username, password)
