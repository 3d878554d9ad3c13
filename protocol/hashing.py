"""Group → ``__consumer_offsets`` partition routing, bit-for-bit as Kafka does it.

Kafka routes a group with ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``
(``GroupMetadataManager.partitionFor``). Two Java details matter:

* ``String.hashCode`` walks UTF-16 *code units*, so a character outside the BMP contributes its two
  surrogates, and the sum wraps as a signed 32-bit integer.
* ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative).
"""

from __future__ import annotations

__all__ = ["java_string_hash", "kafka_abs", "partition_for"]

_INT_MIN = -(2**31)


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, signed 32-bit."""
    units = value.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """``org.apache.kafka.common.utils.Utils.abs``: like ``abs`` but ``MIN_VALUE`` → 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that owns ``group_id``."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
