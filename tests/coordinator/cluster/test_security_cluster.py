"""``groupcoord cluster up`` with a secured listener: ``{port}`` / ``{id}`` in a ``--set`` value are
each node's own, and a ``listeners`` setting is not overridden by the PLAINTEXT ``--listen`` the
node's port alone would mean (``--listen`` is applied after ``--set``). Only the command lines are
built here; tests/clients/test_cluster_security.py runs such a cluster."""

from __future__ import annotations

from pathlib import Path

from coordinator.cli import _parser
from coordinator.cluster.local_cluster import LocalCluster, listening_logged
from coordinator.config import Config, load_config


def _config_of(cluster: LocalCluster, broker_id: int) -> Config:
    argv = cluster.node_args(broker_id, cluster.ports[broker_id - 1])[3:]  # after "python -m coordinator"
    args = _parser().parse_args(argv)
    return load_config(None, args.overrides, args.data_dir, args.listen)


def test_each_node_gets_its_own_secured_listener(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, 19092, settings=["listeners=SASL_SSL://127.0.0.1:{port}",
                                                        "inter.broker.listener.name=SASL_SSL",
                                                        "broker.rack=rack-{id}"])
    for broker_id in (1, 2, 3):
        config = _config_of(cluster, broker_id)
        assert config["listeners"] == f"SASL_SSL://127.0.0.1:{19091 + broker_id}"
        assert config["broker.id"] == broker_id
        assert config["broker.rack"] == f"rack-{broker_id}"


def test_without_a_listeners_setting_each_node_listens_on_its_port(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 2, 19092)
    assert [_config_of(cluster, b)["listeners"] for b in (1, 2)] == ["127.0.0.1:19092", "127.0.0.1:19093"]


def test_a_node_is_ready_whatever_address_its_listener_binds() -> None:
    # `listeners=SASL_SSL://:{port}` binds every interface: the log says 0.0.0.0, not the
    # cluster's 127.0.0.1, and cluster up must not wait 60 s for a line that never comes.
    line = b"ts=x level=INFO logger=groupcoord msg=listening listen=%s:19092 advertised=h:19092 listeners=SASL_SSL://"
    for address in (b"127.0.0.1", b"0.0.0.0", b"::1"):
        assert listening_logged(b"earlier\n" + line % address + b"\n", 19092)
    assert not listening_logged(line % b"127.0.0.1", 9092)
    assert not listening_logged(line % b"127.0.0.1", 190921)


def test_a_node_presents_its_inline_key_store_to_a_peer_requiring_client_certificates(tmp_path: Path) -> None:
    import socket
    import ssl
    import threading

    import trustme

    from coordinator.security.listeners import resolve_listeners
    from coordinator.security.node_client import node_client_security

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    chain = b"".join(b.bytes() for b in cert.cert_chain_pems).decode()
    config = load_config(None, ["listeners=SSL://127.0.0.1:0", "inter.broker.listener.name=SSL",
                                f"ssl.keystore.certificate.chain={chain}",
                                f"ssl.keystore.key={cert.private_key_pem.bytes().decode()}",
                                f"ssl.truststore.certificates={ca.cert_pem.bytes().decode()}"], str(tmp_path))
    security = node_client_security(config, resolve_listeners(config))
    assert security is not None and security.ssl is not None

    # A peer with ssl.client.auth=required: its handshake fails unless a certificate is presented.
    peer = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(peer)
    ca.configure_trust(peer)
    peer.verify_mode = ssl.CERT_REQUIRED
    seen: list[object] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with peer.wrap_socket(conn, server_side=True) as tls:
                    seen.append(tls.getpeercert())
            except (ssl.SSLError, OSError) as exc:
                seen.append(exc)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with socket.create_connection(listener.getsockname(), timeout=5) as raw:
            try:
                with security.ssl.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.recv(1)  # TLS 1.3: the server's verdict on our certificate comes after the handshake
            except (ssl.SSLError, OSError):
                pass
        thread.join(5)
    assert seen and isinstance(seen[0], dict) and seen[0].get("subject"), seen
