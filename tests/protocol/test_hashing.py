from __future__ import annotations

import pytest

from protocol.hashing import java_string_hash, kafka_abs, partition_for

# Kafka's partitionFor (abs(String.hashCode()) % partitions, with Utils.abs mapping MIN_VALUE to 0:
# https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/utils/Utils.java);
# the values were computed with a real JVM (50 partitions).
VECTORS = [
    ("", 0, 0),
    ("test-group", 627841412, 12),
    ("my-group", -1906497762, 12),
    ("console-consumer-12345", 158455506, 6),
    ("été", 227742, 42),
    ("\U0001F600grp", 1276929186, 36),
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("DESIGNING WORKHOUSES", -2147483648, 0),
]


@pytest.mark.parametrize(("group_id", "hash_code", "partition"), VECTORS)
def test_reference_vectors(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id, 50) == partition


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7
