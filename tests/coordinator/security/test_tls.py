"""TLS listeners: client authentication modes, principals from certificates, TLS versions,
certificate reload without restart, the handshake timeout (certificates made by trustme here)."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from coordinator.config import load_config
from coordinator.security.ssl_principal import PrincipalMapper
from coordinator.security.tls import ServerTls, TlsSettings, tls_settings

from .tls_fixtures import LoopServer, api_versions_ok, tls_client


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def pems(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tls")
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = root / "server.pem"
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(b.bytes() for b in server.cert_chain_pems))
    truststore = root / "ca.pem"
    truststore.write_bytes(ca.cert_pem.bytes())
    return {"keystore": keystore, "truststore": truststore}


@pytest.fixture(scope="module")
def loop_server() -> Iterator[LoopServer]:
    server = LoopServer(tls_handshake_timeout_s=0.5)
    yield server
    server.stop()


def _client_context(ca: trustme.CA, client_cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ca.configure_trust(ctx)
    if client_cert is not None:
        client_cert.configure_cert(ctx)
    return ctx


def _listener(loop_server: LoopServer, pems: dict[str, Path], client_auth: str,
              rules: str = "DEFAULT", name: str = "SSL") -> tuple[int, ServerTls]:
    tls = ServerTls(TlsSettings(keystore_location=str(pems["keystore"]), truststore_location=str(pems["truststore"]),
                                client_auth=client_auth), name)
    port = loop_server.bind(listener=name, ssl=tls.context, tls_principal=PrincipalMapper(rules).principal)
    loop_server.start()
    return port, tls


def test_client_auth_none_serves_anonymous_clients(loop_server: LoopServer, pems: dict[str, Path],
                                                   ca: trustme.CA) -> None:
    port, _ = _listener(loop_server, pems, "none", name="SSL_NONE")
    # A certificate a client sends anyway is not asked for, so not used.
    alice = ca.issue_cert("alice", common_name="alice")
    for client_cert in (None, alice):
        with tls_client(port, _client_context(ca, client_cert)) as client:
            assert api_versions_ok(client)
        ctx = loop_server.contexts[-1]
        assert (ctx.principal, ctx.listener, ctx.client_host) == ("User:ANONYMOUS", "SSL_NONE", "127.0.0.1")


def test_client_auth_requested_maps_a_certificate_when_one_is_sent(loop_server: LoopServer, pems: dict[str, Path],
                                                                   ca: trustme.CA) -> None:
    port, _ = _listener(loop_server, pems, "requested", rules="RULE:^CN=([^,]*),.*$/$1/L,DEFAULT",
                        name="SSL_REQUESTED")
    with tls_client(port, _client_context(ca)) as client:
        assert api_versions_ok(client)
    assert loop_server.contexts[-1].principal == "User:ANONYMOUS"
    bob = ca.issue_cert("bob", common_name="Bob", organization_name="Example", organization_unit_name="Eng")
    with tls_client(port, _client_context(ca, bob)) as client:
        assert api_versions_ok(client)
    assert loop_server.contexts[-1].principal == "User:bob"


def test_client_auth_required_refuses_clients_without_a_trusted_certificate(
        loop_server: LoopServer, pems: dict[str, Path], ca: trustme.CA) -> None:
    port, _ = _listener(loop_server, pems, "required", name="SSL_REQUIRED")
    carol = ca.issue_cert("carol", common_name="carol", organization_name="Example")
    with tls_client(port, _client_context(ca, carol)) as client:
        assert api_versions_ok(client)
    # The DN as Kafka prints it (RFC 2253: most specific first), through the DEFAULT rule.
    assert loop_server.contexts[-1].principal.startswith("User:CN=carol,")
    assert loop_server.contexts[-1].principal.endswith(",O=Example")
    stranger = trustme.CA().issue_cert("mallory", common_name="mallory")
    for cert in (None, stranger):
        # TLS 1.3 clients learn of the refusal at their first read.
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with tls_client(port, _client_context(ca, cert)) as client:
                api_versions_ok(client)


def test_a_dn_no_rule_maps_is_refused(loop_server: LoopServer, pems: dict[str, Path], ca: trustme.CA) -> None:
    port, _ = _listener(loop_server, pems, "required", rules="RULE:^CN=admin,.*$/admin/", name="SSL_RULES")
    with pytest.raises((ConnectionError, OSError)):
        with tls_client(port, _client_context(ca, ca.issue_cert("x", common_name="dave"))) as client:
            api_versions_ok(client)


def test_tls_older_than_the_enabled_versions_is_refused(pems: dict[str, Path], ca: trustme.CA) -> None:
    tls = ServerTls(TlsSettings(keystore_location=str(pems["keystore"]), enabled_protocols="TLSv1.3"))
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_3
    default = ServerTls(TlsSettings(keystore_location=str(pems["keystore"])))
    assert default.context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_inline_pem_stores_and_listener_prefixed_settings(ca: trustme.CA) -> None:
    server = ca.issue_cert("localhost")
    config = load_config(overrides=[
        f"listener.name.sasl_ssl.ssl.keystore.certificate.chain={server.cert_chain_pems[0].bytes().decode()}",
        f"listener.name.sasl_ssl.ssl.keystore.key={server.private_key_pem.bytes().decode()}",
        f"ssl.truststore.certificates={ca.cert_pem.bytes().decode()}", "ssl.client.auth=required"])
    # On SASL_SSL only a listener-prefixed ssl.client.auth counts (Kafka's ChannelBuilders).
    settings = tls_settings(config, "SASL_SSL", "SASL_SSL")
    assert settings.client_auth == "none"
    tls = ServerTls(settings, "SASL_SSL")
    assert tls.context.verify_mode == ssl.CERT_NONE


def test_a_changed_certificate_is_served_to_new_connections(loop_server: LoopServer, ca: trustme.CA,
                                                            tmp_path: Path) -> None:
    keystore = tmp_path / "rotating.pem"
    first, second = ca.issue_cert("localhost", "127.0.0.1"), ca.issue_cert("localhost", "127.0.0.1")

    def write(cert: trustme.LeafCert) -> None:
        keystore.write_bytes(cert.private_key_pem.bytes() + cert.cert_chain_pems[0].bytes())

    write(first)
    tls = ServerTls(TlsSettings(keystore_location=str(keystore)), "ROTATING")
    port = loop_server.bind(listener="ROTATING", ssl=tls.context)
    loop_server.start()

    def served() -> bytes:
        with tls_client(port, _client_context(ca)) as client:
            der = client.sock.getpeercert(binary_form=True)
            assert api_versions_ok(client)
            return der

    assert served() == ssl.PEM_cert_to_DER_cert(first.cert_chain_pems[0].bytes().decode())
    old = tls_client(port, _client_context(ca))
    write(second)
    assert served() == ssl.PEM_cert_to_DER_cert(second.cert_chain_pems[0].bytes().decode())
    assert tls.reloads == 1
    with old:  # a connection made before the change keeps working
        assert api_versions_ok(old)


def test_a_stalled_tls_handshake_is_dropped(loop_server: LoopServer, pems: dict[str, Path]) -> None:
    port, _ = _listener(loop_server, pems, "none", name="SSL_STALL")
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        assert raw.recv(1024) == b""  # closed by the server (handshake timeout 0.5 s)
    assert time.monotonic() - started < 3
    assert not any(c.listener == "SSL_STALL" for c in loop_server.server.connections)
