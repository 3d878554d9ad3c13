"""Shared pieces of the stock-client security tests (``tests/clients/test_security_*.py``):
certificates made once per test session with trustme, and a node serving SASL_SSL, SSL with client
certificates required, and SASL_PLAINTEXT at once, with SCRAM users written to its data directory
before it starts and the ACL authorizer on.

The node's users (docs/listeners.md): PLAIN ``admin``/``alice``/``bob`` from the JAAS config, the
same names with SCRAM-SHA-256 and SCRAM-SHA-512 credentials; ``User:admin`` is the super user.
Certificates: the server's for ``localhost`` and ``127.0.0.1``; clients ``alice`` and ``bob`` whose
principals are their subject DNs (``User:CN=alice,OU=eng,O=Example``), by the DEFAULT mapping rule.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

from coordinator.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from coordinator.security.acl_bindings import AccessControlEntry, AclBinding, ResourcePattern
from coordinator.security.acl_store import FileAclStore
from coordinator.security.sasl.scram_formatter import make_credential
from coordinator.security.scram_credentials import FileScramStore
from tests.conftest import REPO, free_ports

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM)
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items()) + ";")


def generic_failure(mechanism: str) -> str:
    """Kafka's one message for a failed exchange of ``mechanism``, whatever was wrong: PLAIN's
    ``PlainSaslServer`` says it itself; for SCRAM ``SaslServerAuthenticator`` names the mechanism."""
    if mechanism == "PLAIN":
        return "Authentication failed: Invalid username or password"
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def dn(user: str) -> str:
    """The principal name of ``user``'s client certificate (RFC 2253 order)."""
    return f"CN={user},OU=eng,O=Example"


@dataclass(frozen=True)
class ClientCert:
    cert: Path  # the certificate chain
    key: Path  # its key, PKCS#8 (the only form Java's PEM key store reads)
    keystore: Path  # key then chain in one file, for Java's ssl.keystore.location


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: Path  # key and chain, the node's ssl.keystore.location
    clients: dict[str, ClientCert]


@functools.cache
def certificates() -> Certs:
    """One CA and its certificates per test session (trustme key generation takes a while)."""
    root = Path(tempfile.mkdtemp(prefix="groupcoord-sec-certs-"))
    atexit.register(shutil.rmtree, root, True)
    ca = trustme.CA()
    (root / "ca.pem").write_bytes(ca.cert_pem.bytes())
    server = ca.issue_cert("localhost", "127.0.0.1")
    (root / "server.pem").write_bytes(_pkcs8(server) + _chain(server))
    clients = {}
    for user in ("alice", "bob"):
        issued = ca.issue_cert(f"{user}@example.com", common_name=user, organization_name="Example",
                               organization_unit_name="eng")
        files = ClientCert(root / f"{user}.crt", root / f"{user}.key", root / f"{user}-keystore.pem")
        files.cert.write_bytes(_chain(issued))
        files.key.write_bytes(_pkcs8(issued))
        files.keystore.write_bytes(_pkcs8(issued) + _chain(issued))
        clients[user] = files
    return Certs(root / "ca.pem", root / "server.pem", clients)


def _chain(issued: trustme.LeafCert) -> bytes:
    return b"".join(blob.bytes() for blob in issued.cert_chain_pems)


def _pkcs8(issued: trustme.LeafCert) -> bytes:
    key = serialization.load_pem_private_key(issued.private_key_pem.bytes(), password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def acl(principal: str, operation: AclOperation, resource: ResourceType, name: str, *,
        deny: bool = False, prefixed: bool = False) -> AclBinding:
    return AclBinding(ResourcePattern(resource, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL),
                      AccessControlEntry.of(principal, "*", operation,
                                            AclPermissionType.DENY if deny else AclPermissionType.ALLOW))


class SecureNode:
    """``groupcoord serve`` with SASL_SSL, SSL (client certificates required) and SASL_PLAINTEXT
    listeners, advertised as ``localhost`` (the name in the server certificate)."""

    def __init__(self, root: Path, *settings: str, acls: Sequence[AclBinding] = ()) -> None:
        self.certs = certificates()
        data = root / "data"
        data.mkdir(exist_ok=True)  # it may hold ACLs added offline already
        if acls:  # stored before the node starts, as `groupcoord acls --data-dir` would
            assert FileAclStore(data).add(acls) == [None] * len(acls)
        # 4096 iterations: Kafka's minimum, so that logging in costs the clients little.
        FileScramStore(data).alter({(user, mechanism): make_credential(mechanism, password, 4096)
                                    for user, password in PASSWORDS.items() for mechanism in SCRAM}, set())
        base = free_ports(3)
        self.sasl_ssl, self.ssl, self.sasl_plain = base, base + 1, base + 2
        self.log = root / "server.log"
        listeners = f"SASL_SSL://127.0.0.1:{self.sasl_ssl},SSL://127.0.0.1:{self.ssl},SASL_PLAINTEXT://127.0.0.1:{self.sasl_plain}"
        advertised = listeners.replace("127.0.0.1", "localhost")
        args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data),
                "--set", f"listeners={listeners}", "--set", f"advertised.listeners={advertised}",
                "--set", f"sasl.enabled.mechanisms={','.join(MECHANISMS)}",
                "--set", f"sasl.jaas.config={PLAIN_JAAS}",
                "--set", f"ssl.keystore.location={self.certs.server}",
                "--set", f"ssl.truststore.location={self.certs.ca}", "--set", "ssl.client.auth=required",
                "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "--set", "super.users=User:admin", "--set", "allow.everyone.if.no.acl.found=true",
                "--set", "connection.failed.authentication.delay.ms=20",
                "--set", "offsets.topic.num.partitions=1", "--set", "offsets.topic.replication.factor=1",
                "--set", "group.initial.rebalance.delay.ms=0"]
        for setting in settings:
            args += ["--set", setting]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.sasl_plain), timeout=0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)

    # --- addresses and client settings ----------------------------------------------------------

    def bootstrap(self, listener: str) -> str:
        port = {"SASL_SSL": self.sasl_ssl, "SSL": self.ssl, "SASL_PLAINTEXT": self.sasl_plain}[listener]
        return f"localhost:{port}"

    def java_properties(self, path: Path, *, mechanism: str | None, user: str, password: str = "",
                        listener: str = "SASL_SSL") -> Path:
        """A Java client configuration: SASL (``mechanism`` set) or the client certificate of ``user``."""
        lines = [f"bootstrap.servers={self.bootstrap(listener)}", f"security.protocol={listener}"]
        if listener != "SASL_PLAINTEXT":
            lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={self.certs.ca}"]
        if mechanism is None:
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.certs.clients[user].keystore}"]
        else:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            lines += [f"sasl.mechanism={mechanism}",
                      f'sasl.jaas.config={module} required username="{user}" password="{password}";']
        path.write_text("\n".join(lines) + "\n")
        return path

    def librdkafka(self, *, mechanism: str | None, user: str, password: str = "",
                   listener: str = "SASL_SSL") -> dict[str, str]:
        """librdkafka's settings (confluent-kafka, kcat)."""
        conf = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener != "SASL_PLAINTEXT":
            conf["ssl.ca.location"] = str(self.certs.ca)
        if mechanism is None:
            conf["ssl.certificate.location"] = str(self.certs.clients[user].cert)
            conf["ssl.key.location"] = str(self.certs.clients[user].key)
        else:
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
        return conf

    def kafka_python(self, *, mechanism: str | None, user: str, password: str = "",
                     listener: str = "SASL_SSL") -> dict[str, object]:
        """kafka-python's keyword arguments."""
        options: dict[str, object] = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener}
        if listener != "SASL_PLAINTEXT":
            options["ssl_cafile"] = str(self.certs.ca)
        if mechanism is None:
            options.update(ssl_certfile=str(self.certs.clients[user].cert),
                           ssl_keyfile=str(self.certs.clients[user].key))
        else:
            options.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        return options

    def aiokafka(self, *, mechanism: str | None, user: str, password: str = "",
                 listener: str = "SASL_SSL") -> dict[str, object]:
        """aiokafka's keyword arguments (it takes an SSLContext, not file names)."""
        from aiokafka.helpers import create_ssl_context

        options: dict[str, object] = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener}
        if listener != "SASL_PLAINTEXT":
            client = self.certs.clients[user] if mechanism is None else None
            options["ssl_context"] = create_ssl_context(
                cafile=str(self.certs.ca), certfile=str(client.cert) if client else None,
                keyfile=str(client.key) if client else None)
        if mechanism is not None:
            options.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        return options

    def kafkajs(self, *, mechanism: str | None, user: str, password: str = "",
                listener: str = "SASL_SSL") -> dict[str, object]:
        """A kafkajs client configuration (the JS side reads the PEM files named here)."""
        conf: dict[str, object] = {"brokers": [self.bootstrap(listener)]}
        if listener != "SASL_PLAINTEXT":
            ssl: dict[str, str] = {"ca": str(self.certs.ca)}
            if mechanism is None:
                ssl.update(cert=str(self.certs.clients[user].cert), key=str(self.certs.clients[user].key))
            conf["ssl"] = ssl
        if mechanism is not None:
            conf["sasl"] = {"mechanism": mechanism.lower(), "username": user, "password": password}
        return conf

    def admin(self) -> dict[str, str]:
        """confluent-kafka settings of the super user (SASL_PLAINTEXT, PLAIN)."""
        return self.librdkafka(mechanism="PLAIN", user="admin", password=PASSWORDS["admin"],
                               listener="SASL_PLAINTEXT")
