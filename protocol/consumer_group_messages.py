"""Message classes for the KIP-848 consumer group protocol, which kafka-python 3.x does not ship.

ConsumerGroupHeartbeat (api key 68) and ConsumerGroupDescribe (69), versions 0-1, built the way
kafka-python builds its own (``ApiMessage`` from a JSON message definition), so our codec treats them
like any other API. The definitions live in protocol/schemas/ and follow Kafka's
(https://github.com/apache/kafka/tree/trunk/clients/src/main/resources/common/message): heartbeat
v1 adds SubscribedTopicRegex to the request; describe v1 adds MemberType to each member of the
response (-1 unknown, 0 classic, 1 consumer; KIP-1099, https://github.com/apache/kafka/pull/17958)
and leaves its request as v0 was.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

__all__ = [
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
]

# kafka-python's metaclass reads "<class name>.json" from this package. mypy sees ApiMessage as
# Any (kafka-python ships no types: protocol/kafka_types.py), hence the ignores on the classes.
_SCHEMAS = f"{__package__}.schemas"


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    pass
