"""A blocking connection to one node for the ``groupcoord`` admin commands (``users``, ``acls``):
TLS and SASL as a Kafka tool's ``--command-config`` asks, then one request at a time.

The client settings are Kafka's: ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL), ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.jaas.config`` (its
``username``/``password`` options), ``ssl.truststore.location`` (a PEM file) and
``ssl.endpoint.identification.algorithm`` (empty turns host-name checks off).
"""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from protocol.apis import ApiKey
from protocol.client import decode_response, encode_request

from .security.sasl.jaas import JaasError, single_login_module
from .security.sasl.scram_client import ScramClient, ScramClientError
from .security.sasl.scram_formatter import MECHANISMS

__all__ = ["AdminConnection", "ClientConfigError", "ClientError", "read_properties"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ClientConfigError(Exception):
    """A usage mistake: bad address, unreadable or wrong client settings."""


class ClientError(Exception):
    """The server refused or closed, or the connection failed."""


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file as Kafka's tools read ``--command-config`` (``key=value``, ``#``/``!`` comments)."""
    props: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ClientConfigError(f"cannot read {path}: {e.strerror}") from None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


class AdminConnection:
    """One blocking connection: TLS and SASL (PLAIN, SCRAM) as ``props`` ask, then request/response."""

    def __init__(self, bootstrap: str, props: dict[str, str] | None = None, client_id: str = "groupcoord") -> None:
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise ClientConfigError(f"--bootstrap-server must be HOST:PORT, not {bootstrap!r}")
        self.host, self.port, self.props, self.client_id = host.strip("[]"), int(port), props or {}, client_id
        self._sock: socket.socket | None = None
        self._correlation = 0

    def __enter__(self) -> AdminConnection:
        protocol = self.props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(f"security.protocol {protocol} is not one of {', '.join(PROTOCOLS)}")
        try:
            sock = socket.create_connection((self.host, self.port), timeout=30)
        except OSError as exc:
            raise ClientError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        try:
            if protocol.endswith("SSL"):
                context = ssl.create_default_context(cafile=self.props.get("ssl.truststore.location") or None)
                if self.props.get("ssl.endpoint.identification.algorithm", "https") == "":
                    context.check_hostname = False
                sock = context.wrap_socket(sock, server_hostname=self.host)
            self._sock = sock
            if protocol.startswith("SASL"):
                self._authenticate()
        except BaseException:
            sock.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def call(self, api_key: int, version: int, request: Any) -> Any:
        assert self._sock is not None, "use the connection inside `with`"
        self._correlation += 1
        self._sock.sendall(encode_request(api_key, version, self._correlation, request, client_id=self.client_id))
        (size,) = struct.unpack(">i", self._recv(4))
        _, response = decode_response(api_key, version, self._recv(size))
        return response

    def _recv(self, n: int) -> bytes:
        assert self._sock is not None
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ClientError("the server closed the connection")
            chunks += chunk
        return bytes(chunks)

    def _authenticate(self) -> None:
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        mechanism = self.props.get("sasl.mechanism", "GSSAPI")
        if mechanism != "PLAIN" and mechanism not in MECHANISMS:
            raise ClientConfigError(f"sasl.mechanism {mechanism} is not supported here (PLAIN, SCRAM-SHA-256/512)")
        try:
            options = single_login_module(self.props.get("sasl.jaas.config", "")).options
        except JaasError as e:
            raise ClientConfigError(f"sasl.jaas.config: {e}") from None
        user, password = options.get("username", ""), options.get("password", "")
        handshake = self.call(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(version=1, mechanism=mechanism))
        if handshake.error_code:
            raise ClientError(f"SASL mechanism {mechanism} not enabled (server offers {handshake.mechanisms})")

        def step(token: bytes) -> bytes:
            response = self.call(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(version=2, auth_bytes=token))
            if response.error_code:
                raise ClientError(f"authentication failed: {response.error_message}")
            return bytes(response.auth_bytes)

        if mechanism == "PLAIN":
            step(f"\x00{user}\x00{password}".encode())
            return
        client = ScramClient(mechanism, user, password)
        try:
            client.verify(step(client.client_final(step(client.client_first()))))
        except ScramClientError as exc:
            raise ClientError(str(exc)) from None
