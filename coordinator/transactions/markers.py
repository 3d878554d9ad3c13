"""The seam between the transaction coordinator and the partitions its markers go to.

After a PrepareCommit or PrepareAbort record is durable, a COMMIT or ABORT control batch goes to
every partition of the transaction (Kafka's ``TransactionMarkerChannelManager``), and only once
they all answered is CompleteCommit/CompleteAbort written. This module holds what the rules hand
over (:class:`MarkerJob`) and the sink that writes the markers (:class:`MarkerWriter`, contract
C2: ``coordinator/topics/txn_markers.TxnMarkerApis`` on one node, the cluster wing's channel
across nodes). Pure: the sending loop is ``marker_channel.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .metadata import TopicPartition

__all__ = ["MarkerWriter", "MarkerJob"]


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                            partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """One control batch per partition, durable before the answer; an error code per partition."""
        ...


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """A decided transaction whose markers are to be written: what the shard hands the service."""

    #: The ``__transaction_state`` partition that owns the id.
    partition: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]
