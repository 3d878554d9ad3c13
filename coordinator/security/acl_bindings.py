"""ACL bindings and filters: what is stored, and what the ACL admin APIs select with.

A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an access control entry
(principal, host, operation, ALLOW or DENY), Kafka's ``AclBinding``. Filters are Kafka's
``ResourcePatternFilter`` / ``AccessControlEntryFilter`` (``None`` and ANY match anything;
MATCH selects every pattern that affects the named resource: the same LITERAL name, LITERAL
``*`` and every PREFIXED prefix of it), as DescribeAcls and DeleteAcls use them
(https://github.com/apache/kafka/blob/3.8.0/clients/src/main/java/org/apache/kafka/common/resource/ResourcePatternFilter.java).

Hosts are IP strings. Java writes IPv6 expanded (``0:0:0:0:0:0:0:1``) where Python says ``::1``,
so both the stored host and the client's address are normalised with :mod:`ipaddress` (an
IPv4-mapped IPv6 address counts as its IPv4 address); anything that is not an IP is kept as written.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from .acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType

__all__ = [
    "WILDCARD_RESOURCE", "WILDCARD_PRINCIPAL", "WILDCARD_HOST", "ResourcePattern", "AccessControlEntry",
    "AclBinding", "AclBindingFilter", "AclError", "normalize_host", "validate_binding", "validate_filter",
    "pascal_name", "parse_pascal", "from_code",
]

#: LITERAL ``*``: every resource of the type (``ResourcePattern.WILDCARD_RESOURCE``).
WILDCARD_RESOURCE = "*"
#: ``User:*``: every principal (``AclEntry.WildcardPrincipalString``).
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


class AclError(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


@lru_cache(maxsize=4096)
def normalize_host(host: str) -> str:
    """One spelling per address: ``0:0:0:0:0:0:0:1`` and ``::1`` are the same host."""
    if host == WILDCARD_HOST or not host:
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @staticmethod
    def of(principal: str, host: str, operation: AclOperation, permission: AclPermissionType) -> AccessControlEntry:
        return AccessControlEntry(principal, normalize_host(host), AclOperation(operation),
                                  AclPermissionType(permission))


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A DescribeAcls filter or one DeleteAcls filter. ``None`` name, principal or host match any."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    @staticmethod
    def of(resource_type: int, name: str | None, pattern_type: int, principal: str | None, host: str | None,
           operation: int, permission: int) -> AclBindingFilter:
        """From wire codes; a code Kafka does not know reads as UNKNOWN (``fromCode``)."""
        return AclBindingFilter(from_code(ResourceType, resource_type), name, from_code(PatternType, pattern_type),
                                principal, None if host is None else normalize_host(host),
                                from_code(AclOperation, operation), from_code(AclPermissionType, permission))

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource of this name.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission in (AclPermissionType.ANY, entry.permission)

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_at_most_one(self) -> bool:
        """Names exactly one pattern (Kafka's ``matchesAtMostOne``): a delete needs no scan."""
        return (self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN) and self.name is not None
                and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED))


def from_code(enum: type[_E], code: int) -> _E:
    """A wire code as the enum; a code Kafka does not know reads as UNKNOWN (``fromCode``)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)  # UNKNOWN


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks on a new ACL (``AclApis.handleCreateAcls`` and
    ``AclControlManager.validateNewAcl``, https://github.com/apache/kafka/blob/3.8.0/metadata/src/main/java/org/apache/kafka/controller/AclControlManager.java):
    raise :class:`AclError` with Kafka's message."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise AclError("Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclError(f"Invalid operation {entry.operation.name}")
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"Invalid permissionType {entry.permission.name}")
    if ":" not in entry.principal:
        raise AclError(f"Could not parse principal from `{entry.principal}` (no colon is present separating the "
                       "principal type from the principal name)")


def validate_filter(flt: AclBindingFilter) -> None:
    """``AclControlManager.validateFilter``: a filter with an UNKNOWN element selects nothing sensible."""
    if flt.resource_type == ResourceType.UNKNOWN or flt.pattern_type == PatternType.UNKNOWN:
        raise AclError("Unknown patternFilter.")
    if flt.operation == AclOperation.UNKNOWN or flt.permission == AclPermissionType.UNKNOWN:
        raise AclError("Unknown entryFilter.")


def pascal_name(value: ResourceType | AclOperation | AclPermissionType) -> str:
    """Kafka's ``SecurityUtils.resourceTypeName`` / ``operationName``: ``TRANSACTIONAL_ID`` →
    ``TransactionalId``, as written in ZooKeeper paths and ACL JSON."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_pascal(enum: type[_E], text: str) -> _E:
    """The inverse of :func:`pascal_name`, also taking Java enum names (``TOPIC``): ValueError if unknown."""
    wanted = text.replace("_", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {enum.__name__} {text!r}")
