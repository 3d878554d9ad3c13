"""The checks a handler makes for the request it serves, through the configured authorizer.

Each API's checks, their order and their error codes are Kafka's (``KafkaApis`` and ``AuthHelper``
of https://github.com/apache/kafka/tree/3.9/core/src/main/scala/kafka/server; Kafka's own matrix
is ``requestKeysToAcls`` in core/src/test/scala/integration/kafka/api/AuthorizerIntegrationTest.scala):
authorization comes before any existence check, so a denied name never reveals whether it exists. With ``NoAuthorizer`` (no ``authorizer.class.name``) every check passes;
handlers test ``authorizer.enabled`` first on their hot paths so that they skip the per-topic work.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..context import RequestContext
from .acl import CLUSTER_NAME, AclOperation, Authorizer, NoAuthorizer, ResourceType

__all__ = ["NO_AUTHORIZER", "allowed", "allowed_names", "cluster_allowed", "operations_of", "operations_set", "OMITTED_OPERATIONS"]

#: The default of every handler's ``authorizer`` (no ``authorizer.class.name``).
NO_AUTHORIZER: Authorizer = NoAuthorizer()

#: An authorized-operations field that was not asked for, or of a failed entry (KIP-430:
#: ``Integer.MIN_VALUE``, which Java's admin client reads as null).
OMITTED_OPERATIONS = -(2**31)


def allowed(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
            name: str) -> bool:
    """May the request's principal, from its host, perform ``operation`` on the resource?"""
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def cluster_allowed(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation) -> bool:
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allowed_names(authorizer: Authorizer, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                  names: Iterable[str]) -> set[str]:
    """The names among ``names`` the check passes for (Kafka's ``filterByAuthorized``: each
    distinct name asked once)."""
    if not authorizer.enabled:
        return set(names)
    return {n for n in set(names) if authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, n)}


def operations_of(authorizer: Authorizer, ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The KIP-430 field of one resource: the supported operations the principal may perform."""
    return authorizer.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)


def operations_set(bits: int) -> set[int]:
    """A KIP-430 field as the operation codes kafka-python's bit-field type encodes."""
    return {op for op in range(31) if bits >> op & 1}
