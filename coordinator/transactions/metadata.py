"""One transactional id's metadata, as the shard holds it and as its record stores it.

Kafka's ``TransactionMetadata`` (https://github.com/apache/kafka/blob/3.9/core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala).
Immutable here: a transition is a new value, built by the shard's handlers, written as a record
and only then applied by ``replay`` (append first, then apply; Kafka's ``prepareTransitionTo`` /
``completeTransitionTo``). Two fields are not in the record and so are soft state:
``last_producer_epoch`` (recognises an InitProducerId retry) and ``previous_producer_id`` (KIP-360:
a retry after the id was rotated). Kafka does not persist them either (value v0); they reload as -1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import groupby

from protocol.transaction_log import MalformedRecordError, TransactionLogValue, TransactionPartitions

from .state import EPOCH_EXHAUSTED, TransactionState

__all__ = ["TransactionMetadata", "TopicPartition"]

TopicPartition = tuple[str, int]
S = TransactionState


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    #: -1 until the first partition is added; drives the timeout.
    start_ms: int
    #: Drives the id expiration.
    last_update_ms: int
    #: Soft state (not in the record).
    last_producer_epoch: int = -1
    previous_producer_id: int = -1

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED

    def to(self, state: TransactionState, now_ms: int, **changes: object) -> TransactionMetadata:
        """The metadata after a transition to ``state`` at ``now_ms``."""
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    def to_value(self) -> TransactionLogValue:
        """The record value (Kafka's ``TransactionLog.valueToBytes``): partitions null in Empty,
        else grouped by topic."""
        partitions: TransactionPartitions | None = None
        if self.state is not S.EMPTY:
            partitions = tuple((topic, tuple(p for _t, p in group))
                               for topic, group in groupby(sorted(self.partitions), key=lambda tp: tp[0]))
        return TransactionLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state),
                                   partitions, self.last_update_ms, self.start_ms)

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue, last_producer_epoch: int = -1,
                   previous_producer_id: int = -1) -> TransactionMetadata:
        try:
            state = TransactionState(value.transaction_status)
        except ValueError:
            # Kafka's loader fails on it too (``TransactionState.fromId``: "Unknown transaction
            # state id"); as a MalformedRecordError the load fails naming the record's offset.
            raise MalformedRecordError(f"unknown TransactionStatus {value.transaction_status}") from None
        partitions = frozenset((topic, p) for topic, ids in value.transaction_partitions or () for p in ids)
        if previous_producer_id == -1:
            previous_producer_id = value.previous_producer_id  # a v1 record may carry it
        return cls(transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
                   state, partitions, value.transaction_start_timestamp_ms,
                   value.transaction_last_update_timestamp_ms, last_producer_epoch, previous_producer_id)
