"""``ErrorCode`` against two independent tables: kafka-python's ``kafka.errors`` and the codes the
coordinator sends as Kafka numbers and names them in ``Errors.java``:
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/protocol/Errors.java

kafka-python keeps some names from older Kafka releases (``NotLeaderForPartitionError`` for what
Kafka now calls NOT_LEADER_OR_FOLLOWER); those renames are listed explicitly below, so that any
other disagreement, in number or in name, fails.
"""

from __future__ import annotations

import inspect
import re

import kafka.errors
import pytest

from protocol.errors import ErrorCode


def _kafka_python_table() -> dict[int, list[type]]:
    table: dict[int, list[type]] = {}
    for obj in vars(kafka.errors).values():
        if inspect.isclass(obj) and isinstance(getattr(obj, "errno", None), int):
            table.setdefault(obj.errno, []).append(obj)
    return table


KAFKA_PYTHON = _kafka_python_table()
SHARED = sorted(set(KAFKA_PYTHON) & {code.value for code in ErrorCode})


def upper_snake(class_name: str) -> str:
    """``UnknownTopicOrPartitionError`` -> ``UNKNOWN_TOPIC_OR_PARTITION_ERROR``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", class_name).upper()


def _candidate_names(cls: type) -> set[str]:
    snake = upper_snake(cls.__name__)
    names = {snake}
    for suffix in ("_ERROR", "_EXCEPTION"):
        if snake.endswith(suffix):
            names.add(snake[: -len(suffix)])
    return names


# kafka-python name -> Kafka (Errors.java) name, where kafka-python kept an older or shorter name.
KNOWN_RENAMES = {
    -1: ("UnknownError", "UNKNOWN_SERVER_ERROR"),
    0: ("NoError", "NONE"),
    2: ("CorruptRecordError", "CORRUPT_MESSAGE"),
    4: ("InvalidFetchRequestError", "INVALID_FETCH_SIZE"),
    6: ("NotLeaderForPartitionError", "NOT_LEADER_OR_FOLLOWER"),
    10: ("MessageSizeTooLargeError", "MESSAGE_TOO_LARGE"),
    17: ("InvalidTopicError", "INVALID_TOPIC_EXCEPTION"),
    39: ("InvalidReplicationAssignmentError", "INVALID_REPLICA_ASSIGNMENT"),
    40: ("InvalidConfigurationError", "INVALID_CONFIG"),
}

# The codes the coordinator sends, with their numbers and names in Kafka's Errors.java (above).
COORDINATOR_CODES = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE", 12: "OFFSET_METADATA_TOO_LARGE", 13: "NETWORK_EXCEPTION",
    14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
    18: "RECORD_LIST_TOO_LARGE", 19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    22: "ILLEGAL_GENERATION", 23: "INCONSISTENT_GROUP_PROTOCOL", 24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID", 26: "INVALID_SESSION_TIMEOUT", 27: "REBALANCE_IN_PROGRESS",
    28: "INVALID_COMMIT_OFFSET_SIZE", 29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED", 35: "UNSUPPORTED_VERSION", 42: "INVALID_REQUEST",
    56: "KAFKA_STORAGE_ERROR", 68: "NON_EMPTY_GROUP", 69: "GROUP_ID_NOT_FOUND",
    79: "MEMBER_ID_REQUIRED", 81: "GROUP_MAX_SIZE_REACHED", 82: "FENCED_INSTANCE_ID",
    86: "GROUP_SUBSCRIBED_TO_TOPIC", 88: "UNSTABLE_OFFSET_COMMIT", 110: "FENCED_MEMBER_EPOCH",
    111: "UNRELEASED_INSTANCE_ID", 112: "UNSUPPORTED_ASSIGNOR", 113: "STALE_MEMBER_EPOCH",
}


def test_upper_snake() -> None:
    assert upper_snake("UnknownTopicOrPartitionError") == "UNKNOWN_TOPIC_OR_PARTITION_ERROR"
    assert _candidate_names(kafka.errors.KafkaStorageError) == {"KAFKA_STORAGE_ERROR",
                                                               "KAFKA_STORAGE"}


def test_codes_are_unique_and_contiguous() -> None:
    values = [code.value for code in ErrorCode]
    assert len(values) == len(set(values))  # no aliases hiding a duplicate number
    assert sorted(values) == list(range(-1, max(values) + 1))


def test_tables_overlap_widely() -> None:
    assert len(SHARED) > 100
    assert set(COORDINATOR_CODES) <= set(SHARED)


@pytest.mark.parametrize("errno", SHARED)
def test_number_and_name_agree_with_kafka_python(errno: int) -> None:
    ours = ErrorCode(errno)
    classes = KAFKA_PYTHON[errno]
    if errno in KNOWN_RENAMES:
        theirs, kafka_name = KNOWN_RENAMES[errno]
        assert theirs in {cls.__name__ for cls in classes}
        assert ours.name == kafka_name
        return
    candidates = set().union(*(_candidate_names(cls) for cls in classes))
    assert ours.name in candidates, (errno, ours.name, [cls.__name__ for cls in classes])


@pytest.mark.parametrize("errno", sorted(KNOWN_RENAMES))
def test_known_renames_are_still_renames(errno: int) -> None:
    """If kafka-python adopts Kafka's name, drop the entry from KNOWN_RENAMES."""
    candidates = set().union(*(_candidate_names(cls) for cls in KAFKA_PYTHON[errno]))
    assert ErrorCode(errno).name not in candidates


@pytest.mark.parametrize(("errno", "name"), sorted(COORDINATOR_CODES.items()))
def test_coordinator_codes(errno: int, name: str) -> None:
    assert ErrorCode[name] == errno
    assert ErrorCode(errno).name == name
    assert errno in KAFKA_PYTHON


def test_codes_the_server_relies_on_by_number() -> None:
    # Spelled out: the numbers clients react to during a rebalance and during discovery.
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS == 14
    assert ErrorCode.COORDINATOR_NOT_AVAILABLE == 15
    assert ErrorCode.NOT_COORDINATOR == 16
    assert ErrorCode.ILLEGAL_GENERATION == 22
    assert ErrorCode.UNKNOWN_MEMBER_ID == 25
    assert ErrorCode.REBALANCE_IN_PROGRESS == 27
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.FENCED_INSTANCE_ID == 82
    assert kafka.errors.for_code(35) is kafka.errors.UnsupportedVersionError
    assert kafka.errors.for_code(79) is kafka.errors.MemberIdRequiredError
