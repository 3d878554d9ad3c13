"""Authorized-operations answers without an authorizer (KIP-430).

Metadata, DescribeCluster and DescribeGroups can ask which operations the caller may perform on a
resource. With no authorizer configured Kafka answers every operation the resource type supports
(``AuthHelper.authorizedOperations``); when not asked, the field is "omitted" (Integer.MIN_VALUE,
which the codec's bit-field writes for None). Operation codes are ``AclOperation``'s.
"""

from __future__ import annotations

__all__ = ["OMITTED", "GROUP_OPERATIONS", "TOPIC_OPERATIONS", "CLUSTER_OPERATIONS", "authorized"]

OMITTED = None

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

GROUP_OPERATIONS = frozenset({READ, DESCRIBE, DELETE})
TOPIC_OPERATIONS = frozenset({READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
CLUSTER_OPERATIONS = frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                                DESCRIBE})


def authorized(requested: bool, operations: frozenset[int]) -> set[int] | None:
    return set(operations) if requested else OMITTED
