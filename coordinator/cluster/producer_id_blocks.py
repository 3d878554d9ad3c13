"""Cluster-wide producer id blocks in ``/latest_producer_id_block``, as Kafka's ZooKeeper mode
allocates them (``ZkProducerIdManager``): the znode holds the last block handed out
(``{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}``, the ids as
strings, the end inclusive); a node claims the next 1,000 ids with a write conditional on the
version it read, retrying when another node won the race. Every id is handed out once in the
cluster's life, whichever node answers InitProducerId.
"""

from __future__ import annotations

import json
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .znodes import ZnodeError, _json_map
from .zookeeper import ZooKeeper

__all__ = ["ProducerIdBlocks", "LATEST_PRODUCER_ID_BLOCK", "BLOCK_SIZE"]

log = logging.getLogger("groupcoord.cluster.producer_ids")

LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
BLOCK_SIZE = 1000


def _block_end(data: bytes | None) -> int:
    """The last id of the block in the znode; -1 for an empty znode (none handed out yet)."""
    if not data:
        return -1
    value = _json_map(LATEST_PRODUCER_ID_BLOCK, data)
    try:
        return int(value["block_end"])
    except (KeyError, TypeError, ValueError):
        raise ZnodeError(f"znode {LATEST_PRODUCER_ID_BLOCK}: block_end is {value.get('block_end')!r}") from None


class ProducerIdBlocks:
    def __init__(self, zk: ZooKeeper, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id

    def claim(self) -> tuple[int, int]:
        """Blocking: the next block as (first id, last id + 1)."""
        client = self.zk.client
        while True:
            try:
                data, stat = client.get(LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            first = _block_end(data) + 1
            last = first + BLOCK_SIZE - 1
            value = json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(first),
                                "block_end": str(last)}, separators=(",", ":")).encode()
            try:
                if stat is None:
                    client.create(LATEST_PRODUCER_ID_BLOCK, value)
                else:
                    client.set(LATEST_PRODUCER_ID_BLOCK, value, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue  # another node claimed a block meanwhile: take the one after it
            log.info("producer id block claimed", extra={"first": first, "last": last})
            return first, last + 1
