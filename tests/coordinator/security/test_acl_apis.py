"""CreateAcls / DescribeAcls / DeleteAcls (v0-3): Kafka's validation messages, filter matching with
MATCH and ANY, the cluster checks, SECURITY_DISABLED without an authorizer; every answer goes
through kafka-python's codec at the version asked."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from coordinator.admin.acl_apis import AclApis
from coordinator.context import RequestContext
from coordinator.security.acl import AclOperation, AclPermissionType, NoAuthorizer, PatternType, ResourceType
from coordinator.security.acl_store import FileAclStore
from coordinator.security.authorizer import AclAuthorizer
from protocol.apis import ApiKey, request_class, response_class
from protocol.errors import ErrorCode

T, O, P = ResourceType, AclOperation, PatternType
ALLOW, DENY, ANY_PERM = AclPermissionType.ALLOW, AclPermissionType.DENY, AclPermissionType.ANY
ADMIN = "User:admin"


def ctx(api_key: ApiKey, version: int, principal: str = ADMIN) -> RequestContext:
    return RequestContext(int(api_key), version, 1, "test", "127.0.0.1:5555", principal=principal,
                          client_host="127.0.0.1")


def answer(handler: Any, context: RequestContext, request: Any) -> Any:
    request = request_class(context.api_key).decode(request.encode(version=context.api_version),
                                                    version=context.api_version)
    reply = handler(context, request)
    if inspect.isawaitable(reply):
        reply = asyncio.run(_wait(reply))
    # Through the codec at the version asked, as the server sends it.
    cls = response_class(context.api_key)
    return cls.decode(reply.encode(version=context.api_version), version=context.api_version)


async def _wait(awaitable: Any) -> Any:
    return await awaitable


@pytest.fixture
def apis(tmp_path: Path) -> AclApis:
    store = FileAclStore(tmp_path)
    return AclApis(AclAuthorizer(store.cache, frozenset({ADMIN})), store)


def creation(rtype: int = T.TOPIC, name: str = "t", pattern: int = P.LITERAL, principal: str = "User:alice",
             host: str = "*", op: int = O.READ, perm: int = ALLOW) -> Any:
    return CreateAclsRequest.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                                         principal=principal, host=host, operation=op, permission_type=perm)


def create(apis: AclApis, *creations: Any, version: int = 3, principal: str = ADMIN) -> list[tuple[int, str | None]]:
    response = answer(apis.create_acls, ctx(ApiKey.CREATE_ACLS, version, principal),
                      CreateAclsRequest(version=version, creations=list(creations)))
    return [(r.error_code, r.error_message) for r in response.results]


def describe(apis: AclApis, rtype: int = T.ANY, name: str | None = None, pattern: int = P.ANY,
             principal: str | None = None, host: str | None = None, op: int = O.ANY, perm: int = ANY_PERM,
             version: int = 3, who: str = ADMIN) -> Any:
    request = DescribeAclsRequest(version=version, resource_type_filter=rtype, resource_name_filter=name,
                                  pattern_type_filter=pattern, principal_filter=principal, host_filter=host,
                                  operation=op, permission_type=perm)
    return answer(apis.describe_acls, ctx(ApiKey.DESCRIBE_ACLS, version, who), request)


def described(response: Any) -> set[tuple[int, str, int, str, str, int, int]]:
    assert response.error_code == 0, response.error_message
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def delete_filter(rtype: int = T.ANY, name: str | None = None, pattern: int = P.ANY, principal: str | None = None,
                  host: str | None = None, op: int = O.ANY, perm: int = ANY_PERM) -> Any:
    return DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=rtype, resource_name_filter=name,
                                              pattern_type_filter=pattern, principal_filter=principal,
                                              host_filter=host, operation=op, permission_type=perm)


@pytest.mark.parametrize("bad, message", [
    (creation(rtype=T.CLUSTER, name="other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (creation(name=""), "Invalid empty resource name"),
    (creation(rtype=T.ANY), "Invalid resourceType ANY"),
    (creation(rtype=T.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (creation(rtype=99), "Invalid resourceType UNKNOWN"),
    (creation(pattern=P.MATCH), "Invalid patternType MATCH"),
    (creation(pattern=P.ANY), "Invalid patternType ANY"),
    (creation(op=O.ANY), "Invalid operation ANY"),
    (creation(op=O.UNKNOWN), "Invalid operation UNKNOWN"),
    (creation(perm=ANY_PERM), "Invalid permissionType ANY"),
    (creation(principal="alice"), "Could not parse principal from `alice` (no colon is present separating the "
                                  "principal type from the principal name)"),
])
def test_invalid_creations_get_kafkas_message_and_the_rest_are_stored(apis: AclApis, bad: Any, message: str) -> None:
    assert create(apis, creation(name="ok"), bad) == [(0, None), (ErrorCode.INVALID_REQUEST, message)]
    assert {r[1] for r in described(describe(apis))} == {"ok"}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_round_trips(apis: AclApis, version: int) -> None:
    assert create(apis, creation(name="t1", host="0:0:0:0:0:0:0:1"), version=version) == [(0, None)]
    want = {(T.TOPIC, "t1", P.LITERAL, "User:alice", "::1", O.READ, ALLOW)}
    got = describe(apis, T.TOPIC, "t1", P.LITERAL, version=version)
    assert described(got) == want
    response = answer(apis.delete_acls, ctx(ApiKey.DELETE_ACLS, version),
                      DeleteAclsRequest(version=version, filters=[delete_filter(T.TOPIC, "t1", P.LITERAL)]))
    [result] = response.filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.principal, m.host, m.operation) for m in result.matching_acls] == [
        ("t1", "User:alice", "::1", O.READ)]
    assert described(describe(apis)) == set()


def test_filters_any_match_literal_prefixed(apis: AclApis) -> None:
    assert create(apis, creation(name="orders"), creation(name="*"), creation(name="ord", pattern=P.PREFIXED),
                  creation(name="other", principal="User:bob", op=O.WRITE, perm=DENY),
                  creation(rtype=T.GROUP, name="orders")) == [(0, None)] * 5
    names = lambda r: {(x[1], x[2]) for x in described(r)}  # noqa: E731
    # MATCH: every pattern that affects topic "orders".
    assert names(describe(apis, T.TOPIC, "orders", P.MATCH)) == {("orders", P.LITERAL), ("*", P.LITERAL),
                                                                  ("ord", P.PREFIXED)}
    # ANY with a name: that exact name, whatever the pattern type.
    assert names(describe(apis, T.TOPIC, "ord", P.ANY)) == {("ord", P.PREFIXED)}
    # LITERAL: only that literal name (no wildcard).
    assert names(describe(apis, T.TOPIC, "orders", P.LITERAL)) == {("orders", P.LITERAL)}
    assert names(describe(apis, T.ANY, "orders", P.LITERAL)) == {("orders", P.LITERAL)}
    assert len(described(describe(apis, T.ANY, "orders", P.LITERAL))) == 2  # the topic's and the group's
    assert names(describe(apis, principal="User:bob", perm=DENY)) == {("other", P.LITERAL)}
    assert names(describe(apis, op=O.WRITE, perm=ALLOW)) == set()
    # An UNKNOWN element: INVALID_REQUEST.
    response = describe(apis, pattern=P.UNKNOWN)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    response = describe(apis, op=O.UNKNOWN)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown entryFilter.")


def test_delete_with_match_and_invalid_filters(apis: AclApis) -> None:
    create(apis, creation(name="orders"), creation(name="*"), creation(name="ord", pattern=P.PREFIXED),
           creation(name="other"))
    response = answer(apis.delete_acls, ctx(ApiKey.DELETE_ACLS, 3), DeleteAclsRequest(version=3, filters=[
        delete_filter(T.TOPIC, "orders", P.MATCH), delete_filter(rtype=T.UNKNOWN)]))
    ok, bad = response.filter_results
    assert {m.resource_name for m in ok.matching_acls} == {"orders", "*", "ord"}
    assert (bad.error_code, bad.error_message) == (ErrorCode.INVALID_REQUEST, "Unknown patternFilter.")
    assert {x[1] for x in described(describe(apis))} == {"other"}


def test_cluster_checks(apis: AclApis) -> None:
    who = "User:alice"
    assert create(apis, creation(), principal=who) == [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                          "Cluster authorization failed.")]
    assert describe(apis, who=who).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # DESCRIBE CLUSTER lets alice describe but not create; ALTER implies DESCRIBE.
    create(apis, creation(rtype=T.CLUSTER, name="kafka-cluster", principal=who, op=O.DESCRIBE))
    assert describe(apis, who=who).error_code == 0
    assert create(apis, creation(), principal=who)[0][0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    create(apis, creation(rtype=T.CLUSTER, name="kafka-cluster", principal=who, op=O.ALTER))
    assert create(apis, creation(), principal=who) == [(0, None)]
    response = answer(apis.delete_acls, ctx(ApiKey.DELETE_ACLS, 1, "User:bob"),
                      DeleteAclsRequest(version=1, filters=[delete_filter()]))
    assert response.filter_results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_security_disabled_without_an_authorizer(tmp_path: Path) -> None:
    apis = AclApis(NoAuthorizer(), FileAclStore(tmp_path))
    assert create(apis, creation()) == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
    response = describe(apis)
    assert (response.error_code, response.error_message) == (ErrorCode.SECURITY_DISABLED,
                                                             "No Authorizer is configured on the broker")
    response = answer(apis.delete_acls, ctx(ApiKey.DELETE_ACLS, 2), DeleteAclsRequest(version=2, filters=[
        delete_filter()]))
    assert response.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED
    assert set(apis.handlers()) == {ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS}


def test_v0_reads_as_literal(apis: AclApis) -> None:
    create(apis, creation(name="orders"), creation(name="ord", pattern=P.PREFIXED))
    # v0 has no pattern type field: the filter is LITERAL, so the prefixed ACL is not listed.
    assert {x[1] for x in described(describe(apis, T.TOPIC, None, P.ANY, version=0))} == {"orders"}
