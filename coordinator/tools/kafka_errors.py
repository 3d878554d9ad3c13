"""Kafka's exception class and message for the error codes the groups tool meets
(``org.apache.kafka.common.protocol.Errors``,
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/protocol/Errors.java):
the Java tool prints a failed call's exception as ``<class>: <message>``."""

from __future__ import annotations

from protocol.errors import ErrorCode

__all__ = ["error_message", "exception_text"]

_ERRORS: dict[int, tuple[str, str]] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ("UnknownTopicOrPartitionException",
                                           "This server does not host this topic-partition."),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    ErrorCode.NOT_COORDINATOR: ("NotCoordinatorException", "This is not the correct coordinator."),
    ErrorCode.INVALID_GROUP_ID: ("InvalidGroupIdException", "The configured groupId is invalid."),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: ("TopicAuthorizationException", "Topic authorization failed."),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: ("GroupAuthorizationException", "Group authorization failed."),
    ErrorCode.NON_EMPTY_GROUP: ("GroupNotEmptyException", "The group is not empty."),
    ErrorCode.GROUP_ID_NOT_FOUND: ("GroupIdNotFoundException", "The group id does not exist."),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: ("GroupSubscribedToTopicException",
                                          "The consumer group is actively subscribed to the topic"),
}


def error_message(code: int) -> str:
    """Errors.message()."""
    return _ERRORS.get(code, ("UnknownServerException", ErrorCode(code).name if code in ErrorCode._value2member_map_
                              else f"error code {code}"))[1]


def exception_text(code: int) -> str:
    """What Java prints for the exception of an error code: its class, a colon, its message."""
    name, message = _ERRORS.get(code, ("UnknownServerException", error_message(code)))
    return f"org.apache.kafka.common.errors.{name}: {message}"
