"""``groupcoord acls`` with kafka-acls' options: offline on a data directory, and over the wire."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coordinator.acls_cli import run_acls
from coordinator.admin.acl_apis import AclApis
from coordinator.cli import _parser, main
from coordinator.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from coordinator.security.acl_bindings import AccessControlEntry, AclBinding, ResourcePattern
from coordinator.security.acl_store import FileAclStore
from coordinator.security.authorizer import AclAuthorizer
from coordinator.security.sasl import SaslGate, gate_factory
from coordinator.server.server import KafkaServer
from protocol.apis import SUPPORTED_VERSIONS, ApiKey

O, T = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def run(*argv: str, confirm: str = "y") -> tuple[int, str]:
    out = io.StringIO()
    status = run_acls(_parser().parse_args(["acls", *argv]), out, lambda _prompt: confirm)
    return status, out.getvalue()


def acl(rtype: ResourceType, name: str, op: AclOperation, principal: str = "User:alice",
        perm: AclPermissionType = ALLOW, pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


def test_add_list_remove_offline(tmp_path: Path) -> None:
    d = str(tmp_path)
    status, out = run("--data-dir", d, "--add", "--allow-principal", "User:alice", "--allow-principal", "User:bob",
                      "--allow-host", "10.0.0.1", "--operation", "Read", "--operation", "DescribeConfigs",
                      "--topic", "orders")
    assert status == 0
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" in out
    assert "(principal=User:bob, host=10.0.0.1, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)" in out
    assert len(FileAclStore(tmp_path).list()) == 4
    assert run("--data-dir", d, "--add", "--deny-principal", "User:mallory", "--group", "g",
               "--resource-pattern-type", "prefixed")[0] == 0
    assert acl(T.GROUP, "g", O.ALL, "User:mallory", DENY, PatternType.PREFIXED) in FileAclStore(tmp_path).list()

    status, out = run("--data-dir", d, "--list", "--topic", "orders")
    assert status == 0 and out.count("principal=") == 4 and "mallory" not in out
    status, out = run("--data-dir", d, "--list", "--principal", "User:mallory")
    assert "patternType=PREFIXED" in out and "alice" not in out

    # A specific ACL, then everything on a resource (asked first, unless --force).
    assert run("--data-dir", d, "--remove", "--allow-principal", "User:bob", "--allow-host", "10.0.0.1",
               "--operation", "Read", "--topic", "orders", "--force")[0] == 0
    assert len([b for b in FileAclStore(tmp_path).list() if b.pattern.name == "orders"]) == 3
    status, out = run("--data-dir", d, "--remove", "--topic", "orders", confirm="n")
    assert "Nothing removed." in out
    assert run("--data-dir", d, "--remove", "--topic", "orders")[0] == 0
    assert [b.pattern.name for b in FileAclStore(tmp_path).list()] == ["g"]


def test_producer_and_consumer_shortcuts(tmp_path: Path) -> None:
    assert run("--data-dir", str(tmp_path), "--add", "--allow-principal", "User:p", "--producer", "--topic", "t",
               "--transactional-id", "tx", "--idempotent")[0] == 0
    assert run("--data-dir", str(tmp_path), "--add", "--allow-principal", "User:c", "--consumer", "--topic", "t",
               "--group", "g")[0] == 0
    assert set(FileAclStore(tmp_path).list()) == {
        acl(T.TOPIC, "t", O.WRITE, "User:p"), acl(T.TOPIC, "t", O.DESCRIBE, "User:p"),
        acl(T.TOPIC, "t", O.CREATE, "User:p"), acl(T.TRANSACTIONAL_ID, "tx", O.WRITE, "User:p"),
        acl(T.TRANSACTIONAL_ID, "tx", O.DESCRIBE, "User:p"), acl(T.CLUSTER, "kafka-cluster", O.IDEMPOTENT_WRITE, "User:p"),
        acl(T.TOPIC, "t", O.READ, "User:c"), acl(T.TOPIC, "t", O.DESCRIBE, "User:c"), acl(T.GROUP, "g", O.READ, "User:c")}


@pytest.mark.parametrize("argv, message", [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must specify one of: --topic, --cluster, --group"),
    (["--add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
     "ResourceType GROUP only supports operations"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"], "--operation 'Fly'"),
    (["--add", "--allow-host", "::1", "--topic", "t"], "--allow-host can only be used with --allow-principal"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "is not valid when adding acls"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "Could not parse principal from `alice`"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "you must specify a --group"),
])
def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["acls", "--data-dir", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "acls.json").exists()


def _serve_acl_apis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, super_user: str,
                    gate: Callable[[], SaslGate] | None) -> Iterator[str]:
    """A server with the ACL APIs only (behind ``gate`` if given), on a loop of its own thread."""
    for key in (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS):
        monkeypatch.setitem(SUPPORTED_VERSIONS, key, (0, 3))
    store = FileAclStore(tmp_path)
    apis = AclApis(AclAuthorizer(store.cache, frozenset({super_user})), store)
    handlers = apis.handlers()
    if gate is not None:  # the SASL APIs the gate answers must have (unused) handlers and be advertised
        for key, versions in ((ApiKey.SASL_HANDSHAKE, (0, 1)), (ApiKey.SASL_AUTHENTICATE, (0, 2))):
            monkeypatch.setitem(SUPPORTED_VERSIONS, key, versions)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    address: list[str] = []

    async def serve() -> None:
        server = KafkaServer(handlers, max_request_size=1 << 20, max_connections=10, idle_timeout_ms=60000)
        host, port = await server.bind("127.0.0.1", 0, listener="SASL_PLAINTEXT" if gate else "PLAINTEXT",
                                       gate_factory=gate)
        await server.start()
        address.append(f"{host}:{port}")
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(serve()), loop.run_forever()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield address[0]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The CLI connects as User:ANONYMOUS (a PLAINTEXT listener): make it the super user.
    yield from _serve_acl_apis(tmp_path, monkeypatch, "User:ANONYMOUS", None)


@pytest.fixture
def sasl_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SASL_PLAINTEXT listener with PLAIN users admin (the super user) and alice."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret" user_alice="alice-secret";')
    yield from _serve_acl_apis(tmp_path, monkeypatch, "User:admin", gate_factory("PLAIN", {"PLAIN": jaas}, None))


def test_over_a_sasl_listener_with_command_config(sasl_node: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--command-config logs in as Kafka's tools do; who logged in decides (alice is not allowed)."""
    config = tmp_path / "admin.properties"

    def login_as(user: str, password: str) -> list[str]:
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                          "org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="{user}" password="{password}";\n')
        return ["--bootstrap-server", sasl_node, "--command-config", str(config)]

    status, out = run(*login_as("admin", "admin-secret"), "--add", "--allow-principal", "User:alice",
                      "--operation", "Read", "--group", "g")
    assert status == 0 and "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out, out
    capsys.readouterr()
    assert run(*login_as("alice", "alice-secret"), "--list")[0] == 2
    assert "CLUSTER_AUTHORIZATION_FAILED" in capsys.readouterr().err
    assert run(*login_as("admin", "wrong"), "--list")[0] == 2
    assert "authentication failed: Authentication failed: Invalid username or password" in capsys.readouterr().err
    # Without the client settings the gate closes the connection at the first ACL request.
    assert run("--bootstrap-server", sasl_node, "--list")[0] == 2
    assert "the server closed the connection" in capsys.readouterr().err


def test_over_the_wire(node: str) -> None:
    status, out = run("--bootstrap-server", node, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                      "--topic", "t", "--resource-pattern-type", "prefixed")
    assert status == 0, out
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)`" in out
    status, out = run("--bootstrap-server", node, "--list", "--topic", "topic", "--resource-pattern-type", "match")
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in out
    status, out = run("--bootstrap-server", node, "--remove", "--force", "--topic", "t", "--resource-pattern-type",
                      "prefixed")
    assert status == 0 and "Removed ACLs for resource" in out
    assert run("--bootstrap-server", node, "--list")[1] == ""
