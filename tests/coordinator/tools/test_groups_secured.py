"""``groupcoord groups --command-config`` on secured listeners: SASL_SSL with SCRAM-SHA-512 (TLS to every
node the cluster advertises, not only the bootstrap) and SASL_PLAINTEXT with PLAIN; a wrong password
or a group the user may not describe is Kafka's run-time error on stdout with status 0."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.groups_cli import run
from coordinator.security.acl import AclOperation, ResourceType
from coordinator.tools.group_admin import GroupAdmin
from tests.clients.security_io import PASSWORDS, SecureNode, acl

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    # Group "audited" has an ACL (bob may read it), so alice, with none, may not describe it.
    secured = SecureNode(tmp_path_factory.mktemp("groups-secured"),
                         acls=[acl("User:bob", AclOperation.READ, ResourceType.GROUP, "audited")])
    try:
        yield secured
    finally:
        secured.stop()


def describe(node: SecureNode, config: Path, listener: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(["--bootstrap-server", node.bootstrap(listener), "--command-config", str(config),
                  "--describe", "--group", "audited", "--state"], out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")])
def test_describe_over_a_secured_listener(node: SecureNode, tmp_path: Path, listener: str, mechanism: str) -> None:
    config = node.java_properties(tmp_path / "admin.properties", mechanism=mechanism, user="admin",
                                  password=PASSWORDS["admin"], listener=listener)
    props = dict(line.split("=", 1) for line in config.read_text().splitlines())
    with GroupAdmin(node.bootstrap(listener), props) as admin:
        # An admin commit makes an Empty group (any existing partition will do).
        assert admin.alter_offsets("audited", {("__consumer_offsets", 0): 0}) == {("__consumer_offsets", 0): 0}
    status, out, err = describe(node, config, listener)
    assert status == 0 and err == "\nConsumer group 'audited' has no active members.\n", (out, err)
    assert out.split("\n")[2].split()[0:1] == ["audited"] and " Empty " in out, out


def test_a_wrong_password_is_an_error_with_status_0(node: SecureNode, tmp_path: Path) -> None:
    config = node.java_properties(tmp_path / "bad.properties", mechanism="SCRAM-SHA-256", user="alice",
                                  password="wrong", listener="SASL_SSL")
    status, out, _ = describe(node, config, "SASL_SSL")
    assert status == 0
    assert out.startswith("\nError: Executing consumer group command failed due to authentication failed"), out


def test_a_group_the_user_may_not_describe_is_an_error_with_status_0(node: SecureNode, tmp_path: Path) -> None:
    config = node.java_properties(tmp_path / "alice.properties", mechanism="SCRAM-SHA-256", user="alice",
                                  password=PASSWORDS["alice"], listener="SASL_SSL")
    status, out, _ = describe(node, config, "SASL_SSL")
    assert (status, out) == (0, "\nError: Executing consumer group command failed due to "
                                "org.apache.kafka.common.errors.GroupAuthorizationException: Group authorization failed.\n")
