"""The hash of a group's subscribed topics (KIP-1101,
https://cwiki.apache.org/confluence/display/KAFKA/KIP-1101%3A+Trigger+rebalance+on+rack+topology+changes):
it changes when a subscribed topic is created, deleted, recreated under a new id, grows
partitions, or when the racks of its replicas change, and the group epoch moves with it.

Kafka stores the hash in ConsumerGroupMetadataValue (tag 0) so that a reloaded group can tell
whether its topics changed while it was away. The value is this implementation's own (BLAKE2b
over a canonical encoding, as a signed int64): it is compared only with hashes this code wrote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..topics_image import TopicsImage

__all__ = ["topics_hash"]


def topics_hash(names: Iterable[str], image: TopicsImage) -> int:
    """0 when no subscribed topic exists (as Kafka's hash of no topics)."""
    h = hashlib.blake2b(digest_size=8)
    found = False
    for name in sorted(set(names)):
        topic = image.get(name)
        if topic is None:
            continue
        found = True
        h.update(name.encode())
        h.update(b"\0")
        h.update(topic.topic_id.bytes)
        h.update(topic.num_partitions.to_bytes(4, "big", signed=True))
        for p in range(topic.num_partitions):
            for rack in image.partition_racks(topic.topic_id, p):
                h.update(rack.encode())
                h.update(b"\1")
            h.update(b"\2")
    return int.from_bytes(h.digest(), "big", signed=True) if found else 0
