"""The consumer's embedded protocol (``protocol_type`` "consumer"): what a group coordinator and
the offsets pipeline need to read of it, which is the topics of a ConsumerProtocolSubscription.

Every version (0-3, KIP-429/KIP-792) starts with ``int16 version, int32 topic count, int16-length
topic names``; later fields (user data, owned partitions, generation, rack) follow and are not
read. A coordinator never writes these bytes, it passes on what members send.
"""

from __future__ import annotations

import struct

__all__ = ["CONSUMER_PROTOCOL_TYPE", "parse_subscribed_topics"]

#: The protocol type of Kafka consumers; only its subscriptions are parsed.
CONSUMER_PROTOCOL_TYPE = "consumer"


def parse_subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription, read from its version-independent prefix; None
    when the bytes do not parse."""
    try:
        pos = 2
        if len(subscription) < 6:
            return None
        (count,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        if count < 0:
            return None
        topics: set[str] = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", subscription, pos)
            pos += 2
            if length < 0 or pos + length > len(subscription):
                return None
            topics.add(bytes(subscription[pos:pos + length]).decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
