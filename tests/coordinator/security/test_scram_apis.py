"""DescribeUserScramCredentials / AlterUserScramCredentials v0: Kafka's checks and errors, keys derived
from the client's salted password, and CLUSTER authorization."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from scramp import ScramClient

from coordinator.admin.scram_apis import ScramApis
from coordinator.context import RequestContext
from coordinator.security.acl import AclOperation, NoAuthorizer, ResourceType
from coordinator.security.sasl.scram import ScramServer
from coordinator.security.sasl.scram_formatter import salted_password
from coordinator.security.scram_credentials import FileScramStore
from protocol.apis import ApiKey
from protocol.errors import ErrorCode

Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
UserName = DescribeUserScramCredentialsRequest.UserName
SHA256, SHA512 = 1, 2


def ctx(key: ApiKey, principal: str = "User:admin") -> RequestContext:
    return RequestContext(api_key=key, api_version=0, correlation_id=1, client_id="t", peer="127.0.0.1:1",
                          principal=principal, client_host="127.0.0.1")


def run(reply: object) -> object:
    return asyncio.run(reply) if inspect.iscoroutine(reply) else reply  # type: ignore[arg-type]


def upsert(name: str, mech: int = SHA512, password: str = "secret", iterations: int = 4096) -> object:
    mechanism = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}.get(mech, "SCRAM-SHA-256")
    salt = b"client-chosen-salt"
    return Upsertion(name=name, mechanism=mech, iterations=iterations, salt=salt,
                     salted_password=salted_password(mechanism, password, salt, iterations))


def alter(apis: ScramApis, deletions=(), upsertions=(), principal: str = "User:admin"):  # type: ignore[no-untyped-def]
    request = AlterUserScramCredentialsRequest(version=0, deletions=list(deletions), upsertions=list(upsertions))
    response = run(apis.alter(ctx(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, principal), request))
    return {r.user: (r.error_code, r.error_message) for r in response.results}  # type: ignore[attr-defined]


def describe(apis: ScramApis, names=None, principal: str = "User:admin"):  # type: ignore[no-untyped-def]
    users = None if names is None else [UserName(name=n) for n in names]
    return apis.describe(ctx(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, principal),
                         DescribeUserScramCredentialsRequest(version=0, users=users))


@pytest.fixture
def apis(tmp_path: Path) -> ScramApis:
    return ScramApis(FileScramStore(tmp_path))


def test_upsert_then_login_with_the_password(apis: ScramApis) -> None:
    assert alter(apis, upsertions=[upsert("alice", SHA512, "pw", 8192), upsert("alice", SHA256, "pw")]) == {
        "alice": (0, None)}
    server = ScramServer("SCRAM-SHA-512", apis.store.get)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "pw")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    assert server.complete
    response = describe(apis)
    assert response.error_code == 0
    [result] = response.results
    assert result.user == "alice"
    assert [(i.mechanism, i.iterations) for i in result.credential_infos] == [(SHA256, 4096), (SHA512, 8192)]


def test_alter_errors_like_kafka(apis: ScramApis) -> None:
    alter(apis, upsertions=[upsert("bob")])
    got = alter(apis, deletions=[Deletion(name="bob", mechanism=SHA256), Deletion(name="", mechanism=SHA256),
                                 Deletion(name="d", mechanism=9)],
                upsertions=[upsert("few", iterations=4095), upsert("many", iterations=16385), upsert("m", 0),
                            upsert("dup"), upsert("dup"), upsert("ok")])
    assert got == {
        "bob": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "d": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "m": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "dup": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        "ok": (0, None),
    }
    assert sorted(apis.store.users()) == ["bob", "ok"]
    # A user with an error keeps everything: deleting bob's SHA-512 with a bad second entry does nothing.
    got = alter(apis, deletions=[Deletion(name="bob", mechanism=SHA512)], upsertions=[upsert("bob", 7)])
    assert got["bob"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert apis.store.get("bob", "SCRAM-SHA-512") is not None
    assert alter(apis, deletions=[Deletion(name="bob", mechanism=SHA512)]) == {"bob": (0, None)}
    assert apis.store.get("bob", "SCRAM-SHA-512") is None


def test_describe_named_users(apis: ScramApis) -> None:
    alter(apis, upsertions=[upsert("alice")])
    response = describe(apis, ["alice", "ghost", "x", "x"])
    assert [(r.user, r.error_code) for r in response.results] == [
        ("alice", 0), ("ghost", ErrorCode.RESOURCE_NOT_FOUND), ("x", ErrorCode.DUPLICATE_RESOURCE)]
    assert response.results[1].error_message == "Attempt to describe a user credential that does not exist: ghost"
    assert describe(apis, []).results[0].user == "alice"  # empty = all


class DenyAll(NoAuthorizer):
    enabled = True

    def __init__(self) -> None:
        self.asked: list[tuple[str, AclOperation, ResourceType, str]] = []

    def authorize(self, principal, host, operation, resource_type, name):  # type: ignore[no-untyped-def]
        self.asked.append((principal, operation, resource_type, name))
        return False


def test_cluster_authorization(tmp_path: Path) -> None:
    authorizer = DenyAll()
    apis = ScramApis(FileScramStore(tmp_path), authorizer=authorizer)
    response = describe(apis, principal="User:eve")
    assert (response.error_code, response.error_message, response.results) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    got = alter(apis, upsertions=[upsert("eve")], deletions=[Deletion(name="x", mechanism=SHA256)],
                principal="User:eve")
    assert {k: v[0] for k, v in got.items()} == {"x": 31, "eve": 31}
    assert apis.store.users() == {}
    assert authorizer.asked == [("User:eve", AclOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
                                ("User:eve", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")]


def test_handlers_table(apis: ScramApis) -> None:
    assert set(apis.handlers()) == {ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS}
