"""The ACL admin APIs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31), versions 0-3, behind
``kafka-acls.sh --bootstrap-server`` and the admin clients' ``describe/create/delete_acls``.

Kafka's handling (``AclApis.scala``,
https://github.com/apache/kafka/blob/3.8.0/core/src/main/scala/kafka/server/AclApis.scala): DescribeAcls
needs DESCRIBE on the cluster, the other two ALTER (else CLUSTER_AUTHORIZATION_FAILED); with no
authorizer configured each answers SECURITY_DISABLED. A creation Kafka refuses (empty name, a
CLUSTER name other than ``kafka-cluster``, an UNKNOWN or filter-only type, pattern, operation or
permission, a principal with no colon) gets INVALID_REQUEST with Kafka's message in its own
result; the others are stored. Filters with an UNKNOWN element are refused the same way
(``AclControlManager.validateFilter``). v0 has no pattern type fields: the codec's default,
LITERAL, applies (Kafka reads v0 the same way). The messages are kafka-python's (kafka.protocol.admin,
all four versions).

The stores block (an fsynced file, or ZooKeeper round trips), so changes run on a worker thread.
"""

from __future__ import annotations

import asyncio
import logging

from kafka.protocol.admin import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_types import KafkaRequest, KafkaResponse, KafkaStruct

from ..context import Handler, Reply, RequestContext
from ..security.acl import CLUSTER_NAME, AclOperation, AclPermissionType, Authorizer, PatternType, ResourceType
from ..security.acl_bindings import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    ResourcePattern,
    from_code,
    validate_binding,
    validate_filter,
)
from ..security.acl_store import AclStore

__all__ = ["AclApis"]

log = logging.getLogger("groupcoord.admin.acls")

_Resource = DescribeAclsResponse.DescribeAclsResource
_Description = _Resource.AclDescription
_Creation = CreateAclsResponse.AclCreationResult
_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _FilterResult.DeleteAclsMatchingAcl

#: Kafka's messages when no authorizer is configured.
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."
CLUSTER_DENIED = "Cluster authorization failed."


def _filter(f: KafkaStruct) -> AclBindingFilter:
    return AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                               f.principal_filter, f.host_filter, f.operation, f.permission_type)


def _binding(c: KafkaStruct) -> AclBinding:
    # Codes Kafka does not know read as UNKNOWN, which validation then refuses.
    pattern = ResourcePattern(from_code(ResourceType, c.resource_type), c.resource_name,
                              from_code(PatternType, c.resource_pattern_type))
    return AclBinding(pattern, AccessControlEntry.of(c.principal, c.host, from_code(AclOperation, c.operation),
                                                     from_code(AclPermissionType, c.permission_type)))


class AclApis:
    def __init__(self, authorizer: Authorizer, store: AclStore | None) -> None:
        self.authorizer = authorizer
        self.store = store

    def _may(self, ctx: RequestContext, operation: AclOperation) -> bool:
        return self.authorizer.authorize(ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER,
                                         CLUSTER_NAME)

    def _disabled(self) -> bool:
        return not self.authorizer.enabled or self.store is None

    # --- DescribeAcls ------------------------------------------------------------------------------

    def describe_acls(self, ctx: RequestContext, request: KafkaRequest) -> KafkaResponse:
        version = ctx.api_version

        def error(code: int, message: str) -> KafkaResponse:
            return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                                        resources=[])

        if not self._may(ctx, AclOperation.DESCRIBE):
            return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
        if self._disabled():
            return error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE)
        assert self.store is not None
        flt = _filter(request)
        try:
            validate_filter(flt)
        except AclError as exc:
            return error(ErrorCode.INVALID_REQUEST, str(exc))
        by_pattern: dict[ResourcePattern, list[KafkaStruct]] = {}
        for b in self.store.list(flt):
            e = b.entry
            by_pattern.setdefault(b.pattern, []).append(_Description(
                principal=e.principal, host=e.host, operation=int(e.operation), permission_type=int(e.permission)))
        resources = [_Resource(resource_type=int(p.resource_type), resource_name=p.name,
                               pattern_type=int(p.pattern_type), acls=acls) for p, acls in by_pattern.items()]
        return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    error_message=None, resources=resources)

    # --- CreateAcls --------------------------------------------------------------------------------

    def create_acls(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        creations = list(request.creations)

        def every(code: int, message: str) -> KafkaResponse:
            return CreateAclsResponse(version=version, throttle_time_ms=0,
                                      results=[_Creation(error_code=code, error_message=message) for _ in creations])

        if not self._may(ctx, AclOperation.ALTER):
            return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
        if self._disabled():
            return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        errors: list[str | None] = []
        valid: list[AclBinding] = []
        for c in creations:
            binding = _binding(c)
            try:
                validate_binding(binding)
            except AclError as exc:
                errors.append(str(exc))
                continue
            errors.append(None)
            valid.append(binding)
        return self._create(version, errors, valid)

    async def _create(self, version: int, errors: list[str | None], valid: list[AclBinding]) -> KafkaResponse:
        assert self.store is not None
        outcome: list[tuple[int, str | None]] = []
        try:
            stored = await asyncio.to_thread(self.store.add, valid) if valid else []
            stored_outcome = [(ErrorCode.NONE, None) if e is None else (ErrorCode.INVALID_REQUEST, str(e))
                              for e in stored]
        except Exception as exc:  # the store failed (ZooKeeper unreachable, disk full): say so per ACL
            log.error("storing ACLs failed", extra={"error": repr(exc)})
            stored_outcome = [(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to store ACLs: {exc}")] * len(valid)
        pending = iter(stored_outcome)
        for message in errors:
            outcome.append((ErrorCode.INVALID_REQUEST, message) if message is not None else next(pending))
        return CreateAclsResponse(version=version, throttle_time_ms=0, results=[
            _Creation(error_code=code, error_message=message) for code, message in outcome])

    # --- DeleteAcls --------------------------------------------------------------------------------

    def delete_acls(self, ctx: RequestContext, request: KafkaRequest) -> Reply:
        version = ctx.api_version
        filters = [_filter(f) for f in request.filters]

        def every(code: int, message: str) -> KafkaResponse:
            return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=[
                _FilterResult(error_code=code, error_message=message, matching_acls=[]) for _ in filters])

        if not self._may(ctx, AclOperation.ALTER):
            return every(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)
        if self._disabled():
            return every(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        return self._delete(version, filters)

    async def _delete(self, version: int, filters: list[AclBindingFilter]) -> KafkaResponse:
        assert self.store is not None
        invalid: dict[int, str] = {}
        valid: list[AclBindingFilter] = []
        for i, flt in enumerate(filters):
            try:
                validate_filter(flt)
                valid.append(flt)
            except AclError as exc:
                invalid[i] = str(exc)
        failure: str | None = None
        deleted: list[list[AclBinding]] = []
        try:
            deleted = await asyncio.to_thread(self.store.remove, valid) if valid else []
        except Exception as exc:
            log.error("deleting ACLs failed", extra={"error": repr(exc)})
            failure = f"Failed to delete ACLs: {exc}"
        results = []
        pending = iter(deleted)
        for i in range(len(filters)):
            if i in invalid:
                results.append(_FilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=invalid[i],
                                             matching_acls=[]))
            elif failure is not None:
                results.append(_FilterResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=failure,
                                             matching_acls=[]))
            else:
                results.append(_FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
                    _Matching(error_code=ErrorCode.NONE, error_message=None,
                              resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                              pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal,
                              host=b.entry.host, operation=int(b.entry.operation),
                              permission_type=int(b.entry.permission))
                    for b in next(pending)]))
        return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)

    def handlers(self) -> dict[ApiKey, Handler]:
        return {ApiKey.DESCRIBE_ACLS: self.describe_acls, ApiKey.CREATE_ACLS: self.create_acls,
                ApiKey.DELETE_ACLS: self.delete_acls}
