"""Kafka's ACL vocabulary and the authorizer seam every handler checks through.

Codes are Kafka's wire codes (``ResourceType``, ``PatternType``, ``AclOperation``,
``AclPermissionType`` of kafka-clients; reference/security.md §6). The handlers of every wing
above this one ask an :class:`Authorizer` — ``NoAuthorizer`` when ``authorizer.class.name`` is
empty (Kafka's default: every check passes, authorized-operations fields list everything the
resource type supports), the ACL authorizer of ``authorizer.py`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

__all__ = [
    "ResourceType", "PatternType", "AclOperation", "AclPermissionType", "CLUSTER_NAME", "ANONYMOUS",
    "SUPPORTED_OPERATIONS", "operations_bitfield", "Action", "Authorizer", "NoAuthorizer",
]

#: The one name a CLUSTER resource has (``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: Kafka's ``KafkaPrincipal.ANONYMOUS``.
ANONYMOUS = "User:ANONYMOUS"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    MATCH = 2  # filters only
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


_O = AclOperation
#: The operations each resource type supports (``AclEntry.supportedOperations``; GROUP gained
#: DESCRIBE_CONFIGS and ALTER_CONFIGS in 4.0 with the group configs of KIP-848): the bits of an
#: authorized-operations field (KIP-430) are drawn from these.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def operations_bitfield(operations: frozenset[AclOperation] | set[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``1 << code`` per operation."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


@dataclass(frozen=True, slots=True)
class Action:
    """One check: may ``principal`` from ``host`` perform ``operation`` on the resource?"""

    operation: AclOperation
    resource_type: ResourceType
    name: str


class Authorizer(Protocol):
    """What handlers ask. ``principal`` is ``Type:name``; ``host`` the client's IP string."""

    #: False for ``NoAuthorizer``: the ACL APIs then answer SECURITY_DISABLED (54).
    enabled: bool

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool: ...

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Allowed on *some* resource of the type (Kafka's ``authorizeByResourceType``; InitProducerId
        without a transactional id: IDEMPOTENT_WRITE CLUSTER or WRITE on any topic)."""
        ...

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bit field of the supported operations this principal may perform."""
        ...


class NoAuthorizer:
    """No ``authorizer.class.name``: every check passes (Kafka's ``authorizer.forall``)."""

    enabled = False

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        return True

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        return operations_bitfield(SUPPORTED_OPERATIONS.get(resource_type, frozenset()))
