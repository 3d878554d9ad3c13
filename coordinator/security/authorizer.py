"""Kafka's ACL authorizer: who may do what to which resource, decided from the ACL bindings.

The evaluation is Kafka's (``AclAuthorizer`` of ZooKeeper mode and KRaft's ``StandardAuthorizer``
agree; https://github.com/apache/kafka/blob/3.8.0/metadata/src/main/java/org/apache/kafka/metadata/authorizer/StandardAuthorizerData.java,
Kafka docs §7.5 https://kafka.apache.org/documentation/#security_authz):

1. a principal named in ``super.users`` (semicolon-separated) may do anything;
2. the ACLs that apply are those of the resource's LITERAL name, of LITERAL ``*``, and of every
   PREFIXED prefix of the name; of those, the entries for the principal or ``User:*``, from the
   client's host or ``*``;
3. a matching DENY wins; else a matching ALLOW allows (ALLOW READ, WRITE, DELETE or ALTER also
   allow DESCRIBE, ALLOW ALTER_CONFIGS allows DESCRIBE_CONFIGS, ALL allows anything);
4. when no ACL at all applies to the resource, ``allow.everyone.if.no.acl.found`` decides.

Checks run on every request, so the lookups are a few dict reads (acl_cache.py).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Protocol

from ..config import ConfigError
from .acl import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    Authorizer,
    NoAuthorizer,
    PatternType,
    ResourceType,
    operations_bitfield,
)
from .acl_bindings import WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, normalize_host
from .acl_cache import AclCache, AclIndex, PatternAcls

__all__ = ["AclAuthorizer", "build_authorizer", "parse_super_users", "ACL_AUTHORIZER_CLASSES",
           "AUTHORIZER_CLASS_NAME", "SUPER_USERS", "ALLOW_EVERYONE_IF_NO_ACL_FOUND"]

#: The settings (Kafka's names; their defaults: "", "", false).
AUTHORIZER_CLASS_NAME = "authorizer.class.name"
SUPER_USERS = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND = "allow.everyone.if.no.acl.found"

#: ``authorizer.class.name`` values that mean "Kafka's ACLs": ZooKeeper mode's and KRaft's
#: authorizers, and our own name for it.
ACL_AUTHORIZER_CLASSES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "groupcoord",
})

#: The name Kafka's ``authorizeByResourceType`` first checks, to let super users (and
#: allow-everyone) through whatever DENY ACLs exist (``Authorizer.java``).
_DUMMY_NAME = "hardcode"
#: How many decisions an authorizer remembers before starting afresh.
MEMO_SIZE = 100_000


class _HasCache(Protocol):
    cache: AclCache


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:Bob;User:Alice``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclAuthorizer:
    enabled = True

    def __init__(self, acls: AclCache, super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self.acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._memo: tuple[AclIndex | None, dict[tuple[str, str, AclOperation, ResourceType, str], bool]] = (None, {})

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        # Decisions are remembered per index: the same client asks the same question on every
        # heartbeat and commit. A change to the ACLs makes a new index, and so a new memo.
        index = self.acls.index
        memo_index, memo = self._memo
        if memo_index is not index:
            memo = {}
            self._memo = (index, memo)
        key = (principal, host, operation, resource_type, name)
        decision = memo.get(key)
        if decision is None:
            decision = self._decide(index.matching(resource_type, name), principal, normalize_host(host), operation)
            if len(memo) >= MEMO_SIZE:
                memo.clear()  # bounded: many distinct questions just means recomputing
            memo[key] = decision
        return decision

    def _decide(self, found: list[PatternAcls], principal: str, host: str, operation: AclOperation) -> bool:
        if not found:
            return self.allow_if_no_acl
        principals = (principal, WILDCARD_PRINCIPAL)
        # Any matching DENY wins; else any matching ALLOW allows.
        if any(_grants(acls.deny, principals, host, operation) for acls in found):
            return False
        return any(_grants(acls.allow, principals, host, operation) for acls in found)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``1 << code`` per supported operation the principal may perform."""
        supported = SUPPORTED_OPERATIONS.get(resource_type, ())
        if principal in self.super_users:
            return operations_bitfield(frozenset(supported))
        found = self.acls.index.matching(resource_type, name)
        host = normalize_host(host)
        bits = 0
        for op in supported:
            if self._decide(found, principal, host, op):
                bits |= 1 << int(op)
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the principal perform the operation on *some* resource of the type? Kafka's default
        ``Authorizer.authorizeByResourceType``
        (https://github.com/apache/kafka/blob/3.8.0/clients/src/main/java/org/apache/kafka/server/authorizer/Authorizer.java):
        yes if allowed on a made-up name; no on a LITERAL ``*`` DENY; yes on a LITERAL ``*`` ALLOW,
        on a LITERAL ALLOW with neither the same LITERAL DENY nor a PREFIXED DENY of a prefix, or
        on a PREFIXED ALLOW no PREFIXED DENY of a prefix dominates. Only the principal's own
        entries and ``User:*``'s count, from its host or ``*``, for the operation or ALL
        (implications play no part here, as in Kafka)."""
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"Must specify a non-filter operation type: {operation.name}")
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"Must specify a non-filter resource type: {resource_type.name}")
        if self.authorize(principal, host, operation, resource_type, _DUMMY_NAME):
            return True
        host = normalize_host(host)
        by_principal = self.acls.index.by_type.get(resource_type, {})
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for who in (principal, WILDCARD_PRINCIPAL) if principal != WILDCARD_PRINCIPAL else (principal,):
            for binding in by_principal.get(who, ()):
                entry, pattern = binding.entry, binding.pattern
                if entry.host not in (host, WILDCARD_HOST):
                    continue
                if entry.operation not in (operation, AclOperation.ALL):
                    continue
                if entry.permission == AclPermissionType.DENY:
                    if pattern.pattern_type == PatternType.LITERAL:
                        if pattern.name == WILDCARD_RESOURCE:
                            return False
                        deny_literal.add(pattern.name)
                    else:
                        deny_prefixed.add(pattern.name)
                elif entry.permission == AclPermissionType.ALLOW:
                    if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                        return True
                    allow.append((pattern.pattern_type, pattern.name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return False


def build_authorizer(class_name: str, super_users: str = "", allow_everyone_if_no_acl_found: bool = False,
                     store: _HasCache | None = None) -> Authorizer:
    """The authorizer ``authorizer.class.name`` asks for: none when empty (every check passes,
    Kafka's default), Kafka's ACLs for Kafka's authorizer class names. ``store`` is the ACL store
    (acl_store.py) whose cache the authorizer reads; without one the ACLs start empty."""
    class_name = class_name.strip()
    if not class_name:
        return NoAuthorizer()
    if class_name not in ACL_AUTHORIZER_CLASSES:
        raise ConfigError(f"{AUTHORIZER_CLASS_NAME}: unknown authorizer {class_name!r}; groupcoord provides Kafka's "
                          f"ACL authorizer under the names {', '.join(sorted(ACL_AUTHORIZER_CLASSES))} "
                          "(or leave it empty for none)")
    cache = store.cache if store is not None else AclCache()
    return AclAuthorizer(cache, parse_super_users(super_users), allow_everyone_if_no_acl_found)


def _grants(side: Mapping[str, Mapping[str, Container[AclOperation]]], principals: tuple[str, str], host: str,
            operation: AclOperation) -> bool:
    """Whether one permission's entries (principal -> host -> operations) of a pattern name
    ``operation`` for one of ``principals`` on the wildcard host or ``host``."""
    for who in principals:
        hosts = side.get(who)
        if hosts is not None:
            for where in (WILDCARD_HOST, host):
                ops = hosts.get(where)
                if ops is not None and operation in ops:
                    return True
    return False
